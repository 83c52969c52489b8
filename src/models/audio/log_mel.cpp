#include "models/audio/log_mel.h"

#include <kiss_fftr.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"

namespace cactus {

namespace {

struct KissCloser {
    void operator()(kiss_fftr_cfg c) const { kiss_fftr_free(c); }
};

// numpy.pad(mode="reflect") of `pad` samples on both sides: x[pad..1] | x | x[n-2..n-1-pad].
std::vector<float> reflect_pad(const std::vector<float>& x, size_t pad) {
    const size_t n = x.size();
    CACTUS_ASSERT(n > pad);
    std::vector<float> out(n + 2 * pad);
    for (size_t i = 0; i < pad; ++i) out[i] = x[pad - i];
    std::copy(x.begin(), x.end(), out.begin() + static_cast<long>(pad));
    for (size_t i = 0; i < pad; ++i) out[pad + n + i] = x[n - 2 - i];
    return out;
}

}  // namespace

LogMel log_mel(const float* samples, size_t n_samples, const std::vector<float>& filters, size_t n_mels) {
    if (n_mels == 0 || filters.size() != n_mels * kMelBins) {
        fail("log_mel: %zu filter values for %zu mel bins (expected %zu)", filters.size(), n_mels, n_mels * kMelBins);
    }
    // 160 zeros appended (faster-whisper's padding); at least n_fft / 2 + 1 samples to reflect.
    std::vector<float> x(samples, samples + n_samples);
    x.resize(std::max(n_samples + kMelHop, kMelFft / 2 + 1), 0.0f);
    const std::vector<float> padded = reflect_pad(x, kMelFft / 2);
    const size_t n_stft = 1 + (padded.size() - kMelFft) / kMelHop;
    LogMel mel;
    mel.n_frames = n_stft - 1;  // the last STFT frame is dropped
    mel.n_mels = n_mels;
    mel.data.assign(mel.n_frames * n_mels, 0.0f);

    std::unique_ptr<std::remove_pointer<kiss_fftr_cfg>::type, KissCloser> cfg(
        kiss_fftr_alloc(static_cast<int>(kMelFft), 0, nullptr, nullptr));
    if (!cfg) fail("log_mel: kissfft cannot plan an FFT of %zu", kMelFft);
    float window[kMelFft];
    for (size_t i = 0; i < kMelFft; ++i) {
        window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * static_cast<double>(i) / kMelFft));
    }
    float frame[kMelFft];
    kiss_fft_cpx spectrum[kMelBins];
    float power[kMelBins];
    float max_log = -INFINITY;
    for (size_t t = 0; t < mel.n_frames; ++t) {
        const float* src = padded.data() + t * kMelHop;
        for (size_t i = 0; i < kMelFft; ++i) frame[i] = src[i] * window[i];
        kiss_fftr(cfg.get(), frame, spectrum);
        for (size_t k = 0; k < kMelBins; ++k) power[k] = spectrum[k].r * spectrum[k].r + spectrum[k].i * spectrum[k].i;
        float* row = mel.data.data() + t * n_mels;  // [n_mels]
        for (size_t m = 0; m < n_mels; ++m) {
            const float* f = filters.data() + m * kMelBins;
            double sum = 0.0;
            for (size_t k = 0; k < kMelBins; ++k) sum += static_cast<double>(f[k]) * power[k];
            row[m] = static_cast<float>(std::log10(std::max(sum, 1e-10)));
            max_log = std::max(max_log, row[m]);
        }
    }
    const float floor = max_log - 8.0f;
    for (float& v : mel.data) v = (std::max(v, floor) + 4.0f) / 4.0f;
    return mel;
}

}  // namespace cactus
