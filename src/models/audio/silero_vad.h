#pragma once
// Silero VAD v6 (16 kHz) from the GGUF that `cactus pull silero-vad` converts from its safetensors:
// per 512-sample chunk (with the previous chunk's last 64 samples as context and 64 reflected
// samples of padding) an STFT as a convolution (256-point, hop 128, magnitude of 129 bins), four
// ReLU convolutions, an LSTM cell carried across chunks, a 1x1 convolution and a sigmoid: the
// probability that the chunk holds speech. speech_spans() turns those into segments with
// faster-whisper's get_speech_timestamps rules (thresholds, minimum silence, padding).
// The network is tiny (~0.7 M multiply-adds per 32 ms chunk), so it runs as plain host loops.
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace cactus {

struct VadOptions {
    float threshold = 0.5f;
    float neg_threshold = -1.0f;  // < 0: max(threshold - 0.15, 0.01)
    double min_speech_ms = 0.0;
    double max_speech_s = std::numeric_limits<double>::infinity();
    double min_silence_ms = 2000.0;
    double speech_pad_ms = 400.0;
};

struct SpeechSpan {
    size_t start = 0;  // samples at 16 kHz
    size_t end = 0;
};

class SileroVad {
public:
    explicit SileroVad(const std::string& gguf_path);
    // One probability per 512-sample chunk of the input padded with zeros to a whole number of chunks
    // (always at least one chunk of padding, as faster-whisper pads).
    std::vector<float> probabilities(const float* samples, size_t n) const;
    std::vector<SpeechSpan> speech_spans(const float* samples, size_t n, const VadOptions& options) const;

    static constexpr size_t kChunk = 512;
    static constexpr size_t kContext = 64;

private:
    struct Conv {
        size_t n_out = 0, n_in = 0, kernel = 0;
        std::vector<float> w, b;  // [n_out, n_in, kernel], [n_out]
    };
    Conv stft_, c1_, c2_, c3_, c4_, final_;
    std::vector<float> w_ih_, w_hh_, b_ih_, b_hh_;  // [512, 128] x2, [512] x2
};

// faster-whisper's get_speech_timestamps over given chunk probabilities.
std::vector<SpeechSpan> speech_spans_from_probabilities(const std::vector<float>& probs, size_t n_samples,
                                                        const VadOptions& options);

}  // namespace cactus
