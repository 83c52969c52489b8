#pragma once
// Gemma 4's audio front end, as transformers' Gemma4AudioFeatureExtractor computes it
// (feature_extraction_gemma4.py; research/GEMMA4.md §5.2): 16 kHz samples, a semicausal left pad of
// 160 zeros, frames of 321 samples every 160 whose last sample is dropped (no pre-emphasis), a
// periodic Hann window of 320, |rfft| of 512 (magnitude, not power), 128 HTK mel filters over
// 0..8 kHz without normalisation, log(mel + 1e-3). Only the frames the extractor's mask keeps are
// returned: frame i is valid when its last sample 160 i + 159 is a real one (160 (i + 1) < n); the
// padding to a multiple of 128 samples and the masked frames after it never reach a valid token.
#include <cstddef>
#include <vector>

namespace cactus {

constexpr size_t kGemma4SampleRate = 16000;
constexpr size_t kGemma4MaxSamples = 480000;  // 30 s
constexpr size_t kGemma4MelBins = 128;
constexpr size_t kGemma4Hop = 160;
constexpr size_t kGemma4FrameLength = 320;
constexpr size_t kGemma4Fft = 512;

struct Gemma4Features {
    size_t n_frames = 0;
    std::vector<float> data;  // [n_frames, 128] (time rows)
};

// Valid mel frames for n samples: (n - 161) / 160 + 1 when n > 160, else 0.
size_t gemma4_mel_frames(size_t n_samples);
// Soft tokens of n samples: the two stride-2 convolutions' ceil(ceil(frames / 2) / 2).
size_t gemma4_audio_tokens(size_t n_samples);
// The mel filterbank [257, 128] (frequency rows), as transformers' mel_filter_bank builds it.
const std::vector<double>& gemma4_mel_filters();
// samples: 16 kHz mono, 1 <= n <= 480000, finite (else a cactus::Error naming the problem).
Gemma4Features gemma4_features(const float* samples, size_t n_samples);

}  // namespace cactus
