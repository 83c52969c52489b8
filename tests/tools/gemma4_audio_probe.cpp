// gemma4_audio_probe: what the Gemma 4 audio tests read from our side.
//   gemma4_audio_probe MMPROJ.gguf IN.f32 OUT_DIR [THREADS [REPEATS]]
// IN.f32: raw 16 kHz float samples. Writes OUT_DIR/features.f32 [frames, 128], tower.f32
// [tokens, out_dim] (before the embedder) and rows.f32 [tokens, proj_dim]; prints one JSON line
// with the shapes and the encode times (ms; from samples, REPEATS runs), or {"error": ...}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "gguf/gguf.h"
#include "models/audio/gemma4_audio.h"
#include "models/audio/gemma4_features.h"

namespace {

void write_floats(const std::string& path, const std::vector<float>& v) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(v.data(), sizeof(float), v.size(), f) != v.size()) {
        throw std::runtime_error("cannot write " + path);
    }
    std::fclose(f);
}

std::vector<float> read_floats(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) throw std::runtime_error(std::string("cannot read ") + path);
    std::vector<float> v;
    float buf[4096];
    size_t got = 0;
    while ((got = std::fread(buf, sizeof(float), 4096, f)) > 0) v.insert(v.end(), buf, buf + got);
    std::fclose(f);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 4) throw std::runtime_error("usage: gemma4_audio_probe MMPROJ IN.f32 OUT_DIR [THREADS [REPEATS]]");
        cactus::BackendOptions opt;
        opt.n_threads = argc > 4 ? std::stoi(argv[4]) : 0;
        const int repeats = argc > 5 ? std::max(1, std::stoi(argv[5])) : 1;
        std::unique_ptr<cactus::GgufFile> file = cactus::GgufFile::open(argv[1]);
        cactus::AudioEncoder enc(*file, opt);
        const std::vector<float> samples = read_floats(argv[2]);
        const cactus::Gemma4Features feats = cactus::gemma4_features(samples.data(), samples.size());
        std::vector<float> rows, tower;
        enc.encode_features(feats.data.data(), feats.n_frames, &rows, &tower);
        std::string times;
        for (int r = 0; r < repeats; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            enc.encode(samples.data(), samples.size(), &rows);
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            times += (r ? ", " : "") + std::to_string(ms);
        }
        const std::string dir = argv[3];
        write_floats(dir + "/features.f32", feats.data);
        write_floats(dir + "/tower.f32", tower);
        write_floats(dir + "/rows.f32", rows);
        std::printf("{\"frames\": %zu, \"tokens\": %zu, \"out_dim\": %zu, \"proj_dim\": %zu, \"encode_ms\": [%s]}\n",
                    feats.n_frames, enc.tokens(samples.size()), enc.hparams().out_dim, enc.proj_dim(), times.c_str());
        return 0;
    } catch (const std::exception& e) {
        std::printf("{\"error\": \"%s\"}\n", e.what());
        return 1;
    }
}
