#pragma once
// Host-side launchers of the CUDA kernels (src/backends/cuda/*.cu). Plain pointers into device
// memory, all work enqueued on `stream`; shapes outermost first. CudaBackend checks the arguments
// (shapes, types, devices) before it calls these; the launchers only check launch errors.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kv/kv_options.h"

namespace cactus {

struct LocalAttention;  // ops/conformer_ref.h

namespace cuda {

// Bits of the device status word (set by kernels that find bad input, read at synchronize()).
constexpr uint32_t kStatusBadRowId = 1u;     // get_rows
constexpr uint32_t kStatusBadSetRowId = 2u;  // set_rows

bool weight_type_supported(DType type);

// y [n, width] = table[ids[i]] * scale (any supported type; ids out of range: zeros + status bit).
void get_rows(cudaStream_t s, float* y, const void* table, DType type, size_t row_bytes, size_t table_rows,
              const int32_t* ids, size_t n, size_t width, float scale, uint32_t* status);
// table[ids[i]] = x[i] for x [n, width], table [table_rows, width] F32; ids < 0 skipped, ids past
// the table skipped + status bit.
void set_rows(cudaStream_t s, float* table, size_t table_rows, const float* x, const int32_t* ids, size_t n,
              size_t width, uint32_t* status);
// y [n, n_out] = x [n, n_in] W^T, W [n_out, n_in] of `type` with rows of row_bytes.
void matmul(cudaStream_t s, float* y, const void* w, DType type, size_t row_bytes, const float* x, size_t n,
            size_t n_in, size_t n_out);
void rms_norm(cudaStream_t s, float* y, const float* x, const float* w, size_t n, size_t width, float eps);
void layer_norm(cudaStream_t s, float* y, const float* x, const float* w, const float* b, size_t n, size_t width,
                float eps);
// y [n, width] = a + b, b [b_rows, width] (b_rows 1: broadcast).
void add(cudaStream_t s, float* y, const float* a, const float* b, size_t n, size_t width, size_t b_rows);
void scale(cudaStream_t s, float* y, const float* x, float v, size_t count);
void softcap(cudaStream_t s, float* y, const float* x, float cap, size_t count);
// kind: 0 SiLU, 1 GELU tanh, 2 GELU erf (Activation's order).
void gelu(cudaStream_t s, float* y, const float* x, int kind, size_t count);
void glu(cudaStream_t s, float* y, const float* gate, const float* up, int kind, size_t count);
// x [n, n_head * head_dim] rotated in place at pos [n]; neox: pairs (i, i + n_rot/2); factors
// [n_rot / 2] (device) divide each pair's angle, nullptr = none.
void rope(cudaStream_t s, float* x, const int32_t* pos, size_t n, size_t n_head, size_t head_dim, size_t n_rot,
          bool neox, float freq_base, float freq_scale, const float* factors);
// Spins for the milliseconds in *ms (mapped host memory, read when the kernel runs) of GPU time
// (test-only fault hook).
void spin(cudaStream_t s, const uint32_t* ms);

// ---- decode products: integer dot products over q8 activations (cuda_gemv.cu) -------------------

constexpr size_t kGemvMaxTokens = 8;    // larger batches (prefill) take matmul
constexpr size_t kGemvMaxProducts = 4;  // products of one launch (q, k, v; gate, up)

// What a launch does with row r's dot product d of token t.
enum class GemvEpilogue : int {
    STORE = 0,       // y[t, r] = d (+ bias[r] when the product has one)
    ACCUMULATE = 1,  // y[t, r] = y[t, r] + d (the residual add; y is not an input of the product)
    GATED = 2,       // products 0 (gate) and 1 (up): y0[t, r] = act(d_gate) * d_up; y1 is not written
};
// One product y [n, n_out] = x W^T, W [n_out, n_in] in rows of row_bytes; bias [n_out] or null.
struct GemvProduct {
    const void* w = nullptr;
    size_t row_bytes = 0;
    float* y = nullptr;
    const float* bias = nullptr;
    size_t n_out = 0;
};
// Weight types with an integer-dot decode path (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K).
bool gemv_supported(DType type);
// Runs up to kGemvMaxProducts products of one weight type that read the same x [n, n_in] (n <=
// kGemvMaxTokens) as one launch: x is rounded once per block into shared memory exactly as the
// CPU's vec_dot_type rounds it, the weights meet it through __dp4a, and each product's value per
// block combines as the CPU's vec_dot does. act: the activation of GATED (activate()'s kinds).
// Returns false, enqueuing nothing, when this path does not take the shapes (type, n, pointer
// alignment, shared memory): the caller then uses matmul and the unfused ops.
bool gemv(cudaStream_t s, const GemvProduct* products, size_t n_products, DType type, const float* x, size_t n,
          size_t n_in, GemvEpilogue epilogue, int act);

// ---- KV cache and attention (cuda_attention.cu) ----------------------------------------------------

// Where batch token t's key / value row goes (f16 or f32 rows; int8 rows and the head scales).
struct KvStoreDesc {
    void* k = nullptr;
    void* v = nullptr;
    float* ks = nullptr;  // int8: scales of the row ([n_head_kv * groups])
    float* vs = nullptr;
};
// k [n, k_width], v [n, v_width] f32 rows into the rows of desc [n] (device array).
void kv_store(cudaStream_t s, const KvStoreDesc* desc, const float* k, const float* v, size_t n, size_t k_width,
              size_t v_width, size_t n_head_kv, KvType type);

// One batch token's view of its cache layer: rows [0, n_rows) from k/v (the query's first row),
// their positions, and its mask.
struct KvAttnDesc {
    const void* k = nullptr;  // first row (f16, int8 or f32), head 0
    const void* v = nullptr;
    const float* ks = nullptr;  // int8 scales of the first row
    const float* vs = nullptr;
    const int32_t* row_pos = nullptr;  // [n_rows] (device)
    int32_t n_rows = 0;
    int32_t q_pos = 0;
    uint32_t window = 0;
    uint32_t sinks = 0;
    uint32_t ahead = 0;  // later positions the query also sees (AttentionMask::ahead)
};
struct KvAttnShape {
    size_t n_head = 0;
    size_t n_head_kv = 0;
    size_t head_dim_k = 0;
    size_t head_dim_v = 0;
    size_t k_width = 0;  // elements between rows
    size_t v_width = 0;
    size_t k_groups = 0;  // int8: scales between rows
    size_t v_groups = 0;
    KvType type = KvType::F16;  // of the rows
    float scale = 1.0f;
    bool rows_aligned = false;  // every token's k and v (first row) are 16-byte aligned
};
// out [n, n_head * head_dim_v] = softmax(scale q k^T, masked) v; q [n, n_head * head_dim_k].
// Head dims up to 512 (Gemma 4's global layers); larger ones are an error. shared_rows: every
// token's rows start at the same row of the same cache (one sequence's prompt or verification
// step): tiles of 16 queries share each load of the rows, on the tensor cores where
// attention_kv_mma_fits (otherwise head dims up to 64).
void attention_kv(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                  const KvAttnShape& shape, bool shared_rows);
// The shared_rows case of attention_kv on the tensor cores (cuda_attention_mma.cu): f16 rows of
// head dim 64, 128 or 256 (keys and values alike), aligned rows.
bool attention_kv_mma_fits(const KvAttnShape& shape);
void attention_kv_mma(cudaStream_t s, float* out, const float* q, const KvAttnDesc* desc, size_t n,
                      const KvAttnShape& shape);
// Dense attention over f32 k [n_kv, n_head_kv * dk], v [n_kv, n_head_kv * dv]; mask [n_q, n_kv] or null.
void attention_dense(cudaStream_t s, float* out, const float* q, const float* k, const float* v, const float* mask,
                     size_t n_q, size_t n_kv, size_t n_head, size_t n_head_kv, size_t dk, size_t dv, float scale,
                     bool causal);
// The same on the tiled kernels of cuda_attention_dense.cu, for head dims up to 128
// (attention_dense_fits); attention_dense takes them there.
bool attention_dense_fits(size_t dk, size_t dv);
void attention_dense_f32(cudaStream_t s, float* out, const float* q, const float* k, const float* v, const float* mask,
                         size_t n_q, size_t n_kv, size_t n_head, size_t n_head_kv, size_t dk, size_t dv, float scale,
                         bool causal);
// Copies n bytes inside device memory (head moves of compaction).
void copy(cudaStream_t s, void* dst, const void* src, size_t n);
// im2col of the convolutions (layouts of CpuBackend::conv1d / conv2d).
void im2col_1d(cudaStream_t s, float* col, const float* x, size_t n_t, size_t n_in, size_t n_t_out, size_t kernel,
               size_t stride, size_t pad);
void im2col_2d(cudaStream_t s, float* col, const float* x, size_t n_in, size_t height, size_t width, size_t h_out,
               size_t w_out, size_t kh, size_t kw, size_t stride, size_t pad);

// Backend::top_k (cuda_topk.cu): ids [n, k], vals [n, k], stats [n, 2] of logits [n, n_vocab], k <= 256.
void top_k(cudaStream_t s, int32_t* ids, float* vals, float* stats, const float* logits, size_t n, size_t n_vocab,
           size_t k);

// ---- conformer ops (cuda_conformer.cu; references in ops/conformer_ref.h) ---------------------------

// y [count] = min(max(x, lo), hi) as clamp_ref compares (NaN stays NaN, -0 stays -0). y may be x.
void clamp(cudaStream_t s, float* y, const float* x, float lo, float hi, size_t count);
// y [width, n_rows] = x [n_rows, width] transposed; y and x disjoint.
void transpose(cudaStream_t s, float* y, const float* x, size_t n_rows, size_t width);
// y [n, width] = the causal depthwise convolution of x [n, width] with taps w [width, kernel]
// (causal_depthwise_conv_row_ref, its rounding too); y and x disjoint.
void depthwise_conv(cudaStream_t s, float* y, const float* x, const float* w, size_t n, size_t width, size_t kernel);
// out [n, n_head * head_dim] = local_attention_row_ref for every row of q, k, v [n, n_head * head_dim];
// rel [window, n_head * head_dim], q_scale [head_dim]. Returns false, enqueuing nothing, when a
// block's scores and scaled query (head_dim + min(window, n) floats) exceed 48 KiB of shared memory.
bool attention_local(cudaStream_t s, float* out, const float* q, const float* k, const float* v, const float* rel,
                     const float* q_scale, size_t n, const LocalAttention& a);

}  // namespace cuda
}  // namespace cactus
