// Per-family tool-call formats: conversations with tool calls rendered through the families'
// published templates (tests/chat/templates) by our Jinja engine and parsed back into the same
// calls; Python-call and FunctionGemma literals read and written; streaming hides the markers.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "chat/call_syntax.h"
#include "chat/chat_template.h"
#include "chat/output_parser.h"
#include "chat/stream_filter.h"
#include "chat/tool_format.h"

using json = nlohmann::ordered_json;
using namespace cactus;

namespace {

std::string read_template(const std::string& name) {
    std::ifstream in(std::string(CACTUS_SOURCE_DIR) + "/tests/chat/templates/" + name);
    EXPECT_TRUE(in.good()) << name;
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

json tools_fixture() {
    return json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
          "unit": {"type": "string", "enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "create_event", "description": "Calendar event",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"},
          "attendees": {"type": "array", "items": {"type": "object", "properties": {
             "name": {"type": "string"}, "optional": {"type": "boolean"}}, "required": ["name"]}},
          "slot": {"type": "object", "properties": {"start": {"type": "string"}, "hours": {"type": "number"}}},
          "notes": {"type": ["string", "null"]}}, "required": ["title"]}}}
    ])");
}

// Typed calls: strings with quotes, newlines and non-ASCII, numbers, booleans, null, nesting.
json typed_calls() {
    return json::parse(R"([
      {"name": "get_weather", "arguments": {"city": "São Paulo, \"SP\"\nBR", "unit": "c", "days": 3}},
      {"name": "create_event", "arguments": {"title": "Sync", "attendees": [{"name": "Ana", "optional": false},
        {"name": "Bo", "optional": true}], "slot": {"start": "09:30", "hours": 1.5}, "notes": null}}
    ])");
}

// Same calls with only string values (templates that print every value as text).
json string_calls() {
    return json::parse(R"([
      {"name": "get_weather", "arguments": {"city": "Paris, FR", "unit": "c"}},
      {"name": "create_event", "arguments": {"title": "Team sync: Q3 plan"}}
    ])");
}

json openai_calls(const json& calls) {
    json out = json::array();
    int i = 0;
    for (const json& c : calls)
        out.push_back(json{{"id", "call_" + std::to_string(i++)}, {"type", "function"}, {"function", c}});
    return out;
}

std::string render(const std::string& source, const ToolFormat& format, const json& messages, bool add_prompt) {
    json ctx = {{"messages", format.prepare_messages(messages)},
                {"tools", tools_fixture()},
                {"add_generation_prompt", add_prompt},
                {"bos_token", "<s>"},
                {"eos_token", "</s>"}};
    return ChatTemplate(source).render_ordered(ctx);
}

// Renders [user] + generation prompt and [user, assistant with calls]; the assistant's part is
// the difference. Parses it back with the family's parser.
json round_trip(const std::string& template_name, const json& calls, const std::string& expected_family,
                const std::string& end_of_turn) {
    std::string source = read_template(template_name);
    std::unique_ptr<ToolFormat> format = tool_format_for(source);
    EXPECT_EQ(format->name(), expected_family) << template_name;
    json user = {{"role", "user"}, {"content", "Plan my day"}};
    json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", openai_calls(calls)}};
    std::string prompt = render(source, *format, json::array({user}), true);
    std::string full = render(source, *format, json::array({user, assistant}), false);
    EXPECT_EQ(full.compare(0, prompt.size(), prompt), 0) << "prompt is not a prefix:\n" << prompt << "\n---\n" << full;
    std::string reply = full.substr(std::min(prompt.size(), full.size()));
    size_t eot = reply.rfind(end_of_turn);
    EXPECT_NE(eot, std::string::npos) << reply;
    if (eot != std::string::npos) reply = reply.substr(0, eot);
    ParsedReply parsed = parse_reply(*format, reply, true);
    EXPECT_EQ(tool_format::trim(parsed.response), "") << reply;
    return parsed.function_calls;
}

}  // namespace

TEST(ToolFormats, FamilyChosenFromTemplate) {
    EXPECT_EQ(tool_format_for(read_template("qwen2_5.jinja"))->name(), "hermes");
    EXPECT_EQ(tool_format_for(read_template("qwen3.jinja"))->name(), "hermes");
    EXPECT_EQ(tool_format_for(read_template("lfm2.jinja"))->name(), "lfm2");
    EXPECT_EQ(tool_format_for(read_template("tools/functiongemma.jinja"))->name(), "gemma");
    EXPECT_EQ(tool_format_for(read_template("llama3_2.jinja"))->name(), "json");
    EXPECT_EQ(tool_format_for(read_template("chatml.jinja"))->name(), "json");
}

TEST(ToolFormats, HermesRoundTripQwen25) {
    EXPECT_EQ(round_trip("qwen2_5.jinja", typed_calls(), "hermes", "<|im_end|>"), typed_calls());
}

TEST(ToolFormats, HermesRoundTripQwen3) {
    EXPECT_EQ(round_trip("qwen3.jinja", typed_calls(), "hermes", "<|im_end|>"), typed_calls());
}

TEST(ToolFormats, Lfm2RoundTrip) {
    // LFM2's template renders only content: the format writes the calls in Python syntax first.
    EXPECT_EQ(round_trip("lfm2.jinja", typed_calls(), "lfm2", "<|im_end|>"), typed_calls());
}

TEST(ToolFormats, GemmaRoundTrip) {
    // The published FunctionGemma template prints every value between <escape> markers as text.
    EXPECT_EQ(round_trip("tools/functiongemma.jinja", string_calls(), "gemma", "<end_of_turn>"), string_calls());
}

TEST(ToolFormats, JsonRoundTripLlama32) {
    // Llama 3.2's template takes one call per message.
    json one = json::array({typed_calls()[1]});
    EXPECT_EQ(round_trip("llama3_2.jinja", one, "json", "<|eot_id|>"), one);
}

TEST(ToolFormats, JsonRoundTripChatmlContent) {
    // ChatML renders no tool_calls: the JSON format writes them into the content.
    EXPECT_EQ(round_trip("chatml.jinja", typed_calls(), "json", "<|im_end|>"), typed_calls());
}

TEST(ToolFormats, RenderThenParseEveryFamilyTyped) {
    for (auto make : {make_hermes_format, make_lfm2_format, make_gemma_format, make_json_format}) {
        std::unique_ptr<ToolFormat> f = make();
        std::string text = "Sure.\n" + f->render_calls(typed_calls());
        ParsedReply r = parse_reply(*f, text, true);
        EXPECT_EQ(r.function_calls, typed_calls()) << f->name() << ": " << text;
        EXPECT_EQ(r.response, "Sure.") << f->name();
    }
}

TEST(ToolFormats, PythonCallSyntax) {
    json calls = json::array();
    ASSERT_TRUE(read_python_calls(
        R"(f(a="x", b='it\'s', n=-3, x=2.5e3, t=True, u=False, v=None, l=[1, (2, 3)], d={"k": {'z': [None]}}), g())",
        calls));
    EXPECT_EQ(calls, json::parse(R"([{"name":"f","arguments":{"a":"x","b":"it's","n":-3,"x":2500.0,"t":true,"u":false,
        "v":null,"l":[1,[2,3]],"d":{"k":{"z":[null]}}}},{"name":"g","arguments":{}}])"));
    for (const char* bad : {"f(", "f(a=)", "f(a=1 b=2)", "f(\"x\")", "f(a=\"open)", "1f()", "f(a=[1,2)", ""}) {
        json none = json::array();
        EXPECT_FALSE(read_python_calls(bad, none)) << bad;
        EXPECT_TRUE(none.empty()) << bad;
    }
    std::string deep = "f(a=" + std::string(100, '[') + std::string(100, ']') + ")";
    json none = json::array();
    EXPECT_FALSE(read_python_calls(deep, none));  // nesting bound, not a stack overflow
}

TEST(ToolFormats, GemmaCallSyntax) {
    json calls = json::array();
    ASSERT_TRUE(read_gemma_call(
        "call:set{a:<escape>x, {y}: \"z\"<escape>,n:1,ok:true,l:[1,<escape>s<escape>],o:{k:null}}", calls));
    EXPECT_EQ(calls,
              json::parse(
                  R"([{"name":"set","arguments":{"a":"x, {y}: \"z\"","n":1,"ok":true,"l":[1,"s"],"o":{"k":null}}}])"));
    json none = json::array();
    EXPECT_FALSE(read_gemma_call("call:set{a:<escape>x}", none));
    EXPECT_FALSE(read_gemma_call("set{a:1}", none));
}

TEST(ToolFormats, UnparseableCallsStayInTheText) {
    std::unique_ptr<ToolFormat> f = make_hermes_format();
    ParsedReply r = parse_reply(*f, "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}\n</tool_call>", true);
    EXPECT_TRUE(r.function_calls.empty());
    EXPECT_NE(r.response.find("oops"), std::string::npos);
}

TEST(ToolFormats, ThinkingSeparated) {
    std::unique_ptr<ToolFormat> f = make_hermes_format();
    ParsedReply r =
        parse_reply(*f, "<think>\nweather needs a tool\n</think>\n\n" + f->render_calls(typed_calls()), true);
    EXPECT_EQ(r.thinking, "weather needs a tool");
    EXPECT_EQ(r.function_calls, typed_calls());
    EXPECT_EQ(r.response, "");
}

TEST(StreamFilter, NeverEmitsMarkersWhateverThePieces) {
    std::mt19937 rng(7);
    for (auto make : {make_hermes_format, make_lfm2_format, make_gemma_format}) {
        std::unique_ptr<ToolFormat> f = make();
        const std::string visible = "Let me check < that <tool and <|tool_x.";
        std::string text =
            "<think>plan</think>" + visible + f->render_calls(json::array({typed_calls()[1]})) + " Done.";
        for (int trial = 0; trial < 50; ++trial) {
            StreamFilter filter(f->hidden_regions());
            std::string shown;
            for (size_t pos = 0; pos < text.size();) {
                size_t n = 1 + rng() % 7;
                shown += filter.push(text.substr(pos, n));
                pos += n;
            }
            shown += filter.finish();
            EXPECT_EQ(shown, visible + " Done.") << f->name();
        }
    }
}
