// gemma4_audio_probe: what the Gemma 4 audio tests read from our side.
//   gemma4_audio_probe encode MMPROJ.gguf IN.f32 OUT_DIR [--threads N] [--repeats N]
//       IN.f32: raw 16 kHz float samples. Writes OUT_DIR/features.f32 [frames, 128], tower.f32
//       [tokens, out_dim] (before the embedder) and rows.f32 [tokens, proj_dim]; prints
//       {"frames", "tokens", "out_dim", "proj_dim", "encode_ms": [...], "encode_cpu_ms": [...]} (each of
//       REPEATS encodes from samples: wall time and the process's CPU time).
//   gemma4_audio_probe prefill TEXT.gguf MMPROJ.gguf IN.f32 OUT.f32 --before IDS --after IDS --boa ID
//                              --eoa ID [--threads N]
//       The ids BEFORE (comma-separated), append_gemma4_audio with the marker ids given, the ids AFTER,
//       prefilled (F32 KV cache); writes the last row's logits to OUT.f32; prints {"tokens", "prefill_ms"}.
//   gemma4_audio_probe media-prefill TEXT.gguf MMPROJ.gguf IMAGE IN.f32 OUT.f32 --before IDS --boi ID --eoi ID
//                                    --middle IDS --boa ID --eoa ID --after IDS [--max-tokens 280] [--threads N]
//       A prompt with both towers of one mmproj, in the order given: BEFORE, append_gemma4_image (at
//       --max-tokens soft tokens), MIDDLE, append_gemma4_audio, AFTER; prefilled and written as prefill.
// Errors -> {"error": "message"} on stdout and exit status 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "engine/media/audio_prompt.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "models/audio/gemma4_audio.h"
#include "models/audio/gemma4_features.h"
#include "models/model.h"
#include "models/vision/vision_encoder.h"

using nlohmann::json;

namespace {

void write_floats(const std::string& path, const std::vector<float>& v) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) cactus::fail("gemma4_audio_probe: cannot write %s", path.c_str());
    const size_t wrote = std::fwrite(v.data(), sizeof(float), v.size(), f);
    std::fclose(f);
    if (wrote != v.size()) cactus::fail("gemma4_audio_probe: cannot write %s", path.c_str());
}

std::vector<float> read_floats(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) cactus::fail("gemma4_audio_probe: cannot read %s", path.c_str());
    std::vector<float> v;
    float buf[4096];
    size_t got = 0;
    while ((got = std::fread(buf, sizeof(float), 4096, f)) > 0) v.insert(v.end(), buf, buf + got);
    std::fclose(f);
    return v;
}

std::vector<int32_t> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    for (size_t at = 0; at < s.size();) {
        const size_t comma = std::min(s.find(',', at), s.size());
        ids.push_back(std::stoi(s.substr(at, comma - at)));
        at = comma + 1;
    }
    return ids;
}

// "--flag value" pairs from argv[first] on.
std::string flag(int argc, char** argv, int first, const char* name, const std::string& fallback) {
    for (int i = first; i + 1 < argc; i += 2) {
        if (name == std::string(argv[i])) return argv[i + 1];
    }
    return fallback;
}

int encode(int argc, char** argv) {
    if (argc < 5) cactus::fail("usage: gemma4_audio_probe encode MMPROJ IN.f32 OUT_DIR [--threads N] [--repeats N]");
    cactus::BackendOptions opt;
    opt.n_threads = std::stoi(flag(argc, argv, 5, "--threads", "0"));
    const int repeats = std::max(1, std::stoi(flag(argc, argv, 5, "--repeats", "1")));
    const auto file = cactus::GgufFile::open(argv[2]);
    cactus::AudioEncoder enc(*file, opt);
    const std::vector<float> samples = read_floats(argv[3]);
    const cactus::Gemma4Features feats = cactus::gemma4_features(samples.data(), samples.size());
    std::vector<float> rows, tower;
    enc.encode_features(feats.data.data(), feats.n_frames, &rows, &tower);
    std::vector<double> times, cpu_times;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::clock_t c0 = std::clock();
        enc.encode(samples.data(), samples.size(), &rows);
        cpu_times.push_back(1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const std::string dir = argv[4];
    write_floats(dir + "/features.f32", feats.data);
    write_floats(dir + "/tower.f32", tower);
    write_floats(dir + "/rows.f32", rows);
    std::printf("%s\n", json{{"frames", feats.n_frames},
                             {"tokens", enc.tokens(samples.size())},
                             {"out_dim", enc.hparams().out_dim},
                             {"proj_dim", enc.proj_dim()},
                             {"encode_ms", times},
                             {"encode_cpu_ms", cpu_times}}
                            .dump()
                            .c_str());
    return 0;
}

struct TextSide {
    cactus::BackendOptions options;
    std::unique_ptr<cactus::Model> model;
    cactus::MediaPrompt prompt;
};

// The text model (F32 KV cache: the oracle's precision, no f16 rounding of K and V) and an empty prompt.
TextSide load_text(const cactus::GgufFile& text, int n_threads) {
    TextSide side;
    cactus::ModelOptions mo;
    side.options.n_threads = mo.n_threads = n_threads;
    mo.n_ctx = 4096;
    mo.kv.type = static_cast<int>(cactus::KvType::F32);
    side.model = cactus::Model::load(text, mo);
    side.prompt.n_embd = side.model->info().n_embd;
    return side;
}

void push_ids(cactus::MediaPrompt* prompt, const std::string& ids) {
    for (int32_t id : parse_ids(ids)) prompt->push_token(id);
}

// Prefills the whole prompt, writes the last row's logits, prints {"tokens", "prefill_ms"}.
int prefill_and_report(TextSide& side, const std::string& out_path) {
    std::vector<float> logits;
    const auto start = std::chrono::steady_clock::now();
    cactus::prefill_media(*side.model, side.prompt, 0, side.prompt.tokens.size(), 0, 0, &logits);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    write_floats(out_path, logits);
    std::printf("%s\n", json{{"tokens", side.prompt.tokens}, {"prefill_ms", ms}}.dump().c_str());
    return 0;
}

int prefill(int argc, char** argv) {
    if (argc < 6) cactus::fail("usage: gemma4_audio_probe prefill TEXT MMPROJ IN.f32 OUT.f32 --before IDS ...");
    const auto text = cactus::GgufFile::open(argv[2]);
    const auto mmproj = cactus::GgufFile::open(argv[3]);
    TextSide side = load_text(*text, std::stoi(flag(argc, argv, 6, "--threads", "0")));
    cactus::AudioEncoder enc(*mmproj, side.options);
    const std::vector<float> samples = read_floats(argv[4]);
    push_ids(&side.prompt, flag(argc, argv, 6, "--before", ""));
    cactus::append_gemma4_audio(&side.prompt, samples.data(), samples.size(), enc,
                                parse_ids(flag(argc, argv, 6, "--boa", "")),
                                parse_ids(flag(argc, argv, 6, "--eoa", "")));
    push_ids(&side.prompt, flag(argc, argv, 6, "--after", ""));
    return prefill_and_report(side, argv[5]);
}

int media_prefill(int argc, char** argv) {
    if (argc < 7) {
        cactus::fail("usage: gemma4_audio_probe media-prefill TEXT MMPROJ IMAGE IN.f32 OUT.f32 --before IDS ...");
    }
    const auto flag_of = [&](const char* name, const char* fallback) { return flag(argc, argv, 7, name, fallback); };
    const auto text = cactus::GgufFile::open(argv[2]);
    const auto mmproj = cactus::GgufFile::open(argv[3]);
    TextSide side = load_text(*text, std::stoi(flag_of("--threads", "0")));
    cactus::VisionEncoder vision(*mmproj, side.options);
    cactus::AudioEncoder audio(*mmproj, side.options);
    const std::vector<float> samples = read_floats(argv[5]);
    push_ids(&side.prompt, flag_of("--before", ""));
    cactus::append_gemma4_image(&side.prompt, cactus::load_image(argv[4]), vision, parse_ids(flag_of("--boi", "")),
                                parse_ids(flag_of("--eoi", "")), std::stoul(flag_of("--max-tokens", "280")));
    push_ids(&side.prompt, flag_of("--middle", ""));
    cactus::append_gemma4_audio(&side.prompt, samples.data(), samples.size(), audio, parse_ids(flag_of("--boa", "")),
                                parse_ids(flag_of("--eoa", "")));
    push_ids(&side.prompt, flag_of("--after", ""));
    return prefill_and_report(side, argv[6]);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string mode = argc > 1 ? argv[1] : "";
        if (mode == "encode") return encode(argc, argv);
        if (mode == "prefill") return prefill(argc, argv);
        if (mode == "media-prefill") return media_prefill(argc, argv);
        cactus::fail("usage: gemma4_audio_probe encode|prefill|media-prefill ...");
    } catch (const std::exception& e) {
        std::printf("%s\n", json{{"error", e.what()}}.dump().c_str());
        return 1;
    }
}
