// Hermes tool calls (Qwen2.5, Qwen3, Hermes): <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
#include "chat/tool_format.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

const std::string kOpen = "<tool_call>", kClose = "</tool_call>";

class HermesFormat : public ToolFormat {
public:
    std::string name() const override { return "hermes"; }

    std::vector<HiddenRegion> hidden_regions() const override { return {{kOpen, kClose}, {"<think>", "</think>"}}; }

    void extract_calls(std::string& text, json& calls) const override {
        size_t found = tool_format::cut_regions(text, kOpen, kClose, [&](const std::string& body) {
            json parsed = tool_format::parse_bounded_json(tool_format::trim(body));
            json call;
            if (parsed.is_discarded() || !tool_format::as_call(parsed, call)) return false;
            calls.push_back(call);
            return true;
        });
        // Small models sometimes drop the markers: fall back to bare JSON calls.
        if (found == 0 && text.find(kOpen) == std::string::npos) make_json_format()->extract_calls(text, calls);
    }

    std::string call_grammar(const json& tools, bool force) const override {
        json tags = json::array();
        for (const auto& sig : tool_format::tool_signatures(tools)) {
            tags.push_back(json{{"type", "tag"},
                                {"begin", kOpen + "\n{\"name\": " + json(sig.first).dump() + ", \"arguments\": "},
                                // No "excludes" for the markers: xgrammar drops a schema's string length limits when
                                // a string has exclusions; the parser reads past marker text inside strings instead.
                                {"content", json{{"type", "json_schema"}, {"json_schema", sig.second}}},
                                {"end", "}\n" + kClose}});
        }
        json format =
            force ? json{{"type", "tags_with_separator"}, {"tags", tags}, {"separator", "\n"}, {"at_least_one", true}}
                  : json{{"type", "triggered_tags"}, {"triggers", json::array({kOpen})}, {"tags", tags}};
        return json{{"type", "structural_tag"}, {"format", format}}.dump();
    }

    std::string render_calls(const json& calls) const override {
        std::string out;
        for (const json& c : calls) {
            if (!out.empty()) out += "\n";
            out += kOpen + "\n{\"name\": " + c["name"].dump() +
                   ", \"arguments\": " + c["arguments"].dump(-1, ' ', false, json::error_handler_t::replace) + "}\n" +
                   kClose;
        }
        return out;
    }
};

}  // namespace

std::unique_ptr<ToolFormat> make_hermes_format() { return std::make_unique<HermesFormat>(); }

}  // namespace cactus
