#pragma once
// The backend interface: an eager contract in the spirit of ggml's backend (no graph compiler).
// A backend owns memory (activation buffers, placed weights, KV storage) and runs the ops the
// models use over tensor views. Model code (src/models/) holds a Backend& and calls these ops; it
// never asks which device it runs on and never touches the bytes behind a Tensor.
//
// Conventions:
//  - Arguments: outputs first, then inputs, then parameters. Shapes in comments outermost first.
//  - Activations are F32 tensors of contiguous rows. Weights may be any GGUF type the backend
//    supports (supports_weight()).
//  - Ops are enqueued in order; a CPU backend runs them at once. synchronize(deadline) waits for
//    everything enqueued, for at most the deadline, and throws cactus::Error on a timeout or a
//    device error (it never blocks forever). download() synchronises first.
//  - Every op has a scalar reference in src/ops/ (ops_ref.h, quant.h): each backend's kernels are
//    tested against it on random data of odd sizes (tests/backends/).
//
// Adding an op: declare it here (with its reference semantics), implement it in every backend
// (CpuBackend: src/backends/cpu_backend*.cpp; later CUDA: src/backends/cuda/), and add its test to
// tests/backends/test_backend_ops.cpp, which runs every backend against the reference.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kv/kv_cache.h"
#include "ops/ops_ref.h"

namespace cactus {

enum class Activation { SILU, GELU_TANH, GELU_ERF };

// Which tokens of a batch attend to which KV cache: token i of the batch is token `token[i]` (its
// index in its sequence) of `cache[i]`. The caches' bookkeeping (rows, positions, rings) is on the
// host; their storage was made by this backend (make_kv_storage).
struct KvBatch {
    size_t n = 0;
    KvCache* const* cache = nullptr;  // [n]
    const size_t* token = nullptr;    // [n]
    // [n] the last token each query sees (>= token[i], stored by this batch: a bidirectional span
    // such as a Gemma 3 image sees all of itself); nullptr = causal (token[i] itself).
    const size_t* last = nullptr;
};

// Dense attention of n_q queries over n_kv given keys and values (encoders, cross-attention,
// bidirectional media tokens). Heads: q [n_q, n_head * head_dim], k [n_kv, n_head_kv * head_dim],
// v [n_kv, n_head_kv * head_dim_v], out [n_q, n_head * head_dim_v]; n_head % n_head_kv == 0.
// mask (optional) [n_q, n_kv] F32, added to the scaled scores (-INFINITY hides a key).
struct DenseAttention {
    size_t n_head = 0;
    size_t n_head_kv = 0;
    size_t head_dim = 0;
    size_t head_dim_v = 0;
    float scale = 1.0f;
    bool causal = false;  // query i sees keys j <= i + (n_kv - n_q)
};

// 1-D convolution over time: x [n_t, n_in] (time rows), w [n_out, n_in * kernel] (GGUF dims
// {kernel, n_in, n_out}; any matmul weight type), b [n_out] F32 or empty; y [n_t_out, n_out] with
// n_t_out = (n_t + 2 * pad - kernel) / stride + 1. Rows in, rows out: convolutions chain.
struct Conv1d {
    size_t kernel = 0;
    size_t stride = 1;
    size_t pad = 0;
};

// 2-D convolution (patch embeddings): x [n_in, height * width] (channel planes of an image),
// w [n_out, n_in * kernel_h * kernel_w] (GGUF dims {kw, kh, n_in, n_out}), b [n_out] F32 or empty;
// y [h_out * w_out, n_out]: one row per output pixel (a patch token), row-major over (y, x).
struct Conv2d {
    size_t kernel_h = 0;
    size_t kernel_w = 0;
    size_t stride = 1;
    size_t pad = 0;
    size_t height = 0;
    size_t width = 0;
};

// One product of Backend::matmuls: y = x W^T.
struct SharedInputProduct {
    const Tensor* y;
    const Tensor* w;
};

class Backend {
public:
    virtual ~Backend() = default;

    // "cpu", "cuda:0", ...; describe() adds details (kernel tier, threads, device name).
    virtual const char* name() const = 0;
    virtual std::string describe() const = 0;
    virtual int n_threads() const { return 1; }

    // ---- memory ---------------------------------------------------------------------------------
    virtual std::unique_ptr<Buffer> alloc(size_t bytes) = 0;
    // Copies host bytes into / out of a tensor with contiguous rows (bytes <= tensor bytes).
    virtual void upload(const Tensor& dst, const void* src, size_t bytes) = 0;
    virtual void download(void* dst, const Tensor& src, size_t bytes) = 0;
    // Places a weight whose bytes are on the host (the mapped GGUF file): the CPU backend keeps the
    // mapping (no copy), a device backend uploads it (and may repack it). [n_rows, width] of type.
    virtual Tensor place_weight(const void* host, DType type, size_t width, size_t n_rows) = 0;
    // A placed weight that is only ever the W of matmul (never a get_rows table, never read by row):
    // the backend may return its own copy in a layout of its kernels (the CPU's x86 tables repack
    // Q4_0, and the AVX2 table also Q4_K and Q6_K, into 8-row groups: ops/*_x8.h); `w` stays valid.
    // Default: w itself.
    virtual Tensor pack_for_products(const Tensor& w) { return w; }
    virtual bool supports_weight(DType type) const = 0;
    // Storage for a KV cache of these layers (the bookkeeping stays in KvCache).
    virtual std::unique_ptr<KvStorage> make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) = 0;
    // Waits for every op enqueued so far; throws cactus::Error after `deadline` or on a device error.
    virtual void synchronize(std::chrono::milliseconds deadline) = 0;

    // ---- ops ------------------------------------------------------------------------------------
    // y [n, width] = table[ids[i]] * scale; ids: [n] I32 (checked < table rows).
    virtual void get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) = 0;
    // y [n, w] = x / sqrt(mean(x^2) + eps) * weight[w] (weight empty: none). y may be x.
    virtual void rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) = 0;
    // y [n, w] = (x - mean) / sqrt(var + eps) * weight + bias (either may be empty). y may be x.
    virtual void layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) = 0;
    // y [n, n_out] = x [n, n_in] W^T, W: [n_out, n_in] of any supported weight type.
    virtual void matmul(const Tensor& y, const Tensor& w, const Tensor& x) = 0;
    // y_i [n, n_out_i] = x W_i^T for products that read the same x [n, n_in] (q, k and v; gate and
    // up): a back end may run them as one job (the CPU quantizes x once, and its threads wait once
    // instead of once per product). Each y_i equals matmul's bit for bit. Default: matmul each.
    virtual void matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) {
        for (size_t i = 0; i < n_products; ++i) matmul(*products[i].y, *products[i].w, x);
    }
    // The same product for encoders (hundreds of rows, results never recomputed by a decode step):
    // a back end may sum in another order than matmul's (which equals its one-token product bit for
    // bit) when that is faster. Default: matmul.
    virtual void matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) { matmul(y, w, x); }
    // y [n, w] = a [n, w] + b, b: [n, w] or [1, w] (broadcast over rows: a bias). y may be a.
    virtual void add(const Tensor& y, const Tensor& a, const Tensor& b) = 0;
    // y = x * s elementwise. y may be x.
    virtual void scale(const Tensor& y, const Tensor& x, float s) = 0;
    // y = cap * tanh(x / cap). y may be x.
    virtual void softcap(const Tensor& y, const Tensor& x, float cap) = 0;
    // y = gelu(x) (tanh approximation or erf). y may be x.
    virtual void gelu(const Tensor& y, const Tensor& x, Activation kind) = 0;
    // y [n, w] = act(gate) * up. y may be gate.
    virtual void glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) = 0;
    // Rotates x [n, n_head * head_dim] in place, token i at position pos[i] (pos: [n] I32).
    virtual void rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) = 0;
    // Stores the batch's keys k [n, k_width] and values v [n, v_width] into layer il of each token's
    // cache (rows from the cache's bookkeeping).
    virtual void kv_store(size_t il, const KvBatch& batch, const Tensor& k, const Tensor& v) = 0;
    // out [n, n_head * head_dim_v] = softmax(scale * q k^T + mask) v over layer il of each token's
    // cache, the mask of KvCache::mask_for (causal, sliding window, sinks). q: [n, n_head * head_dim].
    virtual void attention_kv(const Tensor& out, size_t il, const KvBatch& batch, const Tensor& q, size_t n_head,
                              float scale) = 0;
    virtual void attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& mask, const DenseAttention& shape) = 0;
    virtual void conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) = 0;
    virtual void conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) = 0;
    // LFM2's short causal convolution (short_conv_ref in ops_ref.h): y [n, e] and bx [n, e] = B * x
    // out; bcx [n, 3 * e] = (B | C | x); w [e, L] F32 taps; state [rows, e] F32 (conv rows of earlier
    // steps, src/kv/conv_state.h); hist [n, L - 1] I32 (where each token's predecessors are).
    // The default runs the reference on host copies, so every backend has it; the CPU overrides it.
    virtual void short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                            const Tensor& hist);
    // table [rows, w] F32: table[ids[i]] = x[i] for each row i of x [n, w] with ids[i] >= 0 (ids
    // distinct; ids: [n] I32, each < rows). The default goes through the host.
    virtual void set_rows(const Tensor& table, const Tensor& x, const Tensor& ids);
};

struct BackendOptions {
    std::string device = "cpu";  // "cpu", "cuda" (= "cuda:0"), "cuda:N" (builds with CACTUS_CUDA)
    int n_threads = 0;           // CPU threads; 0 = ThreadPool::default_threads()
    // Longest host wait for a GPU (synchronize, download); then the call throws and the backend
    // refuses further work. 0 = the environment's CACTUS_GPU_TIMEOUT_MS, else 30000.
    int gpu_timeout_ms = 0;
};

// The backend for options.device; throws cactus::Error naming the device when it is unknown or
// not usable on this machine (never a silent fallback).
std::unique_ptr<Backend> make_backend(const BackendOptions& options);
// Whether this build has the CUDA backend (CMake CACTUS_CUDA); a GPU may still be missing.
bool cuda_compiled();
// The device string of the environment's CACTUS_DEVICE, or `fallback` when it is unset or empty.
std::string device_from_env(const std::string& fallback);

// Every device name make_backend knows in this build ("cpu" first; "cuda" when built with CUDA),
// whether or not it is usable on this machine (tests run each and skip the unusable ones).
std::vector<std::string> available_devices();

// The argument checks of Backend::short_conv (throws naming the bad shape); returns the taps L.
size_t check_short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                        const Tensor& hist);

// Host copies of small tensors, for code that must read values (tests, samplers): downloads.
std::vector<float> download_f32(Backend& backend, const Tensor& t);

}  // namespace cactus
