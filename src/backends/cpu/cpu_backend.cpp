#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cpu/activations.h"
#include "backends/cpu/cpu_dispatch.h"
#include "backends/cpu/cpu_tiers.h"
#include "backends/cpu/ops_cpu.h"
#include "core/error.h"
#include "core/memory.h"
#include "ops/conformer_ref.h"
#include "ops/quant.h"

namespace cactus {

namespace {

// Row-wise ops use the thread pool from this many rows on (prefill).
constexpr size_t kMinParallelRows = 8;

void check_host(const Tensor& t, const char* op, const char* what) {
    if (t.buffer == nullptr) fail("cpu %s: %s is an empty tensor", op, what);
    if (std::strcmp(t.buffer->device(), "cpu") != 0) {
        fail("cpu %s: %s lives on %s, not on the CPU", op, what, t.buffer->device());
    }
}

void dequantize_row_any(DType type, float* dst, const void* src, size_t n) {
    if (type == DType::F32) {
        std::memcpy(dst, src, n * sizeof(float));
        return;
    }
    dequantize_row_cpu(type, dst, src, n);  // unknown type ids are errors (cpu_kernels.h)
}

}  // namespace

template <class Fn>
void CpuBackend::for_rows(size_t n_rows, const Fn& fn) const {
    if (n_rows < kMinParallelRows) {
        fn(size_t(0), n_rows);
        return;
    }
    pool_->parallel_for(n_rows, fn);
}

CpuBackend::CpuBackend(int n_threads)
    : pool_(std::make_unique<ThreadPool>(n_threads > 0 ? n_threads : ThreadPool::default_threads())) {
    cpu_kernel_set();  // choose the kernels now: an unknown CACTUS_CPU_ISA fails at load, not mid-run
    attn_ws_.assign(static_cast<size_t>(pool_->size()), AttentionWorkspace());
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::describe() const {
    return std::string("cpu (") + cpu_kernel_set().isa_name + ", " + std::to_string(pool_->size()) + " threads)";
}

std::unique_ptr<Buffer> CpuBackend::alloc(size_t bytes) { return std::make_unique<HostBuffer>(bytes); }

void CpuBackend::upload(const Tensor& dst, const void* src, size_t bytes) {
    check_host(dst, "upload", "the destination");
    CACTUS_ASSERT(dst.contiguous_rows() && bytes <= dst.bytes());
    std::memcpy(dst.data(), src, bytes);
}

void CpuBackend::download(void* dst, const Tensor& src, size_t bytes) {
    check_host(src, "download", "the source");
    CACTUS_ASSERT(src.contiguous_rows() && bytes <= src.bytes());
    std::memcpy(dst, src.data(), bytes);
}

Tensor CpuBackend::place_weight(const void* host, DType type, size_t width, size_t n_rows) {
    const size_t bytes = dtype_row_bytes(type, width) * n_rows;
    weights_.push_back(std::make_unique<ExternalHostBuffer>(host, bytes));
    return make_tensor(weights_.back().get(), 0, type, width, n_rows);
}

namespace {

// A repacked weight in huge-page memory, as the GGUF copy of GgufFile::lock_in_memory: the decode
// reads it from end to end every token.
class RepackedWeightBuffer final : public Buffer {
public:
    explicit RepackedWeightBuffer(size_t bytes) : memory_(bytes) {}
    void* base() const override { return memory_.data(); }
    size_t size() const override { return memory_.size(); }
    const char* device() const override { return "cpu"; }

private:
    HugePageMemory memory_;
};

bool repack_enabled() {
    const char* v = std::getenv("CACTUS_CPU_REPACK");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) return true;
    if (std::strcmp(v, "0") == 0) return false;
    fail("CACTUS_CPU_REPACK: unknown value '%s' (0 or 1)", v);
}

}  // namespace

Tensor CpuBackend::pack_for_products(const Tensor& w) {
    check_host(w, "pack_for_products", "the weight");
    const CpuKernels& k = *cpu_kernel_set().matmul;
    const size_t slot = kernel_slot(w.type, "pack_for_products");
    const DType to = cpu_repack_target(k, w.type);  // the tier's repack table (cpu_tiers.h, docs/OPS.md)
    if (to == w.type || !repack_enabled()) return w;
    if (!w.contiguous_rows() || w.rows() % kPanelRows != 0) return w;  // matmul takes whole panels of them
    const size_t bytes = dtype_row_bytes(to, w.width()) * w.rows();
    weights_.push_back(std::make_unique<RepackedWeightBuffer>(bytes));
    k.repack[slot](static_cast<uint8_t*>(weights_.back()->base()), w.as<uint8_t>(), w.row_bytes(), w.rows(), w.width());
    return make_tensor(weights_.back().get(), 0, to, w.width(), w.rows());
}

bool CpuBackend::supports(Op op, DType type) const {
    switch (op) {
        case Op::GET_ROWS:
            return cpu_reads(cpu_kernels(), type);
        case Op::MATMUL:
        case Op::MATMULS:
        case Op::MATMUL_ENCODER:
        case Op::MATMUL_ACCUMULATE:
        case Op::GATED_MATMUL:
            return cpu_reads(cpu_kernels(), type) || cpu_repacks_into(cpu_kernels(), type);
        case Op::CONV1D:
        case Op::CONV2D:
            return cpu_reads(cpu_kernels(), type);
        case Op::KV_STORE:
        case Op::ATTENTION_KV:
            return type == DType::F16 || type == DType::I8 || type == DType::F32;
        default:
            return type == DType::F32;
    }
}

std::unique_ptr<KvStorage> CpuBackend::make_kv_storage(const std::vector<KvLayerLayout>& layers, KvType type) {
    return std::make_unique<HostKvStorage>(layers, type);
}

void CpuBackend::do_get_rows(const Tensor& y, const Tensor& table, const Tensor& ids, float scale) {
    check_host(y, "get_rows", "y");
    check_host(table, "get_rows", "the table");
    check_host(ids, "get_rows", "ids");
    const int32_t* id = ids.as<int32_t>();
    const size_t width = y.width();
    for (size_t t = 0; t < y.rows(); ++t) {
        if (id[t] < 0 || static_cast<size_t>(id[t]) >= table.rows()) {
            fail("get_rows: id %d is outside the table of %zu rows", id[t], table.rows());
        }
        float* row = y.as<float>() + t * width;
        const uint8_t* src = table.as<uint8_t>() + static_cast<size_t>(id[t]) * table.row_bytes();
        dequantize_row_any(table.type, row, src, width);
        if (scale != 1.0f) {
            for (size_t i = 0; i < width; ++i) row[i] *= scale;
        }
    }
}

void CpuBackend::do_rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) {
    check_host(y, "rms_norm", "y");
    check_host(x, "rms_norm", "x");
    const size_t width = x.width();
    const float* w = nullptr;
    if (!weight.empty()) {
        check_host(weight, "rms_norm", "the weight");
        w = weight.as<float>();
    }
    float* out = y.as<float>();
    const float* in = x.as<float>();
    for_rows(x.rows(), [&](size_t begin, size_t end) {
        rms_norm_rows(out + begin * width, in + begin * width, w, end - begin, width, eps);
    });
}

void CpuBackend::do_layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
    check_host(y, "layer_norm", "y");
    check_host(x, "layer_norm", "x");
    const size_t width = x.width();
    const float* w = weight.empty() ? nullptr : weight.as<float>();
    const float* b = bias.empty() ? nullptr : bias.as<float>();
    if (w) check_host(weight, "layer_norm", "the weight");
    if (b) check_host(bias, "layer_norm", "the bias");
    float* out = y.as<float>();
    const float* in = x.as<float>();
    for_rows(x.rows(), [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
            layer_norm_ref(out + r * width, in + r * width, w, b, width, eps);
        }
    });
}

namespace {

// The kernels' view of y = x W^T (shapes checked by Backend::matmul).
MatmulProduct matmul_product(const Tensor& y, const Tensor& w, const Tensor& x) {
    check_host(y, "matmul", "y");
    check_host(x, "matmul", "x");
    check_host(w, "matmul", "the weight");
    return MatmulProduct{y.as<float>(), w.data(), w.type, w.row_bytes(), w.rows()};
}

}  // namespace

void CpuBackend::do_matmul(const Tensor& y, const Tensor& w, const Tensor& x) {
    const MatmulProduct p = matmul_product(y, w, x);
    cactus::matmuls(&p, 1, x.as<float>(), x.rows(), x.width(), *pool_);
}

void CpuBackend::do_matmuls(const SharedInputProduct* products, size_t n_products, const Tensor& x) {
    for (size_t first = 0; first < n_products; first += kMaxSharedProducts) {
        const size_t n = std::min(kMaxSharedProducts, n_products - first);
        MatmulProduct group[kMaxSharedProducts];
        for (size_t i = 0; i < n; ++i) group[i] = matmul_product(*products[first + i].y, *products[first + i].w, x);
        cactus::matmuls(group, n, x.as<float>(), x.rows(), x.width(), *pool_);
    }
}

void CpuBackend::do_add(const Tensor& y, const Tensor& a, const Tensor& b) {
    check_host(y, "add", "y");
    check_host(a, "add", "a");
    check_host(b, "add", "b");
    const size_t width = a.width();
    float* out = y.as<float>();
    const float* in = a.as<float>();
    const float* other = b.as<float>();
    const bool same_rows = b.rows() == a.rows();
    for_rows(a.rows(), [&](size_t begin, size_t end) {
        float* o = out + begin * width;
        if (o != in + begin * width) std::memcpy(o, in + begin * width, (end - begin) * width * sizeof(float));
        if (same_rows) {
            add_scaled(o, other + begin * width, 1.0f, (end - begin) * width);
            return;
        }
        for (size_t r = begin; r < end; ++r) add_scaled(out + r * width, other, 1.0f, width);
    });
}

void CpuBackend::do_scale(const Tensor& y, const Tensor& x, float s) {
    check_host(y, "scale", "y");
    check_host(x, "scale", "x");
    float* out = y.as<float>();
    const float* in = x.as<float>();
    const size_t width = x.width();
    for_rows(x.rows(), [&](size_t begin, size_t end) {
        for (size_t i = begin * width; i < end * width; ++i) out[i] = in[i] * s;
    });
}

void CpuBackend::do_softcap(const Tensor& y, const Tensor& x, float cap) {
    check_host(y, "softcap", "y");
    check_host(x, "softcap", "x");
    float* out = y.as<float>();
    const float* in = x.as<float>();
    activation_kernels().softcap(out, in, x.elements(), cap);
}

void CpuBackend::do_gelu(const Tensor& y, const Tensor& x, Activation kind) {
    check_host(y, "gelu", "y");
    check_host(x, "gelu", "x");
    float* out = y.as<float>();
    const float* in = x.as<float>();
    const size_t width = x.width();
    const ActivationKernels& kernels = activation_kernels();
    if (kind == Activation::SILU) {  // swiglu against ones, a chunk at a time: the vector kernel's silu
        static const std::vector<float> ones(1024, 1.0f);
        for_rows(x.rows(), [&](size_t begin, size_t end) {
            for (size_t i = begin * width; i < end * width; i += ones.size()) {
                kernels.swiglu(out + i, in + i, ones.data(), std::min(ones.size(), end * width - i));
            }
        });
        return;
    }
    const auto fn = kind == Activation::GELU_ERF ? kernels.gelu_erf : kernels.gelu_tanh;
    for_rows(x.rows(),
             [&](size_t begin, size_t end) { fn(out + begin * width, in + begin * width, (end - begin) * width); });
}

void CpuBackend::do_glu(const Tensor& y, const Tensor& gate, const Tensor& up, Activation act) {
    check_host(y, "glu", "y");
    check_host(gate, "glu", "gate");
    check_host(up, "glu", "up");
    const size_t width = y.width();
    float* out = y.as<float>();
    const float* g = gate.as<float>();
    const float* u = up.as<float>();
    for_rows(y.rows(), [&](size_t begin, size_t end) {
        const size_t offset = begin * width;
        const size_t n = (end - begin) * width;
        switch (act) {
            case Activation::SILU:
                swiglu(out + offset, g + offset, u + offset, n);
                break;
            case Activation::GELU_TANH:
                geglu(out + offset, g + offset, u + offset, n);
                break;
            case Activation::GELU_ERF:
                activation_kernels().gelu_erf(out + offset, g + offset, n);
                for (size_t i = offset; i < offset + n; ++i) out[i] *= u[i];
                break;
            case Activation::SIGMOID:
                sigmoid_glu_ref(out + offset, g + offset, u + offset, n);
                break;
        }
    });
}

void CpuBackend::do_rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) {
    check_host(x, "rope", "x");
    check_host(pos, "rope", "positions");
    const size_t n = x.rows();
    if (n == 0 || params.n_rot == 0) return;
    const size_t head_dim = x.width() / n_head;
    const int32_t* p = pos.as<int32_t>();
    const auto [lo_it, hi_it] = std::minmax_element(p, p + n);
    const int32_t lo = *lo_it;
    const int32_t hi = *hi_it;
    // One table of cos/sin over the batch's position range, shared by every layer with these
    // parameters; several sequences far apart get their angles token by token instead.
    const bool use_table = static_cast<size_t>(hi - lo) < std::max<size_t>(4 * n, 64);
    const float* angles = use_table ? rope_angles_.table(params, lo, hi, *pool_) : nullptr;  // [hi - lo + 1, n_rot]
    float* data = x.as<float>();
    const size_t width = x.width();
    for_rows(n, [&](size_t begin, size_t end) {
        std::vector<float> own(use_table ? 0 : params.n_rot);
        for (size_t t = begin; t < end; ++t) {
            const float* cos_sin = angles ? angles + static_cast<size_t>(p[t] - lo) * params.n_rot : own.data();
            if (!angles) rope_cos_sin(own.data(), p[t], params);
            rope_rotate(data + t * width, n_head, head_dim, cos_sin, params);
        }
    });
}

}  // namespace cactus
