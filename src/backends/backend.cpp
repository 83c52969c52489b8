#include "backends/backend.h"

#include <cstdlib>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

namespace cactus {

// The CUDA branch (src/backends/cuda/cuda_backend.cpp, or cuda_absent.cpp in builds without CUDA).
std::unique_ptr<Backend> make_cuda_backend(const std::string& device, std::chrono::milliseconds timeout);
// "cuda:0", ... for the GPUs a working driver reports; none in builds without CUDA.
std::vector<std::string> cuda_devices();

namespace {

std::chrono::milliseconds gpu_timeout(int option) {
    if (option > 0) return std::chrono::milliseconds(option);
    const char* env = std::getenv("CACTUS_GPU_TIMEOUT_MS");
    if (env == nullptr || *env == '\0') return std::chrono::milliseconds(30000);
    char* end = nullptr;
    const long ms = std::strtol(env, &end, 10);
    if (*end != '\0' || ms <= 0) fail("backend: CACTUS_GPU_TIMEOUT_MS='%s' is not a positive number", env);
    return std::chrono::milliseconds(ms);
}

}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
    if (options.device == "cpu") return std::make_unique<CpuBackend>(options.n_threads);
    if (options.device.rfind("cuda", 0) == 0)
        return make_cuda_backend(options.device, gpu_timeout(options.gpu_timeout_ms));
    fail("backend: device '%s' is not available (devices: cpu, cuda[:N])", options.device.c_str());
}

std::string device_from_env(const std::string& fallback) {
    const char* env = std::getenv("CACTUS_DEVICE");
    return env && *env ? std::string(env) : fallback;
}

std::vector<std::string> available_devices() {
    std::vector<std::string> devices = {"cpu"};
    for (const std::string& d : cuda_devices()) devices.push_back(d);
    return devices;
}

std::vector<float> download_f32(Backend& backend, const Tensor& t) {
    CACTUS_ASSERT(t.type == DType::F32);
    std::vector<float> out(t.elements());
    backend.download(out.data(), t, out.size() * sizeof(float));
    return out;
}

const char* op_name(Op op) {
    switch (op) {
        case Op::GET_ROWS:
            return "get_rows";
        case Op::RMS_NORM:
            return "rms_norm";
        case Op::LAYER_NORM:
            return "layer_norm";
        case Op::MATMUL:
            return "matmul";
        case Op::MATMULS:
            return "matmuls";
        case Op::MATMUL_ENCODER:
            return "matmul_encoder";
        case Op::ADD:
            return "add";
        case Op::SCALE:
            return "scale";
        case Op::SOFTCAP:
            return "softcap";
        case Op::GELU:
            return "gelu";
        case Op::GLU:
            return "glu";
        case Op::ROPE:
            return "rope";
        case Op::KV_STORE:
            return "kv_store";
        case Op::ATTENTION_KV:
            return "attention_kv";
        case Op::ATTENTION_DENSE:
            return "attention_dense";
        case Op::CONV1D:
            return "conv1d";
        case Op::CONV2D:
            return "conv2d";
        case Op::SHORT_CONV:
            return "short_conv";
        case Op::SET_ROWS:
            return "set_rows";
        case Op::CLAMP:
            return "clamp";
        case Op::TRANSPOSE:
            return "transpose";
        case Op::DEPTHWISE_CONV:
            return "depthwise_conv";
        case Op::ATTENTION_LOCAL:
            return "attention_local";
        case Op::MATMUL_ACCUMULATE:
            return "matmul_accumulate";
        case Op::GATED_MATMUL:
            return "gated_matmul";
        case Op::TOP_K:
            return "top_k";
    }
    return "unknown op";
}

DType kv_dtype(KvType type) {
    switch (type) {
        case KvType::F16:
            return DType::F16;
        case KvType::I8:
            return DType::I8;
        case KvType::F32:
            return DType::F32;
    }
    fail("kv_dtype: %d is not a KV type", static_cast<int>(type));
}

// ---- argument checks (once, before any backend runs) ---------------------------------------------
namespace {

// An activation: contiguous F32 rows.
void check_rows(const Tensor& t, const char* op, const char* what) {
    if (t.empty()) fail("%s: %s is an empty tensor", op, what);
    if (t.type != DType::F32 || !t.contiguous_rows()) {
        fail("%s: %s [%zu, %zu] must be contiguous f32 rows (it is %s)", op, what, t.rows(), t.width(),
             dtype_name(t.type));
    }
}

void check_ids(const Tensor& t, size_t n, const char* op, const char* what) {
    if (t.empty()) fail("%s: %s is an empty tensor", op, what);
    if (t.type != DType::I32 || t.elements() != n) {
        fail("%s: %s must be %zu I32 (it is %zu %s)", op, what, n, t.elements(), dtype_name(t.type));
    }
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
    if (a.width() != b.width() || a.rows() != b.rows()) {
        fail("%s: shapes [%zu, %zu] and [%zu, %zu] differ", op, a.rows(), a.width(), b.rows(), b.width());
    }
}

// Optional F32 vector (norm weight, bias): empty, or `n` f32 elements.
void check_optional_vector(const Tensor& t, size_t n, const char* op, const char* what) {
    if (t.empty()) return;
    if (t.type != DType::F32 || !t.contiguous_rows() || t.elements() != n) {
        fail("%s: %s must be %zu f32 elements (it is %zu %s)", op, what, n, t.elements(), dtype_name(t.type));
    }
}

void check_product(const Tensor& y, const Tensor& w, const Tensor& x, const char* op) {
    check_rows(y, op, "y");
    check_rows(x, op, "x");
    if (w.empty()) fail("%s: the weight is an empty tensor", op);
    if (x.width() != w.width() || y.width() != w.rows() || y.rows() != x.rows()) {
        fail("%s: y [%zu, %zu] = x [%zu, %zu] W^T with W [%zu, %zu] do not match", op, y.rows(), y.width(), x.rows(),
             x.width(), w.rows(), w.width());
    }
}

// Two activations (contiguous rows) that must not share bytes: a fused op reads one while it
// writes the other, in an order its kernel chooses.
void check_disjoint(const Tensor& a, const Tensor& b, const char* op, const char* what_a, const char* what_b) {
    const bool overlap = a.buffer == b.buffer && a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
    if (overlap) {
        fail("%s: %s and %s overlap (bytes from %zu and %zu of one buffer)", op, what_a, what_b, a.offset, b.offset);
    }
}

// A scratch or second output of `out`'s shape.
void check_shape_of(const Tensor& t, const Tensor& out, const char* op, const char* what, const char* out_name) {
    check_rows(t, op, what);
    if (t.width() != out.width() || t.rows() != out.rows()) {
        fail("%s: %s [%zu, %zu] must have %s's shape [%zu, %zu]", op, what, t.rows(), t.width(), out_name, out.rows(),
             out.width());
    }
}

// The views of a batch of n tokens: one layer layout, one KV type, rows inside the storage.
const KvView* check_kv_batch(const KvBatch& batch, size_t n, const char* op) {
    if (batch.n != n) fail("%s: the batch has %zu tokens and the tensors %zu rows", op, batch.n, n);
    if (batch.n == 0) return nullptr;
    if (batch.view == nullptr) fail("%s: the batch of %zu tokens has no views", op, batch.n);
    const KvView& first = batch.view[0];
    for (size_t t = 0; t < batch.n; ++t) {
        const KvView& v = batch.view[t];
        if (v.storage == nullptr || v.positions == nullptr) fail("%s: token %zu has no KV storage", op, t);
        if (v.storage->type() != first.storage->type()) fail("%s: token %zu's KV rows are of another type", op, t);
        if (v.layout.k_width != first.layout.k_width || v.layout.v_width != first.layout.v_width ||
            v.layout.n_head_kv != first.layout.n_head_kv) {
            fail("%s: token %zu's layer has rows of %zu/%zu elements in %zu heads, token 0's %zu/%zu in %zu", op, t,
                 v.layout.k_width, v.layout.v_width, v.layout.n_head_kv, first.layout.k_width, first.layout.v_width,
                 first.layout.n_head_kv);
        }
        if (v.row >= v.layout.capacity || v.rows.begin > v.rows.end || v.rows.end > v.layout.capacity) {
            fail("%s: token %zu: row %zu, rows [%zu, %zu) outside the layer's %zu rows", op, t, v.row, v.rows.begin,
                 v.rows.end, v.layout.capacity);
        }
    }
    if (first.layout.n_head_kv == 0 || first.layout.k_width % first.layout.n_head_kv != 0 ||
        first.layout.v_width % first.layout.n_head_kv != 0) {
        fail("%s: rows of %zu/%zu elements do not split into %zu heads", op, first.layout.k_width, first.layout.v_width,
             first.layout.n_head_kv);
    }
    return &first;
}

}  // namespace

void Backend::require_support(Op op, DType type) const {
    if (!supports(op, type)) fail("%s %s: %s is not supported by this backend", name(), op_name(op), dtype_name(type));
}

void Backend::get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) {
    check_rows(y, "get_rows", "y");
    if (table.empty()) fail("get_rows: the table is an empty tensor");
    check_ids(ids, y.rows(), "get_rows", "ids");
    if (table.width() != y.width()) fail("get_rows: table rows of %zu into y rows of %zu", table.width(), y.width());
    require_support(Op::GET_ROWS, table.type);
    do_get_rows(y, table, ids, scale);
}

void Backend::rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) {
    check_rows(y, "rms_norm", "y");
    check_rows(x, "rms_norm", "x");
    check_same_shape(y, x, "rms_norm");
    check_optional_vector(weight, x.width(), "rms_norm", "the weight");
    require_support(Op::RMS_NORM, DType::F32);
    do_rms_norm(y, x, weight, eps);
}

void Backend::layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
    check_rows(y, "layer_norm", "y");
    check_rows(x, "layer_norm", "x");
    check_same_shape(y, x, "layer_norm");
    check_optional_vector(weight, x.width(), "layer_norm", "the weight");
    check_optional_vector(bias, x.width(), "layer_norm", "the bias");
    require_support(Op::LAYER_NORM, DType::F32);
    do_layer_norm(y, x, weight, bias, eps);
}

void Backend::matmul(const Tensor& y, const Tensor& w, const Tensor& x) {
    check_product(y, w, x, "matmul");
    require_support(Op::MATMUL, w.type);
    do_matmul(y, w, x);
}

void Backend::matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) {
    if (n_products > 0 && products == nullptr) fail("matmuls: %zu products and no array", n_products);
    for (size_t i = 0; i < n_products; ++i) {
        if (products[i].y == nullptr || products[i].w == nullptr) fail("matmuls: product %zu has no y or W", i);
        check_product(*products[i].y, *products[i].w, x, "matmuls");
        require_support(Op::MATMULS, products[i].w->type);
        const Tensor* b = products[i].bias;
        if (b != nullptr) {
            check_rows(*b, "matmuls", "bias");
            if (b->rows() != 1 || b->width() != products[i].y->width()) {
                fail("matmuls: bias %zu [%zu, %zu] must be one row of y %zu's width %zu", i, b->rows(), b->width(), i,
                     products[i].y->width());
            }
        }
    }
    do_matmuls(products, n_products, x);
    if (matmuls_add_bias()) return;
    for (size_t i = 0; i < n_products; ++i) {
        if (products[i].bias != nullptr) do_add(*products[i].y, *products[i].y, *products[i].bias);
    }
}

void Backend::matmul_accumulate(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp) {
    const char* op = "matmul_accumulate";
    check_product(x, w, in, op);
    check_shape_of(tmp, x, op, "tmp", "x");
    check_disjoint(x, in, op, "x", "in");
    check_disjoint(tmp, x, op, "tmp", "x");
    check_disjoint(tmp, in, op, "tmp", "in");
    require_support(Op::MATMUL_ACCUMULATE, w.type);
    do_matmul_accumulate(x, w, in, tmp);
}

void Backend::gated_matmul(const Tensor& gate, const Tensor& up, const Tensor& w_gate, const Tensor& w_up,
                           const Tensor& in, Activation act) {
    const char* op = "gated_matmul";
    check_product(gate, w_gate, in, op);
    check_shape_of(up, gate, op, "up", "gate");
    check_product(up, w_up, in, op);
    check_disjoint(gate, up, op, "gate", "up");
    check_disjoint(gate, in, op, "gate", "in");
    check_disjoint(up, in, op, "up", "in");
    require_support(Op::GATED_MATMUL, w_gate.type);
    require_support(Op::GATED_MATMUL, w_up.type);
    do_gated_matmul(gate, up, w_gate, w_up, in, act);
}

void Backend::matmul_encoder(const Tensor& y, const Tensor& w, const Tensor& x) {
    check_product(y, w, x, "matmul_encoder");
    require_support(Op::MATMUL_ENCODER, w.type);
    do_matmul_encoder(y, w, x);
}

void Backend::add(const Tensor& y, const Tensor& a, const Tensor& b) {
    check_rows(y, "add", "y");
    check_rows(a, "add", "a");
    check_rows(b, "add", "b");
    check_same_shape(y, a, "add");
    if (b.width() != a.width() || (b.rows() != a.rows() && b.rows() != 1)) {
        fail("add: b [%zu, %zu] does not match a [%zu, %zu]", b.rows(), b.width(), a.rows(), a.width());
    }
    require_support(Op::ADD, DType::F32);
    do_add(y, a, b);
}

void Backend::scale(const Tensor& y, const Tensor& x, float s) {
    check_rows(y, "scale", "y");
    check_rows(x, "scale", "x");
    check_same_shape(y, x, "scale");
    require_support(Op::SCALE, DType::F32);
    do_scale(y, x, s);
}

void Backend::softcap(const Tensor& y, const Tensor& x, float cap) {
    check_rows(y, "softcap", "y");
    check_rows(x, "softcap", "x");
    check_same_shape(y, x, "softcap");
    if (!(cap > 0.0f)) fail("softcap: cap %g must be > 0", static_cast<double>(cap));
    require_support(Op::SOFTCAP, DType::F32);
    do_softcap(y, x, cap);
}

void Backend::gelu(const Tensor& y, const Tensor& x, Activation kind) {
    check_rows(y, "gelu", "y");
    check_rows(x, "gelu", "x");
    check_same_shape(y, x, "gelu");
    if (kind == Activation::SIGMOID) fail("gelu: the sigmoid is a glu activation only");
    require_support(Op::GELU, DType::F32);
    do_gelu(y, x, kind);
}

void Backend::glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) {
    check_rows(y, "glu", "y");
    check_rows(gate, "glu", "gate");
    check_rows(up, "glu", "up");
    check_same_shape(y, gate, "glu");
    check_same_shape(y, up, "glu");
    require_support(Op::GLU, DType::F32);
    do_glu(y, gate, up, act);
}

void Backend::rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) {
    check_rows(x, "rope", "x");
    check_ids(pos, x.rows(), "rope", "positions");
    if (n_head == 0 || x.width() % n_head != 0)
        fail("rope: rows of %zu do not split into %zu heads", x.width(), n_head);
    if (params.n_rot > x.width() / n_head || params.n_rot % 2 != 0) {
        fail("rope: %zu rotated dimensions do not fit heads of %zu", params.n_rot, x.width() / n_head);
    }
    require_support(Op::ROPE, DType::F32);
    do_rope(x, n_head, pos, params);
}

void Backend::kv_store(const KvBatch& batch, const Tensor& k, const Tensor& v) {
    check_rows(k, "kv_store", "k");
    check_rows(v, "kv_store", "v");
    if (v.rows() != k.rows()) fail("kv_store: %zu keys and %zu values", k.rows(), v.rows());
    const KvView* first = check_kv_batch(batch, k.rows(), "kv_store");
    if (first == nullptr) return;
    if (k.width() != first->layout.k_width || v.width() != first->layout.v_width) {
        fail("kv_store: k [%zu, %zu] and v [%zu, %zu] do not fit rows of %zu/%zu", k.rows(), k.width(), v.rows(),
             v.width(), first->layout.k_width, first->layout.v_width);
    }
    require_support(Op::KV_STORE, kv_dtype(first->storage->type()));
    do_kv_store(batch, k, v);
}

void Backend::attention_kv(const Tensor& out, const KvBatch& batch, const Tensor& q, size_t n_head, float scale) {
    check_rows(out, "attention_kv", "out");
    check_rows(q, "attention_kv", "q");
    if (out.rows() != q.rows()) fail("attention_kv: out has %zu rows and q %zu", out.rows(), q.rows());
    const KvView* first = check_kv_batch(batch, q.rows(), "attention_kv");
    if (first == nullptr) return;
    const KvLayerLayout& l = first->layout;
    if (n_head == 0 || n_head % l.n_head_kv != 0 || q.width() != n_head * (l.k_width / l.n_head_kv) ||
        out.width() != n_head * (l.v_width / l.n_head_kv)) {
        fail("attention_kv: q [%zu, %zu] and out [%zu, %zu] do not fit %zu heads over rows of %zu/%zu in %zu heads",
             q.rows(), q.width(), out.rows(), out.width(), n_head, l.k_width, l.v_width, l.n_head_kv);
    }
    require_support(Op::ATTENTION_KV, kv_dtype(first->storage->type()));
    do_attention_kv(out, batch, q, n_head, scale);
}

void Backend::attention_dense(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const DenseAttention& s) {
    check_rows(out, "attention_dense", "out");
    check_rows(q, "attention_dense", "q");
    check_rows(k, "attention_dense", "k");
    check_rows(v, "attention_dense", "v");
    const size_t n_q = q.rows();
    const size_t n_kv = k.rows();
    if (s.n_head == 0 || s.n_head_kv == 0 || s.n_head % s.n_head_kv != 0 || q.width() != s.n_head * s.head_dim ||
        k.width() != s.n_head_kv * s.head_dim || v.width() != s.n_head_kv * s.head_dim_v || v.rows() != n_kv ||
        out.rows() != n_q || out.width() != s.n_head * s.head_dim_v) {
        fail("attention_dense: shapes q [%zu, %zu] k [%zu, %zu] v [%zu, %zu] out [%zu, %zu] do not fit %zu/%zu heads",
             n_q, q.width(), n_kv, k.width(), v.rows(), v.width(), out.rows(), out.width(), s.n_head, s.n_head_kv);
    }
    if (!mask.empty() &&
        (mask.type != DType::F32 || !mask.contiguous_rows() || mask.width() != n_kv || mask.rows() != n_q)) {
        fail("attention_dense: mask must be f32 [%zu, %zu]", n_q, n_kv);
    }
    require_support(Op::ATTENTION_DENSE, DType::F32);
    do_attention_dense(out, q, k, v, mask, s);
}

void Backend::conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) {
    // x [n_t, n_in] time rows; w [n_out, n_in * kernel]; y [n_t_out, n_out].
    check_rows(y, "conv1d", "y");
    check_rows(x, "conv1d", "x");
    if (w.empty()) fail("conv1d: the weight is an empty tensor");
    const size_t n_t = x.rows();
    const size_t n_in = x.width();
    if (c.kernel == 0 || c.stride == 0 || n_t + 2 * c.pad < c.kernel || w.width() != n_in * c.kernel) {
        fail("conv1d: kernel %zu (stride %zu, pad %zu) over [%zu, %zu] with weight width %zu", c.kernel, c.stride,
             c.pad, n_t, n_in, w.width());
    }
    const size_t n_t_out = (n_t + 2 * c.pad - c.kernel) / c.stride + 1;
    if (y.rows() != n_t_out || y.width() != w.rows()) {
        fail("conv1d: output [%zu, %zu] expected, got [%zu, %zu]", n_t_out, w.rows(), y.rows(), y.width());
    }
    check_optional_vector(b, w.rows(), "conv1d", "the bias");
    require_support(Op::CONV1D, w.type);
    do_conv1d(y, x, w, b, c);
}

void Backend::conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) {
    // x [n_in, height * width] channel planes; w [n_out, n_in * kh * kw]; y [h_out * w_out, n_out].
    check_rows(y, "conv2d", "y");
    check_rows(x, "conv2d", "x");
    if (w.empty()) fail("conv2d: the weight is an empty tensor");
    const size_t n_in = x.rows();
    if (c.kernel_h == 0 || c.kernel_w == 0 || c.stride == 0 || x.width() != c.height * c.width ||
        c.height + 2 * c.pad < c.kernel_h || c.width + 2 * c.pad < c.kernel_w ||
        w.width() != n_in * c.kernel_h * c.kernel_w) {
        fail("conv2d: kernel %zux%zu over %zu planes of %zux%zu with weight width %zu", c.kernel_h, c.kernel_w, n_in,
             c.height, c.width, w.width());
    }
    const size_t h_out = (c.height + 2 * c.pad - c.kernel_h) / c.stride + 1;
    const size_t w_out = (c.width + 2 * c.pad - c.kernel_w) / c.stride + 1;
    if (y.rows() != h_out * w_out || y.width() != w.rows()) {
        fail("conv2d: output [%zu, %zu] expected, got [%zu, %zu]", h_out * w_out, w.rows(), y.rows(), y.width());
    }
    check_optional_vector(b, w.rows(), "conv2d", "the bias");
    require_support(Op::CONV2D, w.type);
    do_conv2d(y, x, w, b, c);
}

void Backend::short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                         const Tensor& hist) {
    for (const Tensor* t : {&y, &bx, &bcx, &w, &state}) check_rows(*t, "short_conv", "y, bx, bcx, w and state");
    if (hist.empty() || hist.type != DType::I32) fail("short_conv: hist must be I32");
    const size_t n = y.rows();
    const size_t e = y.width();
    const size_t L = w.width();
    if (L < 2 || bx.rows() != n || bx.width() != e || bcx.rows() != n || bcx.width() != 3 * e || w.rows() != e ||
        state.width() != e || hist.elements() != n * (L - 1)) {
        fail("short_conv: shapes y [%zu, %zu], bx [%zu, %zu], bcx [%zu, %zu], w [%zu, %zu], state width %zu, hist %zu",
             n, e, bx.rows(), bx.width(), bcx.rows(), bcx.width(), w.rows(), L, state.width(), hist.elements());
    }
    require_support(Op::SHORT_CONV, DType::F32);
    do_short_conv(y, bx, bcx, w, state, hist);
}

void Backend::set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) {
    if (table.empty() || x.empty() || ids.empty() || table.type != DType::F32 || x.type != DType::F32 ||
        ids.type != DType::I32 || table.width() != x.width() || ids.elements() != x.rows()) {
        fail("set_rows: table [%zu, %zu] F32, x [%zu, %zu] F32 and ids [%zu] I32 do not fit", table.rows(),
             table.width(), x.rows(), x.width(), ids.elements());
    }
    require_support(Op::SET_ROWS, DType::F32);
    do_set_rows(table, x, ids);
}

void Backend::top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k) {
    check_rows(logits, "top_k", "logits");
    check_rows(vals, "top_k", "vals");
    check_rows(stats, "top_k", "stats");
    const size_t n = logits.rows();
    if (k < 1 || k > kTopKMax || k > logits.width())
        fail("top_k: k = %zu must be in [1, %zu] and at most n_vocab = %zu", k, kTopKMax, logits.width());
    check_ids(ids, n * k, "top_k", "ids");
    if (!ids.contiguous_rows() || vals.rows() != n || vals.width() != k || stats.rows() != n || stats.width() != 2)
        fail("top_k: ids [%zu] I32, vals [%zu, %zu] and stats [%zu, %zu] do not fit logits [%zu, %zu] and k = %zu",
             ids.elements(), vals.rows(), vals.width(), stats.rows(), stats.width(), n, logits.width(), k);
    require_support(Op::TOP_K, DType::F32);
    do_top_k(ids, vals, stats, logits, k);
}

void Backend::clamp(const Tensor& y, const Tensor& x, float lo, float hi) {
    check_rows(y, "clamp", "y");
    check_rows(x, "clamp", "x");
    check_same_shape(y, x, "clamp");
    if (!(lo <= hi)) fail("clamp: the bounds [%g, %g] are empty or NaN", lo, hi);
    require_support(Op::CLAMP, DType::F32);
    do_clamp(y, x, lo, hi);
}

void Backend::transpose(const Tensor& y, const Tensor& x) {
    check_rows(y, "transpose", "y");
    check_rows(x, "transpose", "x");
    if (y.rows() != x.width() || y.width() != x.rows()) {
        fail("transpose: y [%zu, %zu] is not x [%zu, %zu] transposed", y.rows(), y.width(), x.rows(), x.width());
    }
    check_disjoint(y, x, "transpose", "y", "x");
    require_support(Op::TRANSPOSE, DType::F32);
    do_transpose(y, x);
}

void Backend::depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w) {
    check_rows(y, "depthwise_conv", "y");
    check_rows(x, "depthwise_conv", "x");
    check_rows(w, "depthwise_conv", "w");
    check_same_shape(y, x, "depthwise_conv");
    if (w.rows() != x.width() || w.width() == 0) {
        fail("depthwise_conv: taps [%zu, %zu] for %zu channels", w.rows(), w.width(), x.width());
    }
    check_disjoint(y, x, "depthwise_conv", "y", "x");
    require_support(Op::DEPTHWISE_CONV, DType::F32);
    do_depthwise_conv(y, x, w);
}

void Backend::attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& rel,
                              const Tensor& q_scale, const LocalAttention& a) {
    for (const Tensor* t : {&out, &q, &k, &v, &rel, &q_scale}) check_rows(*t, "attention_local", "every operand");
    check_same_shape(out, q, "attention_local");
    check_same_shape(out, k, "attention_local");
    check_same_shape(out, v, "attention_local");
    if (a.n_head == 0 || a.head_dim == 0 || a.window == 0 || !(a.softcap > 0.0f) ||
        q.width() != a.n_head * a.head_dim || rel.width() != q.width() || rel.rows() != a.window ||
        q_scale.elements() != a.head_dim) {
        fail(
            "attention_local: %zu heads of %zu, window %zu, softcap %g with q [%zu, %zu], rel [%zu, %zu], "
            "q_scale %zu",
            a.n_head, a.head_dim, a.window, a.softcap, q.rows(), q.width(), rel.rows(), rel.width(),
            q_scale.elements());
    }
    for (const Tensor* t : {&q, &k, &v, &rel, &q_scale}) check_disjoint(out, *t, "attention_local", "out", "an input");
    require_support(Op::ATTENTION_LOCAL, DType::F32);
    do_attention_local(out, q, k, v, rel, q_scale, a);
}

// ---- defaults -----------------------------------------------------------------------------------

void Backend::do_matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) {
    for (size_t i = 0; i < n_products; ++i) do_matmul(*products[i].y, *products[i].w, x);
}

void Backend::do_matmul_accumulate(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp) {
    do_matmul(tmp, w, in);
    do_add(x, x, tmp);
}

void Backend::do_gated_matmul(const Tensor& gate, const Tensor& up, const Tensor& w_gate, const Tensor& w_up,
                              const Tensor& in, Activation act) {
    const SharedInputProduct products[] = {{&gate, &w_gate}, {&up, &w_up}};
    do_matmuls(products, 2, in);
    do_glu(gate, gate, up, act);
}

void Backend::do_short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                            const Tensor& hist) {
    const size_t n = y.rows();
    const size_t e = y.width();
    const size_t L = w.width();
    std::vector<float> h_bcx = download_f32(*this, bcx);
    std::vector<float> h_w = download_f32(*this, w);
    std::vector<float> h_state = download_f32(*this, state);
    std::vector<int32_t> h_hist(hist.elements());
    download(h_hist.data(), hist, h_hist.size() * sizeof(int32_t));
    std::vector<float> h_y(n * e), h_bx(n * e);
    short_conv_ref(h_y.data(), h_bx.data(), h_bcx.data(), h_w.data(), h_state.data(), state.rows(), h_hist.data(), n, e,
                   L);
    upload(y, h_y.data(), h_y.size() * sizeof(float));
    upload(bx, h_bx.data(), h_bx.size() * sizeof(float));
}

void Backend::do_set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) {
    std::vector<int32_t> h_ids(ids.elements());
    download(h_ids.data(), ids, h_ids.size() * sizeof(int32_t));
    std::vector<float> h_x = download_f32(*this, x);
    for (size_t i = 0; i < h_ids.size(); ++i) {
        if (h_ids[i] < 0) continue;
        if (static_cast<size_t>(h_ids[i]) >= table.rows())
            fail("set_rows: id %d is outside the table of %zu rows", h_ids[i], table.rows());
        upload(table.rows_view(static_cast<size_t>(h_ids[i]), 1), h_x.data() + i * x.width(),
               x.width() * sizeof(float));
    }
}

void Backend::do_top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k) {
    const std::vector<float> h = download_f32(*this, logits);
    const size_t n = logits.rows(), n_vocab = logits.width();
    std::vector<int32_t> h_ids(n * k);
    std::vector<float> h_vals(n * k), h_stats(n * 2);
    for (size_t r = 0; r < n; ++r)
        top_k_row_ref(h_ids.data() + r * k, h_vals.data() + r * k, h_stats.data() + r * 2, h.data() + r * n_vocab,
                      n_vocab, k);
    upload(ids, h_ids.data(), h_ids.size() * sizeof(int32_t));
    upload(vals, h_vals.data(), h_vals.size() * sizeof(float));
    upload(stats, h_stats.data(), h_stats.size() * sizeof(float));
}

void Backend::do_clamp(const Tensor& y, const Tensor& x, float lo, float hi) {
    std::vector<float> h = download_f32(*this, x);
    clamp_ref(h.data(), h.data(), h.size(), lo, hi);
    upload(y, h.data(), h.size() * sizeof(float));
}

void Backend::do_transpose(const Tensor& y, const Tensor& x) {
    const std::vector<float> h = download_f32(*this, x);
    std::vector<float> out(h.size());
    transpose_ref(out.data(), h.data(), x.rows(), x.width());
    upload(y, out.data(), out.size() * sizeof(float));
}

void Backend::do_depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w) {
    const std::vector<float> hx = download_f32(*this, x);
    const std::vector<float> hw = download_f32(*this, w);
    std::vector<float> out(hx.size());
    for (size_t t = 0; t < x.rows(); ++t) {
        causal_depthwise_conv_row_ref(out.data() + t * x.width(), hx.data(), hw.data(), t, x.width(), w.width());
    }
    upload(y, out.data(), out.size() * sizeof(float));
}

void Backend::do_attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& rel, const Tensor& q_scale, const LocalAttention& a) {
    const std::vector<float> hq = download_f32(*this, q), hk = download_f32(*this, k), hv = download_f32(*this, v);
    const std::vector<float> hr = download_f32(*this, rel), hs = download_f32(*this, q_scale);
    std::vector<float> ho(hq.size());
    for (size_t t = 0; t < q.rows(); ++t) {
        local_attention_row_ref(ho.data() + t * q.width(), hq.data(), hk.data(), hv.data(), hr.data(), hs.data(), t, a);
    }
    upload(out, ho.data(), ho.size() * sizeof(float));
}

}  // namespace cactus
