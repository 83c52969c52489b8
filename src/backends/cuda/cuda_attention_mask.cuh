#pragma once
// What the attention kernels share: which cache rows a query sees (attention_row_visible) and the
// f16 rounding of the query and of the normalized weights with f16 caches.
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"

namespace cactus {
namespace cuda {

// Whether row r (position rp) is visible to the query of d: a row of the view, holding a position
// no later than the query's (plus its bidirectional span), inside the window unless a sink.
__device__ __forceinline__ bool row_visible(const KvAttnDesc& d, int r, int32_t rp) {
    if (r >= d.n_rows || rp < 0 || static_cast<int64_t>(rp) > static_cast<int64_t>(d.q_pos) + d.ahead) return false;
    return rp < static_cast<int64_t>(d.sinks) || d.window == 0 ||
           static_cast<int64_t>(d.q_pos) - rp < static_cast<int64_t>(d.window);
}

__device__ __forceinline__ float round_half(float x) { return __half2float(__float2half_rn(x)); }

}  // namespace cuda
}  // namespace cactus
