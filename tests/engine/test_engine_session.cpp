// The engine on a real model: sampling reproducibility, stop sequences, max tokens, and the
// session's prefix reuse.
#include <gtest/gtest.h>

#include "chat/builtin_templates.h"
#include "common/test_models.h"
#include "core/error.h"
#include "engine/engine.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

using namespace cactus;

namespace {

Engine& smollm() {
    static std::unique_ptr<Engine> engine = [] {
        EngineOptions o;
        o.n_ctx = 2048;
        return Engine::load(cactus::testing::test_model_path("smollm2-135m"), o);
    }();
    return *engine;
}

std::string chat_prompt(Engine& e, const std::string& user) {
    nlohmann::ordered_json messages = {{{"role", "user"}, {"content", user}}};
    return e.render_chat(messages, nlohmann::ordered_json(), true);
}

}  // namespace

TEST(EngineSession, SameSeedSameText) {
    Engine& e = smollm();
    GenerationOptions g;
    g.max_tokens = 20;
    g.sampling.temperature = 0.9f;
    g.sampling.top_k = 40;
    g.sampling.seed = 1234;
    std::string prompt = chat_prompt(e, "Tell me a story.");
    CompletionResult a = e.complete(prompt, g, nullptr);
    e.reset();
    CompletionResult b = e.complete(prompt, g, nullptr);
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.tokens, b.tokens);
    g.sampling.seed = 99;
    e.reset();
    CompletionResult c = e.complete(prompt, g, nullptr);
    EXPECT_NE(a.tokens, c.tokens);
}

TEST(EngineSession, MaxTokensAndStreamingPiecesJoinToText) {
    Engine& e = smollm();
    GenerationOptions g;
    g.max_tokens = 7;
    g.ignore_eos = true;
    std::string streamed;
    CompletionResult r =
        e.complete(chat_prompt(e, "Hello"), g, [&](const std::string& piece, int32_t) { streamed += piece; });
    EXPECT_EQ(r.tokens.size(), 7u);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(streamed, r.text);
    EXPECT_EQ(r.metrics.decode_tokens, 7u);
    EXPECT_GT(r.metrics.decode_tps, 0.0);
}

TEST(EngineSession, StopSequenceIsMatchedOnTextAndNotReturned) {
    Engine& e = smollm();
    GenerationOptions g;
    g.max_tokens = 60;
    g.stop_sequences = {"5"};
    e.reset();
    CompletionResult r = e.complete(chat_prompt(e, "Count from 1 to 10, separated by commas."), g, nullptr);
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_EQ(r.text.find('5'), std::string::npos) << r.text;
    EXPECT_NE(r.text.find('4'), std::string::npos) << r.text;
}

TEST(EngineSession, ExtendingThePromptComputesOnlyTheSuffix) {
    Engine& e = smollm();
    e.reset();
    GenerationOptions g;
    g.max_tokens = 4;
    std::vector<int32_t> first = e.tokenize_prompt(chat_prompt(e, "What is 2+2?"));
    CompletionResult a = e.complete_tokens(first, g, nullptr);
    EXPECT_EQ(a.metrics.prefill_tokens, first.size());
    std::vector<int32_t> second = first;
    for (int32_t t : e.tokenize_prompt(" And 3+3?")) second.push_back(t);
    CompletionResult b = e.complete_tokens(second, g, nullptr);
    EXPECT_EQ(b.metrics.prompt_tokens, second.size());
    EXPECT_EQ(b.metrics.prefill_tokens, second.size() - first.size());
    // The same prompt again recomputes only its last token.
    CompletionResult c = e.complete_tokens(second, g, nullptr);
    EXPECT_EQ(c.metrics.prefill_tokens, 1u);
    EXPECT_EQ(b.tokens, c.tokens);
    // A different prompt reuses the common prefix only.
    std::vector<int32_t> other = e.tokenize_prompt(chat_prompt(e, "What is 9+9?"));
    CompletionResult d = e.complete_tokens(other, g, nullptr);
    EXPECT_LT(d.metrics.prefill_tokens, other.size());
    e.reset();
    CompletionResult f = e.complete_tokens(other, g, nullptr);
    EXPECT_EQ(f.metrics.prefill_tokens, other.size());
    EXPECT_EQ(d.tokens, f.tokens);  // reuse gives the same result as recomputing
}

TEST(EngineSession, PromptLongerThanContextIsAClearError) {
    Engine& e = smollm();
    std::vector<int32_t> huge(5000, 100);
    GenerationOptions g;
    try {
        e.complete_tokens(huge, g, nullptr);
        FAIL() << "no error";
    } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("context"), std::string::npos);
    }
    std::vector<int32_t> bad = {1, -5};
    EXPECT_THROW(e.complete_tokens(bad, g, nullptr), Error);
    g.max_tokens = 2;
    EXPECT_NO_THROW(e.complete(chat_prompt(e, "Hi"), g, nullptr));
}

// EngineOptions::chat_template replaces the GGUF's template (llama-server's --chat-template):
// SmolLM2's own adds a default system turn, ChatML renders only the user's.
TEST(EngineSession, ChatTemplateOptionReplacesTheFilesTemplate) {
    EngineOptions o;
    o.n_ctx = 256;
    o.chat_template = *builtin_chat_template_named("chatml");
    std::unique_ptr<Engine> e = Engine::load(cactus::testing::test_model_path("smollm2-135m"), o);
    EXPECT_EQ(e->chat_template_source(), o.chat_template);
    EXPECT_EQ(chat_prompt(*e, "hi"), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    EXPECT_NE(chat_prompt(smollm(), "hi"), chat_prompt(*e, "hi"));
}

// EngineOptions::kv reaches the model (llama-server's -ctk/-ctv q8_0 → int8 rows).
TEST(EngineSession, KvOptionReachesTheModel) {
    EngineOptions o;
    o.n_ctx = 256;
    o.n_seq = 2;
    o.kv.type = static_cast<int>(KvType::I8);
    std::unique_ptr<Engine> e = Engine::load(cactus::testing::test_model_path("smollm2-135m"), o);
    EXPECT_EQ(e->model().info().kv.type, KvType::I8);
}
