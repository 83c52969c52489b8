// The request's grammar (api/constraints.h) for thinking families: with thinking on, a forced
// call or a JSON reply may first think in the family's own block (Gemma 4's <|channel>...<channel|>,
// Qwen's <think>...</think>); when the prompt opened the block, the reply starts inside it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/constraints.h"
#include "chat/output_parser.h"
#include "chat/tool_format.h"
#include "engine/engine.h"
#include "sampling/grammar.h"

namespace cactus {
namespace {

using json = nlohmann::ordered_json;

GrammarVocab& vocab() {
    static GrammarVocab g = [] {
        std::vector<std::string> bytes = {""};  // 0: end of generation
        for (int c = 32; c < 127; ++c) bytes.push_back(std::string(1, static_cast<char>(c)));
        for (const char* w : {"\n", "<|tool_call>", "<tool_call|>", "<|\"|>", "<|channel>", "<channel|>", "<think>",
                              "</think>", "<tool_call>", "</tool_call>"})
            bytes.push_back(w);
        return GrammarVocab(bytes, {0});
    }();
    return g;
}

json tools() {
    return json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

GrammarConstraint constraint(const ToolFormat& format, const api::ApiOptions& o, bool opened) {
    std::optional<ConstraintSpec> spec = api::constraint_for(format, tools(), o, opened);
    EXPECT_TRUE(spec.has_value());
    return GrammarConstraint(vocab().compile(*spec));
}

bool accepts_whole(const ToolFormat& format, const api::ApiOptions& o, bool opened, const std::string& text) {
    GrammarConstraint c = constraint(format, o, opened);
    return c.accept_text(text) && c.complete();
}

const std::string kCall = "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>";

TEST(ToolConstraints, Gemma4ForcedCallMayThinkInItsChannelFirst) {
    std::unique_ptr<ToolFormat> gemma4 = make_gemma4_format();
    api::ApiOptions o;
    o.force_tools = true;
    o.enable_thinking = true;
    EXPECT_TRUE(accepts_whole(*gemma4, o, false, kCall));
    EXPECT_TRUE(accepts_whole(*gemma4, o, false, "<|channel>thought\nCity given.<channel|>" + kCall));
    EXPECT_FALSE(accepts_whole(*gemma4, o, false, "<think>x</think>" + kCall));
    GrammarConstraint text_first = constraint(*gemma4, o, false);
    EXPECT_FALSE(text_first.accept_text("Sure"));
    o.enable_thinking = false;
    EXPECT_FALSE(accepts_whole(*gemma4, o, false, "<|channel>thought\nx<channel|>" + kCall));
}

TEST(ToolConstraints, Gemma4PromptOpenedThoughtIsClosedBeforeTheCall) {
    // After tool results with thinking on, the prompt ends with <|channel>thought\n.
    std::unique_ptr<ToolFormat> gemma4 = make_gemma4_format();
    api::ApiOptions o;
    o.force_tools = true;
    const std::string reply = "Oslo again.<channel|>" + kCall;
    EXPECT_TRUE(accepts_whole(*gemma4, o, true, reply));
    GrammarConstraint unclosed = constraint(*gemma4, o, true);
    EXPECT_TRUE(unclosed.accept_text(kCall));  // still thinking: any text
    EXPECT_FALSE(unclosed.complete());
    ParsedReply parsed = parse_reply(*gemma4, "<|channel>" + reply, true);  // the API puts the open marker back
    EXPECT_EQ(parsed.thinking, "Oslo again.");
    ASSERT_EQ(parsed.function_calls.size(), 1u);
    EXPECT_EQ(parsed.function_calls[0]["arguments"]["city"], "Oslo");
}

TEST(ToolConstraints, JsonRepliesThinkInTheFamilysBlock) {
    api::ApiOptions o;
    o.enable_thinking = true;
    o.response_format = json{{"type", "json_object"}};
    EXPECT_TRUE(accepts_whole(*make_gemma4_format(), o, false, "<|channel>thought\nx<channel|>{\"a\": 1}"));
    EXPECT_TRUE(accepts_whole(*make_hermes_format(), o, false, "<think>x</think>{\"a\": 1}"));
    EXPECT_FALSE(accepts_whole(*make_hermes_format(), o, false, "<|channel>x<channel|>{\"a\": 1}"));
}

TEST(ToolConstraints, ForcedCallsMayFollowOneAnotherUnlessParallelCallsAreOff) {
    struct Case {
        std::unique_ptr<ToolFormat> format;
        std::string call, separator;
    };
    Case cases[] = {
        {make_gemma4_format(), kCall, ""},
        {make_hermes_format(),
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", "\n"}};
    for (const Case& c : cases) {
        api::ApiOptions o;
        o.force_tools = true;
        EXPECT_TRUE(accepts_whole(*c.format, o, false, c.call + c.separator + c.call)) << c.call;
        o.parallel_tool_calls = false;
        EXPECT_TRUE(accepts_whole(*c.format, o, false, c.call)) << c.call;
        GrammarConstraint one = constraint(*c.format, o, false);
        ASSERT_TRUE(one.accept_text(c.call));
        EXPECT_FALSE(one.accept_text(c.separator + c.call.substr(0, 3))) << "a second call after the first";
    }
}

TEST(ToolConstraints, LazyGrammarEngagesAtItsTriggerOnly) {
    // Free text says nothing about the grammar: an end-of-turn token there is the model's, and
    // ignore_eos keeps it out; once the trigger appeared the grammar shapes the reply.
    std::unique_ptr<ToolFormat> gemma4 = make_gemma4_format();
    api::ApiOptions o;
    GrammarConstraint lazy = constraint(*gemma4, o, false);
    EXPECT_FALSE(lazy.engaged());
    ASSERT_TRUE(lazy.accept_text("Let me look <|tool"));  // the trigger split across pieces
    EXPECT_FALSE(lazy.engaged());
    ASSERT_TRUE(lazy.accept_text("_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>"));
    EXPECT_TRUE(lazy.engaged());
    EXPECT_TRUE(lazy.complete());  // the call is whole: the reply may end here

    GrammarConstraint mid_call = constraint(*gemma4, o, false);
    ASSERT_TRUE(mid_call.accept_text("<|tool_call>call:get_weather{city:"));
    EXPECT_TRUE(mid_call.engaged());
    EXPECT_FALSE(mid_call.complete());  // an end-of-turn token is masked by the grammar

    o.force_tools = true;
    EXPECT_TRUE(constraint(*gemma4, o, false).engaged());  // a forced call shapes it from the start
}

TEST(ToolConstraints, IgnoreEosLetsTheEndInOnlyWhereAGrammarShapesTheReply) {
    std::unique_ptr<ToolFormat> gemma4 = make_gemma4_format();
    api::ApiOptions o;
    GrammarConstraint lazy = constraint(*gemma4, o, false);
    GenerationOptions g;
    EXPECT_TRUE(end_of_turn_allowed(g, nullptr));
    EXPECT_TRUE(end_of_turn_allowed(g, &lazy));
    g.ignore_eos = true;
    EXPECT_FALSE(end_of_turn_allowed(g, nullptr));
    EXPECT_FALSE(end_of_turn_allowed(g, &lazy));
    ASSERT_TRUE(lazy.accept_text(kCall));
    EXPECT_TRUE(end_of_turn_allowed(g, &lazy));
}

}  // namespace
}  // namespace cactus
