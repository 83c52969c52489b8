#include "chat/output_parser.h"

#include <cctype>
#include <utility>

#include "chat/json_parse.h"

namespace cactus {

namespace {

using json = nlohmann::ordered_json;

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

// Moves <think>...</think> (or a leading "...</think>" when the template opened the block) into
// `thinking`.
void split_thinking(std::string& text, std::string& thinking) {
    const std::string open = "<think>", close = "</think>";
    size_t end = text.find(close);
    if (end == std::string::npos) {
        size_t start = text.find(open);
        if (start != std::string::npos) {  // unterminated: all after <think> is thinking
            thinking = trim(text.substr(start + open.size()));
            text = text.substr(0, start);
        }
        return;
    }
    size_t start = text.rfind(open, end);
    size_t body = start == std::string::npos ? 0 : start + open.size();
    size_t cut_from = start == std::string::npos ? 0 : start;
    thinking = trim(text.substr(body, end - body));
    text = text.substr(0, cut_from) + text.substr(end + close.size());
}

// The end of the balanced JSON object starting at text[begin] == '{', or npos.
size_t object_end(const std::string& text, size_t begin) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = begin; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
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

bool as_call(const json& j, json& call) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    json args = j.contains("arguments") ? j["arguments"] : j.value("parameters", json::object());
    if (args.is_string()) {
        json parsed;
        if (try_parse_json(args.get_ref<const std::string&>(), parsed)) args = std::move(parsed);
    }
    call = json{{"name", j["name"]}, {"arguments", args}};
    return true;
}

// Finds JSON objects that are tool calls; removes them (and their wrappers) from text.
void extract_calls(std::string& text, json& calls) {
    std::string kept;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t brace = text.find('{', pos);
        if (brace == std::string::npos) break;
        size_t end = object_end(text, brace);
        if (end == std::string::npos) break;
        json parsed;
        json call;
        if (try_parse_json(text.data() + brace, text.data() + end, parsed) && as_call(parsed, call)) {
            calls.push_back(call);
            kept += text.substr(pos, brace - pos);
        } else {
            kept += text.substr(pos, end - pos);
        }
        pos = end;
    }
    kept += text.substr(std::min(pos, text.size()));
    for (const char* wrapper : {"<tool_call>", "</tool_call>", "<|python_tag|>", "```json", "```"}) {
        if (calls.empty()) break;
        size_t at;
        while ((at = kept.find(wrapper)) != std::string::npos) kept.erase(at, std::string(wrapper).size());
    }
    text = kept;
}

}  // namespace

ParsedReply parse_reply(const std::string& text, bool tools_offered) {
    ParsedReply out;
    std::string rest = text;
    split_thinking(rest, out.thinking);
    if (tools_offered) extract_calls(rest, out.function_calls);
    out.response = out.function_calls.empty() ? rest : trim(rest);
    return out;
}

}  // namespace cactus
