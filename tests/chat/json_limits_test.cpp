// One JSON parser with one set of limits for every document, including JSON nested inside JSON
// strings (tool-call arguments in requests and in model output) and contexts built in memory.
// Run on a 256 KiB stack, as the engine is, with documents far deeper than the limit.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "chat/chat_template.h"
#include "chat/json_parse.h"
#include "chat/output_parser.h"
#include "common/small_stack.h"
#include "core/error.h"

namespace cactus {
using cactus::testing::on_small_stack;

namespace {

std::string nested_objects(int depth) {
    std::string s;
    for (int k = 0; k < depth; ++k) s += "{\"a\":";
    s += "1";
    s += std::string(static_cast<size_t>(depth), '}');
    return s;
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

TEST(JsonLimits, DepthAndSizeNamedInErrors) {
    EXPECT_EQ(parse_json(nested_objects(kMaxJsonDepth), "doc").is_object(), true);
    std::string deep = error_of([] { parse_json(nested_objects(kMaxJsonDepth + 1), "doc"); });
    EXPECT_NE(deep.find("kMaxJsonDepth"), std::string::npos) << deep;
    EXPECT_NE(deep.find("doc"), std::string::npos) << deep;
    // Brackets inside strings are text, not nesting.
    EXPECT_TRUE(parse_json("[\"" + std::string(1000, '[') + "\"]", "doc").is_array());
    std::string big(kMaxJsonBytes + 1, ' ');
    EXPECT_NE(error_of([&] { parse_json(big, "doc"); }).find("kMaxJsonBytes"), std::string::npos);
    EXPECT_NE(error_of([] { parse_json("{", "doc"); }).find("not valid JSON"), std::string::npos);
    nlohmann::ordered_json out;
    EXPECT_FALSE(try_parse_json(nested_objects(kMaxJsonDepth + 1), out));
    EXPECT_FALSE(try_parse_json("{", out));
    EXPECT_TRUE(try_parse_json("{\"x\": [1]}", out));
}

TEST(JsonLimits, ToolCallArgumentsInModelOutputOnSmallStack) {
    on_small_stack([] {
        const std::string args = nested_objects(200000);
        const std::string text = "{\"name\": \"f\", \"arguments\": " + nlohmann::ordered_json(args).dump() + "}";
        ParsedReply reply = parse_reply(text, /*tools_offered=*/true);
        ASSERT_EQ(reply.function_calls.size(), 1u);
        EXPECT_TRUE(reply.function_calls[0]["arguments"].is_string());  // kept as text, not parsed
        // Within the limit the arguments are parsed.
        const std::string ok =
            "{\"name\": \"f\", \"arguments\": " + nlohmann::ordered_json(nested_objects(10)).dump() + "}";
        EXPECT_TRUE(parse_reply(ok, true).function_calls[0]["arguments"].is_object());
    });
}

TEST(JsonLimits, DeepContextBuiltInMemoryFailsCleanlyOnSmallStack) {
    on_small_stack([] {
        nlohmann::json deep = 1;
        for (int k = 0; k < 200000; ++k) {
            nlohmann::json wrap = nlohmann::json::object();
            wrap["a"] = std::move(deep);
            deep = std::move(wrap);
        }
        ChatTemplate t("{{ messages|length }}");
        nlohmann::json context = {{"messages", nlohmann::json::array()}};
        context["messages"].push_back(std::move(deep));
        std::string err = error_of([&] { t.render(context); });
        EXPECT_NE(err.find("kMaxJsonDepth"), std::string::npos) << err;
        nlohmann::ordered_json ordered = {{"messages", nlohmann::ordered_json::array()}};
        nlohmann::ordered_json deep_ordered = parse_json(nested_objects(kMaxJsonDepth), "doc");
        for (int k = 0; k < 10; ++k) deep_ordered = nlohmann::ordered_json::array({deep_ordered});
        ordered["messages"].push_back(deep_ordered);
        err = error_of([&] { t.render_ordered(ordered); });
        EXPECT_NE(err.find("kMaxJsonDepth"), std::string::npos) << err;
    });
}

}  // namespace
}  // namespace cactus
