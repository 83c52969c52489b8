// CpuBackend: convolutions as im2col rows times the weight matrix (the matmul kernels of every
// weight type; 1-D over many frames with F16 / F32 weights: dense_gemm), plus the bias.
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dense_gemm.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

namespace cactus {

namespace {

void add_bias_rows(float* y, const Tensor& b, size_t n_rows, size_t width) {
    if (b.empty()) return;  // else f32 [width] (checked by Backend)
    const float* bias = b.as<float>();
    for (size_t r = 0; r < n_rows; ++r) {
        for (size_t o = 0; o < width; ++o) y[r * width + o] += bias[o];
    }
}

}  // namespace

void CpuBackend::do_conv1d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv1d& c) {
    // x [n_t, n_in] time rows; w [n_out, n_in * kernel]; y [n_t_out, n_out] (checked by Backend::conv1d).
    const size_t n_t = x.rows();
    const size_t n_in = x.width();
    const size_t n_t_out = (n_t + 2 * c.pad - c.kernel) / c.stride + 1;
    const size_t n_out = w.rows();
    const size_t k_width = n_in * c.kernel;
    scratch_.assign(n_t_out * k_width, 0.0f);  // [n_t_out, n_in * kernel], element (c, k) at c * kernel + k
    const float* xd = x.as<float>();
    pool_->parallel_for(n_t_out, [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) {
            float* col = scratch_.data() + t * k_width;
            for (size_t k = 0; k < c.kernel; ++k) {
                const size_t src = t * c.stride + k;
                if (src < c.pad || src - c.pad >= n_t) continue;
                const float* row = xd + (src - c.pad) * n_in;
                for (size_t ch = 0; ch < n_in; ++ch) col[ch * c.kernel + k] = row[ch];
            }
        }
    });
    // Many frames (Whisper's stem): F16 / F32 weights through dense_gemm, as the encoder linears.
    const bool dense =
        n_t_out >= kDenseGemmMinQueries && dense_matmul(y.as<float>(), w.data(), w.type, w.row_bytes(), scratch_.data(),
                                                        n_t_out, k_width, n_out, dense_packed_, *pool_);
    if (!dense) {
        cactus::matmul(y.as<float>(), w.data(), w.type, w.row_bytes(), scratch_.data(), n_t_out, k_width, n_out,
                       *pool_);
    }
    add_bias_rows(y.as<float>(), b, n_t_out, n_out);
}

void CpuBackend::do_conv2d(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2d& c) {
    // x [n_in, height * width] channel planes; w [n_out, n_in * kh * kw]; y [h_out * w_out, n_out]
    // (checked by Backend::conv2d).
    const size_t n_in = x.rows();
    const size_t h_out = (c.height + 2 * c.pad - c.kernel_h) / c.stride + 1;
    const size_t w_out = (c.width + 2 * c.pad - c.kernel_w) / c.stride + 1;
    const size_t n_out = w.rows();
    const size_t k_width = n_in * c.kernel_h * c.kernel_w;
    scratch_.assign(h_out * w_out * k_width, 0.0f);  // element (ch, ky, kx) at (ch * kh + ky) * kw + kx
    const float* xd = x.as<float>();
    pool_->parallel_for(h_out * w_out, [&](size_t begin, size_t end) {
        for (size_t p = begin; p < end; ++p) {
            const size_t oy = p / w_out;
            const size_t ox = p % w_out;
            float* col = scratch_.data() + p * k_width;
            for (size_t ch = 0; ch < n_in; ++ch) {
                for (size_t ky = 0; ky < c.kernel_h; ++ky) {
                    const size_t iy = oy * c.stride + ky;
                    if (iy < c.pad || iy - c.pad >= c.height) continue;
                    for (size_t kx = 0; kx < c.kernel_w; ++kx) {
                        const size_t ix = ox * c.stride + kx;
                        if (ix < c.pad || ix - c.pad >= c.width) continue;
                        col[(ch * c.kernel_h + ky) * c.kernel_w + kx] =
                            xd[ch * c.height * c.width + (iy - c.pad) * c.width + (ix - c.pad)];
                    }
                }
            }
        }
    });
    cactus::matmul(y.as<float>(), w.data(), w.type, w.row_bytes(), scratch_.data(), h_out * w_out, k_width, n_out,
                   *pool_);
    add_bias_rows(y.as<float>(), b, h_out * w_out, n_out);
}

}  // namespace cactus
