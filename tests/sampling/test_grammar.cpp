// The grammar engine behind the sampler, on a small synthetic vocabulary: random-logit walks under
// each constraint (JSON Schema, any JSON object, every family's forced tool-call syntax) must end
// in text that parses with the family's parser and validates against the schema; lazy tool
// grammars leave text free until the marker; compiled grammars are cached per spec.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "chat/output_parser.h"
#include "chat/tool_format.h"
#include "core/error.h"
#include "sampling/grammar.h"
#include "sampling/sampler.h"

using json = nlohmann::ordered_json;
using namespace cactus;

namespace {

struct Vocab {
    std::vector<std::string> bytes;
    int32_t eos = 0;
};

const Vocab& vocab() {
    static const Vocab v = [] {
        Vocab out;
        out.bytes.push_back("");  // 0: end of generation
        for (int c = 32; c < 127; ++c) out.bytes.push_back(std::string(1, static_cast<char>(c)));
        out.bytes.push_back("\n");
        for (const char* w : {"<tool_call>",
                              "</tool_call>",
                              "<|tool_call_start|>",
                              "<|tool_call_end|>",
                              "<start_function_call>",
                              "<end_function_call>",
                              "<escape>",
                              "<|tool_call>",
                              "<tool_call|>",
                              "<|\"|>",
                              "<|channel>",
                              "<channel|>",
                              "<think>",
                              "</think>",
                              "true",
                              "false",
                              "null",
                              "True",
                              "False",
                              "None",
                              "\"name\"",
                              "\"arguments\"",
                              "get_weather",
                              "create_event",
                              "call:",
                              "\": ",
                              ", ",
                              "é",
                              "日本",
                              " \"",
                              "\","})
            out.bytes.push_back(w);
        return out;
    }();
    return v;
}

GrammarVocab& grammar_vocab() {
    static GrammarVocab g(vocab().bytes, {vocab().eos});
    return g;
}

// Samples under the constraint from random logits (closing characters favoured so strings end)
// until the end token; returns false when the budget runs out first.
bool random_walk(GrammarConstraint& c, std::mt19937& rng, std::string& text, size_t budget = 4000) {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::vector<float> logits(vocab().bytes.size());
    for (size_t step = 0; step < budget; ++step) {
        for (size_t i = 0; i < logits.size(); ++i) {
            const std::string& b = vocab().bytes[i];
            float bias = i == 0 ? 3.0f : 0.0f;
            if (!b.empty() && std::string("\"}])<,").find(b[0]) != std::string::npos) bias += 2.5f;
            logits[i] = noise(rng) + bias;
        }
        c.mask(logits);
        size_t best = 0;
        for (size_t i = 1; i < logits.size(); ++i)
            if (logits[i] > logits[best]) best = i;
        EXPECT_TRUE(std::isfinite(logits[best])) << "no token allowed after: " << text;
        if (!std::isfinite(logits[best])) return false;
        EXPECT_TRUE(c.accept(static_cast<int32_t>(best)));
        if (best == 0) return true;
        text += vocab().bytes[best];
    }
    return false;
}

const json* resolve(const json& schema, const json& root) {
    if (!schema.contains("$ref")) return &schema;
    std::string ref = schema["$ref"].get<std::string>();
    const std::string prefix = "#/$defs/";
    return &root["$defs"][ref.substr(prefix.size())];
}

// A validator for the schema subset these tests use (type, enum, const, properties, required,
// additionalProperties:false by default as in strict mode, items, minItems, anyOf, $ref).
bool valid(const json& v, const json& schema_in, const json& root, std::string& why) {
    const json& s = *resolve(schema_in, root);
    if (s.contains("enum")) {
        for (const json& e : s["enum"])
            if (e == v) return true;
        why = "not in enum: " + v.dump();
        return false;
    }
    if (s.contains("const") && s["const"] != v) return why = "const", false;
    if (s.contains("anyOf")) {
        for (const json& alt : s["anyOf"])
            if (valid(v, alt, root, why)) return true;
        return why = "no anyOf branch: " + v.dump(), false;
    }
    std::set<std::string> types;
    if (s.contains("type")) {
        if (s["type"].is_array())
            for (const json& t : s["type"]) types.insert(t.get<std::string>());
        else
            types.insert(s["type"].get<std::string>());
    }
    auto is = [&](const char* t) { return types.count(t) > 0; };
    if (!types.empty()) {
        bool ok = (v.is_string() && is("string")) || (v.is_number_integer() && (is("integer") || is("number"))) ||
                  (v.is_number_float() && is("number")) || (v.is_boolean() && is("boolean")) ||
                  (v.is_null() && is("null")) || (v.is_array() && is("array")) || (v.is_object() && is("object"));
        if (!ok) return why = "type " + v.dump() + " vs " + s["type"].dump(), false;
    }
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return why = "minItems", false;
        if (s.contains("items"))
            for (const json& item : v)
                if (!valid(item, s["items"], root, why)) return false;
    }
    if (v.is_object() && s.contains("properties")) {
        for (const json& r : s.value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return why = "missing " + r.dump(), false;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!s["properties"].contains(it.key())) return why = "extra key " + it.key(), false;
            if (!valid(it.value(), s["properties"][it.key()], root, why)) return false;
        }
    }
    return true;
}

json tools_fixture() {
    return json::parse(R"([
      {"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
          "unit": {"type": "string", "enum": ["c", "f"]}, "days": {"type": "integer"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "create_event",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"},
          "attendees": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/person"}},
          "slot": {"type": "object", "properties": {"hours": {"type": "number"}, "ok": {"type": "boolean"}},
                   "required": ["hours"]},
          "notes": {"type": ["string", "null"]}}, "required": ["title", "attendees"],
          "$defs": {"person": {"type": "object", "properties": {"name": {"type": "string"},
             "role": {"anyOf": [{"type": "string", "enum": ["host", "guest"]}, {"type": "null"}]}},
             "required": ["name"]}}}}}
    ])");
}

const json& params_of(const json& tools, const std::string& name) {
    for (const json& t : tools)
        if (t["function"]["name"] == name) return t["function"]["parameters"];
    static const json none;
    return none;
}

}  // namespace

TEST(Grammar, JsonSchemaWalksAlwaysValidate) {
    json schema = params_of(tools_fixture(), "create_event");
    auto compiled = grammar_vocab().compile({ConstraintSpec::Kind::json_schema, schema.dump()});
    std::mt19937 rng(1);
    int finished = 0;
    for (int walk = 0; walk < 40; ++walk) {
        GrammarConstraint c(compiled);
        std::string text;
        if (!random_walk(c, rng, text)) continue;
        ++finished;
        EXPECT_TRUE(c.terminated());
        json parsed = json::parse(text, nullptr, false);
        ASSERT_FALSE(parsed.is_discarded()) << text;
        std::string why;
        EXPECT_TRUE(valid(parsed, schema, schema, why)) << why << "\n" << text;
    }
    EXPECT_GE(finished, 30);
}

TEST(Grammar, JsonObjectWalksAreObjects) {
    auto compiled = grammar_vocab().compile({ConstraintSpec::Kind::json_schema, R"({"type":"object"})"});
    std::mt19937 rng(2);
    for (int walk = 0; walk < 20; ++walk) {
        GrammarConstraint c(compiled);
        std::string text;
        if (!random_walk(c, rng, text)) continue;
        json parsed = json::parse(text, nullptr, false);
        EXPECT_TRUE(!parsed.is_discarded() && parsed.is_object()) << text;
    }
}

TEST(Grammar, ForcedToolCallsParseAndValidateInEveryFamily) {
    json tools = tools_fixture();
    for (auto make : {make_hermes_format, make_lfm2_format, make_gemma_format, make_gemma4_format, make_json_format}) {
        std::unique_ptr<ToolFormat> format = make();
        auto compiled =
            grammar_vocab().compile({ConstraintSpec::Kind::structural_tag, format->call_grammar(tools, true)});
        std::mt19937 rng(3);
        int finished = 0;
        for (int walk = 0; walk < 25; ++walk) {
            GrammarConstraint c(compiled);
            std::string text;
            if (!random_walk(c, rng, text)) continue;
            ++finished;
            ParsedReply reply = parse_reply(*format, text, true);
            ASSERT_FALSE(reply.function_calls.empty()) << format->name() << ": " << text;
            EXPECT_EQ(tool_format::trim(reply.response), "") << format->name() << ": " << text;
            for (const json& call : reply.function_calls) {
                const json& params = params_of(tools, call["name"].get<std::string>());
                ASSERT_FALSE(params.is_null()) << call.dump();
                std::string why;
                EXPECT_TRUE(valid(call["arguments"], params, params, why)) << format->name() << ": " << why << "\n"
                                                                           << text;
            }
        }
        EXPECT_GE(finished, 15) << format->name();
    }
}

TEST(Grammar, LazyToolGrammarIsFreeUntilTheMarker) {
    std::unique_ptr<ToolFormat> format = make_hermes_format();
    auto compiled =
        grammar_vocab().compile({ConstraintSpec::Kind::structural_tag, format->call_grammar(tools_fixture(), false)});
    GrammarConstraint free_text(compiled);
    EXPECT_TRUE(free_text.accept_text("Any text at all {\"not\": json} <tool_cal"));
    EXPECT_TRUE(free_text.complete());
    GrammarConstraint bad_call(compiled);
    EXPECT_TRUE(bad_call.accept_text("Checking. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "));
    EXPECT_FALSE(bad_call.accept_text("12"));  // city is a string
    EXPECT_TRUE(bad_call.accept_text("\"Oslo\"}}\n</tool_call>"));
    GrammarConstraint unknown(compiled);
    EXPECT_FALSE(unknown.accept_text("<tool_call>\n{\"name\": \"rm_rf\""));
}

// Gemma 4: free text until <|tool_call>, then only calls of the offered tools with arguments
// valid for their schemas, in the bare-key / <|"|>-string syntax the parser reads.
TEST(Grammar, Gemma4LazyGrammarAcceptsValidCallsOnly) {
    std::unique_ptr<ToolFormat> format = make_gemma4_format();
    auto compiled =
        grammar_vocab().compile({ConstraintSpec::Kind::structural_tag, format->call_grammar(tools_fixture(), false)});
    const std::string q = "<|\"|>";
    GrammarConstraint free_text(compiled);
    EXPECT_TRUE(free_text.accept_text("<|channel>thought\nweather<channel|>Any text {a:1} <|tool_cal"));
    EXPECT_TRUE(free_text.complete());
    const std::vector<std::string> good = {
        "call:get_weather{city:" + q + "Oslo <3 & {x}, \"y\"" + q + "}",
        "call:get_weather{city:" + q + q + ",unit:" + q + "f" + q + ",days:-2}",
        "call:create_event{title:" + q + "Sync" + q + ",attendees:[{name:" + q + "Ana" + q + ",role:null},{name:" + q +
            "Bo" + q + ",role:" + q + "guest" + q + "}],slot:{hours:1.5e2,ok:true},notes:null}",
    };
    for (const std::string& call : good) {
        GrammarConstraint c(compiled);
        EXPECT_TRUE(c.accept_text("Let me look. <|tool_call>" + call + "<tool_call|>")) << call;
        EXPECT_TRUE(c.complete()) << call;
        ParsedReply reply = parse_reply(*format, "<|tool_call>" + call + "<tool_call|>", true);
        ASSERT_EQ(reply.function_calls.size(), 1u) << call;
        std::string why;
        const json tools = tools_fixture();
        const json& params = params_of(tools, reply.function_calls[0]["name"].get<std::string>());
        EXPECT_TRUE(valid(reply.function_calls[0]["arguments"], params, params, why)) << why;
    }
    const std::vector<std::pair<std::string, std::string>> invalid = {
        {"call:get_weather{city:", "12"},                                  // a number where a string goes
        {"call:get_weather{city:" + q + "x" + q + ",unit:", q + "k" + q},  // not in the enum
        {"call:get_weather{", "unit:" + q + "c" + q + "}"},                // required city missing
        {"call:get_weather{city:" + q + "x" + q, ",zip:1"},                // an undeclared key
        {"call:", "rm_rf{"},                                               // an unknown tool
        {"call:get_weather{city:", "\"Oslo\""},                            // JSON quotes are not strings
        {"call:create_event{title:" + q + "t" + q + ",attendees:", "[]"},  // minItems 1
        {"call:get_weather{city:" + q + "x" + q + ",days:", "1.5"},        // an integer field
        {"call:get_weather{city:" + q + "a", "<tool_call|>"},              // the close marker inside a string
    };
    for (const auto& [prefix, wrong] : invalid) {
        GrammarConstraint c(compiled);
        EXPECT_TRUE(c.accept_text("<|tool_call>" + prefix)) << prefix;
        EXPECT_FALSE(c.accept_text(wrong)) << prefix << wrong;
    }
    // The template writes calls without whitespace; the grammar allows one character between items.
    GrammarConstraint spaced(compiled);
    EXPECT_TRUE(spaced.accept_text("<|tool_call>call:get_weather{ city:"));
    EXPECT_FALSE(spaced.accept_text("\n\n"));
}

TEST(Grammar, ForcedGrammarRejectsTextBeforeTheCall) {
    std::unique_ptr<ToolFormat> format = make_lfm2_format();
    auto compiled =
        grammar_vocab().compile({ConstraintSpec::Kind::structural_tag, format->call_grammar(tools_fixture(), true)});
    GrammarConstraint c(compiled);
    EXPECT_FALSE(c.accept_text("Sure"));
    EXPECT_TRUE(c.accept_text(
        "<|tool_call_start|>[get_weather(city=\"Oslo\", days=2), get_weather(city=\"Rome\")]<|tool_call_end|>"));
    EXPECT_TRUE(c.complete());
}

TEST(Grammar, CompiledOncePerSpec) {
    GrammarVocab g(vocab().bytes, {0});
    ConstraintSpec spec{ConstraintSpec::Kind::json_schema,
                        R"({"type":"object","properties":{"a":{"type":"integer"}}})"};
    auto first = g.compile(spec);
    auto second = g.compile(spec);
    EXPECT_EQ(first.get(), second.get());
    EXPECT_EQ(g.cached(), 1u);
}

TEST(Grammar, BadSchemaIsAnErrorNotACrash) {
    GrammarVocab g(vocab().bytes, {0});
    EXPECT_THROW(g.compile({ConstraintSpec::Kind::json_schema, "{\"type\": \"object\", \"properties\": 7}"}),
                 cactus::Error);
    EXPECT_THROW(g.compile({ConstraintSpec::Kind::structural_tag, "{\"type\": \"structural_tag\"}"}), cactus::Error);
    EXPECT_THROW(GrammarVocab({}, {}), cactus::Error);
}

TEST(Grammar, SamplerMasksAndAdvances) {
    auto compiled = grammar_vocab().compile({ConstraintSpec::Kind::json_schema, R"({"type":"boolean"})"});
    GrammarConstraint c(compiled);
    SamplingParams p;
    p.temperature = 0.8f;
    p.seed = 5;
    Sampler sampler(p);
    sampler.set_constraint(&c);
    std::string text;
    for (int step = 0; step < 10; ++step) {
        std::vector<float> logits(vocab().bytes.size(), 0.0f);
        int32_t t = sampler.sample(logits);
        if (t == 0) break;
        text += vocab().bytes[static_cast<size_t>(t)];
    }
    EXPECT_TRUE(text == "true" || text == "false") << text;
    EXPECT_GT(sampler.constraint_ms(), 0.0);
}

TEST(Grammar, GbnfEmptyAlternativesBecomeEmptyStrings) {
    EXPECT_EQ(gbnf_to_xgrammar("ws ::= | \" \" | \"\\n\" [ \\t]{0,20}"), "ws ::= \"\" | \" \" | \"\\n\" [ \\t]{0,20}");
    EXPECT_EQ(gbnf_to_xgrammar("a ::= (\"x\" | ) \"|\" [|(]\nb ::= \"y\" |\nc ::= b"),
              "a ::= (\"x\" | \"\" ) \"|\" [|(]\nb ::= \"y\" | \"\"\nc ::= b");
    EXPECT_EQ(gbnf_to_xgrammar("root ::= \"a\" # a | comment (\nx ::= |"),
              "root ::= \"a\" # a | comment (\nx ::= \"\" | \"\"");
    const std::string plain = "root ::= (\"yes\" | \"no\") [a-z]+ \"\\\"\"";
    EXPECT_EQ(gbnf_to_xgrammar(plain), plain);
}

TEST(Grammar, LlamaCppJsonGbnfCompilesAndConstrains) {
    // llama.cpp's grammars/json.gbnf (empty alternatives, {m,n} repetition, classes with \x escapes).
    const std::string json_gbnf = R"(root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";
    auto compiled = grammar_vocab().compile(ConstraintSpec{ConstraintSpec::Kind::ebnf, json_gbnf});
    GrammarConstraint ok(compiled);
    EXPECT_TRUE(ok.accept_text("{\"a\": [1, 2.5, \"x\"], \"b\": null}"));
    EXPECT_TRUE(ok.complete());
    GrammarConstraint bad(compiled);
    EXPECT_FALSE(bad.accept_text("[1]"));  // root is an object
    EXPECT_THROW(grammar_vocab().compile(ConstraintSpec{ConstraintSpec::Kind::ebnf, "root ::= missing"}), Error);
}
