#pragma once
// The CPU backend: host memory, the mapped GGUF bytes as weights (no copy; Q4_K matrices repacked
// for the AVX2 table, pack_for_products), the thread pool, and
// the kernel tables of src/backends/cpu/ (chosen once: cpu_dispatch.h). Every op runs at once on
// the calling thread and the pool; synchronize() has nothing to wait for.
//
// Files: cpu_backend.cpp (memory, element-wise ops, norms, matmul, RoPE), cpu_backend_attention.cpp
// (KV store, attention over the cache, dense attention), cpu_backend_conv.cpp (convolutions).
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/attention_cpu.h"
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

    std::unique_ptr<Buffer> alloc(size_t bytes) override;
    void upload(const Tensor& dst, const void* src, size_t bytes) override;
    void download(void* dst, const Tensor& src, size_t bytes) override;
    Tensor place_weight(const void* host, DType type, size_t width, size_t n_rows) override;
    // Repacks when the kernel table has a layout for the type (repack) and the rows are whole
    // panels, unless $CACTUS_CPU_REPACK is 0 (docs/ARCHITECTURE.md).
    Tensor pack_for_products(const Tensor& w) override;
    bool supports_weight(DType type) const override;
    std::unique_ptr<KvStorage> make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) override;
    void synchronize(std::chrono::milliseconds deadline) override {}

    void get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) override;
    void rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) override;
    void layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) override;
    void matmul(const Tensor& y, const Tensor& w, const Tensor& x) override;
    void matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) override;
    // F16 / F32 weights and kDenseGemmMinQueries+ rows: dense_gemm (cpu_backend_audio.cpp).
    void matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) override;
    void add(const Tensor& y, const Tensor& a, const Tensor& b) override;
    void scale(const Tensor& y, const Tensor& x, float s) override;
    void softcap(const Tensor& y, const Tensor& x, float cap) override;
    void gelu(const Tensor& y, const Tensor& x, Activation kind) override;
    void glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) override;
    void rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) override;
    void kv_store(size_t il, const KvBatch& batch, const Tensor& k, const Tensor& v) override;
    void attention_kv(const Tensor& out, size_t il, const KvBatch& batch, const Tensor& q, size_t n_head,
                      float scale) override;
    void attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                         const DenseAttention& shape) override;
    void conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) override;
    void conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) override;
    void short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                    const Tensor& hist) override;
    void set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) override;

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
    // Query heads [head, head + n_q) of batch token t (one KV head) over layer il of its cache.
    void attend_heads(size_t il, const KvBatch& batch, size_t t, const float* q, float* out, size_t n_head, size_t head,
                      size_t n_q, float scale, AttentionWorkspace& ws) const;

    std::unique_ptr<ThreadPool> pool_;
    std::vector<std::unique_ptr<Buffer>> weights_;  // views of the mapped file, and repacked copies
    std::vector<AttentionWorkspace> attn_ws_;       // [n_threads] attention scratch
    RopeAngles rope_angles_;                        // cos/sin of the batch positions per parameter set
    std::vector<float> scratch_;                    // im2col rows of the convolutions
    std::vector<float> dense_packed_;               // dense_gemm's packed B (encoder matmuls, attention)
    bool force_dense_rows_ = false;
};

}  // namespace cactus
