// Embedding throughput: embeds the lines of a file (one text per line) as one batch, `reps` times,
// and prints JSON with the median seconds per batch, texts/s and tokens/s. Driven by
// bench/compare_embedding.py side by side with llama.cpp's llama-embedding.
// Usage: embed_bench MODEL.gguf TEXTS.txt [reps] [threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/embedding.h"

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: embed_bench MODEL.gguf TEXTS.txt [reps] [threads]\n");
        return 2;
    }
    try {
        const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 10;
        const int threads = argc > 4 ? std::atoi(argv[4]) : 0;
        std::vector<std::string> texts;
        std::ifstream in(argv[2]);
        for (std::string line; std::getline(in, line);)
            if (!line.empty()) texts.push_back(line);
        if (texts.empty()) cactus::fail("no texts in %s", argv[2]);
        auto embedder = cactus::TextEmbedder::load_encoder(argv[1], threads);
        size_t tokens = 0;
        for (const auto& e : embedder->embed(texts, cactus::EmbedOptions())) tokens += e.n_tokens;  // warm-up
        std::vector<double> seconds;
        for (int r = 0; r < reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            embedder->embed(texts, cactus::EmbedOptions());
            seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(seconds.begin(), seconds.end());
        const double median = seconds[seconds.size() / 2];
        std::printf(
            "{\"engine\":\"cactus\",\"texts\":%zu,\"tokens\":%zu,\"reps\":%d,\"threads\":%d,\"median_s\":%.6f,"
            "\"texts_per_s\":%.1f,\"tokens_per_s\":%.1f}\n",
            texts.size(), tokens, reps, threads, median, texts.size() / median, tokens / median);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "embed_bench: %s\n", e.what());
        return 1;
    }
}
