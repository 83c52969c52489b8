// Unit tests of the chat-template engine, construct by construct. Expected strings are what
// jinja2 (trim_blocks, lstrip_blocks, as transformers configures it) renders.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "common/small_stack.h"
#include "core/error.h"

using cactus::ChatTemplate;
using json = nlohmann::ordered_json;

using cactus::testing::on_small_stack;

namespace {

std::string render(const std::string& source, const json& ctx = json::object()) {
    return ChatTemplate(source).render_ordered(ctx);
}

std::string error_of(const std::string& source, const json& ctx = json::object()) {
    try {
        render(source, ctx);
    } catch (const cactus::Error& e) {
        return e.what();
    }
    return "<no error>";
}

constexpr int kMaxExprHeightForTest = 100;  // a chain this long renders

}  // namespace

TEST(ChatTemplate, TextAndOutput) {
    EXPECT_EQ(render("a{{ 1 + 2 }}b"), "a3b");
    EXPECT_EQ(render("{{ 'x' ~ 1 ~ none }}"), "x1None");
    EXPECT_EQ(render("{{ undefined_name }}|"), "|");
    EXPECT_EQ(render("line\n"), "line");  // keep_trailing_newline=False
}

TEST(ChatTemplate, WhitespaceControl) {
    EXPECT_EQ(render("  {% if true %}\n  yes\n  {% endif %}\nafter"), "  yes\nafter");
    EXPECT_EQ(render("a  {{- ' b ' -}}  c"), "a b c");
    EXPECT_EQ(render("a {#- comment -#} b"), "ab");
    EXPECT_EQ(render("x\n    {%+ if true %}y{% endif %}"), "x\n    y");
    EXPECT_EQ(render("{% if true +%}\nz{% endif %}"), "\nz");
}

TEST(ChatTemplate, Literals) {
    EXPECT_EQ(render("{{ [1, 'a', none, true] }}"), "[1, 'a', None, True]");
    EXPECT_EQ(render("{{ {'b': 1, 'a': \"it's\"} }}"), "{'b': 1, 'a': \"it's\"}");
    EXPECT_EQ(render("{{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 2.5e-5 }}"), "1.0 1e+20 0.30000000000000004 2.5e-05");
    EXPECT_EQ(render("{{ 'a\\nb\\u00e9' }}"), "a\nb\xc3\xa9");
}

TEST(ChatTemplate, Arithmetic) {
    EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"), "3 -4 2 3.5 1024");
    EXPECT_EQ(render("{{ 'ab' * 2 }} {{ [1] + [2] }} {{ -3|abs }}"), "abab [1, 2] 3");
    EXPECT_NE(error_of("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
    EXPECT_NE(error_of("{{ 'a' + 1 }}").find("unsupported operand"), std::string::npos);
}

TEST(ChatTemplate, LogicAndComparison) {
    EXPECT_EQ(render("{{ 1 < 2 and 'a' in 'cat' and 3 not in [1, 2] }}"), "True");
    EXPECT_EQ(render("{{ none or 'x' }} {{ 0 and 1 }} {{ not [] }}"), "x 0 True");
    EXPECT_EQ(render("{{ 'y' if 1 == 1.0 else 'n' }}{{ 'z' if false }}"), "y");
}

TEST(ChatTemplate, Tests) {
    json ctx = {{"d", {{"k", 1}}}, {"s", "x"}, {"n", nullptr}};
    EXPECT_EQ(render("{{ d is mapping }}{{ s is string }}{{ n is none }}{{ q is defined }}{{ q is undefined }}", ctx),
              "TrueTrueTrueFalseTrue");
    EXPECT_EQ(render("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is integer }}{{ 1.5 is float }}"),
              "TrueTrueTrueTrueTrue");
    EXPECT_EQ(render("{{ true is boolean }}{{ 'a' is equalto 'a' }}{{ 2 is in [1, 2] }}{{ d is not none }}", ctx),
              "TrueTrueTrueTrue");
}

TEST(ChatTemplate, ForLoops) {
    EXPECT_EQ(render("{% for x in ['a','b','c'] %}{{ loop.index }}{{ x }}{{ '.' if loop.last }}{% endfor %}"),
              "1a2b3c.");
    EXPECT_EQ(render("{% for x in [1,2] %}{{ loop.previtem }}>{{ loop.nextitem }};{% endfor %}"), ">2;1>;");
    EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", {{"d", {{"z", 1}, {"a", 2}}}}),
              "z=1,a=2,");
    EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
    EXPECT_EQ(render("{% for x in range(5) if x is odd %}{{ x }}{{ loop.length }}{% endfor %}"), "1232");
    EXPECT_EQ(render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% "
                     "endif %}{{ i }}{% endfor %}"),
              "02");
    EXPECT_EQ(render("{% for x in 'hé' %}[{{ x }}]{% endfor %}"), "[h][\xc3\xa9]");
}

TEST(ChatTemplate, ScopingAndNamespace) {
    EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
    EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
    EXPECT_EQ(
        render("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
        "6");
    EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
    EXPECT_EQ(render("{% set t %}in{{ 1 }}{% endset %}[{{ t }}]"), "[in1]");
}

TEST(ChatTemplate, Macros) {
    EXPECT_EQ(render("{% macro m(a, b='d') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1d][23]");
    EXPECT_NE(error_of("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").find("nested deeper"), std::string::npos);
    // Recursion stops with an error that names the macro and the bound.
    std::string err = error_of("{% macro walk(n) %}{{ walk(n + 1) }}{% endmacro %}{{ walk(0) }}");
    EXPECT_NE(err.find("'walk'"), std::string::npos) << err;
    EXPECT_NE(err.find("kMaxMacroDepth"), std::string::npos) << err;
    // Keyword arguments through recursion, as Gemma 4's format_argument passes escape_keys.
    EXPECT_EQ(render("{% macro f(v, k=true) %}{% if v is mapping %}{{ '{' }}{% for a, b in v|dictsort %}{{ a }}:"
                     "{{ f(b, k=k) }}{% endfor %}{{ '}' }}{% else %}{{ v }}{{ k }}{% endif %}{% endmacro %}"
                     "{{ f(x, k=false) }}",
                     json{{"x", {{"b", {{"c", 1}}}, {"a", 2}}}}),
              "{a:2Falseb:{c:1False}}");
}

// Gemma 4's template walks tool-call arguments with a recursive macro: realistic nesting renders
// on a 256 KiB stack, hostile nesting is refused by kMaxMacroDepth, naming the macro.
TEST(ChatTemplate, RecursiveMacroOverNestedArgumentsOnSmallStack) {
    std::ifstream file(std::string(CACTUS_SOURCE_DIR) + "/tests/chat/templates/gemma4_e2b.jinja");
    ASSERT_TRUE(file.good());
    std::stringstream source;
    source << file.rdbuf();
    ChatTemplate gemma4(source.str());
    auto context = [](int depth) {
        json v = "x";
        for (int i = 0; i < depth; ++i) v = i % 2 ? json{{"k", v}} : json::array({v});
        json call = {{"id", "a"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", {{"a", v}}}}}};
        return json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}},
                                              {{"role", "assistant"}, {"tool_calls", json::array({call})}}})},
                    {"bos_token", "<bos>"}};
    };
    on_small_stack([&] {
        std::string text = gemma4.render_ordered(context(30));
        EXPECT_NE(text.find("<|tool_call>call:f{a:{k:[{k:[{k:"), std::string::npos) << text;
        try {
            gemma4.render_ordered(context(50));  // within kMaxJsonDepth, beyond kMaxMacroDepth
            ADD_FAILURE() << "50 levels rendered";
        } catch (const cactus::Error& e) {
            EXPECT_NE(std::string(e.what()).find("'format_argument'"), std::string::npos) << e.what();
        }
    });
}

TEST(ChatTemplate, Filters) {
    EXPECT_EQ(render("{{ ' x '|trim }}|{{ 'ab'|upper }}|{{ 'hello world'|title }}|{{ 'aB'|capitalize }}"),
              "x|AB|Hello World|Ab");
    EXPECT_EQ(render("{{ [3,1,2]|sort|join(',') }} {{ [1,2,2,1]|unique|list }} {{ [1,2]|reverse|list }}"),
              "1,2,3 [1, 2] [2, 1]");
    EXPECT_EQ(render("{{ x|default('d') }} {{ ''|d('e', true) }} {{ [1,2]|first }}{{ [1,2]|last }} {{ 'abc'|length }}"),
              "d e 12 3");
    EXPECT_EQ(render("{{ '3'|int + 1 }} {{ '2.5'|float }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 1|string }}"),
              "4 2.5 2.0 3.14 1");
    EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1}|items|list }}"), "[['a', 2], ['b', 1]] [['b', 1]]");
    EXPECT_EQ(render("{{ 'a\nb'|indent(2) }}|{{ 'x y z'|wordcount }}|{{ '<a>'|e }}|{{ [1,2,3,4,5]|batch(2)|list }}"),
              "a\n  b|3|&lt;a&gt;|[[1, 2], [3, 4], [5]]");
    json users = {{"u", json::array({{{"name", "a"}, {"age", 30}}, {{"name", "b"}, {"age", 10}}})}};
    EXPECT_EQ(render("{{ u|selectattr('age', 'gt', 20)|map(attribute='name')|join }}{{ u|rejectattr('age', 'gt', "
                     "20)|map(attribute='name')|first }}",
                     users),
              "ab");
    EXPECT_EQ(
        render("{{ [1, 2, 3]|select('odd')|list }}{{ [1, 2, 3]|reject('odd')|list }}{{ ['a']|map('upper')|list }}"),
        "[1, 3][2]['A']");
    EXPECT_NE(error_of("{{ 1|nosuchfilter }}").find("nosuchfilter"), std::string::npos);
}

TEST(ChatTemplate, ToJsonKeepsInsertionOrder) {
    json ctx = {{"t", {{"zeta", 1}, {"alpha", json::array({1.5, "é\n", nullptr, true})}, {"e", json::object()}}}};
    EXPECT_EQ(render("{{ t|tojson }}", ctx), "{\"zeta\": 1, \"alpha\": [1.5, \"é\\n\", null, true], \"e\": {}}");
    EXPECT_EQ(render("{{ t|tojson(indent=2) }}", ctx),
              "{\n  \"zeta\": 1,\n  \"alpha\": [\n    1.5,\n    \"é\\n\",\n    null,\n    true\n  ],\n  \"e\": {}\n}");
    EXPECT_NE(error_of("{{ nothing|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(ChatTemplate, MethodsAndSubscripts) {
    EXPECT_EQ(render("{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'x y'.split() }}|{{ 'abc'.startswith('ab') }}"),
              "a b|['a', 'b']|['x', 'y']|True");
    EXPECT_EQ(
        render(
            "{{ 'aXa'.replace('a', 'b') }}{{ '\\n\\nx\\n'.lstrip('\\n') }}{{ 'abc'.find('c') }}{{ 'aa'.count('a') }}"),
        "bXbx\n22");
    EXPECT_EQ(render("{{ d.get('k') }} {{ d.get('q', 5) }} {{ d.keys()|list }} {{ d['k'] }}", {{"d", {{"k", 1}}}}),
              "1 5 ['k'] 1");
    EXPECT_EQ(render("{{ 'héllo'[1:3] }} {{ [1,2,3,4][::-2] }} {{ 'abc'[-1] }} {{ [1][5] }}"), "él [4, 2] c ");
    EXPECT_NE(error_of("{{ a.b }}").find("'a' is undefined"), std::string::npos);
    EXPECT_NE(error_of("{{ [1].append(2) }}").find("undefined"), std::string::npos);  // sandbox: lists immutable
}

TEST(ChatTemplate, GlobalsAndErrors) {
    EXPECT_EQ(render("{{ range(1, 7, 2)|list }} {{ dict(a=1) }}"), "[1, 3, 5] {'a': 1}");
    EXPECT_EQ(error_of("{{ raise_exception('Roles must alternate') }}"), "Roles must alternate");
    EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
    std::string unknown = error_of("line1\n{% include 'x' %}");
    EXPECT_NE(unknown.find("include"), std::string::npos);
    EXPECT_NE(unknown.find("line 2"), std::string::npos);
    EXPECT_NE(error_of("{% if true %}never closed").find("endif"), std::string::npos);
    EXPECT_NE(error_of("{{ 'unterminated }}").find("unterminated"), std::string::npos);
    EXPECT_NE(error_of("{% for x in [1] %}").find("endfor"), std::string::npos);
    EXPECT_NE(error_of("{% break %}").find("outside a loop"), std::string::npos);
}

TEST(ChatTemplate, HostileNestingFailsCleanlyOnSmallStack) {
    on_small_stack([] {
        std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
        EXPECT_NE(error_of("{{ " + parens + " }}").find("nesting deeper"), std::string::npos);
        std::string ifs;
        for (int k = 0; k < 5000; ++k) ifs += "{% if true %}";
        EXPECT_NE(error_of(ifs).find("nesting deeper"), std::string::npos);
        std::string nots;
        for (int k = 0; k < 5000; ++k) nots += "not ";
        EXPECT_NE(error_of("{{ " + nots + "1 }}").find("nesting deeper"), std::string::npos);
        std::string negs(5000, '-');
        EXPECT_NE(error_of("{{ " + negs + "1 }}").find("nesting deeper"), std::string::npos);
        // Just inside the limits still renders.
        std::string ok_parens = std::string(40, '(') + "1" + std::string(40, ')');
        EXPECT_EQ(render("{{ " + ok_parens + " }}"), "1");
        std::string ok_ifs, ends;
        for (int k = 0; k < 50; ++k) {
            ok_ifs += "{% if true %}";
            ends += "{% endif %}";
        }
        EXPECT_EQ(render(ok_ifs + "x" + ends), "x");
        EXPECT_NE(error_of("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}").find("nested deeper"),
                  std::string::npos);
    });
}

// Chains the parser builds in loops (not by recursion) must not make trees as deep as the template
// is long: evaluating or merely destroying such a tree overflows the stack. Each kind, 200,000 long.
TEST(ChatTemplate, HugeChainsFailCleanlyOnSmallStack) {
    on_small_stack([] {
        const int n = 200000;
        auto chain = [n](const std::string& head, const std::string& link) {
            std::string s = head;
            s.reserve(head.size() + link.size() * n);
            for (int k = 0; k < n; ++k) s += link;
            return s;
        };
        const std::vector<std::string> exprs = {
            chain("1", " + 1"),    chain("1", " * 1"),        chain("'a'", " ~ 'a'"),    chain("1", " == 1"),
            chain("x", " or x"),   chain("x", " and x"),      chain("x", " in y"),       chain("2", " ** 1"),
            chain("x", "|string"), chain("x", "|default(1)"), chain("x", ".a"),          chain("x", "[0]"),
            chain("x", "()"),      chain("x", "[1:2]"),       chain("x", " is defined"), chain("1", " if x"),
        };
        for (const std::string& e : exprs) {
            std::string err = error_of("{{ " + e + " }}");
            EXPECT_NE(err.find("kMaxExprHeight"), std::string::npos) << e.substr(0, 40) << ": " << err;
        }
        // Nested literals, unary chains and blocks hit the parser's nesting limit.
        EXPECT_NE(error_of("{{ " + std::string(n, '[') + std::string(n, ']') + " }}").find("nesting deeper"),
                  std::string::npos);
        EXPECT_NE(error_of("{{ " + chain("", "{'a': ") + "1" + chain("", "}") + " }}").find("nesting deeper"),
                  std::string::npos);
        EXPECT_NE(error_of("{{ " + chain("", "-+") + "1 }}").find("nesting deeper"), std::string::npos);
        EXPECT_NE(error_of(chain("", "{% for x in y %}")).find("nesting deeper"), std::string::npos);
        EXPECT_NE(error_of(chain("", "{% macro m() %}")).find("nesting deeper"), std::string::npos);
        // Long but shallow templates still render: many statements, a chain just under the limit.
        EXPECT_EQ(render(chain("", "{{ 1 }}")).size(), static_cast<size_t>(n));
        std::string sum = "1";
        for (int k = 1; k < kMaxExprHeightForTest; ++k) sum += " + 1";
        EXPECT_EQ(render("{{ " + sum + " }}"), std::to_string(kMaxExprHeightForTest));
    });
}

// A namespace is the one place a template can feed a value back into itself.
TEST(ChatTemplate, RuntimeValueNestingAndCyclesFailCleanlyOnSmallStack) {
    on_small_stack([] {
        std::string deep =
            "{% set ns = namespace(x=0) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
            "{% endfor %}{{ ns.x|length }}";
        EXPECT_NE(error_of(deep).find("kMaxValueNesting"), std::string::npos);
        std::string cycle = "{% set ns = namespace(x=0) %}{% set ns.x = [ns] %}{{ ns }}";
        EXPECT_NE(error_of(cycle).find("kMaxValueNesting"), std::string::npos);
        std::string shared =
            "{% set ns = namespace(x=[1]) %}{% for i in range(100) %}{% set ns.x = [ns.x, ns.x] %}"
            "{% endfor %}{{ ns.x|length }}";  // shared, not deep: 100 levels
        EXPECT_EQ(render(shared), "2");
    });
}

TEST(ChatTemplate, RealTemplates) {
    std::ifstream file(std::string(CACTUS_SOURCE_DIR) + "/tests/chat/templates/qwen3.jinja");
    ASSERT_TRUE(file.good());
    std::stringstream source;
    source << file.rdbuf();
    ChatTemplate qwen(source.str());
    json ctx = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                {"add_generation_prompt", true},
                {"enable_thinking", false}};
    EXPECT_EQ(qwen.render_ordered(ctx),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    nlohmann::json plain = {{"messages", nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}})}};
    EXPECT_EQ(qwen.render(plain), "<|im_start|>user\nhi<|im_end|>\n");
}

// Renders cannot hang the host or exhaust its memory: a step budget, a string size bound, and
// 64-bit integer arithmetic that reports overflow instead of wrapping (or UB).
TEST(ChatTemplate, RenderIsBoundedInTimeMemoryAndArithmetic) {
    std::string loops = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
    EXPECT_NE(error_of(loops).find("kMaxEvalSteps"), std::string::npos);
    std::string doubling =
        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s|length }}";
    EXPECT_NE(error_of(doubling).find("kMaxStringBytes"), std::string::npos);
    EXPECT_NE(error_of("{{ ('a' * 1000000)|replace('a', 'a' * 1000) }}").find("kMaxStringBytes"), std::string::npos);
    EXPECT_NE(error_of("{{ 'ab' * 4611686018427387904 }}").find("too large"), std::string::npos);
    EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("overflow"), std::string::npos);
    EXPECT_NE(error_of("{{ 3 ** 100 }}").find("overflow"), std::string::npos);
    EXPECT_NE(error_of("{{ -9223372036854775807 - 1 - 1 }}").find("overflow"), std::string::npos);
    EXPECT_EQ(render("{{ 2 ** 62 }} {{ (-1) ** 1000001 }} {{ 7 // -2 }} {{ 'ab' * 3 }}"),
              "4611686018427387904 -1 -4 ababab");
}
