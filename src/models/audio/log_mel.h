#pragma once
// Whisper's log-mel front end, as faster-whisper's FeatureExtractor computes it: 160 zero samples
// appended, reflect padding of n_fft / 2, periodic Hann window of 400, |rfft|^2 (kissfft), the last
// frame dropped, mel filterbank (from the model file), log10 clamped at 1e-10, floor at max - 8
// over the whole input, then (x + 4) / 4.
#include <cstddef>
#include <vector>

namespace cactus {

constexpr size_t kMelFft = 400;
constexpr size_t kMelHop = 160;
constexpr size_t kMelBins = kMelFft / 2 + 1;  // 201 frequency bins

struct LogMel {
    size_t n_frames = 0;  // floor(n_samples / 160) + 1
    size_t n_mels = 0;
    std::vector<float> data;  // [n_frames, n_mels] (time rows, what the encoder's conv reads)
};

// samples: 16 kHz mono; filters: [n_mels, 201] row-major.
LogMel log_mel(const float* samples, size_t n_samples, const std::vector<float>& filters, size_t n_mels);

}  // namespace cactus
