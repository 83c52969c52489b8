// What a verification step of speculative decoding costs, and whether its rows are the one-token
// steps' bit for bit (docs/SPECULATIVE.md):
//
//   spec_cost_probe MODEL.gguf [--threads N] [--max-n N]
//
// After a 200-token prompt, decodes max-n tokens one at a time (the reference rows and the time of
// a plain step), then the same tokens in one step of n = 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64
// (up to max-n), each timed best of three. Prints one JSON line per n: milliseconds, the ratio to
// a plain step, and whether every row equals the one-token step's bit for bit.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"

using namespace cactus;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 2) fail("usage: spec_cost_probe MODEL [--threads N] [--max-n N]");
        int threads = 2;
        size_t max_n = 16;
        for (int i = 2; i + 1 < argc; i += 2) {
            const std::string k = argv[i];
            const long v = std::strtol(argv[i + 1], nullptr, 10);
            if (v <= 0) fail("spec_cost_probe: %s needs a positive number", k.c_str());
            if (k == "--threads")
                threads = static_cast<int>(v);
            else if (k == "--max-n")
                max_n = std::min<size_t>(static_cast<size_t>(v), 64);
            else
                fail("spec_cost_probe: unknown option %s", k.c_str());
        }
        auto file = GgufFile::open(argv[1]);
        ModelOptions o;
        o.n_ctx = 1024;
        o.n_threads = threads;
        o.n_batch = 64;
        auto model = Model::load(*file, o);
        const size_t V = model->info().n_vocab;
        std::vector<int32_t> prompt, tokens;
        for (int i = 0; i < 200; ++i) prompt.push_back(100 + (i * 7919) % 5000);
        for (size_t i = 0; i < max_n; ++i) tokens.push_back(static_cast<int32_t>(300 + i * 37));
        std::vector<float> logits;
        model->forward(prompt.data(), prompt.size(), &logits);
        const size_t base = model->n_past();
        std::vector<std::vector<float>> single;
        const auto start = std::chrono::steady_clock::now();
        for (size_t i = 0; i < max_n; ++i) {
            model->forward(&tokens[i], 1, &logits);
            single.push_back(logits);
        }
        const double plain_s = seconds_since(start) / static_cast<double>(max_n);
        std::printf("{\"n\": 1, \"ms\": %.3f}\n", plain_s * 1e3);
        for (size_t n : {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
            if (n > max_n) break;
            double best = 1e30;
            bool exact = true;
            for (int rep = 0; rep < 3; ++rep) {
                model->truncate(base);
                std::vector<uint8_t> marks(n, 1);
                Batch b;
                b.n = n;
                b.tokens = tokens.data();
                b.logits = marks.data();
                std::vector<float> rows;
                const auto t = std::chrono::steady_clock::now();
                model->decode(b, &rows);
                best = std::min(best, seconds_since(t));
                for (size_t r = 0; r < n; ++r)
                    exact = exact && std::memcmp(rows.data() + r * V, single[r].data(), V * sizeof(float)) == 0;
            }
            std::printf("{\"n\": %zu, \"ms\": %.3f, \"ratio\": %.3f, \"bit_exact\": %s}\n", n, best * 1e3,
                        best / plain_s, exact ? "true" : "false");
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "spec_cost_probe: %s\n", e.what());
        return 2;
    }
}
