// ignore_eos with tools offered, through the C API on the real small models: the lazy tool-call
// grammar never ends a reply it was not triggered in (the reply runs to max_tokens, as without
// tools), and a forced call ends the reply right after the call as it does without ignore_eos.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/capi_fixture.h"

namespace cactus::testing {
namespace {

using nlohmann::json;

// Twenty small tools, as the crash report's app offers.
std::string twenty_tools() {
    json tools = json::array();
    for (int i = 0; i < 20; ++i) {
        json parameters = {{"type", "object"},
                           {"properties", {{"query", {{"type", "string"}}}, {"limit", {{"type", "integer"}}}}},
                           {"required", {"query"}}};
        tools.push_back({{"type", "function"},
                         {"function",
                          {{"name", "tool_" + std::to_string(i)},
                           {"description", "Looks up item " + std::to_string(i) + " of the user's data."},
                           {"parameters", parameters}}}});
    }
    return tools.dump();
}

json complete(cactus_model_t model, const std::string& messages, const std::string& options) {
    std::vector<char> buffer(1 << 17);
    const std::string tools = twenty_tools();
    int rc = cactus_complete(model, messages.c_str(), buffer.data(), buffer.size(), options.c_str(), tools.c_str(),
                             nullptr, nullptr, nullptr, 0);
    EXPECT_GT(rc, 0) << cactus_get_last_error();
    return rc > 0 ? json::parse(buffer.data()) : json::object();
}

// A greeting the models answer in a few tokens and then end their turn.
const std::string kShortAnswer = R"([{"role":"user","content":"Say hi in one word."}])";

class IgnoreEosWithTools : public ::testing::TestWithParam<const char*> {};

TEST_P(IgnoreEosWithTools, UntriggeredToolGrammarRunsToMaxTokens) {
    cactus_model_t model = shared_model(GetParam());
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    int without_call = 0;
    for (int seed : {7, 8, 9}) {
        cactus_reset(model);
        const std::string options =
            R"({"max_tokens":48,"ignore_eos":true,"temperature":0.7,"enable_thinking_if_supported":true,)"
            R"("seed":)" +
            std::to_string(seed) + "}";
        json r = complete(model, kShortAnswer, options);
        ASSERT_TRUE(r.value("success", false)) << r.dump();
        if (!r["function_calls"].empty()) continue;  // the model chose a call: its grammar may end the reply
        ++without_call;
        EXPECT_EQ(r["decode_tokens"], 48) << "seed " << seed << ": " << r.dump();
        EXPECT_EQ(r["finish_reason"], "length") << "seed " << seed;
    }
    EXPECT_GT(without_call, 0) << "every seed called a tool: the test checks nothing";
}

TEST_P(IgnoreEosWithTools, ForcedCallEndsTheReplyRightAfterTheCall) {
    // The forced grammar shapes the reply from its first token, so ignore_eos changes nothing: the
    // end of turn is allowed once the call is whole (with parallel calls off, nothing else is) and
    // ends the reply there. A rule that kept end-of-turn tokens out here would leave the grammar
    // with no next token.
    cactus_model_t model = shared_model(GetParam());
    ASSERT_NE(model, nullptr) << cactus_get_last_error();
    json replies[2];
    for (bool ignore_eos : {false, true}) {
        cactus_reset(model);
        const std::string options = std::string(R"({"max_tokens":120,"temperature":0.7,"seed":7,"force_tools":true,)") +
                                    R"("parallel_tool_calls":false,"ignore_eos":)" + (ignore_eos ? "true}" : "false}");
        replies[ignore_eos] = complete(model, kShortAnswer, options);
        ASSERT_TRUE(replies[ignore_eos].value("success", false)) << replies[ignore_eos].dump();
    }
    const json& r = replies[1];
    ASSERT_EQ(r["function_calls"].size(), 1u) << r.dump();
    EXPECT_EQ(r["function_calls"][0]["name"].get<std::string>().rfind("tool_", 0), 0u) << r.dump();
    EXPECT_EQ(r["finish_reason"], "stop") << r.dump();
    EXPECT_LT(r["decode_tokens"].get<int>(), 120);
    EXPECT_EQ(r["response"], "") << "nothing follows the call";
    EXPECT_EQ(r["decode_tokens"], replies[0]["decode_tokens"]);
    EXPECT_EQ(r["function_calls"], replies[0]["function_calls"]);
}

INSTANTIATE_TEST_SUITE_P(RealModels, IgnoreEosWithTools, ::testing::Values("smollm2-135m", "gemma3-270m"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             std::string name = info.param;
                             for (char& c : name)
                                 if (c == '-' || c == '.') c = '_';
                             return name;
                         });

}  // namespace
}  // namespace cactus::testing
