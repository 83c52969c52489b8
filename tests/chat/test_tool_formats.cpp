// Per-family tool-call formats: conversations with tool calls rendered through the families'
// published templates (tests/chat/templates) by our Jinja engine and parsed back into the same
// calls; Python-call and (Function)Gemma literals read and written; streaming hides the markers.
// Gemma 4 (below): llama.cpp's parser cases, nesting, truncation, thinking, message preparation.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/builtin_templates.h"
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
    EXPECT_EQ(tool_format_for(read_template("gemma4_e2b.jinja"))->name(), "gemma4");
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
    for (auto make : {make_hermes_format, make_lfm2_format, make_gemma_format, make_gemma4_format, make_json_format}) {
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
    for (auto make : {make_hermes_format, make_lfm2_format, make_gemma_format, make_gemma4_format}) {
        std::unique_ptr<ToolFormat> f = make();
        const std::string visible = "Let me check < that <tool and <|tool_x.";
        const HiddenRegion think = f->thinking_region();
        std::string text =
            think.open + "plan" + think.close + visible + f->render_calls(json::array({typed_calls()[1]})) + " Done.";
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

// ---- Gemma 4: <|tool_call>call:f{k:<|"|>v<|"|>}<tool_call|>, thinking in <|channel>...<channel|> ----

namespace {

// Key order aside (the template writes arguments in dictsort order).
nlohmann::json unordered(const json& j) { return nlohmann::json::parse(j.dump()); }

ParsedReply gemma4_parse(const std::string& text, bool tools = true) {
    return parse_reply(*make_gemma4_format(), text, tools);
}

json one_call(const std::string& name, const std::string& arguments) {
    return json::array({json{{"name", name}, {"arguments", json::parse(arguments)}}});
}

}  // namespace

TEST(Gemma4Format, BuiltinTemplateIsTheCommittedE2bTemplate) {
    EXPECT_EQ(builtin_chat_template("gemma4"), read_template("gemma4_e2b.jinja"));
    EXPECT_EQ(tool_format_for(builtin_chat_template("gemma4"))->name(), "gemma4");
    EXPECT_NE(builtin_chat_template("gemma3"), builtin_chat_template("gemma4"));
}

// llama-server's --chat-template names that we carry; others are refused by the server.
TEST(BuiltinTemplates, NamedAsLlamaServerNamesThem) {
    ASSERT_NE(builtin_chat_template_named("chatml"), nullptr);
    EXPECT_EQ(*builtin_chat_template_named("chatml"), builtin_chat_template("llama"));
    ASSERT_NE(builtin_chat_template_named("gemma"), nullptr);
    EXPECT_EQ(*builtin_chat_template_named("gemma"), builtin_chat_template("gemma3"));
    EXPECT_EQ(builtin_chat_template_named("llama3"), nullptr);
    EXPECT_EQ(builtin_chat_template_named(""), nullptr);
}

// llama.cpp's tests/test-chat.cpp cases for its Gemma 4 parser (common/parsers/gemma4.cpp).
TEST(Gemma4Format, LlamaCppParserCases) {
    const std::string q = "<|\"|>";
    struct Case {
        std::string text, thinking, response;
        json calls;
    };
    const std::vector<Case> cases = {
        {"Hello, world!", "", "Hello, world!", json::array()},
        {"<|channel>thought\nI'm\nthinking<channel|>Hello, world!\nWhat's up?", "I'm\nthinking",
         "Hello, world!\nWhat's up?", json::array()},
        {"<|channel>thought<channel|>Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?", json::array()},
        {"<|tool_call>call:get_time{city:" + q + "London" + q + "}<tool_call|>", "", "",
         one_call("get_time", R"({"city": "London"})")},
        {"<|tool_call>call:get_time{city:" + q + "San Francisco" + q + "}<tool_call|>", "", "",
         one_call("get_time", R"({"city": "San Francisco"})")},
        {"<|tool_call>call:empty_args{}<tool_call|>", "", "", one_call("empty_args", "{}")},
        {"Hello, world!\nWhat's up?<|tool_call>call:get_time{city:" + q + "Paris" + q + "}<tool_call|>", "",
         "Hello, world!\nWhat's up?", one_call("get_time", R"({"city": "Paris"})")},
        {"<|channel>thought\nI'm\nthinking<channel|><|tool_call>call:get_time{city:" + q + "Paris" + q +
             "}<tool_call|>",
         "I'm\nthinking", "", one_call("get_time", R"({"city": "Paris"})")},
        {"<|tool_call>call:get_time{city:" + q + "London" + q + "}<tool_call|><|tool_call>call:get_weather{city:" + q +
             "Paris" + q + "}<tool_call|>",
         "", "", json::parse(R"([{"name":"get_time","arguments":{"city":"London"}},
                         {"name":"get_weather","arguments":{"city":"Paris"}}])")},
        {"<|tool_call>call:special_function{arg1:42}<tool_call|>", "", "",
         one_call("special_function", R"({"arg1": 42})")},
        {"<|tool_call>call:special_function{arg1:-7}<tool_call|>", "", "",
         one_call("special_function", R"({"arg1": -7})")},
        {"<|tool_call>call:amount{orig:3.14}<tool_call|>", "", "", one_call("amount", R"({"orig": 3.14})")},
        {"<|tool_call>call:toggle{enabled:true}<tool_call|>", "", "", one_call("toggle", R"({"enabled": true})")},
        {"<|tool_call>call:toggle{enabled:false}<tool_call|>", "", "", one_call("toggle", R"({"enabled": false})")},
        {"<|tool_call>call:set_nullable{value:null}<tool_call|>", "", "",
         one_call("set_nullable", R"({"value": null})")},
        {"<|tool_call>call:todo_list{todos:[" + q + "buy milk" + q + "," + q + "walk dog" + q + "]}<tool_call|>", "",
         "", one_call("todo_list", R"({"todos":["buy milk","walk dog"]})")},
        {"<|tool_call>call:set_config{config:{theme:" + q + "dark" + q + ",count:3}}<tool_call|>", "", "",
         one_call("set_config", R"({"config":{"theme":"dark","count":3}})")},
        {"<|tool_call>call:todo_list{todos:[]}<tool_call|>", "", "", one_call("todo_list", R"({"todos":[]})")},
        {"<|tool_call>call:set_config{config:{}}<tool_call|>", "", "", one_call("set_config", R"({"config":{}})")},
        {"<|tool_call>call:amount{orig:1.5e10}<tool_call|>", "", "", one_call("amount", R"({"orig": 1.5e10})")},
        // Edge cases: empty thoughts, trailing empty thoughts and stray channel markers.
        {"<|channel>thought\n<channel|>Hello, world!\nWhat's up?<channel|>", "", "Hello, world!\nWhat's up?",
         json::array()},
        {"<|channel>thought\n<channel|>Hello, world!\nWhat's up?<|channel>thought\n<channel|>", "",
         "Hello, world!\nWhat's up?", json::array()},
        {"<|channel>thought\n<channel|>Hello, world!\nWhat's up?<|channel>thought\n<channel|><channel|>", "",
         "Hello, world!\nWhat's up?", json::array()},
        {"<|channel><|channel>thought\n<channel|>Hello, world!\nWhat's up?", "", "Hello, world!\nWhat's up?",
         json::array()},
    };
    for (const Case& c : cases) {
        ParsedReply r = gemma4_parse(c.text);
        EXPECT_EQ(r.thinking, c.thinking) << c.text;
        EXPECT_EQ(r.response, c.response) << c.text;
        EXPECT_EQ(r.function_calls, c.calls) << c.text;
    }
}

TEST(Gemma4Format, NestedValuesNamesKeysAndDelimitersInsideStrings) {
    const std::string q = "<|\"|>";
    json calls = json::array();
    ASSERT_TRUE(read_gemma_call("call:fs.read-file{path:" + q + "a, {b}: [c] \"d\"\n" + q +
                                    ",opts:{deep:[[1,[2.5e-3,null]],{k:" + q + q + "}],My Key: true, n:-0.5}}",
                                calls, CallSyntax::gemma4));
    EXPECT_EQ(calls, json::parse(R"([{"name":"fs.read-file","arguments":{"path":"a, {b}: [c] \"d\"\n",
        "opts":{"deep":[[1,[0.0025,null]],{"k":""}],"My Key":true,"n":-0.5}}}])"));
    // A delimiter not followed by , } or ] is text: a string may quote the delimiter itself.
    calls = json::array();
    ASSERT_TRUE(read_gemma_call("call:say{text:" + q + "use " + q + "x" + q + " to quote" + q + ",n:1}", calls,
                                CallSyntax::gemma4));
    EXPECT_EQ(calls[0]["arguments"]["text"], "use " + q + "x" + q + " to quote");
    // Python's str() of floats as the template writes them.
    calls = json::array();
    ASSERT_TRUE(
        read_gemma_call("call:f{a:1e+20,b:1e-07,c:15000000000.0,d:9007199254740993}", calls, CallSyntax::gemma4));
    EXPECT_EQ(calls[0]["arguments"], json::parse(R"({"a":1e20,"b":1e-7,"c":15000000000.0,"d":9007199254740993})"));
    // Beyond 64 bits an integer is kept as a double; beyond the double range a number saturates
    // (the grammar lets any digits through; the call is otherwise valid).
    calls = json::array();
    ASSERT_TRUE(
        read_gemma_call("call:f{a:123456789012345678901234,b:1e309,c:-77.89E497,d:1e-400}", calls, CallSyntax::gemma4));
    EXPECT_DOUBLE_EQ(calls[0]["arguments"]["a"].get<double>(), 1.2345678901234568e23);
    EXPECT_EQ(calls[0]["arguments"]["b"].get<double>(), std::numeric_limits<double>::max());
    EXPECT_EQ(calls[0]["arguments"]["c"].get<double>(), -std::numeric_limits<double>::max());
    EXPECT_EQ(calls[0]["arguments"]["d"].get<double>(), 0.0);
    calls = json::array();
    for (const char* bad : {"call:f{a:1e}", "call:f{a:1.}", "call:f{a:-}", "call:f{a:1e+}"})
        EXPECT_FALSE(read_gemma_call(bad, calls, CallSyntax::gemma4)) << bad;
    // FunctionGemma's syntax is the same reader with <escape>.
    calls = json::array();
    ASSERT_TRUE(read_gemma_call("call:f{a:<escape>x<escape>}", calls));
    EXPECT_FALSE(read_gemma_call("call:f{a:" + q + "x" + q + "}", calls));
    EXPECT_EQ(write_call(json::parse(R"({"name":"f","arguments":{"s":"x","l":[true,null],"o":{"k":1.5}}})"),
                         CallSyntax::gemma4),
              "call:f{s:" + q + "x" + q + ",l:[true,null],o:{k:1.5}}");
}

TEST(Gemma4Format, MalformedCallsStayTextAndCutOffOnesLeaveWithoutCrashing) {
    const std::string q = "<|\"|>";
    for (const std::string& bad :
         {"<|tool_call>call:f{a:" + q + "x}<tool_call|>", std::string("<|tool_call>call:f{a:1<tool_call|>"),
          std::string("<|tool_call>call:{a:1}<tool_call|>"), std::string("<|tool_call>call:f{a:[1,2}<tool_call|>"),
          std::string("<|tool_call>call:f{a:1,}x<tool_call|>"), std::string("<|tool_call>f{a:1}<tool_call|>"),
          std::string("<|tool_call>call:f{:1}<tool_call|>"), std::string("<|tool_call>call:f{a:tru}<tool_call|>"),
          std::string("<|tool_call>call:f g{a:1}<tool_call|>"), std::string("<|tool_call>"),
          std::string("<|tool_call>call:f"),
          "<|tool_call>call:f{a:" + std::string(200, '[') + std::string(200, ']') + "}"}) {
        ParsedReply r = gemma4_parse("before " + bad);
        EXPECT_TRUE(r.function_calls.empty()) << bad;
        // A closed block that is no call stays as text; one cut off before its close marker (a
        // reply that hit max_tokens) leaves the response, as it never reached the stream.
        const bool closed = bad.find("<tool_call|>") != std::string::npos;
        EXPECT_EQ(r.response, closed ? "before " + bad : "before ") << bad;
    }
    // Every prefix of a reply with thinking and two calls: no crash; whatever parses is one of the
    // calls in full (an unterminated last block is read to the end, so only complete ones parse).
    std::unique_ptr<ToolFormat> f = make_gemma4_format();
    const std::string full = "<|channel>thought\nplan<channel|>Checking." + f->render_calls(typed_calls());
    for (size_t n = 0; n <= full.size(); ++n) {
        ParsedReply r = gemma4_parse(full.substr(0, n));
        for (size_t i = 0; i < r.function_calls.size(); ++i) EXPECT_EQ(r.function_calls[i], typed_calls()[i]) << n;
        EXPECT_EQ(r.response.find("<|channel>"), std::string::npos) << n;
    }
    EXPECT_EQ(gemma4_parse(full).function_calls, typed_calls());
}

TEST(Gemma4Format, HostileRepliesAreBoundedInTime) {
    const std::string q = "<|\"|>";
    std::string many_delims = "<|tool_call>call:f{a:";
    for (int i = 0; i < 100000; ++i) many_delims += q + "x";
    std::string many_closes = "<|tool_call>call:f{a:" + q;
    for (int i = 0; i < 100000; ++i) many_closes += "<tool_call|>";
    for (const std::string& text : {many_delims, many_closes}) {
        auto start = std::chrono::steady_clock::now();
        ParsedReply r = gemma4_parse(text);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_TRUE(r.function_calls.empty());
        EXPECT_LT(s, 5.0);
    }
}

TEST(Gemma4Format, RoundTripThroughTheE2bTemplate) {
    // The template writes the call and, with no result yet, ends the reply with <|tool_response>.
    json calls = round_trip("gemma4_e2b.jinja", typed_calls(), "gemma4", "<|tool_response>");
    EXPECT_EQ(unordered(calls), unordered(typed_calls()));
}

TEST(Gemma4Format, ThinkingOpenedByThePrompt) {
    std::unique_ptr<ToolFormat> f = make_gemma4_format();
    const std::vector<HiddenRegion> regions = f->hidden_regions();
    // After tool results with thinking on, the prompt ends inside the thought.
    const int opened = region_open_at_end(regions, "...<tool_response|><|channel>thought\n");
    ASSERT_GE(opened, 0);
    EXPECT_EQ(regions[static_cast<size_t>(opened)].open, "<|channel>");
    EXPECT_EQ(region_open_at_end(regions, "<|turn>model\n"), -1);
    EXPECT_EQ(region_open_at_end(regions, "<|channel>thought\nold\n<channel|>Answer.<turn|>\n<|turn>model\n"), -1);
    EXPECT_EQ(region_open_at_end(regions, "<|channel>thought\nplain text the user wrote, then more"), -1);
    const std::string reply = "compare both<channel|>Paris is warmer.";
    ParsedReply r = gemma4_parse(regions[static_cast<size_t>(opened)].open + reply);
    EXPECT_EQ(r.thinking, "compare both");
    EXPECT_EQ(r.response, "Paris is warmer.");
    StreamFilter filter(regions, opened);
    std::string shown;
    for (char c : reply) shown += filter.push(std::string(1, c));
    shown += filter.finish();
    EXPECT_EQ(shown, "Paris is warmer.");
    // Qwen-style <think> opened by the prompt behaves the same.
    std::unique_ptr<ToolFormat> hermes = make_hermes_format();
    EXPECT_GE(region_open_at_end(hermes->hidden_regions(), "<|im_start|>assistant\n<think>\n"), 0);
}

TEST(Gemma4Format, ThinkingNeverReachesTheStreamOrTheResponse) {
    std::mt19937 rng(11);
    std::unique_ptr<ToolFormat> f = make_gemma4_format();
    const std::string text =
        "<|channel>thought\nfirst <b>plan</b><channel|>Visible <|x <channel "
        "text." +
        f->render_calls(typed_calls()) + "<channel|> Tail.<|channel>thought\n<channel|>";
    ParsedReply r = gemma4_parse(text);
    EXPECT_EQ(r.thinking, "first <b>plan</b>");
    EXPECT_EQ(r.response, "Visible <|x <channel text. Tail.");
    EXPECT_EQ(r.function_calls, typed_calls());
    for (int trial = 0; trial < 50; ++trial) {
        StreamFilter filter(f->hidden_regions());
        std::string shown;
        for (size_t pos = 0; pos < text.size();) {
            size_t n = 1 + rng() % 9;
            shown += filter.push(text.substr(pos, n));
            pos += n;
        }
        shown += filter.finish();
        EXPECT_EQ(shown, "Visible <|x <channel text. Tail.");
    }
    // Without tools the calls stay in the response, the thinking still leaves it.
    ParsedReply no_tools = gemma4_parse(text, false);
    EXPECT_EQ(no_tools.thinking, "first <b>plan</b>");
    EXPECT_NE(no_tools.response.find("<|tool_call>call:get_weather"), std::string::npos);
}

TEST(Gemma4Format, MessagesPreparedAsTransformersDoes) {
    std::unique_ptr<ToolFormat> f = make_gemma4_format();
    json messages = json::parse(R"([
      {"role": "user", "content": "x"},
      {"role": "assistant", "content": "", "thinking": "plan", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"n\": 1, \"s\": \"t\"}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
        {"id": "c", "type": "function", "function": {"name": "h", "arguments": "[1]"}}]},
      {"role": "assistant", "content": "y", "reasoning": "why"}
    ])");
    json out = f->prepare_messages(messages);
    EXPECT_EQ(out[1]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"n": 1, "s": "t"})"));
    EXPECT_EQ(out[1]["tool_calls"][1]["function"]["arguments"], "not json");  // the template raises on it
    EXPECT_EQ(out[1]["tool_calls"][2]["function"]["arguments"], "[1]");
    EXPECT_EQ(out[1]["reasoning_content"], "plan");
    EXPECT_EQ(out[2]["reasoning_content"], "why");
    EXPECT_EQ(out[2]["thinking"], "why");
    EXPECT_EQ(out[2].begin().key(), "thinking");  // {"thinking": r, **message, "reasoning_content": r}
    EXPECT_EQ(out[0], messages[0]);
}

TEST(Gemma4Format, FinishPromptOpensTheModelTurnTheTemplateLeftClosed) {
    std::unique_ptr<ToolFormat> f = make_gemma4_format();
    auto finished = [&](std::string prompt, bool add) {
        f->finish_prompt(prompt, add);
        return prompt;
    };
    EXPECT_EQ(finished("...<tool_response|>Let me check.<turn|>\n", true),
              "...<tool_response|>Let me check.<turn|>\n<|turn>model\n");
    EXPECT_EQ(finished("...Let me check.<turn|>\n<|channel>thought\n", true),
              "...Let me check.<turn|>\n<|turn>model\n");
    EXPECT_EQ(finished("...<turn|>\n", false), "...<turn|>\n");
    EXPECT_EQ(finished("...<|turn>model\n", true), "...<|turn>model\n");
    EXPECT_EQ(finished("...<tool_response|><|channel>thought\n", true), "...<tool_response|><|channel>thought\n");
    EXPECT_EQ(finished("...<tool_call|><|tool_response>", true), "...<tool_call|><|tool_response>");
    // Other families leave prompts alone.
    std::string p = "<|im_end|>\n";
    make_hermes_format()->finish_prompt(p, true);
    EXPECT_EQ(p, "<|im_end|>\n");
}

TEST(Gemma4Format, ShownMarkersIncludeTheStringDelimiter) {
    std::vector<std::string> m = make_gemma4_format()->shown_markers();
    for (const char* marker : {"<|tool_call>", "<tool_call|>", "<|channel>", "<channel|>", "<|\"|>"})
        EXPECT_NE(std::find(m.begin(), m.end(), marker), m.end()) << marker;
}

TEST(Gemma4Format, MarkersInsideStringArgumentsStayInTheCall) {
    std::unique_ptr<ToolFormat> f = make_gemma4_format();
    json calls = json::parse(R"([{"name":"note","arguments":{
        "text":"a <tool_call|> b <|channel>c<channel|> d <|tool_call>call:x{} e","n":1}}])");
    ParsedReply r = gemma4_parse("<|channel>thought\nt<channel|>Ok." + f->render_calls(calls) + " after");
    EXPECT_EQ(r.function_calls, calls);
    EXPECT_EQ(r.thinking, "t");
    EXPECT_EQ(r.response, "Ok. after");
    // Cut off right after the call (no close marker): still one call; cut inside it: text.
    const std::string block = f->render_calls(calls);
    EXPECT_EQ(gemma4_parse(block.substr(0, block.size() - std::string("<tool_call|>").size())).function_calls, calls);
    EXPECT_TRUE(gemma4_parse(block.substr(0, block.size() - 20)).function_calls.empty());
}

// The early large-model template (inside llama.cpp's ggml-vocab-gemma-4.gguf) reads results only
// from the calling message's tool_responses: OpenAI role:tool messages are folded into it, as
// llama.cpp does for such templates. The E2B template scans role:tool messages itself.
TEST(Gemma4Format, EarlyTemplatesGetToolResultsFolded) {
    json messages = json::parse(R"([
      {"role": "user", "content": "Weather and time?"},
      {"role": "assistant", "content": "", "reasoning_content": "both", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": {"city": "Tokyo"}}}]},
      {"role": "tool", "tool_call_id": "c2", "content": "{\"t\": \"09:30\"}"},
      {"role": "tool", "tool_call_id": "zz", "content": [{"type": "text", "text": "sun"}, {"type": "text", "text": "ny"}]},
      {"role": "assistant", "content": "Sunny, 09:30."},
      {"role": "user", "content": "Thanks"}
    ])");
    const std::string early = read_template("gemma4_early.jinja");
    std::unique_ptr<ToolFormat> f = tool_format_for(early);
    ASSERT_EQ(f->name(), "gemma4");
    json prepared = f->prepare_messages(messages);
    ASSERT_EQ(prepared.size(), 3u);
    EXPECT_EQ(prepared[1]["tool_responses"], json::parse(R"([{"name": "get_time", "response": {"t": "09:30"}},
                                                             {"name": "get_time", "response": "sunny"}])"));
    EXPECT_EQ(prepared[1]["content"], "Sunny, 09:30.");
    EXPECT_EQ(prepared[1]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"city": "Paris"})"));
    json ctx = {{"messages", prepared}, {"add_generation_prompt", true}, {"bos_token", "<bos>"}};
    std::string text = ChatTemplate(early).render_ordered(ctx);
    EXPECT_NE(text.find("<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>"), std::string::npos) << text;
    EXPECT_NE(text.find("<|tool_response>response:get_time{t:<|\"|>09:30<|\"|>}<tool_response|>"), std::string::npos)
        << text;
    EXPECT_EQ(text.find("<|turn>tool"), std::string::npos) << text;
    // The E2B template keeps the messages as given.
    std::unique_ptr<ToolFormat> e2b = tool_format_for(read_template("gemma4_e2b.jinja"));
    EXPECT_EQ(e2b->prepare_messages(messages).size(), messages.size());
}
