// CpuBackend: the conformer ops (Gemma 4's audio tower) as their references run over row ranges on the
// thread pool. They are a few percent of an encode (the linears dominate: docs/AUDIO.md), so the
// references' inner loops are fast enough; a SIMD kernel pays only if a profile says so.
#include "backends/cpu/cpu_backend.h"
#include "ops/conformer_ref.h"

namespace cactus {

void CpuBackend::do_clamp(const Tensor& y, const Tensor& x, float lo, float hi) {
    const size_t width = x.width();
    float* out = y.as<float>();
    const float* in = x.as<float>();
    pool_->parallel_for(x.rows(), [&](size_t begin, size_t end) {
        clamp_ref(out + begin * width, in + begin * width, (end - begin) * width, lo, hi);
    });
}

void CpuBackend::do_transpose(const Tensor& y, const Tensor& x) {
    const size_t n = x.rows(), width = x.width();
    float* out = y.as<float>();
    const float* in = x.as<float>();
    pool_->parallel_for(width, [&](size_t begin, size_t end) {  // output rows = input columns
        for (size_t c = begin; c < end; ++c) {
            for (size_t r = 0; r < n; ++r) out[c * n + r] = in[r * width + c];
        }
    });
}

void CpuBackend::do_depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w) {
    const size_t width = x.width();
    float* out = y.as<float>();
    const float* in = x.as<float>();
    const float* taps = w.as<float>();
    pool_->parallel_for(x.rows(), [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) {
            causal_depthwise_conv_row_ref(out + t * width, in, taps, t, width, w.width());
        }
    });
}

void CpuBackend::do_attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& rel, const Tensor& q_scale, const LocalAttention& a) {
    const size_t width = q.width();
    float* o = out.as<float>();
    pool_->parallel_for(q.rows(), [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) {
            local_attention_row_ref(o + t * width, q.as<float>(), k.as<float>(), v.as<float>(), rel.as<float>(),
                                    q_scale.as<float>(), t, a);
        }
    });
}

}  // namespace cactus
