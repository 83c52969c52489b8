#include "api/speech_api.h"

#include <algorithm>

#include "core/error.h"
#include "engine/embedding.h"
#include "media/audio_input.h"
#include "models/audio/log_mel.h"

namespace cactus::api {

using json = nlohmann::ordered_json;

std::vector<float> audio_embedding(SpeechModel& model, const std::vector<float>& samples) {
    if (samples.empty()) fail("audio embedding: no audio samples");
    WhisperModel& whisper = *model.whisper;
    const WhisperHparams& hp = whisper.hparams();
    const size_t n = std::min(samples.size(), hp.n_frames() * kMelHop);  // the first window (30 s)
    const LogMel mel = log_mel(samples.data(), n, whisper.mel_filters(), hp.n_mels);
    const size_t frames = std::min(mel.n_frames - 1, hp.n_frames());
    std::vector<float> window(hp.n_frames() * hp.n_mels, 0.0f);  // [n_frames, n_mels], zero-padded
    std::copy(mel.data.begin(), mel.data.begin() + static_cast<std::ptrdiff_t>(frames * hp.n_mels), window.begin());
    whisper.encode(window.data());
    const size_t rows = std::max<size_t>(1, std::min(hp.n_audio_ctx, (frames + 1) / 2));  // the conv halves time
    std::vector<float> states;
    whisper.encoder_states(rows, &states);
    std::vector<float> v = pool_hidden(states.data(), rows, hp.n_embd, Pooling::MEAN);
    l2_normalize(&v);
    return v;
}

SpeechModel::SpeechModel(const std::string& path, const BackendOptions& options) {
    backend = make_backend(options);
    whisper = std::make_unique<WhisperModel>(path, *backend);
}

TranscribeOptions parse_transcribe_options(const char* options_json) {
    TranscribeOptions o;
    if (options_json == nullptr || options_json[0] == '\0') return o;
    json j;
    try {
        j = json::parse(options_json);
    } catch (const json::exception& e) {
        fail("options_json is not valid JSON: %s", e.what());
    }
    if (!j.is_object()) fail("options_json must be an object");
    for (const auto& [key, value] : j.items()) {
        if (key == "language") {
            if (!value.is_string()) fail("options_json: language must be a string");
            o.language = value.get<std::string>();
        } else if (key == "translate") {
            if (!value.is_boolean()) fail("options_json: translate must be a boolean");
            o.translate = value.get<bool>();
        } else if (key == "temperature") {
            if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1)
                fail("options_json: temperature must be a number in [0, 1]");
            if (value.get<double>() == 0.0)
                o.temperatures = {0.0f};
            else
                o.temperatures = {value.get<float>()};
        } else if (key == "no_speech_threshold") {
            if (!value.is_number()) fail("options_json: no_speech_threshold must be a number");
            o.no_speech_threshold = value.get<float>();
        } else if (key == "without_timestamps") {
            if (!value.is_boolean()) fail("options_json: without_timestamps must be a boolean");
            o.without_timestamps = value.get<bool>();
        } else if (key == "timestamps" || key == "max_tokens") {
            // timestamps: segments are always in the response; max_tokens: bounded by the model
        } else if (key == "beam_size") {
            if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
                value.get<int64_t>() > static_cast<int64_t>(kMaxBeamSize))
                fail("options_json: beam_size %s is out of range (an integer from 1 to %zu)", value.dump().c_str(),
                     kMaxBeamSize);
            o.beam_size = value.get<size_t>();
        } else if (key == "patience") {
            if (!value.is_number() || !(value.get<double>() > 0) || value.get<double>() > 100)
                fail("options_json: patience %s must be a number in (0, 100]", value.dump().c_str());
            o.patience = value.get<float>();
        } else if (key == "length_penalty") {
            if (!value.is_number() || !(value.get<double>() >= 0) || value.get<double>() > 100)
                fail("options_json: length_penalty %s must be a number in [0, 100]", value.dump().c_str());
            o.length_penalty = value.get<float>();
        } else {
            fail("options_json: unknown key '%s' for transcription", key.c_str());
        }
    }
    return o;
}

json transcript_response(const Transcript& t, bool with_segments) {
    json segs = json::array();
    for (const TranscriptSegment& s : t.segments)
        segs.push_back({{"start", s.start}, {"end", s.end}, {"text", s.text}});
    const TranscribeMetrics& m = t.metrics;
    const double decode_s = m.decode_ms / 1000.0;
    json r;
    r["success"] = true;
    r["error"] = nullptr;
    r["response"] = t.text();
    r["language"] = t.language;
    r["segments"] = with_segments ? segs : json::array();
    r["total_time_ms"] = m.total_ms;
    r["encoder_time_ms"] = m.encode_ms;
    r["audio_seconds"] = m.audio_seconds;
    r["real_time_factor"] = m.audio_seconds > 0 ? m.total_ms / 1000.0 / m.audio_seconds : 0.0;
    r["decode_tokens"] = m.decoded_tokens;
    r["decode_tps"] = decode_s > 0 ? static_cast<double>(m.decoded_tokens) / decode_s : 0.0;
    return r;
}

json SpeechStream::process(const uint8_t* pcm, size_t bytes) {
    if (pcm == nullptr && bytes != 0) fail("pcm_buffer is NULL but pcm_buffer_size is %zu", bytes);
    if (bytes % 2 != 0) fail("pcm_buffer_size %zu is not a whole number of 16-bit samples", bytes);
    if (bytes > 0) {
        const std::vector<float> x = pcm16_to_float(pcm, bytes);
        audio_.insert(audio_.end(), x.begin(), x.end());
        since_decode_ += x.size();
    }
    if (since_decode_ < static_cast<size_t>(kStreamStep * kWhisperSampleRate)) {
        return {{"success", true}, {"error", nullptr}, {"confirmed", confirmed_}, {"pending", pending_}};
    }
    json r = decode(false);
    while (audio_.size() >= kWindowSamples) r = decode(false);  // a large piece: whole windows first
    return r;
}

json SpeechStream::stop() {
    json r = {{"success", true}, {"error", nullptr}};
    while (!audio_.empty()) r = decode(true);
    r["confirmed"] = confirmed_;
    r["pending"] = "";
    r["response"] = confirmed_;
    r["segments"] = segments_;
    return r;
}

json SpeechStream::decode(bool final) {
    since_decode_ = 0;
    const size_t window = kWindowSamples;
    const size_t n = std::min(audio_.size(), window);
    const Transcript t = transcribe(*model_.whisper, audio_.data(), n, options_);
    const double buffer_end = static_cast<double>(n) / kWhisperSampleRate;
    double confirmed_until = 0.0;
    pending_.clear();
    std::string new_text;
    // a full 30 s buffer confirms all but its last segment (all of a single one), so it moves on
    const bool flush = final || (n == window && t.segments.size() <= 1);
    for (size_t i = 0; i < t.segments.size(); ++i) {
        const TranscriptSegment& s = t.segments[i];
        const bool full = n == window && i + 1 < t.segments.size();
        if (flush || full || s.end < buffer_end - kStreamHold) {
            new_text += s.text;
            segments_.push_back({{"start", offset_ + s.start}, {"end", offset_ + s.end}, {"text", s.text}});
            confirmed_until = s.end;
        } else {
            pending_ += s.text;
        }
    }
    if (flush) confirmed_until = buffer_end;
    const size_t drop = std::min(audio_.size(), static_cast<size_t>(confirmed_until * kWhisperSampleRate));
    audio_.erase(audio_.begin(), audio_.begin() + static_cast<long>(drop));
    offset_ += static_cast<double>(drop) / kWhisperSampleRate;
    confirmed_ += new_text;
    json r = transcript_response(t, false);
    r["confirmed"] = confirmed_;
    r["pending"] = pending_;
    r["response"] = confirmed_ + pending_;
    return r;
}

}  // namespace cactus::api
