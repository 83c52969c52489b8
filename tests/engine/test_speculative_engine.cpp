// Speculative decoding on real models: greedy replies with prompt lookup and with a draft model are
// the plain replies token for token, the session's cache afterwards is what plain decoding leaves
// or holds the reply's last token too (the next turn reuses it), and a drafter with another vocabulary is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "common/test_models.h"
#include "core/error.h"
#include "engine/engine.h"

using namespace cactus;

namespace {

// Edits whose replies copy much of the prompt (drafts accepted) and change parts of it (rejected).
const char* const kPrompts[] = {
    "Rename the variable `total` to `acc` and output the whole function:\n```python\ndef weighted(values, "
    "weights):\n    total = 0\n    for v, w in zip(values, weights):\n        if w <= 0:\n            continue\n "
    "       total += v * w\n    return total\n```",
    "Add a docstring to this function and output it whole:\n```python\ndef clamp(x, lo, hi):\n    if x < lo:\n   "
    "     return lo\n    if x > hi:\n        return hi\n    return x\n```",
    "Convert this loop to a list comprehension, output the function:\n```python\ndef squares(n):\n    out = []\n  "
    "  for i in range(n):\n        if i % 2 == 0:\n            out.append(i * i)\n    return out\n```",
    "Fix the off-by-one error and output the corrected C function:\n```c\nint sum(const int* a, int n) {\n    int "
    "s = 0;\n    for (int i = 0; i <= n; ++i) s += a[i];\n    return s;\n}\n```",
    "What is the capital of France? Answer in one sentence.",
};

std::string chat(Engine& e, const std::string& user) {
    nlohmann::ordered_json messages = {{{"role", "user"}, {"content", user}}};
    return e.render_chat(messages, nlohmann::ordered_json(), true);
}

struct Reply {
    std::vector<int32_t> tokens;
    std::vector<int32_t> cached;
    CompletionMetrics metrics;
};

Reply run(Engine& e, const SpecOptions& spec, const std::string& prompt, size_t max_tokens) {
    e.set_speculative(spec);
    e.reset();
    GenerationOptions g;
    g.max_tokens = max_tokens;
    CompletionResult r = e.complete(prompt, g, nullptr);
    return {r.tokens, e.cached_tokens(), r.metrics};
}

SpecOptions spec_of(SpecType type, const std::string& draft = "") {
    SpecOptions s;
    s.type = type;
    s.draft_model = draft;
    s.draft_max = 8;
    s.adaptive = false;  // draft at every step: the rollback paths run whatever the timing
    return s;
}

// Under the sanitizers (scripts/test.sh sets CACTUS_SANITIZER_RUN) the first two prompts: they
// already accept and reject drafts of both drafters, so every rollback path runs, at a fifth of the
// ~4 minutes that all five cost there; the Release run checks all five.
size_t prompts_to_run(size_t all) {
    const char* env = std::getenv("CACTUS_SANITIZER_RUN");
    return env != nullptr && env[0] == '1' ? std::min<size_t>(all, 2) : all;
}

// Returns {drafted, accepted} over the prompts.
std::pair<size_t, size_t> same_replies(const std::string& model, const std::string& draft, size_t n_prompts,
                                       size_t max_tokens, KvRequest kv = {}) {
    EngineOptions o;
    o.n_ctx = 1024;
    o.n_threads = 2;
    o.kv = kv;
    auto e = Engine::load(cactus::testing::test_model_path(model), o);
    size_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < prompts_to_run(n_prompts); ++i) {
        const std::string prompt = chat(*e, kPrompts[i]);
        const Reply plain = run(*e, spec_of(SpecType::off), prompt, max_tokens);
        std::vector<SpecOptions> modes = {spec_of(SpecType::ngram)};
        if (!draft.empty()) modes.push_back(spec_of(SpecType::draft, cactus::testing::test_model_path(draft)));
        for (const SpecOptions& mode : modes) {
            const Reply got = run(*e, mode, prompt, max_tokens);
            EXPECT_EQ(got.tokens, plain.tokens) << model << " " << spec_type_name(mode.type) << " prompt " << i;
            // The cache holds the prompt and the reply (its last token too when a kept draft put it there).
            std::vector<int32_t> whole = plain.cached;
            whole.insert(whole.end(), plain.tokens.end() - (plain.tokens.empty() ? 0 : 1), plain.tokens.end());
            EXPECT_GE(got.cached.size(), plain.cached.size()) << spec_type_name(mode.type) << " prompt " << i;
            EXPECT_LE(got.cached.size(), whole.size()) << spec_type_name(mode.type) << " prompt " << i;
            EXPECT_TRUE(got.cached.size() <= whole.size() &&
                        std::equal(got.cached.begin(), got.cached.end(), whole.begin()))
                << model << " " << spec_type_name(mode.type) << " prompt " << i;
            EXPECT_LE(got.metrics.draft_accepted, got.metrics.draft_tokens);
            EXPECT_EQ(got.metrics.decode_tokens, got.tokens.size());
            drafted += got.metrics.draft_tokens;
            accepted += got.metrics.draft_accepted;
        }
    }
    return {drafted, accepted};
}

void expect_same_replies(const std::string& model, const std::string& draft, size_t n_prompts, size_t max_tokens,
                         KvRequest kv = {}) {
    const auto [drafted, accepted] = same_replies(model, draft, n_prompts, max_tokens, kv);
    EXPECT_GT(accepted, 0u) << "no draft was ever accepted: the edits copy their input";
    EXPECT_LT(accepted, drafted) << "no draft was ever rejected: the rollback went untested";
}

}  // namespace

TEST(SpeculativeEngine, GreedyRepliesAreThePlainOnesWithLookupAndADraftModel) {
    expect_same_replies("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b", 5, 40);
}

// Gemma 3: sliding-window rings (a verification step writes rows a rollback must give back) with
// f16 and int8 KV.
TEST(SpeculativeEngine, GreedyRepliesAreThePlainOnesOnSlidingRingsAndInt8Kv) {
    expect_same_replies("gemma3-270m", "", 4, 48);
    KvRequest int8;
    int8.type = static_cast<int>(KvType::I8);
    expect_same_replies("gemma3-270m", "", 4, 48, int8);
}

// Gemma 4's layout (random weights at CI size): KV-shared layers read rows a verification step
// wrote and a rollback drops. Random weights predict nothing prompt lookup could find, so the model
// drafts for itself (its drafts are the greedy tokens; those its catch-up prefill computed slightly
// differently get rejected, which rolls back shared layers too).
TEST(SpeculativeEngine, GreedyRepliesAreThePlainOnesWithKvSharedLayers) {
    EngineOptions o;
    o.n_ctx = 512;
    const std::string path = cactus::testing::test_model_path("gemma4-reduced-q4_0");
    auto e = Engine::load(path, o);
    GenerationOptions g;
    g.max_tokens = 40;
    g.ignore_eos = true;
    const std::vector<int32_t> prompt = e->tokenize_prompt(chat(*e, kPrompts[0]));
    const CompletionResult plain = e->complete_tokens(prompt, g, nullptr);
    e->set_speculative(spec_of(SpecType::draft, path));
    e->reset();
    const CompletionResult got = e->complete_tokens(prompt, g, nullptr);
    EXPECT_EQ(got.tokens, plain.tokens);
    EXPECT_GT(got.metrics.draft_tokens, 0u);
    EXPECT_LT(got.metrics.decode_steps, plain.metrics.decode_steps);
}

TEST(SpeculativeEngine, ANextTurnReusesTheCacheASpeculativeReplyLeft) {
    EngineOptions o;
    o.n_ctx = 1024;
    auto e = Engine::load(cactus::testing::test_model_path("qwen2.5-coder-0.5b"), o);
    e->set_speculative(spec_of(SpecType::ngram));
    GenerationOptions g;
    g.max_tokens = 32;
    const std::string first = chat(*e, kPrompts[0]);
    CompletionResult r1 = e->complete(first, g, nullptr);
    ASSERT_GT(r1.metrics.draft_tokens, 0u);
    // The second prompt extends the first with the reply: only the new part is computed.
    const std::string second = first + r1.text +
                               "<|im_end|>\n<|im_start|>user\nNow rename it back.<|im_end|>\n"
                               "<|im_start|>assistant\n";
    CompletionResult r2 = e->complete(second, g, nullptr);
    EXPECT_LT(r2.metrics.prefill_tokens, r2.metrics.prompt_tokens - r1.metrics.prompt_tokens);
    // The same as a fresh engine without drafts gives.
    auto fresh = Engine::load(cactus::testing::test_model_path("qwen2.5-coder-0.5b"), o);
    CompletionResult want = fresh->complete(second, g, nullptr);
    EXPECT_EQ(r2.tokens, want.tokens);
}

TEST(SpeculativeEngine, ADrafterWithAnotherVocabularyIsAClearErrorAndChangesNothing) {
    EngineOptions o;
    o.n_ctx = 512;
    auto e = Engine::load(cactus::testing::test_model_path("qwen2.5-coder-0.5b"), o);
    e->set_speculative(spec_of(SpecType::ngram));
    try {
        e->set_speculative(spec_of(SpecType::draft, cactus::testing::test_model_path("smollm2-135m")));
        FAIL() << "a drafter with another vocabulary was accepted";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("vocabulary"), std::string::npos) << err.what();
    }
    EXPECT_EQ(e->speculative().type, SpecType::ngram);
    SpecOptions no_model = spec_of(SpecType::draft);
    EXPECT_THROW(e->set_speculative(no_model), Error);
    GenerationOptions g;
    g.max_tokens = 4;
    EXPECT_EQ(e->complete(chat(*e, "Hi"), g, nullptr).tokens.size(), 4u);
}
