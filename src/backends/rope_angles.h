#pragma once
// cos/sin of the RoPE angles of a range of positions, computed once per batch for every layer that
// shares the parameters (gemma3 has two sets, local and global; llama one), instead of once per
// layer and token. Values are rope_cos_sin's exactly.
#include <cstdint>
#include <vector>

#include "ops/ops_ref.h"

namespace cactus {

class ThreadPool;

class RopeAngles {
public:
    // Table [hi - lo + 1, n_rot] of (cos, sin) pairs for positions lo..hi; recomputed only when the
    // parameters' range changes. Valid until the next call with the same parameters.
    const float* table(const RopeParams& params, int32_t lo, int32_t hi, ThreadPool& pool);

private:
    struct Entry {
        RopeParams params;
        int32_t lo = 0;
        int32_t hi = -1;
        std::vector<float> cos_sin;
    };
    std::vector<Entry> entries_;  // one per distinct parameter set
};

}  // namespace cactus
