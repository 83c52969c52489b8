// FunctionGemma tool calls (Gemma 3 270M function calling):
// <start_function_call>call:f{a:<escape>x<escape>,n:1}<end_function_call>, one block per call.
#include "chat/call_syntax.h"
#include "chat/tool_format.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

const std::string kOpen = "<start_function_call>", kClose = "<end_function_call>";

class GemmaFormat : public ToolFormat {
public:
    std::string name() const override { return "gemma"; }

    std::vector<HiddenRegion> hidden_regions() const override { return {{kOpen, kClose}, {"<think>", "</think>"}}; }

    void extract_calls(std::string& text, json& calls) const override {
        tool_format::cut_regions(text, kOpen, kClose, [&](const std::string& body) {
            return read_gemma_call(tool_format::trim(body), calls);
        });
    }

    std::string call_grammar(const json& tools, bool force) const override {
        json tag = {{"type", "tag"},
                    {"begin", kOpen + "call:"},
                    {"content", json{{"type", "grammar"}, {"grammar", calls_ebnf(tools, CallSyntax::gemma)}}},
                    {"end", kClose}};
        json format =
            force ? json{{"type", "tags_with_separator"},
                         {"tags", json::array({tag})},
                         {"separator", ""},
                         {"at_least_one", true}}
                  : json{{"type", "triggered_tags"}, {"triggers", json::array({kOpen})}, {"tags", json::array({tag})}};
        return json{{"type", "structural_tag"}, {"format", format}}.dump();
    }

    std::string render_calls(const json& calls) const override {
        std::string out;
        for (const json& c : calls) out += kOpen + write_call(c, CallSyntax::gemma) + kClose;
        return out;
    }
};

}  // namespace

std::unique_ptr<ToolFormat> make_gemma_format() { return std::make_unique<GemmaFormat>(); }

}  // namespace cactus
