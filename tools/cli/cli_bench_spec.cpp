// cactus bench MODEL --spec ngram|draft [--draft MODEL] [--draft-max N]: speculative decoding next to
// plain decoding of the same greedy reply, per thread count: decode tok/s of each, the speedup, the
// share of drafted tokens the model accepted and the tokens each model step produced.
//
// Method: the engine loads the model (the draft model too for --spec draft) and answers one
// code-editing request, whose reply copies much of its prompt (the workload speculative decoding is
// for; --spec-prompt FILE replaces the request's text). Greedy, at most -n tokens; one warm-up
// reply, then `reps` replies from an empty cache, first all speculative (the drafters adapt to
// what they measure across replies, as in a conversation), then all plain. Decode tok/s is the
// engine's: (tokens - 1) / (total - TTFT). Greedy replies must be the same text both ways.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/model_store.h"

namespace cactus::cli {

namespace {

using Json = nlohmann::ordered_json;

// An edit whose answer repeats most of the quoted function (prompt lookup's best case, and the
// small drafter's: code is predictable).
constexpr const char* kCodeEditPrompt =
    R"(Rename the variable `total` to `running_sum` in this function and return the whole function, with no explanation:

```python
def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    averages = []
    total = 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        if i >= window - 1:
            averages.append(total / window)
    return averages
```)";

std::string request_text(const std::string& prompt_file) {
    if (prompt_file.empty()) return kCodeEditPrompt;
    std::ifstream in(prompt_file, std::ios::binary);
    if (!in) fail("bench: --spec-prompt: cannot read '%s'", prompt_file.c_str());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Json rates_json(const std::vector<double>& v) {
    return Json{{"median", median(v)},
                {"min", v.empty() ? 0.0 : *std::min_element(v.begin(), v.end())},
                {"max", v.empty() ? 0.0 : *std::max_element(v.begin(), v.end())},
                {"samples", v}};
}

double ratio(double a, double b) { return b > 0.0 ? a / b : 0.0; }

// The timed replies of one mode: decode tok/s of each, their counters summed, the last text.
struct Replies {
    std::vector<double> decode_tps;
    CompletionMetrics sum;
    std::string text;
    size_t prompt_tokens = 0;
};

Replies timed_replies(Engine& engine, const std::string& prompt, const GenerationOptions& options, int reps) {
    Replies out;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1: the warm-up
        engine.reset();
        const CompletionResult r = engine.complete(prompt, options, nullptr);
        if (rep < 0) continue;
        out.decode_tps.push_back(r.metrics.decode_tps);
        out.sum.decode_tokens += r.metrics.decode_tokens;
        out.sum.decode_steps += r.metrics.decode_steps;
        out.sum.draft_tokens += r.metrics.draft_tokens;
        out.sum.draft_accepted += r.metrics.draft_accepted;
        out.text = r.text;
        out.prompt_tokens = r.metrics.prompt_tokens;
    }
    return out;
}

}  // namespace

Json run_spec_bench(const SpecBenchInput& in, int threads) {
    EngineOptions options;
    options.n_threads = threads;
    options.device = in.device;
    options.lock_weights = in.lock_weights;
    std::unique_ptr<Engine> engine = Engine::load(resolve_model_path(in.model), options);
    const Json messages = Json::array({{{"role", "user"}, {"content", request_text(in.prompt_file)}}});
    const std::string prompt = engine->render_chat(messages, Json(), /*add_generation_prompt=*/true);
    GenerationOptions generation;
    generation.max_tokens = in.n_gen;
    generation.sampling.temperature = 0.0f;
    engine->set_speculative(in.spec);  // first: a draft model that does not fit fails before any reply
    const Replies spec = timed_replies(*engine, prompt, generation, in.reps);
    engine->set_speculative(SpecOptions());
    const Replies plain = timed_replies(*engine, prompt, generation, in.reps);
    const CompletionMetrics& s = spec.sum;
    return Json{{"threads", threads},
                {"prompt_tokens", spec.prompt_tokens},
                {"plain_decode_tps", rates_json(plain.decode_tps)},
                {"spec_decode_tps", rates_json(spec.decode_tps)},
                {"speedup", ratio(median(spec.decode_tps), median(plain.decode_tps))},
                {"decode_tokens", s.decode_tokens},
                {"decode_steps", s.decode_steps},
                {"tokens_per_step", ratio(static_cast<double>(s.decode_tokens), static_cast<double>(s.decode_steps))},
                {"draft_tokens", s.draft_tokens},
                {"draft_accepted", s.draft_accepted},
                {"acceptance_rate", ratio(static_cast<double>(s.draft_accepted), static_cast<double>(s.draft_tokens))},
                {"same_output", plain.text == spec.text}};
}

Json spec_bench_settings(const SpecBenchInput& in) {
    return Json{{"spec_type", spec_type_name(in.spec.type)},
                {"draft_model", in.spec.draft_model},
                {"draft_max", in.spec.draft_max},
                {"prompt", in.prompt_file.empty() ? "built-in code edit" : in.prompt_file},
                {"max_tokens", in.n_gen},
                {"reps", in.reps},
                {"warmup", 1}};
}

void print_spec_bench(const Json& settings, const std::vector<Json>& rows) {
    const std::string draft = settings["draft_model"].get<std::string>();
    std::printf("\nspeculative decoding: %s%s%s, draft_max %zu; greedy reply of at most %zu tokens to %s\n",
                settings["spec_type"].get<std::string>().c_str(), draft.empty() ? "" : " with ", draft.c_str(),
                settings["draft_max"].get<size_t>(), settings["max_tokens"].get<size_t>(),
                settings["prompt"].get<std::string>().c_str());
    std::printf("threads | plain tok/s | spec tok/s | speedup | accepted/drafted | accept %% | tok/step | same text\n");
    std::printf("--------+-------------+------------+---------+------------------+----------+----------+----------\n");
    for (const Json& r : rows) {
        const std::string counts =
            std::to_string(r["draft_accepted"].get<size_t>()) + "/" + std::to_string(r["draft_tokens"].get<size_t>());
        std::printf("%7d | %11.2f | %10.2f | %6.2fx | %16s | %7.1f%% | %8.2f | %s\n", r["threads"].get<int>(),
                    r["plain_decode_tps"]["median"].get<double>(), r["spec_decode_tps"]["median"].get<double>(),
                    r["speedup"].get<double>(), counts.c_str(), 100.0 * r["acceptance_rate"].get<double>(),
                    r["tokens_per_step"].get<double>(), r["same_output"].get<bool>() ? "yes" : "NO");
    }
}

}  // namespace cactus::cli
