// CudaBackend: the conformer ops of Gemma 4's audio tower (clamp, also the vision tower's clipped
// linears; transpose; the causal depthwise convolution; the local attention with relative keys) as
// kernels of cuda_conformer.cu, so an encoder pass stays on the stream: no host wait, no copies.
#include "backends/cuda/cuda_backend.h"
#include "ops/conformer_ref.h"

namespace cactus {

void CudaBackend::do_clamp(const Tensor& y, const Tensor& x, float lo, float hi) {
    check_f32(y, "clamp", "y");
    check_f32(x, "clamp", "x");
    launch("clamp", [&](cudaStream_t s) { cuda::clamp(s, y.as<float>(), x.as<float>(), lo, hi, x.elements()); });
}

void CudaBackend::do_transpose(const Tensor& y, const Tensor& x) {
    check_f32(y, "transpose", "y");
    check_f32(x, "transpose", "x");
    launch("transpose", [&](cudaStream_t s) { cuda::transpose(s, y.as<float>(), x.as<float>(), x.rows(), x.width()); });
}

void CudaBackend::do_depthwise_conv(const Tensor& y, const Tensor& x, const Tensor& w) {
    check_f32(y, "depthwise_conv", "y");
    check_f32(x, "depthwise_conv", "x");
    check_f32(w, "depthwise_conv", "w");
    launch("depthwise_conv", [&](cudaStream_t s) {
        cuda::depthwise_conv(s, y.as<float>(), x.as<float>(), w.as<float>(), x.rows(), x.width(), w.width());
    });
}

void CudaBackend::do_attention_local(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                                     const Tensor& rel, const Tensor& q_scale, const LocalAttention& a) {
    check_f32(out, "attention_local", "out");
    for (const Tensor* t : {&q, &k, &v, &rel, &q_scale}) check_f32(*t, "attention_local", "an input");
    bool taken = false;
    launch("attention_local", [&](cudaStream_t s) {
        taken = cuda::attention_local(s, out.as<float>(), q.as<float>(), k.as<float>(), v.as<float>(), rel.as<float>(),
                                      q_scale.as<float>(), q.rows(), a);
    });
    // A window too wide for one block's shared memory (none of the models') takes the host default.
    if (!taken) Backend::do_attention_local(out, q, k, v, rel, q_scale, a);
}

}  // namespace cactus
