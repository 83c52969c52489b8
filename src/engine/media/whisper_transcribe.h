#pragma once
// Transcription with a Whisper model, as faster-whisper does it: log-mel of the whole input, 30 s
// windows that advance to the last timestamp the model emitted, the previous text as prompt,
// greedy decoding or beam search (CTranslate2's, as faster-whisper runs it) under the suppress lists
// and timestamp rules, temperature fallback (compression ratio, average log-probability; sampling
// best_of above temperature 0), the no-speech skip, language detection on the first window.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/audio/whisper_model.h"

namespace cactus {

struct TranscribeOptions {
    std::string language;  // "" or "auto": detected (multilingual models); else a code ("en", "de")
    bool translate = false;
    bool condition_on_previous_text = true;
    std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
    size_t best_of = 5;  // samples per temperature above 0
    // At temperature 0: 1 = greedy; N in [2, kMaxBeamSize] = beam search of N beams.
    size_t beam_size = 1;
    float patience = 1.0f;        // beam search ends after round(beam_size * patience) finished hypotheses
    float length_penalty = 1.0f;  // hypothesis score = sum of log-probs / length^length_penalty (1: the mean)
    float compression_ratio_threshold = 2.4f;  // <= 0: off
    float log_prob_threshold = -1.0f;
    float no_speech_threshold = 0.6f;    // <= 0: off
    float max_initial_timestamp = 1.0f;  // seconds
    // Text only (faster-whisper's without_timestamps, whisper.cpp's -nt): <|notimestamps|> ends the
    // prompt, timestamp tokens are never sampled, each window is one segment and the next window
    // starts where it ends.
    bool without_timestamps = false;
    uint64_t seed = 0;
};

struct TranscriptSegment {
    double start = 0.0;  // seconds
    double end = 0.0;
    std::string text;
    std::vector<int32_t> tokens;  // with their timestamp tokens
    float avg_logprob = 0.0f;
    float no_speech_prob = 0.0f;
    float temperature = 0.0f;
};

struct TranscribeMetrics {
    double audio_seconds = 0.0;
    double mel_ms = 0.0;
    double encode_ms = 0.0;
    double decode_ms = 0.0;
    size_t windows = 0;
    size_t decoded_tokens = 0;  // tokens run through the decoder after the prompts (every beam's)
    double total_ms = 0.0;
};

struct Transcript {
    std::string language;
    float language_probability = 0.0f;
    std::vector<TranscriptSegment> segments;
    std::string text() const;  // the segments' texts joined
    TranscribeMetrics metrics;
};

// Called with each segment as soon as its window is decoded.
using SegmentCallback = std::function<void(const TranscriptSegment&)>;

constexpr size_t kMaxBeamSize = WhisperModel::kMaxSlots;

// samples: 16 kHz mono.
Transcript transcribe(WhisperModel& model, const float* samples, size_t n_samples, const TranscribeOptions& options,
                      const SegmentCallback& on_segment = nullptr);

// The tokens generated for the window last encoded after `prompt` (which ends with the
// <|startoftranscript|> sequence) at temperature 0, without <|endoftext|>: beam search of
// options.beam_size beams when `beam` (even for 1 beam), else greedy. For tests.
std::vector<int32_t> decode_window(WhisperModel& model, const std::vector<int32_t>& prompt,
                                   const TranscribeOptions& options, bool beam);

// gzip-style compression ratio of a text (len / len(zlib(text))), as Whisper measures repetition.
float compression_ratio(const std::string& text);

}  // namespace cactus
