#pragma once
// The speech side of the C API: a handle opened on a Whisper GGUF holds a SpeechModel instead of
// an Engine. cactus_transcribe runs one file or PCM buffer; the streaming trio feeds audio in
// pieces of any size and reports `confirmed` text (never changed afterwards) and `pending` text
// (the current guess for the audio not yet confirmed).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "engine/media/whisper_transcribe.h"

namespace cactus::api {

// True for a Whisper model's general.architecture.
inline bool is_speech_architecture(const std::string& arch) { return arch == "whisper"; }

struct SpeechModel {
    // On options.device (cactus_init: $CACTUS_DEVICE, else the CPU); an unknown or unusable device
    // throws naming it.
    SpeechModel(const std::string& path, const BackendOptions& options);
    std::unique_ptr<Backend> backend;
    std::unique_ptr<WhisperModel> whisper;
};

// The mean of the Whisper encoder's states over the frames that hold audio (the first 30 s of
// `samples`, 16 kHz mono), as one window is encoded for transcription; unit L2 length.
std::vector<float> audio_embedding(SpeechModel& model, const std::vector<float>& samples);

// options_json keys: language ("auto" or a code), translate (bool), temperature (0: temperature 0
// only, no fallback), timestamps (bool: segments in the response), without_timestamps (bool: decode
// text only, one segment per 30 s window), no_speech_threshold, beam_size (1 = greedy, up to
// kMaxBeamSize), patience, length_penalty.
TranscribeOptions parse_transcribe_options(const char* options_json);
nlohmann::ordered_json transcript_response(const Transcript& t, bool with_segments);

// Live transcription over a growing buffer. Each process() call appends audio; once at least
// kStreamStep seconds arrived since the last decode, the unconfirmed audio (at most 30 s) is
// transcribed: its segments that end more than kStreamHold seconds before the end of the audio
// are confirmed and the buffer moves past them; the rest is pending. stop() confirms everything.
class SpeechStream {
public:
    SpeechStream(SpeechModel& model, const TranscribeOptions& options) : model_(model), options_(options) {}
    nlohmann::ordered_json process(const uint8_t* pcm, size_t bytes);
    nlohmann::ordered_json stop();

    static constexpr double kStreamStep = 1.0;
    static constexpr double kStreamHold = 2.0;
    static constexpr size_t kWindowSamples = 30 * 16000;

private:
    nlohmann::ordered_json decode(bool final);

    SpeechModel& model_;
    TranscribeOptions options_;
    std::vector<float> audio_;  // unconfirmed audio, from offset_ seconds on
    double offset_ = 0.0;
    size_t since_decode_ = 0;  // samples appended since the last decode
    std::string confirmed_;    // all confirmed text
    std::string pending_;
    nlohmann::ordered_json segments_ = nlohmann::ordered_json::array();
};

}  // namespace cactus::api
