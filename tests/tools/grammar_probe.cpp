// Cost of the grammar mask on a real vocabulary, without running the model (docs/PERFORMANCE.md).
//
//   grammar_probe MODEL.gguf TOOLS.json REPLY.txt [repeats]
//
// Builds the grammar's view of the model's vocabulary, compiles the forced tool-call grammar of the
// tools in the model family's format (chat template), then replays REPLY (a reply the model gave,
// tokenized by the model's tokenizer) through mask + accept, `repeats` times. Prints JSON: vocab
// build ms, compile ms (first, and again from the cache), mask+accept ms per token (median run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_format.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "sampling/grammar.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string slurp(const char* path) {
    std::ifstream in(path);
    if (!in) cactus::fail("grammar_probe: cannot read %s", path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s MODEL.gguf TOOLS.json REPLY.txt [repeats]\n", argv[0]);
        return 2;
    }
    try {
        const int repeats = argc > 4 ? std::max(1, std::atoi(argv[4])) : 5;
        auto file = cactus::GgufFile::open(argv[1]);
        auto tok = cactus::Tokenizer::from_gguf(*file);
        auto format = cactus::tool_format_for(file->get_string("tokenizer.chat_template", ""));
        nlohmann::ordered_json tools = nlohmann::ordered_json::parse(slurp(argv[2]));
        std::vector<int32_t> reply = tok->encode(slurp(argv[3]), false, true);

        Clock::time_point t = Clock::now();
        std::vector<bool> marker(tok->vocab_size(), false);  // as the engine: markers shown as text
        for (const cactus::HiddenRegion& region : format->hidden_regions()) {
            for (const std::string* m : {&region.open, &region.close}) {
                std::vector<int32_t> ids = tok->encode(*m, false, true);
                if (ids.size() == 1) marker[static_cast<size_t>(ids[0])] = true;
            }
        }
        std::vector<std::string> bytes(tok->vocab_size());
        for (size_t id = 0; id < bytes.size(); ++id) {
            const int32_t i = static_cast<int32_t>(id);
            if (!tok->is_end_of_generation(i) && (!tok->is_control(i) || marker[id]))
                bytes[id] = tok->token_to_piece(i, true);
        }
        cactus::GrammarVocab vocab(bytes, tok->end_of_generation_ids());
        const double vocab_ms = ms_since(t);
        cactus::ConstraintSpec spec{cactus::ConstraintSpec::Kind::structural_tag, format->call_grammar(tools, true)};
        t = Clock::now();
        auto compiled = vocab.compile(spec);
        const double compile_ms = ms_since(t);
        t = Clock::now();
        vocab.compile(spec);
        const double cached_ms = ms_since(t);

        std::vector<double> per_token;
        std::vector<float> logits(tok->vocab_size());
        for (int r = 0; r < repeats; ++r) {
            cactus::GrammarConstraint c(compiled);
            double total = 0.0;
            for (int32_t id : reply) {
                std::fill(logits.begin(), logits.end(), 0.0f);
                t = Clock::now();
                c.mask(logits);
                bool ok = c.accept(id);
                total += ms_since(t);
                if (!ok) cactus::fail("grammar_probe: the grammar rejects token %d of the reply", id);
            }
            per_token.push_back(total / static_cast<double>(reply.size()));
        }
        std::sort(per_token.begin(), per_token.end());
        nlohmann::json out = {{"format", format->name()},
                              {"tools", tools.size()},
                              {"reply_tokens", reply.size()},
                              {"vocab_build_ms", vocab_ms},
                              {"compile_ms", compile_ms},
                              {"compile_cached_ms", cached_ms},
                              {"mask_ms_per_token_median", per_token[per_token.size() / 2]},
                              {"mask_ms_per_token_min", per_token.front()}};
        std::printf("%s\n", out.dump().c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "grammar_probe: %s\n", e.what());
        return 1;
    }
}
