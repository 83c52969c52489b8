// Tool-call arguments that arrive as JSON strings are re-parsed under the same limits as the
// request that carried them: nested past kMaxJsonDepth they stay text.
#include <gtest/gtest.h>

#include <string>

#include "api/request.h"
#include "chat/json_parse.h"
#include "core/error.h"

namespace cactus {
namespace {

std::string nested_objects(int depth) {
    std::string s;
    for (int k = 0; k < depth; ++k) s += "{\"a\":";
    return s + "1" + std::string(static_cast<size_t>(depth), '}');
}

nlohmann::ordered_json arguments_after_parse(const std::string& arguments) {
    nlohmann::ordered_json call = {{"type", "function"}, {"function", {{"name", "f"}, {"arguments", arguments}}}};
    nlohmann::ordered_json messages = nlohmann::ordered_json::array(
        {{{"role", "user"}, {"content", "hi"}},
         {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", nlohmann::ordered_json::array({call})}}});
    nlohmann::ordered_json parsed = api::parse_messages(messages.dump().c_str());
    return parsed[1]["tool_calls"][0]["function"]["arguments"];
}

TEST(RequestLimits, ToolCallArgumentStringsGetTheRequestLimits) {
    EXPECT_TRUE(arguments_after_parse(nested_objects(kMaxJsonDepth)).is_object());
    EXPECT_TRUE(arguments_after_parse(nested_objects(kMaxJsonDepth + 1)).is_string());
    EXPECT_TRUE(arguments_after_parse(nested_objects(100000)).is_string());
    EXPECT_TRUE(arguments_after_parse("not json").is_string());
}

}  // namespace
}  // namespace cactus

namespace cactus {
namespace {

// OpenAI's developer role is accepted; an assistant's reasoning reaches the template untouched
// (the family's ToolFormat::prepare_messages aliases its names as transformers does).
TEST(RequestMessages, DeveloperRoleAndReasoningPassThrough) {
    nlohmann::ordered_json parsed = api::parse_messages(
        R"([{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "reasoning_content": "plan", "tool_calls": [
              {"type": "function", "function": {"name": "f", "arguments": "{\"a\": [1, {\"b\": null}]}"}}]}])");
    EXPECT_EQ(parsed[0]["role"], "developer");
    EXPECT_EQ(parsed[2]["reasoning_content"], "plan");
    EXPECT_EQ(parsed[2]["tool_calls"][0]["function"]["arguments"],
              nlohmann::ordered_json::parse(R"({"a": [1, {"b": null}]})"));
    EXPECT_THROW(api::parse_messages(R"([{"role": "narrator", "content": "x"}])"), Error);
}

}  // namespace
}  // namespace cactus
