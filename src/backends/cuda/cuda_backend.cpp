// CudaBackend: device selection, memory, staging, bounded waits, and the row ops' host side.
// Attention, KV storage and convolutions: cuda_backend_attention.cpp.
#include "backends/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/cuda/cuda_caps.h"
#include "core/error.h"

namespace cactus {

namespace {

constexpr size_t kStaging = 32u << 20;  // bytes of the pinned staging area (and its device twin)
constexpr size_t kAlign = 256;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// A switch read from the environment (0 or 1); `otherwise` when unset.
bool switch_value(const char* name, bool otherwise) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return otherwise;
    if (std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    fail("%s: unknown value '%s' (0 or 1)", name, v);
}
bool switch_on(const char* name) { return switch_value(name, true); }
bool switch_set(const char* name) { return switch_value(name, false); }

// CACTUS_CUDA_MMQ_TOKENS: the token width of the tiled prompt products, 64 or 128; unset (0), the
// default, 64 (cuda_mmq.cu's tile_tokens says why).
int mmq_tokens_setting() {
    const char* name = "CACTUS_CUDA_MMQ_TOKENS";
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return 0;
    if (std::strcmp(v, "64") == 0) return 64;
    if (std::strcmp(v, "128") == 0) return 128;
    fail("%s: unknown value '%s' (64 or 128; unset for the default, 64)", name, v);
}

// CACTUS_CUDA_GEMM_TOKENS: prompts of at least this many tokens multiply quantized weights through
// cuBLAS on dequantized f16 (cuda_gemm.h); shorter ones take the int8 tiles (cuda_mmq.h). 0: never.
// 64 by default, above the steps that must round x as one-token decode steps do: a speculative
// verification step (up to draft_max + 1 = 17 tokens) must score its tokens as plain decoding
// would, and the server's batched slots (16) likewise. cuBLAS also wins at 16-48 tokens
// (docs/CUDA.md), so a prompt-only workload may set it lower.
constexpr size_t kGemmTokensDefault = 64;
size_t gemm_tokens_setting() {
    const char* name = "CACTUS_CUDA_GEMM_TOKENS";
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return kGemmTokensDefault;
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end != '\0' || *v == '-' || n > (1ul << 30)) {
        fail("%s: unknown value '%s' (a token count; 0 for never; unset for the default, %zu)", name, v,
             kGemmTokensDefault);
    }
    return static_cast<size_t>(n);
}
constexpr size_t kBlasWorkspace = 32u << 20;  // cuBLAS's advice for Hopper
// Steps of up to this many decode passes (kGemvMaxTokens rows each:
// the server's 16 slots) take the decode products instead of the int8 tiles.
constexpr size_t kGemvSplitPasses = 2;

// The profile's label of a product shape: "Q4_K 1536 -> 8960, 512 tokens" (empty when not profiling).
std::string product_label(bool profiling, const Tensor& w, size_t n, size_t n_in) {
    if (!profiling) return std::string();
    return std::string(dtype_name(w.type)) + " " + std::to_string(n_in) + " -> " + std::to_string(w.rows()) + ", " +
           std::to_string(n) + " tokens";
}

class CudaBuffer final : public Buffer {
public:
    CudaBuffer(std::shared_ptr<CudaContext> ctx, void* ptr, size_t bytes)
        : ctx_(std::move(ctx)), ptr_(ptr), size_(bytes) {}
    ~CudaBuffer() override {
        // Stream-ordered: never waits. A broken handle leaks (the GPU may still be using it). Work the
        // step recorder still holds back is launched first: the free must not overtake it.
        if (ptr_ && ctx_->broken.empty()) {
            cudaSetDevice(ctx_->device);
            try {
                if (ctx_->steps) ctx_->steps->flush();
            } catch (const std::exception& e) {
                ctx_->broken = std::string("free: ") + e.what();
                return;
            }
            cudaFreeAsync(ptr_, ctx_->stream);
        }
    }
    void* base() const override { return ptr_; }
    size_t size() const override { return size_; }
    const char* device() const override { return ctx_->name.c_str(); }

private:
    std::shared_ptr<CudaContext> ctx_;
    void* ptr_;
    size_t size_;
};

}  // namespace

CudaContext::~CudaContext() {
    // cudaStreamDestroy returns at once even with work in flight; a broken stream is left alone, and
    // so are its graphs (one may still be running).
    if (!broken.empty()) {
        steps.release();
        return;
    }
    steps.reset();
    if (stream) cudaStreamDestroy(stream);
}

CudaBackend::CudaBackend(int device, std::chrono::milliseconds timeout)
    : ctx_(std::make_shared<CudaContext>()), timeout_(timeout), timer_(switch_set("CACTUS_CUDA_PROFILE")) {
    ctx_->device = device;
    ctx_->name = "cuda:" + std::to_string(device);
    mmq_tiling_.tokens = mmq_tokens_setting();  // before anything is allocated: a bad value throws
    gemm_tokens_ = gemm_tokens_setting();
    check(cudaSetDevice(device), "init", "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "init", "cudaGetDeviceProperties");
    if (prop.major < 9) {
        fail(
            "backend: device %s (%s) has compute capability %d.%d; the CUDA backend is built for 9.0 (Hopper) "
            "and newer",
            ctx_->name.c_str(), prop.name, prop.major, prop.minor);
    }
    device_name_ = prop.name;
    check(cudaStreamCreateWithFlags(&ctx_->stream, cudaStreamNonBlocking), "init", "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "init", "cudaEventCreate");
    const char* pdl = std::getenv("CACTUS_CUDA_PDL");
    cuda::set_programmatic_launch(pdl && std::strcmp(pdl, "1") == 0);
    // Step graphs, the fused decode products and the tiled prompt products are on unless their
    // variable is 0 (they passed the device suite on an H100; =0 is the comparison path).
    ctx_->steps = std::make_unique<cuda::StepRecorder>(ctx_->stream, switch_on("CACTUS_CUDA_GRAPHS") && !timer_.on());
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, device), "init", "cudaDeviceGetDefaultMemPool");
    uint64_t keep = ~0ull;  // keep freed memory in the pool: no trimming at synchronisation points
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "init", "cudaMemPoolSetAttribute");
    check(cudaMallocHost(reinterpret_cast<void**>(&pinned_), kStaging + kAlign + kSideStaging), "init",
          "cudaMallocHost");
    status_host_ = reinterpret_cast<uint32_t*>(pinned_ + kStaging);
    *status_host_ = 0;
    fault_spin_ = status_host_ + 1;  // in the same pinned page, read by the device through its mapping
    *fault_spin_ = 0;
    void* spin_dev = nullptr;  // with unified addressing the host address itself works as well
    if (cudaHostGetDevicePointer(&spin_dev, fault_spin_, 0) != cudaSuccess) {
        cudaGetLastError();
        spin_dev = fault_spin_;
    }
    fault_spin_dev_ = static_cast<const uint32_t*>(spin_dev);
    side_pinned_ = pinned_ + kStaging + kAlign;
    check(cudaMallocAsync(reinterpret_cast<void**>(&twin_), kStaging + kAlign, ctx_->stream), "init",
          "cudaMallocAsync (staging)");
    status_dev_ = reinterpret_cast<uint32_t*>(twin_ + kStaging);
    check(cudaMemsetAsync(status_dev_, 0, sizeof(uint32_t), ctx_->stream), "init", "cudaMemsetAsync");
    synchronize(timeout_);
    fused_ = switch_on("CACTUS_CUDA_FUSED");
    mmq_ = switch_on("CACTUS_CUDA_MMQ");
    gemv_split_ = switch_on("CACTUS_CUDA_GEMV_SPLIT");
    gemm_f16_weights_ = switch_on("CACTUS_CUDA_GEMM_F16");
    const char* spin = std::getenv("CACTUS_CUDA_FAULT_SPIN_MS");
    if (spin && *spin) fault_spin_ms_ = static_cast<uint32_t>(std::strtoul(spin, nullptr, 10));
    const char* spin_at = std::getenv("CACTUS_CUDA_FAULT_SPIN_AT");
    if (spin_at && *spin_at) fault_spin_at_ = static_cast<uint32_t>(std::strtoul(spin_at, nullptr, 10));
}

CudaBackend::~CudaBackend() {
    if (ctx_->broken.empty()) {
        try {
            synchronize(timeout_);
        } catch (const Error&) {
            // broken now: everything below is leaked rather than waited for
        }
    }
    weights_.clear();
    scratch_.reset();
    mmq_scratch_.reset();
    blas_.reset();  // its handle goes back to the pool (cuda_blas.h), never waited for
    blas_workspace_.reset();
    gemm_scratch_.reset();
    mirrors_.clear();
    if (!ctx_->broken.empty()) return;
    cudaSetDevice(ctx_->device);
    cudaFreeAsync(twin_, ctx_->stream);
    cudaEventDestroy(done_);
    // The last synchronize completed, so freeing the pinned area does not wait for the GPU.
    cudaFreeHost(pinned_);
}

std::string CudaBackend::describe() const {
    const cuda::StepRecorder& steps = *ctx_->steps;
    const std::string graphs = steps.enabled()                   ? "step graphs on"
                               : steps.disabled_reason().empty() ? "step graphs off (CACTUS_CUDA_GRAPHS=0)"
                                                                 : steps.disabled_reason();
    return ctx_->name + " (" + device_name_ + ", " + graphs +
           (cuda::programmatic_launch() ? ", programmatic launch" : "") +
           (fused_ ? "" : ", fused products off (CACTUS_CUDA_FUSED=0)") +
           (mmq_ ? "" : ", tiled prompt products off (CACTUS_CUDA_MMQ=0)") +
           (gemv_split_ ? "" : ", 9-16-token decode passes off (CACTUS_CUDA_GEMV_SPLIT=0)") +
           (mmq_tiling_.tokens == 0
                ? ""
                : ", prompt tiles of " + std::to_string(mmq_tiling_.tokens) + " tokens (CACTUS_CUDA_MMQ_TOKENS)") +
           gemm_description() + ")";
}

std::string CudaBackend::gemm_description() const {
    if (gemm_tokens_ == 0) return ", cuBLAS prompt products off (CACTUS_CUDA_GEMM_TOKENS=0)";
    if (!gemm_off_.empty()) return ", no cuBLAS prompt products (" + gemm_off_ + ")";
    return ", cuBLAS f16 prompt products from " + std::to_string(gemm_tokens_) + " tokens" +
           (gemm_f16_weights_ ? " (F16 weights too, x split in two)" : "");
}

BackendCounters CudaBackend::counters() const {
    const cuda::StepCounters& c = ctx_->steps->counters();
    BackendCounters out;
    out.kernels = c.kernels;
    out.copies = c.copies;
    out.steps = c.segments;
    out.graph_replays = c.graph_replays;
    out.graph_captures = c.graph_captures;
    return out;
}

void CudaBackend::stage_copy(const char* op, size_t offset, size_t bytes) {
    try {
        ctx_->steps->stage_copy(twin_ + offset, pinned_ + offset, bytes);
    } catch (const std::exception& e) {
        broke(op, e.what());
    }
}

void CudaBackend::enqueue_copy(const char* op, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    try {
        ctx_->steps->copy(dst, src, bytes, kind);
    } catch (const std::exception& e) {
        broke(op, e.what());
    }
}

void CudaBackend::usable(const char* op) const {
    if (!ctx_->broken.empty()) {
        fail("%s %s: the device handle refuses work after an earlier failure (%s)", ctx_->name.c_str(), op,
             ctx_->broken.c_str());
    }
    thread_local int current = -1;  // cudaSetDevice only when this thread last used another device
    if (current != ctx_->device) {
        cudaSetDevice(ctx_->device);
        current = ctx_->device;
    }
}

void CudaBackend::broke(const char* op, const std::string& what) {
    ctx_->broken = std::string(op) + ": " + what;
    fail("%s %s: %s", ctx_->name.c_str(), op, what.c_str());
}

void CudaBackend::check(cudaError_t e, const char* op, const char* what) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a non-sticky error; sticky ones stay, and the handle is broken anyway
    broke(op, std::string(what) + " failed: " + cudaGetErrorString(e));
}

void CudaBackend::synchronize(std::chrono::milliseconds deadline) {
    usable("synchronize");
    const auto start = std::chrono::steady_clock::now();
    try {
        ctx_->steps->finish();
    } catch (const std::exception& e) {
        broke("synchronize", e.what());
    }
    check(cudaMemcpyAsync(status_host_, status_dev_, sizeof(uint32_t), cudaMemcpyDeviceToHost, ctx_->stream),
          "synchronize", "cudaMemcpyAsync (status)");
    check(cudaEventRecord(done_, ctx_->stream), "synchronize", "cudaEventRecord");
    for (unsigned polls = 0;; ++polls) {
        const cudaError_t e = cudaEventQuery(done_);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) check(e, "synchronize", "waiting for the GPU (cudaEventQuery)");
        const auto waited = std::chrono::steady_clock::now() - start;
        if (waited > deadline) {
            broke("synchronize", "the GPU did not finish its work within gpu_timeout_ms = " +
                                     std::to_string(deadline.count()) + " ms");
        }
        if (polls < 2000) {
            std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    staged_ = 0;
    side_staged_ = 0;
    if (timer_.on()) timer_.collect();
    const uint32_t status = *status_host_;
    if (status != 0) {
        *status_host_ = 0;
        check(cudaMemsetAsync(status_dev_, 0, sizeof(uint32_t), ctx_->stream), "synchronize", "cudaMemsetAsync");
        if (status & cuda::kStatusBadRowId) fail("%s get_rows: a row id was outside its table", ctx_->name.c_str());
        if (status & cuda::kStatusBadSetRowId) fail("%s set_rows: a row id was outside its table", ctx_->name.c_str());
    }
}

// ---- memory ---------------------------------------------------------------------------------------

std::unique_ptr<Buffer> CudaBackend::alloc(size_t bytes) {
    usable("alloc");
    void* ptr = nullptr;
    const std::string what = "cudaMallocAsync of " + std::to_string(bytes) + " bytes";
    check(cudaMallocAsync(&ptr, bytes > 0 ? bytes : 1, ctx_->stream), "alloc", what.c_str());
    return std::make_unique<CudaBuffer>(ctx_, ptr, bytes);
}

size_t CudaBackend::stage(size_t bytes) {
    CACTUS_ASSERT(bytes <= kStaging);
    if (staged_ + align_up(bytes) > kStaging) synchronize(timeout_);
    const size_t offset = staged_;
    staged_ += align_up(bytes);
    return offset;
}

const void* CudaBackend::stage_upload(const void* src, size_t bytes) {
    const size_t offset = stage(bytes);
    std::memcpy(pinned_ + offset, src, bytes);
    stage_copy("upload", offset, bytes);
    return twin_ + offset;
}

void CudaBackend::upload_raw(void* dst, const void* src, size_t bytes) {
    usable("upload");
    const char* from = static_cast<const char*>(src);
    for (size_t done = 0; done < bytes;) {
        const size_t n = std::min(bytes - done, kStaging);
        const size_t offset = stage(n);
        std::memcpy(pinned_ + offset, from + done, n);
        enqueue_copy("upload", static_cast<char*>(dst) + done, pinned_ + offset, n, cudaMemcpyHostToDevice);
        done += n;
    }
}

void CudaBackend::download_raw(void* dst, const void* src, size_t bytes) {
    usable("download");
    if (fault_spin_ms_ > 0) {
        if (++downloads_ >= fault_spin_at_) *fault_spin_ = fault_spin_ms_;  // before the spin can run
        launch("download", [&](cudaStream_t s) { cuda::spin(s, fault_spin_dev_); });
    }
    char* to = static_cast<char*>(dst);
    for (size_t done = 0; done < bytes;) {
        const size_t n = std::min(bytes - done, kStaging);
        const size_t offset = stage(n);
        enqueue_copy("download", pinned_ + offset, static_cast<const char*>(src) + done, n, cudaMemcpyDeviceToHost);
        synchronize(timeout_);
        std::memcpy(to + done, pinned_ + offset, n);
        done += n;
    }
}

void CudaBackend::copy_raw(void* dst, const void* src, size_t bytes) {
    launch("copy", [&](cudaStream_t s) { cuda::copy(s, dst, src, bytes); });
}

void CudaBackend::check_dev(const Tensor& t, const char* op, const char* what) const {
    if (t.buffer == nullptr) fail("%s %s: %s is an empty tensor", ctx_->name.c_str(), op, what);
    if (std::strcmp(t.buffer->device(), ctx_->name.c_str()) != 0) {
        fail("%s %s: %s lives on %s, not on %s", ctx_->name.c_str(), op, what, t.buffer->device(), ctx_->name.c_str());
    }
}

void CudaBackend::check_f32(const Tensor& t, const char* op, const char* what) const {
    check_dev(t, op, what);
    if (t.type != DType::F32 || !t.contiguous_rows()) {
        fail("%s %s: %s must be contiguous f32 rows", ctx_->name.c_str(), op, what);
    }
}

void CudaBackend::upload(const Tensor& dst, const void* src, size_t bytes) {
    check_dev(dst, "upload", "the destination");
    CACTUS_ASSERT(dst.contiguous_rows() && bytes <= dst.bytes());
    upload_raw(dst.data(), src, bytes);
}

void CudaBackend::download(void* dst, const Tensor& src, size_t bytes) {
    check_dev(src, "download", "the source");
    CACTUS_ASSERT(src.contiguous_rows() && bytes <= src.bytes());
    download_raw(dst, src.data(), bytes);
}

Tensor CudaBackend::place_weight(const void* host, DType type, size_t width, size_t n_rows) {
    if (!supports_weight(type)) fail("%s place_weight: type %s is not supported", ctx_->name.c_str(), dtype_name(type));
    const size_t bytes = dtype_row_bytes(type, width) * n_rows;
    weights_.push_back(alloc(bytes));
    upload_raw(weights_.back()->base(), host, bytes);
    return make_tensor(weights_.back().get(), 0, type, width, n_rows);
}

bool CudaBackend::supports(Op op, DType type) const { return cuda_supports(op, type); }

float* CudaBackend::scratch(size_t floats) {
    const size_t bytes = floats * sizeof(float);
    if (!scratch_ || scratch_->size() < bytes) {
        scratch_.reset();
        scratch_ = alloc(std::max(bytes, size_t(1) << 20));
    }
    return static_cast<float*>(scratch_->base());
}

void* CudaBackend::mmq_scratch(size_t bytes) {
    if (!mmq_scratch_ || mmq_scratch_->size() < bytes) {
        mmq_scratch_.reset();
        mmq_scratch_ = alloc(std::max(bytes, size_t(1) << 20));
    }
    return mmq_scratch_->base();
}

void* CudaBackend::gemm_scratch(size_t bytes) {
    if (!gemm_scratch_ || gemm_scratch_->size() < bytes) {
        gemm_scratch_.reset();
        gemm_scratch_ = alloc(std::max(bytes, size_t(1) << 20));
    }
    return gemm_scratch_->base();
}

bool CudaBackend::open_blas(const char* op) {
    if (blas_) return true;
    if (!gemm_off_.empty()) return false;
    usable(op);
    blas_workspace_ = alloc(kBlasWorkspace);
    blas_ = cuda::Blas::open(ctx_->device, blas_workspace_->base(), kBlasWorkspace, &gemm_off_);
    if (!blas_) blas_workspace_.reset();
    return blas_ != nullptr;
}

bool CudaBackend::try_gemm(const char* op, const Tensor& y, const Tensor& w, const Tensor& x, bool accumulate) {
    const size_t n = x.rows(), n_in = x.width();
    const bool f16 = w.type == DType::F16 && gemm_f16_weights_;
    if (gemm_tokens_ == 0 || n < gemm_tokens_ || n <= cuda::kGemvMaxTokens ||
        !(f16 || cuda::gemm_f16_supported(w.type)))
        return false;
    if (!open_blas(op)) return false;
    if (f16) {  // x split in two f16 parts: f32 accuracy, as the tf32 tiles keep it
        void* split = gemm_scratch(cuda::gemm_split_scratch_bytes(n, n_in));
        launch(
            op,
            [&](cudaStream_t s) {
                cuda::gemm_f16_weights(s, *blas_, y.as<float>(), w.data(), w.row_bytes(), x.as<float>(), n, n_in,
                                       w.rows(), accumulate, split);
            },
            product_label(timer_.on(), w, n, n_in));
        return true;
    }
    void* scratch = gemm_scratch(cuda::gemm_f16_scratch_bytes(n, n_in, w.rows()));
    bool ran = false;
    launch(
        op,
        [&](cudaStream_t s) {
            ran = cuda::gemm_f16(s, *blas_, y.as<float>(), w.data(), w.type, w.row_bytes(), x.as<float>(), n, n_in,
                                 w.rows(), accumulate, scratch);
        },
        product_label(timer_.on(), w, n, n_in));
    return ran;
}

bool CudaBackend::try_mmq(const Tensor& y, const Tensor& w, const float* x, size_t n, size_t n_in) {
    if (!mmq_ || n <= cuda::kGemvMaxTokens) return false;
    bool ran = false;
    // The profile times each product shape apart: "Q4_K 1536 -> 8960, 512 tokens".
    const std::string shape = product_label(timer_.on(), w, n, n_in);
    if (cuda::mmf_supported(w.type)) {
        launch(
            "matmul",
            [&](cudaStream_t s) {
                ran = cuda::mmf(s, y.as<float>(), w.data(), w.type, w.row_bytes(), x, n, n_in, w.rows());
            },
            shape);
        return ran;
    }
    if (!cuda::mmq_supported(w.type)) return false;
    void* rounded = mmq_scratch(cuda::mmq_scratch_bytes(n, n_in));
    launch(
        "matmul",
        [&](cudaStream_t s) {
            ran = cuda::mmq(s, y.as<float>(), w.data(), w.type, w.row_bytes(), x, n, n_in, w.rows(), rounded,
                            mmq_tiling_);
        },
        shape);
    return ran;
}

// ---- row ops ----------------------------------------------------------------------------------------

void CudaBackend::do_get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) {
    check_f32(y, "get_rows", "y");
    check_dev(table, "get_rows", "the table");
    check_dev(ids, "get_rows", "ids");
    launch("get_rows", [&](cudaStream_t s) {
        cuda::get_rows(s, y.as<float>(), table.data(), table.type, table.row_bytes(), table.rows(), ids.as<int32_t>(),
                       y.rows(), y.width(), scale, status_dev_);
    });
}

void CudaBackend::do_set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) {
    check_f32(table, "set_rows", "the table");
    check_f32(x, "set_rows", "x");
    check_dev(ids, "set_rows", "ids");
    launch("set_rows", [&](cudaStream_t s) {
        cuda::set_rows(s, table.as<float>(), table.rows(), x.as<float>(), ids.as<int32_t>(), x.rows(), x.width(),
                       status_dev_);
    });
}

void CudaBackend::do_rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) {
    check_f32(y, "rms_norm", "y");
    check_f32(x, "rms_norm", "x");
    const float* w = nullptr;
    if (!weight.empty()) {
        check_f32(weight, "rms_norm", "the weight");
        w = weight.as<float>();
    }
    launch("rms_norm",
           [&](cudaStream_t s) { cuda::rms_norm(s, y.as<float>(), x.as<float>(), w, x.rows(), x.width(), eps); });
}

void CudaBackend::do_layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
    check_f32(y, "layer_norm", "y");
    check_f32(x, "layer_norm", "x");
    if (!weight.empty()) check_f32(weight, "layer_norm", "the weight");
    if (!bias.empty()) check_f32(bias, "layer_norm", "the bias");
    const float* w = weight.empty() ? nullptr : weight.as<float>();
    const float* b = bias.empty() ? nullptr : bias.as<float>();
    launch("layer_norm",
           [&](cudaStream_t s) { cuda::layer_norm(s, y.as<float>(), x.as<float>(), w, b, x.rows(), x.width(), eps); });
}

void CudaBackend::do_matmul(const Tensor& y, const Tensor& w, const Tensor& x) {
    check_f32(y, "matmul", "y");
    check_f32(x, "matmul", "x");
    check_dev(w, "matmul", "the weight");
    const cuda::GemvProduct product{w.data(), w.row_bytes(), y.as<float>(), nullptr, w.rows()};
    if (try_gemv("matmul", &product, 1, w.type, x, cuda::GemvEpilogue::STORE, 0)) return;
    if (try_gemm("matmul", y, w, x, false)) return;
    const float* xd = x.as<float>();
    const bool quantized = dtype_traits(w.type).block_size > 1;
    if (quantized && reinterpret_cast<uintptr_t>(xd) % 16 != 0) {  // the block kernels read x as float4
        float* aligned = scratch(x.elements());
        copy_raw(aligned, xd, x.bytes());
        xd = aligned;
    }
    if (try_mmq(y, w, xd, x.rows(), x.width())) return;
    launch("matmul", [&](cudaStream_t s) {
        cuda::matmul(s, y.as<float>(), w.data(), w.type, w.row_bytes(), xd, x.rows(), x.width(), w.rows());
    });
}

bool CudaBackend::try_gemv(const char* op, const cuda::GemvProduct* products, size_t n_products, DType type,
                           const Tensor& x, cuda::GemvEpilogue epilogue, int act) {
    const size_t n = x.rows(), n_in = x.width();
    const size_t passes = (n + cuda::kGemvMaxTokens - 1) / cuda::kGemvMaxTokens;
    if (!fused_ || passes > (gemv_split_ ? kGemvSplitPasses : 1) || !cuda::gemv_supported(type)) return false;
    bool ran = false;
    launch(op, [&](cudaStream_t s) {
        // Passes of up to kGemvMaxTokens rows: each row's products are those of a decode step.
        cuda::GemvProduct part[cuda::kGemvMaxProducts];
        for (size_t r0 = 0; r0 < n; r0 += cuda::kGemvMaxTokens) {
            const size_t m = std::min(cuda::kGemvMaxTokens, n - r0);
            for (size_t i = 0; i < n_products; ++i) {
                part[i] = products[i];
                part[i].y = products[i].y + r0 * products[i].n_out;
            }
            const bool pass = cuda::gemv(s, part, n_products, type, x.as<float>() + r0 * n_in, m, n_in, epilogue, act);
            CACTUS_ASSERT(pass || r0 == 0);  // a later pass has the first one's shapes, fewer rows at most
            ran = pass;
            if (!pass) break;
        }
    });
    return ran;
}

void CudaBackend::do_matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) {
    if (!fused_) {
        Backend::do_matmuls(products, n_products, x);  // Backend::matmuls adds the biases
        return;
    }
    // Runs of one weight type (q, k, v of one file usually share it) go as one launch each.
    for (size_t first = 0; first < n_products;) {
        size_t end = first + 1;
        while (end < n_products && end - first < cuda::kGemvMaxProducts &&
               products[end].w->type == products[first].w->type) {
            ++end;
        }
        matmuls_group(products + first, end - first, x);
        first = end;
    }
}

void CudaBackend::matmuls_group(const SharedInputProduct* products, size_t n_products, const Tensor& x) {
    check_f32(x, "matmuls", "x");
    cuda::GemvProduct p[cuda::kGemvMaxProducts];
    for (size_t i = 0; i < n_products; ++i) {
        const SharedInputProduct& sp = products[i];
        check_f32(*sp.y, "matmuls", "y");
        check_dev(*sp.w, "matmuls", "the weight");
        if (sp.bias) check_f32(*sp.bias, "matmuls", "the bias");
        p[i] = cuda::GemvProduct{sp.w->data(), sp.w->row_bytes(), sp.y->as<float>(),
                                 sp.bias ? sp.bias->as<float>() : nullptr, sp.w->rows()};
    }
    if (try_gemv("matmuls", p, n_products, products[0].w->type, x, cuda::GemvEpilogue::STORE, 0)) return;
    for (size_t i = 0; i < n_products; ++i) {  // matmuls_add_bias(): the biases are ours to add
        do_matmul(*products[i].y, *products[i].w, x);
        if (products[i].bias) do_add(*products[i].y, *products[i].y, *products[i].bias);
    }
}

void CudaBackend::do_matmul_accumulate(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp) {
    check_f32(x, "matmul_accumulate", "x");
    check_f32(in, "matmul_accumulate", "in");
    check_dev(w, "matmul_accumulate", "the weight");
    const cuda::GemvProduct product{w.data(), w.row_bytes(), x.as<float>(), nullptr, w.rows()};
    if (try_gemv("matmul_accumulate", &product, 1, w.type, in, cuda::GemvEpilogue::ACCUMULATE, 0)) return;
    if (try_gemm("matmul_accumulate", x, w, in, true)) return;
    Backend::do_matmul_accumulate(x, w, in, tmp);
}

void CudaBackend::do_gated_matmul(const Tensor& gate, const Tensor& up, const Tensor& w_gate, const Tensor& w_up,
                                  const Tensor& in, Activation act) {
    check_f32(gate, "gated_matmul", "gate");
    check_f32(in, "gated_matmul", "in");
    check_dev(w_gate, "gated_matmul", "the gate weight");
    check_dev(w_up, "gated_matmul", "the up weight");
    if (w_gate.type == w_up.type) {
        // up is not written: each warp computes a gate row and its up row and stores act(g) * u.
        const cuda::GemvProduct products[2] = {
            {w_gate.data(), w_gate.row_bytes(), gate.as<float>(), nullptr, w_gate.rows()},
            {w_up.data(), w_up.row_bytes(), up.as<float>(), nullptr, w_up.rows()}};
        if (try_gemv("gated_matmul", products, 2, w_gate.type, in, cuda::GemvEpilogue::GATED, static_cast<int>(act)))
            return;
    }
    Backend::do_gated_matmul(gate, up, w_gate, w_up, in, act);
}

void CudaBackend::do_add(const Tensor& y, const Tensor& a, const Tensor& b) {
    check_f32(y, "add", "y");
    check_f32(a, "add", "a");
    check_f32(b, "add", "b");
    launch("add", [&](cudaStream_t s) {
        cuda::add(s, y.as<float>(), a.as<float>(), b.as<float>(), a.rows(), a.width(), b.rows());
    });
}

void CudaBackend::do_scale(const Tensor& y, const Tensor& x, float v) {
    check_f32(y, "scale", "y");
    check_f32(x, "scale", "x");
    launch("scale", [&](cudaStream_t s) { cuda::scale(s, y.as<float>(), x.as<float>(), v, x.elements()); });
}

void CudaBackend::do_softcap(const Tensor& y, const Tensor& x, float cap) {
    check_f32(y, "softcap", "y");
    check_f32(x, "softcap", "x");
    launch("softcap", [&](cudaStream_t s) { cuda::softcap(s, y.as<float>(), x.as<float>(), cap, x.elements()); });
}

void CudaBackend::do_top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k) {
    check_dev(ids, "top_k", "ids");
    check_f32(vals, "top_k", "vals");
    check_f32(stats, "top_k", "stats");
    check_f32(logits, "top_k", "logits");
    launch("top_k", [&](cudaStream_t s) {
        cuda::top_k(s, ids.as<int32_t>(), vals.as<float>(), stats.as<float>(), logits.as<float>(), logits.rows(),
                    logits.width(), k);
    });
}

void CudaBackend::do_gelu(const Tensor& y, const Tensor& x, Activation kind) {
    check_f32(y, "gelu", "y");
    check_f32(x, "gelu", "x");
    const int k = static_cast<int>(kind);  // cuda_kernels.cu activate(): 0 silu, 1 gelu tanh, 2 gelu erf
    launch("gelu", [&](cudaStream_t s) { cuda::gelu(s, y.as<float>(), x.as<float>(), k, x.elements()); });
}

void CudaBackend::do_glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) {
    check_f32(y, "glu", "y");
    check_f32(gate, "glu", "gate");
    check_f32(up, "glu", "up");
    const int k = static_cast<int>(act);
    launch("glu",
           [&](cudaStream_t s) { cuda::glu(s, y.as<float>(), gate.as<float>(), up.as<float>(), k, y.elements()); });
}

void CudaBackend::do_rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) {
    check_f32(x, "rope", "x");
    check_dev(pos, "rope", "positions");
    const size_t n = x.rows();
    const size_t head_dim = x.width() / n_head;
    const float* factors = rope_factors(params);
    launch("rope", [&](cudaStream_t s) {
        cuda::rope(s, x.as<float>(), pos.as<int32_t>(), n, n_head, head_dim, params.n_rot,
                   params.style == RopeStyle::NEOX, params.freq_base, params.freq_scale, factors);
    });
}

const float* CudaBackend::rope_factors(const RopeParams& params) {
    if (!params.freq_factors) return nullptr;
    auto it = rope_factors_.find(params.freq_factors);
    if (it == rope_factors_.end()) {
        const size_t bytes = params.n_rot / 2 * sizeof(float);
        std::unique_ptr<Buffer> buffer = alloc(bytes);
        upload(make_tensor(buffer.get(), 0, DType::F32, params.n_rot / 2), params.freq_factors, bytes);
        it = rope_factors_.emplace(params.freq_factors, std::move(buffer)).first;
    }
    return static_cast<const float*>(it->second->base());
}

// ---- selection --------------------------------------------------------------------------------------

bool cuda_compiled() { return true; }

std::vector<std::string> cuda_devices() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // no driver or no GPU: none usable
        return {};
    }
    std::vector<std::string> devices;
    for (int i = 0; i < count; ++i) devices.push_back("cuda:" + std::to_string(i));
    return devices;
}

std::unique_ptr<Backend> make_cuda_backend(const std::string& device, std::chrono::milliseconds timeout) {
    int index = 0;
    if (device != "cuda" && device.compare(0, 5, "cuda:") != 0) {
        fail("backend: device '%s' is not available (devices: cpu, cuda[:N])", device.c_str());
    }
    if (device.size() > 5) {  // "cuda:N"
        char* end = nullptr;
        const long n = std::strtol(device.c_str() + 5, &end, 10);
        if (device[4] != ':' || end == device.c_str() + 5 || *end != '\0' || n < 0 || n > 1024) {
            fail("backend: device '%s' is not cuda or cuda:N", device.c_str());
        }
        index = static_cast<int>(n);
    }
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fail("backend: device '%s' needs a usable NVIDIA GPU and driver: %s", device.c_str(), cudaGetErrorString(e));
    }
    if (index >= count) {
        fail("backend: device '%s' does not exist (this machine has %d CUDA device%s)", device.c_str(), count,
             count == 1 ? "" : "s");
    }
    return std::make_unique<CudaBackend>(index, timeout);
}

}  // namespace cactus
