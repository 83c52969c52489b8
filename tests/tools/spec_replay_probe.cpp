// Replays recorded greedy replies through speculative decoding with a modelled step cost, to weigh
// drafting policies in seconds instead of the hours real models take (docs/SPECULATIVE.md):
//
//   spec_replay_probe record TARGET.gguf PROMPTS.jsonl OUT.jsonl [--max-tokens N] [--threads N]
//   spec_replay_probe replay RECORDS.jsonl [--costs N:X,...] [--unit-ms M] [--ngram MIN:MAX]
//
// record: each prompt (one JSON object per line with "id", "kind", "messages") rendered with the
// target's chat template, tokenized, and its plain greedy reply; one JSON line each with the ids.
//
// replay: for each record, the reply decoded by TokenSource + SpecDecoder (prompt lookup, adaptive)
// against a target whose rows put the recorded reply's next token first, and whose steps of n
// tokens take cost(n) units of wall time (a spin; --costs gives a verification step's cost in
// one-token steps, interpolated between the points, default the AVX2 1-thread table of
// docs/SPECULATIVE.md). Greedy speculative replies are the plain replies token for token, so what
// the drafter gets kept is what it would get on the real model. Prints per record the speedup over
// plain decoding in the cost model's steps (the policy itself times its steps by the clock, which
// the spins set), lookup's acceptance and tokens per step, and the speedup of an oracle that
// verifies exactly the kept part of every draft (what the drafter allows at best).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/speculative.h"
#include "sampling/sampler.h"

using namespace cactus;
using json = nlohmann::ordered_json;

namespace {

// ---- record ----

int record(int argc, char** argv) {
    if (argc < 5) fail("usage: spec_replay_probe record TARGET PROMPTS OUT [--max-tokens N] [--threads N]");
    size_t max_tokens = 128;
    int threads = 2;
    for (int i = 5; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const long v = std::strtol(argv[i + 1], nullptr, 10);
        if (v <= 0) fail("spec_replay_probe: %s needs a positive number", k.c_str());
        if (k == "--max-tokens")
            max_tokens = static_cast<size_t>(v);
        else if (k == "--threads")
            threads = static_cast<int>(v);
        else
            fail("spec_replay_probe: unknown option %s", k.c_str());
    }
    EngineOptions o;
    o.n_threads = threads;
    o.n_ctx = 2048;
    auto engine = Engine::load(argv[2], o);
    std::ifstream in(argv[3]);
    if (!in) fail("spec_replay_probe: cannot read %s", argv[3]);
    std::ofstream out(argv[4]);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto row = json::parse(line);
        const std::string prompt = engine->render_chat(row.at("messages"), json(), true);
        engine->reset();
        GenerationOptions g;
        g.max_tokens = max_tokens;
        const CompletionResult r = engine->complete(prompt, g, nullptr);
        out << json{{"id", row.at("id")},
                    {"kind", row.value("kind", "")},
                    {"prompt", engine->tokenize_prompt(prompt)},
                    {"reply", r.tokens}}
                   .dump()
            << "\n";
        std::cerr << row.at("id").get<std::string>() << ": " << r.tokens.size() << " tokens\n";
    }
    return 0;
}

// ---- replay ----

// A verification step's cost in one-token steps, linear between the given points (and past the
// last, with the slope of the last two).
class StepCost {
public:
    explicit StepCost(const std::string& spec) {
        points_[1] = 1.0;
        size_t at = 0;
        while (at < spec.size()) {
            const size_t comma = std::min(spec.find(',', at), spec.size());
            const std::string item = spec.substr(at, comma - at);
            size_t n = 0;
            double x = 0.0;
            char tail = 0;
            if (std::sscanf(item.c_str(), "%zu:%lf%c", &n, &x, &tail) != 2 || n < 2 || !(x >= 1.0))
                fail("spec_replay_probe: cost '%s' is not N:X (N >= 2 tokens, X >= 1 one-token steps)", item.c_str());
            points_[n] = x;
            at = comma + 1;
        }
        if (points_.size() < 2) fail("spec_replay_probe: --costs needs at least one point past 1");
    }
    double operator()(size_t n) const {
        auto hi = points_.lower_bound(n);
        if (hi != points_.end() && hi->first == n) return hi->second;
        if (hi == points_.end()) --hi;
        auto lo = std::prev(hi);
        const double slope = (hi->second - lo->second) / static_cast<double>(hi->first - lo->first);
        return lo->second + slope * (static_cast<double>(n) - static_cast<double>(lo->first));
    }

private:
    std::map<size_t, double> points_;
};

void spin(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
    }
}

// The recorded conversation as a model: the row after position p puts the token the record has at
// p + 1 first (the reply's next token); past the record, token 0. Ids are dense (remapped). The
// appended ids are not read: a row after a wrong draft is never judged (judging stops at the first
// rejected draft), so every row judged follows the record's own tokens.
class ReplayTarget final : public SpecTarget {
public:
    ReplayTarget(std::vector<int32_t> truth, size_t n_vocab, const StepCost& cost, double unit_s)
        : truth_(std::move(truth)), n_vocab_(n_vocab), cost_(cost), unit_s_(unit_s) {}
    void append_scored(const int32_t* /*ids*/, size_t n, std::vector<float>* logits) override {
        if (cached_ > 0) {  // the prompt's prefill is not timed
            units_ += cost_(n);
            spin(cost_(n) * unit_s_);
        }
        logits->assign(n * n_vocab_, 0.0f);
        for (size_t i = 0; i < n; ++i) {
            const size_t next = cached_ + i + 1;
            const int32_t t = next < truth_.size() ? truth_[next] : 0;
            (*logits)[i * n_vocab_ + static_cast<size_t>(t)] = 1.0f;
        }
        cached_ += n;
    }
    void keep(size_t n) override { cached_ = std::min(cached_, n); }
    size_t n_cached() const override { return cached_; }
    size_t reserve(size_t wanted) override { return wanted; }
    size_t max_step() const override { return 64; }
    double units() const { return units_; }

private:
    double units_ = 0.0;          // one-token steps of the cost model spent
    std::vector<int32_t> truth_;  // prompt then reply
    size_t n_vocab_;
    const StepCost& cost_;
    double unit_s_;
    size_t cached_ = 0;
};

struct Outcome {
    double units = 0.0;  // one-token steps of the cost model
    SpecCounters counters;
};

Outcome decode(const std::vector<int32_t>& truth, size_t prompt, size_t n_vocab, SpecDecoder* spec,
               const StepCost& cost, double unit_s) {
    ReplayTarget target(truth, n_vocab, cost, unit_s);
    Sampler sampler(SamplingParams{});
    std::vector<float> logits;
    target.append_scored(truth.data(), prompt, &logits);
    std::vector<float> last(logits.end() - std::ptrdiff_t(n_vocab), logits.end());
    TokenSource source(target, spec, sampler,
                       std::vector<int32_t>(truth.begin(), truth.begin() + std::ptrdiff_t(prompt)), last);
    const size_t n = truth.size() - prompt;
    for (size_t i = 0; i < n; ++i) {
        const int32_t t = source.next();
        if (t != truth[prompt + i]) fail("spec_replay_probe: the replay left the record at token %zu", i);
        sampler.accept(t);
        if (i + 1 < n) source.advance(t);
    }
    source.finish(prompt, n);
    Outcome o;
    o.units = target.units();
    o.counters = source.counters();
    return o;
}

// The best any policy could do with lookup's drafts: at each step the drafter's draft (up to 16),
// verified only as far as the reply keeps it; a step without a kept token is plain. In one-token
// steps of the cost model.
double oracle_cost(const std::vector<int32_t>& truth, size_t prompt, const StepCost& cost, size_t ngram_min,
                   size_t ngram_max) {
    NgramDrafter drafter(ngram_min, ngram_max);
    std::vector<int32_t> history(truth.begin(), truth.begin() + std::ptrdiff_t(prompt + 1)), draft;
    double units = 0.0;
    size_t at = prompt + 1;  // tokens known (the reply's first comes from the prefill)
    while (at < truth.size()) {
        drafter.draft(history, 16, &draft);
        size_t kept = 0;
        while (kept < draft.size() && at + kept < truth.size() && draft[kept] == truth[at + kept]) ++kept;
        units += kept == 0 ? 1.0 : cost(kept + 1);
        const size_t step = std::min(kept + 1, truth.size() - at);
        history.insert(history.end(), truth.begin() + std::ptrdiff_t(at), truth.begin() + std::ptrdiff_t(at + step));
        at += step;
    }
    return units;
}

int replay(int argc, char** argv) {
    if (argc < 3) fail("usage: spec_replay_probe replay RECORDS [--costs N:X,...] [--unit-ms M] [--ngram MIN:MAX]");
    std::string costs = "2:1.27,3:1.57,4:1.87,6:2.4,8:3.1,12:4.9";
    double unit_ms = 2.0;
    size_t ngram_min = 2, ngram_max = 4;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--costs") {
            costs = argv[i + 1];
        } else if (k == "--ngram") {
            if (std::sscanf(argv[i + 1], "%zu:%zu", &ngram_min, &ngram_max) != 2)
                fail("spec_replay_probe: --ngram takes MIN:MAX, not %s", argv[i + 1]);
        } else if (k == "--unit-ms") {
            unit_ms = std::stod(argv[i + 1]);
            if (!(unit_ms > 0.0)) fail("spec_replay_probe: --unit-ms needs a positive number");
        } else {
            fail("spec_replay_probe: unknown option %s", k.c_str());
        }
    }
    const StepCost cost(costs);
    std::ifstream in(argv[2]);
    if (!in) fail("spec_replay_probe: cannot read %s", argv[2]);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const auto row = json::parse(line);
        const auto prompt = row.at("prompt").get<std::vector<int32_t>>();
        const auto reply = row.at("reply").get<std::vector<int32_t>>();
        if (reply.size() < 2) continue;
        // Dense ids: the drafter only compares them, and the rows stay small.
        std::unordered_map<int32_t, int32_t> dense{{0, 0}};
        std::vector<int32_t> truth;
        for (const auto* part : {&prompt, &reply})
            for (int32_t id : *part) truth.push_back(dense.emplace(id, int32_t(dense.size())).first->second);
        const size_t n_vocab = dense.size();
        const Outcome plain = decode(truth, prompt.size(), n_vocab, nullptr, cost, unit_ms * 1e-3);
        SpecOptions o;
        o.type = SpecType::ngram;
        o.ngram_min = ngram_min;
        o.ngram_max = ngram_max;
        std::vector<std::unique_ptr<Drafter>> drafters;
        drafters.push_back(std::make_unique<NgramDrafter>(o.ngram_min, o.ngram_max));
        SpecDecoder spec(o, std::move(drafters));
        const Outcome s = decode(truth, prompt.size(), n_vocab, &spec, cost, unit_ms * 1e-3);
        const double plain_units = static_cast<double>(reply.size() - 1);
        const SpecCounters& c = s.counters;
        std::cout << json{{"id", row.at("id")},
                          {"kind", row.value("kind", "")},
                          {"tokens", reply.size()},
                          {"speedup", plain.units / s.units},
                          {"acceptance", c.drafted ? double(c.accepted) / double(c.drafted) : 0.0},
                          {"tokens_per_step", double(reply.size() - 1) / double(std::max<size_t>(1, c.steps))},
                          {"oracle", plain_units / oracle_cost(truth, prompt.size(), cost, ngram_min, ngram_max)}}
                         .dump()
                  << std::endl;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string mode = argc > 1 ? argv[1] : "";
        if (mode == "record") return record(argc, argv);
        if (mode == "replay") return replay(argc, argv);
        fail("usage: spec_replay_probe record|replay ...");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    }
}
