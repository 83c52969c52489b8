// CpuBackend::top_k: the reference's candidates, and the normalizer summed exactly as the host
// sampler sums it (sum_exp_below), so sampling from the candidates reports the same probabilities
// as sampling from the logits (Sampler::sample_from_top).
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "ops/exp_sum.h"
#include "ops/ops_ref.h"

namespace cactus {

void CpuBackend::do_top_k(const Tensor& ids, const Tensor& vals, const Tensor& stats, const Tensor& logits, size_t k) {
    const size_t n_vocab = logits.width();
    for (size_t r = 0; r < logits.rows(); ++r) {
        const float* row = logits.as<float>() + r * n_vocab;  // [n_vocab]
        float* s = stats.as<float>() + r * 2;                 // [max, sum]
        top_k_row_ref(ids.as<int32_t>() + r * k, vals.as<float>() + r * k, s, row, n_vocab, k);
        if (std::isfinite(s[0])) s[1] = static_cast<float>(sum_exp_below(row, n_vocab, s[0]));
    }
}

}  // namespace cactus
