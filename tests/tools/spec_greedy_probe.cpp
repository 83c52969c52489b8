// The greedy-identity check of speculative decoding on real models (docs/SPECULATIVE.md):
//
//   spec_greedy_probe TARGET.gguf DRAFT.gguf PROMPTS.jsonl [--max-tokens N] [--threads N] [--draft-max N]
//
// For each prompt of the file (one JSON object per line with "id" and "messages"), rendered with the
// target's chat template: the greedy reply without drafts, with prompt lookup and with the draft
// model (drafting at every step, so every reply goes through verification and rollback). Prints one
// JSON line per prompt and a summary line; exits 1 when any reply differs from the plain one.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"

using namespace cactus;

namespace {

struct Args {
    std::string target, draft, prompts;
    size_t max_tokens = 64;
    int threads = 2;
    size_t draft_max = 8;
};

Args parse(int argc, char** argv) {
    if (argc < 4) fail("usage: spec_greedy_probe TARGET DRAFT PROMPTS [--max-tokens N] [--threads N] [--draft-max N]");
    Args a{argv[1], argv[2], argv[3]};
    for (int i = 4; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const long v = std::strtol(argv[i + 1], nullptr, 10);
        if (v <= 0) fail("spec_greedy_probe: %s needs a positive number", k.c_str());
        if (k == "--max-tokens")
            a.max_tokens = static_cast<size_t>(v);
        else if (k == "--threads")
            a.threads = static_cast<int>(v);
        else if (k == "--draft-max")
            a.draft_max = static_cast<size_t>(v);
        else
            fail("spec_greedy_probe: unknown option %s", k.c_str());
    }
    return a;
}

CompletionResult reply(Engine& e, const SpecOptions& spec, const std::string& prompt, size_t max_tokens) {
    e.set_speculative(spec);
    e.reset();
    GenerationOptions g;
    g.max_tokens = max_tokens;
    return e.complete(prompt, g, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Args a = parse(argc, argv);
        EngineOptions o;
        o.n_threads = a.threads;
        o.n_ctx = 2048;
        auto engine = Engine::load(a.target, o);
        std::ifstream in(a.prompts);
        if (!in) fail("spec_greedy_probe: cannot read %s", a.prompts.c_str());
        SpecOptions off, ngram, draft;
        ngram.type = SpecType::ngram;
        draft.type = SpecType::draft;
        draft.draft_model = a.draft;
        for (SpecOptions* s : {&ngram, &draft}) {
            s->draft_max = a.draft_max;
            s->adaptive = false;
        }
        size_t prompts = 0, differ = 0;
        std::string line;
        while (std::getline(in, line)) {
            if (line.empty()) continue;
            const auto row = nlohmann::ordered_json::parse(line);
            const std::string prompt = engine->render_chat(row.at("messages"), nlohmann::ordered_json(), true);
            const CompletionResult plain = reply(*engine, off, prompt, a.max_tokens);
            nlohmann::ordered_json out = {{"id", row.at("id")}, {"tokens", plain.tokens.size()}};
            for (const auto& [name, spec] : {std::pair<const char*, SpecOptions>{"ngram", ngram}, {"draft", draft}}) {
                const CompletionResult r = reply(*engine, spec, prompt, a.max_tokens);
                const bool same = r.tokens == plain.tokens;
                differ += same ? 0 : 1;
                out[name] = {{"same", same},
                             {"drafted", r.metrics.draft_tokens},
                             {"accepted", r.metrics.draft_accepted},
                             {"steps", r.metrics.decode_steps}};
            }
            ++prompts;
            std::cout << out.dump() << std::endl;
        }
        std::cout << nlohmann::ordered_json{{"prompts", prompts}, {"replies_compared", 2 * prompts}, {"differ", differ}}
                         .dump()
                  << std::endl;
        return differ == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "spec_greedy_probe: %s\n", e.what());
        return 2;
    }
}
