#pragma once
// The CUDA backend: device memory for activations, weights (uploaded in their GGUF blocks) and KV
// rows; one stream per backend; kernels in the cuda_*.cu files.
//
// Memory: every device allocation is stream-ordered (cudaMallocAsync / cudaFreeAsync on the
// backend's stream), so freeing never waits for the GPU. Host <-> device copies go through one
// pinned staging area with a device twin of the same size: small per-step inputs (positions of the
// cache rows, per-token descriptors) are written to the staging area and copied to the twin at the
// same offset; both are recycled after each completed synchronize().
//
// Steps as CUDA graphs: every enqueue goes through the context's StepRecorder (cuda_step_graph.h);
// a step repeated with the same launches replays as one graph. Per-step inputs therefore sit at
// fixed device addresses: staged data at the same staging offsets each step, and the row positions
// of each KV cache in a device mirror updated outside the graph (position_rows()).
//
// Bounded waits: the host never calls a blocking CUDA wait. synchronize() records an event and
// polls it until the deadline; on a timeout or any CUDA error the backend is marked broken, the
// call throws cactus::Error naming what failed, every later call throws, and destruction leaks the
// device memory instead of waiting for a GPU that may never finish.
#include <cuda_runtime_api.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_blas.h"
#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_mmq.h"
#include "backends/cuda/cuda_op_timer.h"
#include "backends/cuda/cuda_step_graph.h"

namespace cactus {

// State shared by the backend and the buffers it handed out (they may outlive it).
struct CudaContext {
    int device = 0;
    cudaStream_t stream = nullptr;
    std::string name;    // "cuda:N"
    std::string broken;  // why the handle refuses work; empty while usable
    std::unique_ptr<cuda::StepRecorder> steps;
    ~CudaContext();
};

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, std::chrono::milliseconds timeout);
    ~CudaBackend() override;

    const char* name() const override { return ctx_->name.c_str(); }
    std::string describe() const override;
    bool supports(Op op, DType type) const override;  // cuda_supports (cuda_caps.h)
    bool replays_steps() const override { return ctx_->steps->enabled(); }

    std::unique_ptr<Buffer> alloc(size_t bytes) override;
    void upload(const Tensor& dst, const void* src, size_t bytes) override;
    void download(void* dst, const Tensor& src, size_t bytes) override;
    Tensor place_weight(const void* host, DType type, size_t width, size_t n_rows) override;
    std::unique_ptr<KvStorage> make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) override;
    void synchronize(std::chrono::milliseconds deadline) override;
    BackendCounters counters() const override;

protected:
    void do_get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) override;
    void do_set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) override;
    void do_rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) override;
    void do_layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) override;
    void do_matmul(const Tensor& y, const Tensor& w, const Tensor& x) override;
    // Decode batches (n <= cuda::kGemvMaxTokens) of the integer-dot types run as one fused launch
    // (cuda_gemv.cu): q/k/v or gate/up with their biases, the residual add, the gated product.
    void do_matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) override;
    bool matmuls_add_bias() const override { return fused_; }
    void do_matmul_accumulate(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp) override;
    void do_gated_matmul(const Tensor& gate, const Tensor& up, const Tensor& w_gate, const Tensor& w_up,
                         const Tensor& in, Activation act) override;
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
    void do_top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k) override;
    // The conformer ops (cuda_backend_conformer.cpp).
    void do_clamp(const Tensor& y, const Tensor& x, float lo, float hi) override;
    void do_transpose(const Tensor& y, const Tensor& x) override;
    void do_depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w) override;
    void do_attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel,
                            const Tensor& q_scale, const LocalAttention& a) override;

public:
    // Raw device copies for the KV storage (dst / src are device addresses of this backend).
    void upload_raw(void* dst, const void* src, size_t bytes);
    void download_raw(void* dst, const void* src, size_t bytes);
    void copy_raw(void* dst, const void* src, size_t bytes);
    std::chrono::milliseconds timeout() const { return timeout_; }

private:
    friend class CudaKvStorage;
    // Throws when the handle is broken; makes the device current for this thread.
    void usable(const char* op) const;
    // Marks the handle broken and throws: "cuda:N <op>: <what> failed: <error>".
    [[noreturn]] void broke(const char* op, const std::string& what);
    void check(cudaError_t e, const char* op, const char* what);
    // Staging bytes [offset, offset + bytes) to the device twin (StepRecorder::stage_copy).
    void stage_copy(const char* op, size_t offset, size_t bytes);
    // One device copy through the step recorder; an error breaks the handle.
    void enqueue_copy(const char* op, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
    // Runs a launcher; a launch error breaks the handle.
    // detail: what the profile adds to the op's label (its shape), when CACTUS_CUDA_PROFILE is on.
    template <class Fn>
    void launch(const char* op, const Fn& fn, const std::string& detail = std::string()) {
        usable(op);
        try {
            cuda::RecorderScope scope(ctx_->steps.get());
            if (timer_.on()) timer_.begin(ctx_->stream);
            fn(ctx_->stream);
            if (timer_.on())
                timer_.end(ctx_->stream, detail.empty() ? std::string(op) : std::string(op) + " " + detail);
        } catch (const std::exception& e) {
            broke(op, e.what());
        }
    }
    // Reserves `bytes` of the staging area (pinned host + device twin); syncs when it is full.
    size_t stage(size_t bytes);
    // Copies host bytes into the device twin and returns the device address.
    const void* stage_upload(const void* src, size_t bytes);
    float* scratch(size_t floats);
    // The rounded activations of a tiled product (cuda::mmq), grown on demand and kept: a replayed
    // step reads the same address.
    void* mmq_scratch(size_t bytes);
    // y = x W^T through cuda::mmq (quantized weights) or cuda::mmf (F16, BF16, F32) for prompts
    // (n > kGemvMaxTokens); false (nothing enqueued) when off or when neither takes the type or
    // shapes. x is 16-byte aligned for the quantized types.
    bool try_mmq(const Tensor& y, const Tensor& w, const float* x, size_t n, size_t n_in);
    // y = x W^T (accumulate: y += x W^T) through cuBLAS on dequantized f16 (cuda::gemm_f16) for
    // prompts of at least gemm_tokens_ tokens; false (nothing enqueued) when off, shorter, another
    // weight type, or cuBLAS is unavailable (gemm_off_ says why).
    bool try_gemm(const char* op, const Tensor& y, const Tensor& w, const Tensor& x, bool accumulate);
    // Loads cuBLAS on first use; false (gemm_off_ set) when it cannot.
    bool open_blas(const char* op);
    // The scratch of a cuBLAS product (x and a chunk of W in f16), grown on demand and kept.
    void* gemm_scratch(size_t bytes);
    std::string gemm_description() const;
    // The device copy of a KV cache's row positions [capacity] (keyed by the host array), with rows
    // [lo, hi) brought up to date by copies enqueued outside the step graph: the graph reads the
    // positions, it never carries them.
    const int32_t* position_rows(const int32_t* host, size_t capacity, size_t lo, size_t hi);
    // The device copy of a RoPE's frequency factors (uploaded on first use; the model keeps the
    // host array for its lifetime, so its address identifies it).
    const float* rope_factors(const RopeParams& params);
    void check_dev(const Tensor& t, const char* op, const char* what) const;
    void check_f32(const Tensor& t, const char* op, const char* what) const;
    // Runs products reading x through cuda::gemv; false (nothing enqueued) when that path does not
    // take them (fused products off, n > kGemvMaxTokens, another weight type, shapes).
    bool try_gemv(const char* op, const cuda::GemvProduct* products, size_t n_products, DType type, const Tensor& x,
                  cuda::GemvEpilogue epilogue, int act);
    // Products of one weight type (at most kGemvMaxProducts) of matmuls: one launch, or matmul each.
    void matmuls_group(const SharedInputProduct* products, size_t n_products, const Tensor& x);

    std::shared_ptr<CudaContext> ctx_;
    std::chrono::milliseconds timeout_;
    std::string device_name_;
    cudaEvent_t done_ = nullptr;
    char* pinned_ = nullptr;           // staging, host side [kStaging]
    char* twin_ = nullptr;             // staging, device side [kStaging]
    size_t staged_ = 0;                // bytes of staging in use since the last synchronize
    uint32_t* status_dev_ = nullptr;   // kernels' bad-input bits
    uint32_t* status_host_ = nullptr;  // pinned copy, read after each synchronize
    std::unique_ptr<Buffer> scratch_;
    std::unique_ptr<Buffer> mmq_scratch_;
    // Tiled tensor-core prompt products (cuda_mmq.cu); CACTUS_CUDA_MMQ=0 sends prompts to matmul's
    // one-warp-per-row kernel instead (A/B runs).
    bool mmq_ = true;
    // Their tile width: CACTUS_CUDA_MMQ_TOKENS=64 or 128 forces one (A/B runs), else cuda::mmq picks
    // per product from the device's multiprocessor count.
    cuda::MmqTiling mmq_tiling_;
    // cuBLAS f16 prompt products (cuda_gemm.h) from this many tokens (CACTUS_CUDA_GEMM_TOKENS; 0
    // never); the handle is opened at the first such product.
    size_t gemm_tokens_ = 0;
    // F16 weights' prompt products through cuBLAS too, x split in two f16 parts
    // (cuda::gemm_f16_weights): on an H100 a SigLIP tower's encode took 0.71x the time of the tf32
    // tiles (docs/CUDA.md). CACTUS_CUDA_GEMM_F16=0: the tiles.
    bool gemm_f16_weights_ = true;
    // Steps of 9-16 tokens through two passes of the decode products (cuda_gemv.cu) instead of the
    // int8 tiles, whose 64-token tiles such a step leaves three quarters empty; each row's products
    // are then a decode step's. On an H100 16 clients of cactus serve took 1.18x the aggregate tok/s
    // of the int8 tiles (docs/CUDA.md). CACTUS_CUDA_GEMV_SPLIT=0: the tiles.
    bool gemv_split_ = true;
    std::unique_ptr<cuda::Blas> blas_;
    std::unique_ptr<Buffer> blas_workspace_;
    std::unique_ptr<Buffer> gemm_scratch_;
    std::string gemm_off_;  // why cuBLAS could not be opened; empty otherwise
    // Fused decode products (cuda_gemv.cu); environment CACTUS_CUDA_FUSED=0 turns them off (matmul's
    // kernel and the unfused sequences of the base class), read once here, for A/B runs.
    bool fused_ = true;
    // Test-only fault hook: environment CACTUS_CUDA_FAULT_SPIN_MS=N makes every download enqueue a
    // kernel that spins for the milliseconds in fault_spin_ (mapped pinned memory): 0 until download
    // number CACTUS_CUDA_FAULT_SPIN_AT (default 1), N from then on, so the spin can fire inside a
    // replayed graph (tests/backends: the deadline must fire).
    uint32_t fault_spin_ms_ = 0;
    uint32_t fault_spin_at_ = 1;
    uint32_t downloads_ = 0;
    uint32_t* fault_spin_ = nullptr;  // host view; the kernel reads fault_spin_dev_
    const uint32_t* fault_spin_dev_ = nullptr;
    static constexpr size_t kSideStaging = 4u << 20;  // pinned staging of the position mirrors' copies
    static constexpr size_t kMaxMirrors = 64;         // position mirrors kept (one per KV cache in use)
    struct PositionMirror {
        std::unique_ptr<Buffer> rows;  // [capacity] int32 on the device
        std::vector<int32_t> shadow;   // what the device holds
        size_t capacity = 0;
        uint64_t last_used = 0;
    };
    std::map<const int32_t*, PositionMirror> mirrors_;
    uint64_t mirror_tick_ = 0;
    char* side_pinned_ = nullptr;  // staging of the mirror copies [kSideStaging], apart from the step's
    size_t side_staged_ = 0;
    std::vector<std::unique_ptr<Buffer>> weights_;
    std::map<const float*, std::unique_ptr<Buffer>> rope_factors_;
    cuda::OpTimer timer_{false};  // CACTUS_CUDA_PROFILE=1: GPU time per op (cuda_op_timer.h)
};

// make_backend's CUDA branch: "cuda" or "cuda:N"; throws when no usable device.
std::unique_ptr<Backend> make_cuda_backend(const std::string& device, std::chrono::milliseconds timeout);
// available_devices' CUDA branch: "cuda:0", ... for the GPUs the driver reports (none without one).
std::vector<std::string> cuda_devices();

}  // namespace cactus
