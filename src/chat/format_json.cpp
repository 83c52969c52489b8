// Generic JSON tool calls for templates without a known call syntax: bare, fenced (```json) or
// <|python_tag|>-prefixed objects {"name": ..., "arguments": {...}}, one per call.
#include "chat/tool_format.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

// The end of the balanced JSON object starting at text[begin] == '{', or npos.
size_t object_end(const std::string& text, size_t begin) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = begin; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{') {
            ++depth;
        } else if (c == '}') {
            if (--depth == 0) return i + 1;
        }
    }
    return std::string::npos;
}

class JsonFormat : public ToolFormat {
public:
    std::string name() const override { return "json"; }

    std::vector<HiddenRegion> hidden_regions() const override { return {{"<think>", "</think>"}}; }

    void extract_calls(std::string& text, json& calls) const override {
        std::string kept;
        size_t pos = 0, before = calls.size();
        while (pos < text.size()) {
            size_t brace = text.find('{', pos);
            if (brace == std::string::npos) break;
            size_t end = object_end(text, brace);
            if (end == std::string::npos) break;
            json parsed = tool_format::parse_bounded_json(text.substr(brace, end - brace));
            json call;
            if (!parsed.is_discarded() && tool_format::as_call(parsed, call)) {
                calls.push_back(call);
                kept += text.substr(pos, brace - pos);
            } else {
                kept += text.substr(pos, end - pos);
            }
            pos = end;
        }
        kept += text.substr(std::min(pos, text.size()));
        if (calls.size() > before) {
            for (const std::string wrapper : {"<|python_tag|>", "```json", "```"}) {
                size_t at;
                while ((at = kept.find(wrapper)) != std::string::npos) kept.erase(at, wrapper.size());
            }
        }
        text = kept;
    }

    std::string call_grammar(const json& tools, bool force) const override {
        json tags = json::array();
        for (const auto& sig : tool_format::tool_signatures(tools)) {
            tags.push_back(json{{"type", "tag"},
                                {"begin", "{\"name\": " + json(sig.first).dump() + ", \"arguments\": "},
                                {"content", json{{"type", "json_schema"},
                                                 {"json_schema", sig.second},
                                                 {"excludes", json::array({"<think>", "</think>"})}}},
                                {"end", "}"}});
        }
        json format =
            force ? json{{"type", "tags_with_separator"}, {"tags", tags}, {"separator", "\n"}, {"at_least_one", true}}
                  : json{{"type", "triggered_tags"}, {"triggers", json::array({"{\"name\": "})}, {"tags", tags}};
        return json{{"type", "structural_tag"}, {"format", format}}.dump();
    }

    std::string render_calls(const json& calls) const override {
        std::string out;
        for (const json& c : calls) {
            if (!out.empty()) out += "\n";
            out += "{\"name\": " + c["name"].dump() +
                   ", \"arguments\": " + c["arguments"].dump(-1, ' ', false, json::error_handler_t::replace) + "}";
        }
        return out;
    }
};

}  // namespace

std::unique_ptr<ToolFormat> make_json_format() { return std::make_unique<JsonFormat>(); }

}  // namespace cactus
