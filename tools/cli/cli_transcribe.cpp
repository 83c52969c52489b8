// cactus transcribe FILE.wav: speech to text with a Whisper model; text, segments with timestamps,
// JSON, SRT or WebVTT on stdout; timings to stderr.
#include <cstdio>
#include <memory>
#include <vector>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "cli_common.h"
#include "engine/media/vad_transcribe.h"
#include "engine/media/whisper_transcribe.h"
#include "engine/model_store.h"
#include "media/audio_input.h"

namespace cactus::cli {

namespace {

struct TranscribeArgs {
    std::vector<std::string> files;
    std::string model = "whisper-tiny.en";
    std::string language = "auto";
    bool translate = false;
    bool timestamps = false;
    bool without_timestamps = false;
    bool json = false;
    bool srt = false;
    bool vtt = false;
    bool greedy_only = false;
    int beam_size = 1;
    float patience = 1.0f;
    float length_penalty = 1.0f;
    bool vad = false;
    std::string vad_model = "silero-vad";
    int threads = 0;
    std::string device;  // empty = $CACTUS_DEVICE, else cpu
};

// "00:01:02,345" (SRT) or "00:01:02.345" (VTT, timestamps).
std::string clock_time(double seconds, char sep) {
    long ms = static_cast<long>(seconds * 1000.0 + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep,
                  ms % 1000);
    return buf;
}

std::string trimmed(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\n");
    size_t b = s.find_last_not_of(" \t\n");
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

void print_transcript(const Transcript& t, const TranscribeArgs& args) {
    if (args.json) {
        nlohmann::ordered_json j;
        j["language"] = t.language;
        j["text"] = t.text();
        j["segments"] = nlohmann::ordered_json::array();
        for (const TranscriptSegment& s : t.segments) {
            j["segments"].push_back({{"start", s.start},
                                     {"end", s.end},
                                     {"text", s.text},
                                     {"avg_logprob", s.avg_logprob},
                                     {"no_speech_prob", s.no_speech_prob},
                                     {"temperature", s.temperature}});
        }
        const TranscribeMetrics& m = t.metrics;
        j["metrics"] = {{"audio_seconds", m.audio_seconds},  {"total_ms", m.total_ms},   {"mel_ms", m.mel_ms},
                        {"encode_ms", m.encode_ms},          {"decode_ms", m.decode_ms}, {"windows", m.windows},
                        {"decoded_tokens", m.decoded_tokens}};
        const int indent = args.files.size() > 1 ? -1 : 2;  // several files: one JSON object per line
        std::printf("%s\n", j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        std::fflush(stdout);
        return;
    }
    if (args.vtt) std::printf("WEBVTT\n\n");
    size_t index = 0;
    for (const TranscriptSegment& s : t.segments) {
        const std::string text = trimmed(s.text);
        if (args.srt) {
            std::printf("%zu\n%s --> %s\n%s\n\n", ++index, clock_time(s.start, ',').c_str(),
                        clock_time(s.end, ',').c_str(), text.c_str());
        } else if (args.vtt) {
            std::printf("%s --> %s\n%s\n\n", clock_time(s.start, '.').c_str(), clock_time(s.end, '.').c_str(),
                        text.c_str());
        } else if (args.timestamps) {
            std::printf("[%s --> %s] %s\n", clock_time(s.start, '.').c_str(), clock_time(s.end, '.').c_str(),
                        text.c_str());
        }
    }
    if (!args.srt && !args.vtt && !args.timestamps) std::printf("%s\n", trimmed(t.text()).c_str());
}

int transcribe_command(const TranscribeArgs& args) {
    BackendOptions bo;
    bo.device = args.device.empty() ? device_from_env("cpu") : args.device;
    bo.n_threads = args.threads;
    std::unique_ptr<Backend> backend = make_backend(bo);  // Whisper's encoder and decoder
    WhisperModel model(resolve_model_path(args.model), *backend);
    TranscribeOptions options;
    options.language = args.language;
    options.translate = args.translate;
    if (args.greedy_only) options.temperatures = {0.0f};
    options.beam_size = static_cast<size_t>(args.beam_size);  // in [1, kMaxBeamSize] (checked)
    options.patience = args.patience;
    options.length_penalty = args.length_penalty;
    options.without_timestamps = args.without_timestamps;
    // Silero VAD stays on the CPU whatever the device: a ~0.7 M multiply-add LSTM step per 32 ms
    // chunk, carried chunk to chunk, is host loops faster than a kernel launch and a copy each.
    std::unique_ptr<SileroVad> vad;
    if (args.vad) vad = std::make_unique<SileroVad>(resolve_model_path(args.vad_model));
    for (const std::string& file : args.files) {
        const std::vector<float> audio = read_wav_file(file);
        const Transcript t = vad ? transcribe_speech(model, *vad, audio.data(), audio.size(), options, VadOptions())
                                 : transcribe(model, audio.data(), audio.size(), options);
        print_transcript(t, args);
        const TranscribeMetrics& m = t.metrics;
        std::fprintf(stderr,
                     "%s: audio %.1f s | total %.0f ms (RTF %.3f) | mel %.0f ms | encode %.0f ms (%zu windows) | "
                     "decode %.0f ms, %zu tokens\n",
                     file.c_str(), m.audio_seconds, m.total_ms,
                     m.audio_seconds > 0 ? m.total_ms / 1000.0 / m.audio_seconds : 0.0, m.mel_ms, m.encode_ms,
                     m.windows, m.decode_ms, m.decoded_tokens);
    }
    return 0;
}

}  // namespace

void register_transcribe(CLI::App& app) {
    auto args = std::make_shared<TranscribeArgs>();
    CLI::App* cmd = app.add_subcommand("transcribe", "Speech to text with a Whisper model (WAV in)");
    cmd->add_option("files", args->files, "WAV files (any rate, channels, PCM or float)")->required();
    cmd->add_option("-m,--model", args->model, "Whisper model: name or .gguf path")->capture_default_str();
    cmd->add_option("--language", args->language, "Language code, or auto (detect)")->capture_default_str();
    cmd->add_flag("--translate", args->translate, "Translate to English (multilingual models)");
    cmd->add_flag("--timestamps", args->timestamps, "Print segments with their start and end times");
    cmd->add_flag("--without-timestamps", args->without_timestamps,
                  "Decode text only: no timestamp tokens, one segment per 30 s window");
    cmd->add_flag("--greedy", args->greedy_only,
                  "Temperature 0 only, no fallback (greedy, or beam search with --beam-size)");
    cmd->add_option("--beam-size", args->beam_size, "Beams at temperature 0 (1 = greedy)")
        ->capture_default_str()
        ->check(CLI::Range(1, static_cast<int>(kMaxBeamSize)));
    cmd->add_option("--patience", args->patience, "Beam search: stop after round(beam size * patience) hypotheses")
        ->capture_default_str();
    cmd->add_option("--length-penalty", args->length_penalty,
                    "Hypothesis score = log-prob sum / length^penalty (1: mean; 0: sum)")
        ->capture_default_str();
    cmd->add_flag("--vad", args->vad, "Skip silence: transcribe only the speech Silero VAD finds");
    cmd->add_option("--vad-model", args->vad_model, "VAD model: name or .gguf path")->capture_default_str();
    cmd->add_option("-t,--threads", args->threads, "CPU threads (0: all cores)");
    cmd->add_option("--device", args->device,
                    "cpu, cuda or cuda:N for Whisper (default: $CACTUS_DEVICE, else cpu); --vad runs on the CPU");
    auto* fmt = cmd->add_option_group("format");
    fmt->add_flag("--json", args->json, "JSON: language, text, segments, metrics");
    fmt->add_flag("--srt", args->srt, "SubRip subtitles");
    fmt->add_flag("--vtt", args->vtt, "WebVTT subtitles");
    fmt->require_option(0, 1);
    cmd->callback([args]() { throw CLI::RuntimeError(transcribe_command(*args)); });
}

}  // namespace cactus::cli
