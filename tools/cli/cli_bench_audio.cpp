// cactus bench MODEL --mmproj MMPROJ.gguf: audio encode speed (the mmproj's audio tower: features +
// conformer + projector, ms per clip) and the prefill of a prompt holding the clip, per thread count,
// beside the image bench (cli_bench_vision.cpp). The clip is a generated 10 s tone sweep at 16 kHz.
// An mmproj without an audio tower: the audio section says so.
//   encode:  samples -> the clip's layout (markers and rows).
//   prefill: from an empty cache, kAudioMarker + a short text; the clip's rows are already encoded
//            (the engine keeps the last call's clips), so this is the prefill of its rows alone.
//   ttft:    encode + prefill of the same repetition.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli_bench_media.h"
#include "cli_common.h"
#include "engine/engine.h"
#include "engine/media/audio_prompt.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "models/audio/gemma4_audio.h"

namespace cactus::cli {

namespace {

struct AudioResult {
    int threads = 0;
    std::string device;  // where the encoder ran (AudioEncoder::device)
    BenchStats encode_ms, prefill_ms, ttft_ms;
    size_t audio_tokens = 0;   // rows per clip
    size_t prompt_tokens = 0;  // the prefill test's prompt
};

// A tone sweeping 200 Hz -> 2 kHz at half scale: [seconds * 16000] samples.
std::vector<float> sweep(double seconds) {
    const size_t n = size_t(seconds * AudioEncoder::kSampleRate);
    std::vector<float> out(n);
    double phase = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double f = 200.0 + 1800.0 * double(i) / double(n);
        phase += 2.0 * M_PI * f / AudioEncoder::kSampleRate;
        out[i] = 0.5f * float(std::sin(phase));
    }
    return out;
}

AudioResult bench_audio_threads(const std::string& model_path, const std::string& mmproj_path, const AudioInput& clip,
                                int threads, int reps, const std::string& device) {
    EngineOptions options;
    options.n_threads = threads;
    options.device = device;
    options.mmproj_path = mmproj_path;
    std::unique_ptr<Engine> engine = Engine::load(model_path, options);  // refuses an mmproj that is not a pair
    const MarkerVocab vocab(engine->tokenizer());
    const size_t n_embd = engine->model().info().n_embd;
    const std::string prompt = std::string(kAudioMarker) + "Transcribe the audio.";
    const std::vector<AudioInput> audio{clip};
    auto encode = [&](MediaPrompt* layout) {
        const BenchClock::time_point start = BenchClock::now();
        *layout = MediaPrompt();
        layout->n_embd = n_embd;
        append_gemma4_audio(layout, clip.samples.data(), clip.samples.size(), *engine->audio(), vocab);
        return bench_ms_since(start);
    };
    AudioResult r;
    r.threads = threads;
    r.device = engine->audio()->device();
    MediaPrompt layout;
    encode(&layout);  // warm-up
    engine->reset();
    engine->prefill_with_media(prompt, {}, audio);
    std::vector<double> enc, prefill, ttft;
    for (int rep = 0; rep < reps; ++rep) {
        const double e = encode(&layout);
        engine->reset();
        const CompletionMetrics m = engine->prefill_with_media(prompt, {}, audio);
        enc.push_back(e);
        prefill.push_back(m.time_to_first_token_ms);
        ttft.push_back(e + m.time_to_first_token_ms);
        r.prompt_tokens = m.prefill_tokens;
    }
    for (int32_t id : layout.tokens) r.audio_tokens += id < 0 ? 1 : 0;
    r.encode_ms = bench_stats(enc);
    r.prefill_ms = bench_stats(prefill);
    r.ttft_ms = bench_stats(ttft);
    return r;
}

}  // namespace

nlohmann::ordered_json run_audio_bench(const std::string& model_path, const std::string& mmproj_path,
                                       const std::vector<int>& threads, int reps, bool json,
                                       const std::string& device) {
    using Json = nlohmann::ordered_json;
    if (!mmproj_path_has_audio(mmproj_path)) {
        const char* why = "the mmproj has no audio tower";
        if (!json) std::printf("\naudio bench skipped: %s\n", why);
        return Json{{"skipped", why}};
    }
    const AudioInput clip{"<generated 10 s tone sweep>", sweep(10.0)};
    std::vector<AudioResult> results;
    for (int n : threads) {
        if (!json) std::fprintf(stderr, "bench: audio, %d thread(s)...\n", n);
        results.push_back(bench_audio_threads(model_path, mmproj_path, clip, n, reps, device));
    }
    Json out = Json::array();
    if (!json) {
        std::printf("\naudio: %s (%zu samples at 16 kHz), encoder on %s\n", clip.name.c_str(), clip.samples.size(),
                    results.empty() ? "-" : results.front().device.c_str());
        std::printf("threads | aud tok | encode ms med |   min   |   max   | prefill ms | prefill tok |   TTFT ms\n");
        std::printf("--------+---------+---------------+---------+---------+------------+-------------+----------\n");
    }
    for (const AudioResult& r : results) {
        if (!json)
            std::printf("%7d | %7zu | %13.1f | %7.1f | %7.1f | %10.1f | %11zu | %9.1f\n", r.threads, r.audio_tokens,
                        r.encode_ms.median, r.encode_ms.min, r.encode_ms.max, r.prefill_ms.median, r.prompt_tokens,
                        r.ttft_ms.median);
        out.push_back(Json{{"threads", r.threads},
                           {"device", r.device},
                           {"audio_tokens", r.audio_tokens},
                           {"encode_ms", bench_stats_json(r.encode_ms)},
                           {"prefill", {{"prompt_tokens", r.prompt_tokens}, {"ms", bench_stats_json(r.prefill_ms)}}},
                           {"ttft_ms", bench_stats_json(r.ttft_ms)}});
    }
    return Json{{"clip", clip.name}, {"samples", clip.samples.size()}, {"results", out}};
}

bool mmproj_path_has_audio(const std::string& mmproj_path) { return mmproj_has_audio(*GgufFile::open(mmproj_path)); }

bool mmproj_path_has_vision(const std::string& mmproj_path) {
    return GgufFile::open(mmproj_path)->get_bool("clip.has_vision_encoder", false);
}

}  // namespace cactus::cli
