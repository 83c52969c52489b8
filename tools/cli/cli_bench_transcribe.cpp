// cactus bench --transcribe [MODEL] [--audio FILE.wav]: speech-to-text speed of a Whisper model:
// real-time factor, encoder ms per 30 s window, decoder tokens per second, per thread count (greedy or
// --beam-size N, temperature 0 only, text only with --without-timestamps, after one warm-up). A model
// without an audio encoder is reported as skipped (exit 0), never an abort; every rate is 0 when its
// time or count is 0.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli_common.h"
#include "core/error.h"
#include "engine/media/whisper_transcribe.h"
#include "engine/model_store.h"
#include "gguf/gguf.h"
#include "media/audio_input.h"

namespace cactus::cli {

namespace {

double rate(double count, double seconds) { return count > 0 && seconds > 0 ? count / seconds : 0.0; }

// 30 s of a deterministic test signal when no file is given: a gliding tone over low noise.
std::vector<float> synthetic_audio() {
    std::vector<float> x(30 * kWhisperSampleRate);
    uint32_t seed = 12345;
    double phase = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        seed = seed * 1664525u + 1013904223u;
        const double f = 200.0 + 300.0 * std::sin(2 * M_PI * i / (3.0 * kWhisperSampleRate));
        phase += 2 * M_PI * f / kWhisperSampleRate;
        x[i] = static_cast<float>(0.3 * std::sin(phase) + 0.01 * ((seed >> 8) / 16777216.0 - 0.5));
    }
    return x;
}

}  // namespace

int run_transcribe_bench(const std::string& model_name, const std::string& audio_path, const std::vector<int>& threads,
                         int reps, bool json, size_t beam_size, bool without_timestamps, const std::string& device) {
    const std::string path = resolve_model_path(model_name);
    const std::string arch = GgufFile::open(path)->get_string("general.architecture", "");
    if (arch != "whisper") {
        if (json) {
            std::printf(
                "%s\n",
                nlohmann::ordered_json({{"model", model_name}, {"skipped", "no audio encoder"}}).dump().c_str());
        } else {
            std::printf("%s: skipped (architecture '%s' has no audio encoder)\n", model_name.c_str(), arch.c_str());
        }
        return 0;
    }
    const std::vector<float> audio = audio_path.empty() ? synthetic_audio() : read_wav_file(audio_path);
    const double seconds = static_cast<double>(audio.size()) / kWhisperSampleRate;
    const std::string on = device.empty() ? device_from_env("cpu") : device;
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    if (!json) {
        std::printf("model %s | audio %s (%.1f s) | beam %zu%s | device %s\n", model_name.c_str(),
                    audio_path.empty() ? "synthetic" : audio_path.c_str(), seconds, beam_size,
                    without_timestamps ? " | without timestamps" : "", on.c_str());
        std::printf("%8s %10s %12s %14s %12s %8s\n", "threads", "RTF", "total ms", "encoder ms/win", "decode tok/s",
                    "tokens");
    }
    for (int t : threads.empty() ? std::vector<int>{0} : threads) {
        BackendOptions bo;
        bo.device = on;
        bo.n_threads = t;
        std::unique_ptr<Backend> backend = make_backend(bo);
        WhisperModel model(path, *backend);
        TranscribeOptions options;
        options.temperatures = {0.0f};
        options.beam_size = beam_size;
        options.without_timestamps = without_timestamps;
        transcribe(model, audio.data(), audio.size(), options);  // warm-up
        double best_total = 0, enc = 0, dec_rate = 0;
        size_t tokens = 0;
        for (int r = 0; r < reps; ++r) {
            const Transcript tr = transcribe(model, audio.data(), audio.size(), options);
            const TranscribeMetrics& m = tr.metrics;
            if (r == 0 || m.total_ms < best_total) {
                best_total = m.total_ms;
                enc = m.windows > 0 ? m.encode_ms / static_cast<double>(m.windows) : 0.0;
                dec_rate = rate(static_cast<double>(m.decoded_tokens), m.decode_ms / 1000.0);
                tokens = m.decoded_tokens;
            }
        }
        const double rtf = seconds > 0 ? best_total / 1000.0 / seconds : 0.0;
        rows.push_back({{"threads", backend->n_threads()},
                        {"rtf", rtf},
                        {"total_ms", best_total},
                        {"encoder_ms_per_window", enc},
                        {"decode_tps", dec_rate},
                        {"decode_tokens", tokens}});
        if (!json) {
            std::printf("%8d %10.3f %12.1f %14.1f %12.1f %8zu\n", backend->n_threads(), rtf, best_total, enc, dec_rate,
                        tokens);
        }
    }
    if (json) {
        std::printf("%s\n", nlohmann::ordered_json({{"model", model_name},
                                                    {"device", on},
                                                    {"beam_size", beam_size},
                                                    {"without_timestamps", without_timestamps},
                                                    {"audio_seconds", seconds},
                                                    {"runs", rows}})
                                .dump(2)
                                .c_str());
    }
    return 0;
}

}  // namespace cactus::cli
