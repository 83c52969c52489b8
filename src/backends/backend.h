#pragma once
// The backend interface: an eager contract in the spirit of ggml's backend (no graph compiler).
// A backend owns memory (activation buffers, placed weights, KV storage) and runs the ops the
// models use over tensor views. Model code (src/models/) holds a Backend& and calls these ops; it
// never asks which device it runs on and never touches the bytes behind a Tensor.
//
// Conventions:
//  - Arguments: outputs first, then inputs, then parameters. Shapes in comments outermost first.
//  - Activations are F32 tensors of contiguous rows. Weights may be any GGUF type the backend
//    supports (supports(op, type)).
//  - Ops are enqueued in order; a CPU backend runs them at once. synchronize(deadline) waits for
//    everything enqueued, for at most the deadline, and throws cactus::Error on a timeout or a
//    device error (it never blocks forever). download() synchronises first.
//  - Every op has a scalar reference in src/ops/ (ops_ref.h, quant.h): each backend's kernels are
//    tested against it on random data of odd sizes (tests/backends/test_backend_ops.cpp, on every
//    device of available_devices()).
//
// The seam: each public op method is non-virtual. It checks its arguments once, here (backend.cpp:
// types, shapes, KV views; a mismatch is a cactus::Error naming the op and the shapes), then asks
// supports(op, type) (an unsupported weight or KV type is a clear error, never a crash), then calls
// the backend's protected do_<op>, which may assume valid arguments and checks only what is its
// own (that a tensor lives in its memory, device errors).
//
// Adding an op:
//  1. add it to enum Op and op_name() (backend.cpp), saying which operand supports() asks about;
//  2. declare the public method here with its reference semantics, and write its argument check in
//     backend.cpp (the public method: check, require_support, do_<op>);
//  3. declare the protected virtual do_<op> (pure, or a default through the host as do_short_conv),
//     implement it in every backend (CpuBackend: src/backends/cpu/cpu_backend*.cpp; CudaBackend:
//     src/backends/cuda/), and answer it in each supports() (CPU: CpuBackend::supports; CUDA:
//     cuda_supports in src/backends/cuda/cuda_caps.cpp, answerable without a GPU);
//  4. test it in tests/backends/test_backend_ops.cpp (every device against the reference), and
//     regenerate docs/OPS.md (python3 scripts/gen_ops_doc.py).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kv/kv_storage.h"
#include "kv/kv_view.h"
#include "ops/conformer_ref.h"
#include "ops/ops_ref.h"

namespace cactus {

enum class Activation { SILU, GELU_TANH, GELU_ERF, SIGMOID };  // SIGMOID: glu only

// The ops of the interface (supports(), docs/OPS.md).
enum class Op : uint8_t {
    GET_ROWS,
    RMS_NORM,
    LAYER_NORM,
    MATMUL,
    MATMULS,
    MATMUL_ENCODER,
    ADD,
    SCALE,
    SOFTCAP,
    GELU,
    GLU,
    ROPE,
    KV_STORE,
    ATTENTION_KV,
    ATTENTION_DENSE,
    CONV1D,
    CONV2D,
    SHORT_CONV,
    SET_ROWS,
    CLAMP,
    TRANSPOSE,
    DEPTHWISE_CONV,
    ATTENTION_LOCAL,
    MATMUL_ACCUMULATE,
    GATED_MATMUL,
    TOP_K,
};
constexpr size_t kOpCount = static_cast<size_t>(Op::TOP_K) + 1;
// "get_rows", "matmul", ...: the method's name.
const char* op_name(Op op);
// Which operand's type supports(op, type) is asked about: get_rows the table; matmul, matmuls,
// matmul_encoder, matmul_accumulate, gated_matmul, conv1d, conv2d the weight W; kv_store, attention_kv the KV rows (F16, I8 or F32:
// kv_dtype); every other op has only F32 operands and is asked with F32.
DType kv_dtype(KvType type);

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

// One product of Backend::matmuls: y = x W^T (+ bias [n_out] when bias is not null).
struct SharedInputProduct {
    const Tensor* y;
    const Tensor* w;
    const Tensor* bias = nullptr;
};

// What a device backend enqueued since it was made (all zero on the CPU, which runs ops in place).
struct BackendCounters {
    uint64_t kernels = 0;         // kernel launches, counting those inside replayed graphs
    uint64_t copies = 0;          // host <-> device and device copies, likewise
    uint64_t steps = 0;           // runs of work between two synchronisations
    uint64_t graph_replays = 0;   // steps that ran as one captured graph
    uint64_t graph_captures = 0;  // graphs captured (a step shape seen for the first time twice in a row)
};

class Backend {
public:
    virtual ~Backend() = default;

    // "cpu", "cuda:0", ...; describe() adds details (kernel tier, threads, device name).
    virtual const char* name() const = 0;
    virtual std::string describe() const = 0;
    virtual int n_threads() const { return 1; }
    // Whether this backend runs `op` with that operand type (Op: which operand). Answered without
    // running anything; every op method fails with a clear error for an unsupported type.
    virtual bool supports(Op op, DType type) const = 0;
    // A weight of this type can be placed and multiplied: supports(Op::MATMUL, type).
    bool supports_weight(DType type) const { return supports(Op::MATMUL, type); }

    // ---- memory ---------------------------------------------------------------------------------
    virtual std::unique_ptr<Buffer> alloc(size_t bytes) = 0;
    // Copies host bytes into / out of a tensor with contiguous rows (bytes <= tensor bytes).
    virtual void upload(const Tensor& dst, const void* src, size_t bytes) = 0;
    virtual void download(void* dst, const Tensor& src, size_t bytes) = 0;
    // Places a weight whose bytes are on the host (the mapped GGUF file): the CPU backend keeps the
    // mapping (no copy), a device backend uploads it (and may repack it). [n_rows, width] of type.
    virtual Tensor place_weight(const void* host, DType type, size_t width, size_t n_rows) = 0;
    // A placed weight that is only ever the W of matmul (never a get_rows table, never read by row):
    // the backend may return its own copy in a layout of its kernels (the CPU tiers' repack table:
    // src/backends/cpu/cpu_tiers.h, docs/OPS.md); `w` stays valid. Default: w itself.
    virtual Tensor pack_for_products(const Tensor& w) { return w; }
    // Storage for a KV cache of these layers (the bookkeeping stays in KvCache).
    virtual std::unique_ptr<KvStorage> make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) = 0;
    // Waits for every op enqueued so far; throws cactus::Error after `deadline` or on a device error.
    virtual void synchronize(std::chrono::milliseconds deadline) = 0;
    virtual BackendCounters counters() const { return {}; }
    // Whether a step repeated with the same kernel arguments runs as one captured graph (CUDA step
    // graphs). A model may then keep a step's arguments fixed, e.g. attend over a whole window under
    // a mask instead of over a row range that grows every step. Default: no.
    virtual bool replays_steps() const { return false; }

    // ---- ops (checked here, then do_<op>) ------------------------------------------------------
    // y [n, width] = table[ids[i]] * scale; ids: [n] I32 (checked < table rows).
    void get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale);
    // y [n, w] = x / sqrt(mean(x^2) + eps) * weight[w] (weight empty: none). y may be x.
    void rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps);
    // y [n, w] = (x - mean) / sqrt(var + eps) * weight + bias (either may be empty). y may be x.
    void layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
    // y [n, n_out] = x [n, n_in] W^T, W: [n_out, n_in] of any supported weight type.
    void matmul(const Tensor& y, const Tensor& w, const Tensor& x);
    // y_i [n, n_out_i] = x W_i^T for products that read the same x [n, n_in] (q, k and v; gate and
    // up): a back end may run them as one job (the CPU quantizes x once, and its threads wait once
    // instead of once per product). Each y_i equals matmul's bit for bit (then + bias_i [1, n_out_i]
    // as add would). Default: matmul each.
    void matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x);
    // x [n, n_out] += in [n, n_in] W^T: the residual add folded into the product (x is not in).
    // tmp [n, n_out] is scratch a back end without the fused kernel uses (matmul into it, then add).
    void matmul_accumulate(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp);
    // gate [n, n_ff] = act(in W_gate^T) * (in W_up^T) (glu of the two products; in is neither
    // output). up [n, n_ff] is scratch for a back end without the fused kernel (matmuls, then glu).
    void gated_matmul(const Tensor& gate, const Tensor& up, const Tensor& w_gate, const Tensor& w_up, const Tensor& in,
                      Activation act);
    // The same product for encoders (hundreds of rows, results never recomputed by a decode step):
    // a back end may sum in another order than matmul's (which equals its one-token product bit for
    // bit) when that is faster. Default: matmul.
    void matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x);
    // y [n, w] = a [n, w] + b, b: [n, w] or [1, w] (broadcast over rows: a bias). y may be a.
    void add(const Tensor& y, const Tensor& a, const Tensor& b);
    // y = x * s elementwise. y may be x.
    void scale(const Tensor& y, const Tensor& x, float s);
    // y = cap * tanh(x / cap), cap > 0. y may be x.
    void softcap(const Tensor& y, const Tensor& x, float cap);
    // y = gelu(x) (tanh approximation or erf), or silu(x) with Activation::SILU. y may be x.
    void gelu(const Tensor& y, const Tensor& x, Activation kind);
    // y [n, w] = act(gate) * up. y may be gate.
    void glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act);
    // Rotates x [n, n_head * head_dim] in place, token i at position pos[i] (pos: [n] I32).
    void rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params);
    // Stores the batch's keys k [n, k_width] and values v [n, v_width] into row view[i].row of
    // each token's layer (KvView: the KvCache's bookkeeping, kv/kv_view.h).
    void kv_store(const KvBatch& batch, const Tensor& k, const Tensor& v);
    // out [n, n_head * head_dim_v] = softmax(scale * q k^T + mask) v over rows view[i].rows of each
    // token's layer, masked by view[i].positions and view[i].mask (causal, sliding window, sinks,
    // bidirectional spans). q: [n, n_head * head_dim_k].
    void attention_kv(const Tensor& out, const KvBatch& batch, const Tensor& q, size_t n_head, float scale);
    void attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                         const DenseAttention& shape);
    void conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c);
    void conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c);
    // LFM2's short causal convolution (short_conv_ref in ops_ref.h): y [n, e] and bx [n, e] = B * x
    // out; bcx [n, 3 * e] = (B | C | x); w [e, L] F32 taps; state [rows, e] F32 (conv rows of earlier
    // steps, src/kv/conv_state.h); hist [n, L - 1] I32 (where each token's predecessors are).
    void short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                    const Tensor& hist);
    // table [rows, w] F32: table[ids[i]] = x[i] for each row i of x [n, w] with ids[i] >= 0 (ids
    // distinct; ids: [n] I32, each < rows).
    void set_rows(const Tensor& table, const Tensor& x, const Tensor& ids);

    // ---- conformer ops (Gemma 4's audio tower; references in ops/conformer_ref.h) ----------------
    // y = min(max(x, lo), hi) elementwise (ReLU: lo 0, hi +inf). y may be x.
    void clamp(const Tensor& y, const Tensor& x, float lo, float hi);
    // y [w, n] = x [n, w] transposed (time rows <-> channel planes). y and x do not overlap.
    void transpose(const Tensor& y, const Tensor& x);
    // Causal depthwise convolution over time rows: y [n, e], x [n, e], w [e, kernel] F32 taps
    // (causal_depthwise_conv_row_ref). y and x do not overlap.
    void depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w);
    // Sliding-window self-attention with relative position keys and a logit softcap
    // (local_attention_row_ref): out, q, k, v [n, n_head * head_dim]; rel [window, n_head * head_dim];
    // q_scale [head_dim]. out overlaps no input.
    void attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel,
                         const Tensor& q_scale, const LocalAttention& a);

    // ---- sampling on the device (reference: top_k_row_ref in ops/ops_ref.h) -------------------
    // For each row of logits [n, n_vocab]: ids [n, k] I32 and vals [n, k] F32 its k largest logits
    // in descending order, equal logits by lower id first (k = 1 is the host sampler's argmax; NaN
    // ranks below -inf, -0 equals +0); stats [n, 2] F32 the row's maximum and sum_i exp(logit_i -
    // maximum) (the softmax normalizer at temperature 1). 1 <= k <= min(256, n_vocab).
    void top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k);

protected:
    // The backends' ops: arguments already checked by the public method of the same name.
    virtual void do_get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) = 0;
    virtual void do_rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) = 0;
    virtual void do_layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                               float eps) = 0;
    virtual void do_matmul(const Tensor& y, const Tensor& w, const Tensor& x) = 0;
    virtual void do_matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x);
    // Whether do_matmuls adds the products' biases itself; otherwise matmuls adds them after it.
    virtual bool matmuls_add_bias() const { return false; }
    // Defaults: the unfused sequence (do_matmul + do_add; do_matmuls + do_glu) through the scratch
    // tensors, so a backend without a fused kernel computes exactly what the separate ops compute.
    virtual void do_matmul_accumulate(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp);
    virtual void do_gated_matmul(const Tensor& gate, const Tensor& up, const Tensor& w_gate, const Tensor& w_up,
                                 const Tensor& in, Activation act);
    virtual void do_matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) { do_matmul(y, w, x); }
    virtual void do_add(const Tensor& y, const Tensor& a, const Tensor& b) = 0;
    virtual void do_scale(const Tensor& y, const Tensor& x, float s) = 0;
    virtual void do_softcap(const Tensor& y, const Tensor& x, float cap) = 0;
    virtual void do_gelu(const Tensor& y, const Tensor& x, Activation kind) = 0;
    virtual void do_glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) = 0;
    virtual void do_rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) = 0;
    virtual void do_kv_store(const KvBatch& batch, const Tensor& k, const Tensor& v) = 0;
    virtual void do_attention_kv(const Tensor& out, const KvBatch& batch, const Tensor& q, size_t n_head,
                                 float scale) = 0;
    virtual void do_attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, const DenseAttention& shape) = 0;
    virtual void do_conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) = 0;
    virtual void do_conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) = 0;
    // Defaults through the host (downloads, the reference, uploads), so every backend has them.
    virtual void do_short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w,
                               const Tensor& state, const Tensor& hist);
    virtual void do_set_rows(const Tensor& table, const Tensor& x, const Tensor& ids);
    virtual void do_clamp(const Tensor& y, const Tensor& x, float lo, float hi);
    virtual void do_transpose(const Tensor& y, const Tensor& x);
    virtual void do_depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w);
    virtual void do_attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& rel, const Tensor& q_scale, const LocalAttention& a);
    virtual void do_top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k);

private:
    // Throws "<backend> <op>: <type> is not supported" unless supports(op, type).
    void require_support(Op op, DType type) const;
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

// The devices usable in this build and on this machine: "cpu" first, then "cuda:0", "cuda:1", ...
// when the build has the CUDA backend and the machine a GPU with a working driver.
std::vector<std::string> available_devices();

// Host copies of small tensors, for code that must read values (tests, samplers): downloads.
std::vector<float> download_f32(Backend& backend, const Tensor& t);

}  // namespace cactus
