// LFM2 tool calls: <|tool_call_start|>[f(a="x", n=1), g()]<|tool_call_end|>, Python-call syntax
// with typed arguments (strings, numbers, True/False/None, lists, dicts); parallel calls in one list.
#include "chat/call_syntax.h"
#include "chat/tool_format.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

const std::string kOpen = "<|tool_call_start|>", kClose = "<|tool_call_end|>";

class Lfm2Format : public ToolFormat {
public:
    std::string name() const override { return "lfm2"; }

    std::vector<HiddenRegion> hidden_regions() const override { return {{kOpen, kClose}, {"<think>", "</think>"}}; }

    void extract_calls(std::string& text, json& calls) const override {
        tool_format::cut_regions(text, kOpen, kClose, [&](const std::string& body) {
            std::string list = tool_format::trim(body);
            if (list.size() < 2 || list.front() != '[' || list.back() != ']') return false;
            return read_python_calls(list.substr(1, list.size() - 2), calls);
        });
    }

    std::string call_grammar(const json& tools, bool force) const override {
        json tag = {{"type", "tag"},
                    {"begin", kOpen + "["},
                    {"content", json{{"type", "grammar"}, {"grammar", calls_ebnf(tools, CallSyntax::python)}}},
                    {"end", "]" + kClose}};
        json format =
            force ? json{{"type", "tags_with_separator"},
                         {"tags", json::array({tag})},
                         {"separator", ""},
                         {"at_least_one", true},
                         {"stop_after_first", true}}
                  : json{{"type", "triggered_tags"}, {"triggers", json::array({kOpen})}, {"tags", json::array({tag})}};
        return json{{"type", "structural_tag"}, {"format", format}}.dump();
    }

    std::string render_calls(const json& calls) const override {
        std::string out = kOpen + "[";
        for (size_t i = 0; i < calls.size(); ++i) out += (i ? ", " : "") + write_call(calls[i], CallSyntax::python);
        return out + "]" + kClose;
    }
};

}  // namespace

std::unique_ptr<ToolFormat> make_lfm2_format() { return std::make_unique<Lfm2Format>(); }

}  // namespace cactus
