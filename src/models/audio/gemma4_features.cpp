#include "models/audio/gemma4_features.h"

#include <kiss_fftr.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"

namespace cactus {

namespace {

constexpr size_t kFreqBins = kGemma4Fft / 2 + 1;  // 257

struct KissCloser {
    void operator()(kiss_fftr_cfg c) const { kiss_fftr_free(c); }
};

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// transformers.audio_utils.mel_filter_bank(257, 128, 0, 8000, 16000, norm=None, mel_scale="htk"):
// triangles between mel-spaced centres, evaluated at the FFT bin frequencies.
std::vector<double> make_mel_filters() {
    const size_t n_mels = kGemma4MelBins;
    std::vector<double> centres(n_mels + 2);
    const double mel_lo = hz_to_mel(0.0), mel_hi = hz_to_mel(8000.0);
    for (size_t i = 0; i < centres.size(); ++i) {
        centres[i] = mel_to_hz(mel_lo + (mel_hi - mel_lo) * static_cast<double>(i) / (n_mels + 1));
    }
    std::vector<double> filters(kFreqBins * n_mels, 0.0);  // [257, 128]
    for (size_t f = 0; f < kFreqBins; ++f) {
        const double hz = 8000.0 * static_cast<double>(f) / (kFreqBins - 1);
        for (size_t m = 0; m < n_mels; ++m) {
            const double down = (hz - centres[m]) / (centres[m + 1] - centres[m]);
            const double up = (centres[m + 2] - hz) / (centres[m + 2] - centres[m + 1]);
            filters[f * n_mels + m] = std::max(0.0, std::min(down, up));
        }
    }
    return filters;
}

// Each mel filter's non-zero band of frequency bins and its weights (a triangle covers a few bins).
struct MelBand {
    size_t first = 0;
    std::vector<double> weights;
};

std::vector<MelBand> make_mel_bands() {
    const std::vector<double>& filters = gemma4_mel_filters();
    std::vector<MelBand> bands(kGemma4MelBins);
    for (size_t m = 0; m < kGemma4MelBins; ++m) {
        size_t lo = kFreqBins, hi = 0;
        for (size_t k = 0; k < kFreqBins; ++k) {
            if (filters[k * kGemma4MelBins + m] != 0.0) {
                lo = std::min(lo, k);
                hi = k + 1;
            }
        }
        bands[m].first = lo < hi ? lo : 0;
        for (size_t k = bands[m].first; k < hi; ++k) bands[m].weights.push_back(filters[k * kGemma4MelBins + m]);
    }
    return bands;
}

void check_samples(const float* samples, size_t n) {
    if (n == 0 || samples == nullptr) fail("gemma4 audio: no samples");
    if (n > kGemma4MaxSamples) {
        fail("gemma4 audio: %zu samples is %.2f s, longer than the 30 s (480000 samples) the encoder takes", n,
             static_cast<double>(n) / kGemma4SampleRate);
    }
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(samples[i])) fail("gemma4 audio: sample %zu is not a finite number", i);
    }
    if (gemma4_mel_frames(n) == 0) {
        fail("gemma4 audio: %zu samples is shorter than one 10 ms frame past the first (161 samples)", n);
    }
}

}  // namespace

size_t gemma4_mel_frames(size_t n_samples) { return n_samples > kGemma4Hop ? (n_samples - 161) / kGemma4Hop + 1 : 0; }

size_t gemma4_audio_tokens(size_t n_samples) {
    const size_t half = (gemma4_mel_frames(n_samples) + 1) / 2;
    return (half + 1) / 2;
}

const std::vector<double>& gemma4_mel_filters() {
    static const std::vector<double> filters = make_mel_filters();
    return filters;
}

Gemma4Features gemma4_features(const float* samples, size_t n_samples) {
    check_samples(samples, n_samples);
    Gemma4Features out;
    out.n_frames = gemma4_mel_frames(n_samples);
    out.data.assign(out.n_frames * kGemma4MelBins, 0.0f);
    std::unique_ptr<std::remove_pointer<kiss_fftr_cfg>::type, KissCloser> cfg(
        kiss_fftr_alloc(static_cast<int>(kGemma4Fft), 0, nullptr, nullptr));
    if (!cfg) fail("gemma4 audio: kissfft cannot plan an FFT of %zu", kGemma4Fft);
    float window[kGemma4FrameLength];  // periodic Hann, as window_function(320) in float32
    for (size_t i = 0; i < kGemma4FrameLength; ++i) {
        window[i] = static_cast<float>(0.5 - 0.5 * std::cos(2.0 * M_PI * static_cast<double>(i) / kGemma4FrameLength));
    }
    static const std::vector<MelBand> bands = make_mel_bands();
    float frame[kGemma4Fft];
    kiss_fft_cpx spectrum[kFreqBins];
    double magnitude[kFreqBins];
    for (size_t t = 0; t < out.n_frames; ++t) {
        // Frame t covers samples [160 t - 160, 160 t + 160): the left pad is 160 zeros.
        for (size_t i = 0; i < kGemma4Fft; ++i) {
            const size_t at = t * kGemma4Hop + i;  // index into the left-padded signal
            const bool real = i < kGemma4FrameLength && at >= kGemma4Hop;
            frame[i] = real ? samples[at - kGemma4Hop] * window[i] : 0.0f;
        }
        kiss_fftr(cfg.get(), frame, spectrum);
        for (size_t k = 0; k < kFreqBins; ++k) {
            magnitude[k] = std::hypot(static_cast<double>(spectrum[k].r), static_cast<double>(spectrum[k].i));
        }
        float* row = out.data.data() + t * kGemma4MelBins;  // [128]
        for (size_t m = 0; m < kGemma4MelBins; ++m) {
            const MelBand& band = bands[m];
            double sum = 0.0;  // zero filter entries add exact zeros: the band's sum is the whole sum
            for (size_t k = 0; k < band.weights.size(); ++k) sum += magnitude[band.first + k] * band.weights[k];
            row[m] = static_cast<float>(std::log(sum + 1e-3));
        }
    }
    return out;
}

}  // namespace cactus
