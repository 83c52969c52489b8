#include "chat/tool_format.h"

#include "chat/json_parse.h"

#include <cctype>

namespace cactus {

using json = nlohmann::ordered_json;

namespace tool_format {

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

bool as_call(const json& j, json& call) {
    if (!j.is_object()) return false;
    const json* body = &j;
    if (j.contains("function") && j["function"].is_object())
        body = &j["function"];
    else if (j.contains("function_call") && j["function_call"].is_object())
        body = &j["function_call"];
    if (!body->contains("name") || !(*body)["name"].is_string()) return false;
    json args = body->contains("arguments") ? (*body)["arguments"] : body->value("parameters", json::object());
    if (args.is_string()) {
        // Arguments sent as a JSON string are parsed under the engine's JSON limits; text that is
        // not JSON, or breaks a limit, stays a string for the app to see (docs/RELIABILITY.md).
        json parsed;
        if (try_parse_json(args.get<std::string>(), parsed)) args = parsed;
    }
    if (!args.is_object() && !args.is_string()) return false;
    call = json{{"name", (*body)["name"]}, {"arguments", args}};
    return true;
}

std::vector<std::pair<std::string, json>> tool_signatures(const json& tools) {
    std::vector<std::pair<std::string, json>> out;
    for (const json& t : tools) {
        const json& fn = t.contains("function") ? t["function"] : t;
        json params = fn.value("parameters", json::object());
        if (!params.is_object() || params.empty()) params = json{{"type", "object"}, {"properties", json::object()}};
        out.emplace_back(fn["name"].get<std::string>(), params);
    }
    return out;
}

json message_calls(const json& message) {
    json calls = json::array();
    if (!message.contains("tool_calls") || !message["tool_calls"].is_array()) return calls;
    for (const json& c : message["tool_calls"]) {
        json call;
        if (as_call(c, call)) calls.push_back(call);
    }
    return calls;
}

size_t cut_regions(std::string& text, const std::string& open, const std::string& close,
                   const std::function<bool(const std::string&)>& read) {
    std::string kept;
    size_t pos = 0, accepted = 0;
    while (pos < text.size()) {
        size_t start = text.find(open, pos);
        if (start == std::string::npos) break;
        const size_t body = start + open.size();
        kept += text.substr(pos, start - pos);
        // The first close marker that ends a readable body (a string argument may itself contain
        // the marker's text), among the next kMaxCloseCandidates (a bound on the work for hostile
        // text); an unterminated block is read to the end of the text.
        constexpr int kMaxCloseCandidates = 16;
        size_t after = std::string::npos;
        int tries = 0;
        for (size_t end = text.find(close, body); tries++ < kMaxCloseCandidates; end = text.find(close, end + 1)) {
            const size_t stop = end == std::string::npos ? text.size() : end;
            if (read(text.substr(body, stop - body))) {
                after = end == std::string::npos ? text.size() : end + close.size();
                break;
            }
            if (end == std::string::npos) break;
        }
        if (after != std::string::npos) {
            ++accepted;
            pos = after;
            continue;
        }
        // Unreadable. A block cut off before its close marker (a reply that hit max_tokens) is
        // dropped: the stream hid it and it is no call, so the response matches what was streamed
        // (an app that sends the response back must not put an open marker into its next prompt).
        // A closed one stays as text.
        const size_t end = text.find(close, body);
        pos = end == std::string::npos ? text.size() : end + close.size();
        if (end != std::string::npos) kept += text.substr(start, pos - start);
    }
    if (pos < text.size()) kept += text.substr(pos);
    text = kept;
    return accepted;
}

json parse_bounded_json(const std::string& text) {
    constexpr int kMaxDepth = 64;
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxDepth) return json(json::value_t::discarded);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    json out;
    if (!try_parse_json(text, out)) return json(json::value_t::discarded);
    return out;
}

json alias_reasoning(const json& message) {
    if (!message.is_object()) return message;
    const json* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
        if (message.contains(key) && !message[key].is_null()) {
            reasoning = &message[key];
            break;
        }
    }
    if (reasoning == nullptr) return message;
    json out = json::object();
    out["thinking"] = *reasoning;  // first, as in {"thinking": r, **message, "reasoning_content": r}
    for (auto it = message.begin(); it != message.end(); ++it) out[it.key()] = it.value();
    out["reasoning_content"] = *reasoning;
    return out;
}

json call_schema(const json& parameters) {
    if (!parameters.is_object() || parameters.empty()) return json{{"type", "object"}, {"properties", json::object()}};
    return parameters;
}

}  // namespace tool_format

void ToolFormat::extract_thinking(std::string& text, std::string& thinking) const {
    const HiddenRegion block = thinking_region();
    const std::string &open = block.open, &close = block.close;
    size_t lead = text.find_first_not_of(" \t\r\n");
    if (lead != std::string::npos && text.compare(lead, open.size(), open) == 0) {
        size_t body = lead + open.size();
        size_t end = text.find(close, body);
        thinking = tool_format::trim(text.substr(body, (end == std::string::npos ? text.size() : end) - body));
        text = end == std::string::npos ? std::string() : text.substr(end + close.size());
        return;
    }
    size_t end = text.find(close);
    if (end == std::string::npos || text.rfind(open, end) != std::string::npos) return;
    for (const HiddenRegion& r : hidden_regions())
        if (r.open != open && r.open != close && text.find(r.open) < end) return;
    thinking = tool_format::trim(text.substr(0, end));
    text = text.substr(end + close.size());
}

std::vector<std::string> ToolFormat::shown_markers() const {
    std::vector<std::string> markers;
    for (const HiddenRegion& r : hidden_regions()) {
        for (const std::string* m : {&r.open, &r.close})
            if (!m->empty()) markers.push_back(*m);
    }
    return markers;
}

json ToolFormat::prepare_messages(const json& messages) const {
    json out = json::array();
    for (const json& m : messages) {
        json copy = tool_format::alias_reasoning(m);
        if (!template_renders_calls_ && m.is_object() && m.value("role", "") == "assistant" &&
            m.contains("tool_calls")) {
            json calls = tool_format::message_calls(m);
            std::string content =
                m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
            if (!calls.empty()) content += render_calls(calls);
            copy["content"] = content;
            copy.erase("tool_calls");
        }
        out.push_back(copy);
    }
    return out;
}

std::unique_ptr<ToolFormat> tool_format_for(const std::string& source) {
    std::unique_ptr<ToolFormat> format;
    if (source.find("<|tool_call>call:") != std::string::npos)
        format = source.find("OpenAI Chat Completions") != std::string::npos ? make_gemma4_format()
                                                                             : make_gemma4_folded_format();
    else if (source.find("<|tool_call_start|>") != std::string::npos ||
             source.find("<|tool_list_start|>") != std::string::npos)
        format = make_lfm2_format();
    else if (source.find("<start_function_call>") != std::string::npos ||
             source.find("<start_function_declaration>") != std::string::npos)
        format = make_gemma_format();
    else if (source.find("<tool_call>") != std::string::npos)
        format = make_hermes_format();
    else
        format = make_json_format();
    format->template_renders_calls_ = source.find("tool_calls") != std::string::npos;
    return format;
}

}  // namespace cactus
