#pragma once
// The CPU backend: host memory, the mapped GGUF bytes as weights (no copy; matmul-only weights
// repacked into the tier's layouts, pack_for_products), the thread pool, and
// the kernel tables of src/backends/cpu/ (chosen once: cpu_dispatch.h). Every op runs at once on
// the calling thread and the pool; synchronize() has nothing to wait for.
//
// Files: cpu_backend.cpp (memory, supports, element-wise ops, norms, matmul, RoPE),
// cpu_backend_attention.cpp (KV store, attention over the cache, dense attention),
// cpu_backend_audio.cpp (encoder products and dense attention through GEMM), cpu_backend_conv.cpp
// (convolutions), cpu_backend_shortconv.cpp; host_kv_storage.h (the KV rows).
// Arguments arrive checked (Backend's public ops); the do_ methods check only that tensors are in
// host memory.
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/host_kv_storage.h"
#include "backends/rope_angles.h"
#include "core/thread_pool.h"

namespace cactus {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads);
    ~CpuBackend() override;

    const char* name() const override { return "cpu"; }
    std::string describe() const override;
    int n_threads() const override { return pool_->size(); }
    ThreadPool& pool() const { return *pool_; }
    // get_rows, matmul*, conv*: the types this machine's kernel table reads (F32, and those with a
    // vec_dot; matmul also the repacked layouts of its tier); KV ops: f16, int8, f32 rows; others F32.
    bool supports(Op op, DType type) const override;

    std::unique_ptr<Buffer> alloc(size_t bytes) override;
    void upload(const Tensor& dst, const void* src, size_t bytes) override;
    void download(void* dst, const Tensor& src, size_t bytes) override;
    Tensor place_weight(const void* host, DType type, size_t width, size_t n_rows) override;
    // Repacks when the kernel table has a layout for the type (cpu_repack_target: the per-tier
    // table of docs/OPS.md) and the rows are whole panels, unless $CACTUS_CPU_REPACK is 0.
    Tensor pack_for_products(const Tensor& w) override;
    std::unique_ptr<KvStorage> make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) override;
    void synchronize(std::chrono::milliseconds deadline) override {}

protected:
    void do_get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) override;
    void do_rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) override;
    void do_layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) override;
    void do_matmul(const Tensor& y, const Tensor& w, const Tensor& x) override;
    void do_matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) override;
    // F16 / F32 weights and kDenseGemmMinQueries+ rows: dense_gemm (cpu_backend_audio.cpp).
    void do_matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) override;
    void do_add(const Tensor& y, const Tensor& a, const Tensor& b) override;
    void do_scale(const Tensor& y, const Tensor& x, float s) override;
    void do_softcap(const Tensor& y, const Tensor& x, float cap) override;
    void do_gelu(const Tensor& y, const Tensor& x, Activation kind) override;
    void do_glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) override;
    void do_rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) override;
    void do_kv_store(const KvBatch& batch, const Tensor& k, const Tensor& v) override;
    void do_attention_kv(const Tensor& out, const KvBatch& batch, const Tensor& q, size_t n_head, float scale) override;
    void do_attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                            const DenseAttention& shape) override;
    void do_conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) override;
    void do_conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) override;
    void do_short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                       const Tensor& hist) override;
    void do_set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) override;
    void do_clamp(const Tensor& y, const Tensor& x, float lo, float hi) override;
    void do_transpose(const Tensor& y, const Tensor& x) override;
    void do_depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w) override;
    void do_attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel,
                            const Tensor& q_scale, const LocalAttention& a) override;
    void do_top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k) override;

public:
    // attention_dense through the GEMM kernels, head by head (cpu_backend_audio.cpp); attention_dense
    // picks it from kDenseGemmMinQueries queries on. Public for its test against the row loop.
    void attention_dense_gemm(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const DenseAttention& shape);
    static constexpr size_t kDenseGemmMinQueries = 16;
    // Fewer queries, no mask, not causal (cross-attention of a decode step): per (query, head) the
    // scores and weighted values straight from the k / v rows (cpu_backend_audio.cpp).
    void attention_dense_few(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                             const DenseAttention& shape);
    // Tests: always the row loop (the reference for attention_dense_gemm).
    void force_dense_rows(bool on) { force_dense_rows_ = on; }

private:
    // Runs fn(begin, end) over row ranges of [0, n_rows): on the pool from kMinParallelRows rows
    // (prefill), on the caller below (decode: waking workers costs more than the work).
    template <class Fn>
    void for_rows(size_t n_rows, const Fn& fn) const;
    // Query heads [head, head + n_q) of batch token t (one KV head) over its view's rows.
    void attend_heads(const KvView& view, const float* q, float* out, size_t n_head, size_t head, size_t n_q,
                      float scale, AttentionWorkspace& ws) const;

    std::unique_ptr<ThreadPool> pool_;
    std::vector<std::unique_ptr<Buffer>> weights_;  // views of the mapped file, and repacked copies
    std::vector<AttentionWorkspace> attn_ws_;       // [n_threads] attention scratch
    RopeAngles rope_angles_;                        // cos/sin of the batch positions per parameter set
    std::vector<float> scratch_;                    // im2col rows of the convolutions
    std::vector<float> dense_packed_;               // dense_gemm's packed B (encoder matmuls, attention)
    bool force_dense_rows_ = false;
};

}  // namespace cactus
