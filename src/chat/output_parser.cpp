#include "chat/output_parser.h"

#include "chat/tool_format.h"

namespace cactus {

namespace {

// Moves the thinking block into `thinking`: a reply that opens with <think> (after whitespace)
// thinks until the first </think>; a reply holding "...</think>" with no opening tag (the prompt
// opened the block) thinks up to it, unless a tool call starts before it. Think markers later in
// the reply (inside call arguments, say) are left alone.
void split_thinking(std::string& text, std::string& thinking, const ToolFormat& format) {
    const std::string open = "<think>", close = "</think>";
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
    for (const HiddenRegion& r : format.hidden_regions())
        if (r.open != open && text.find(r.open) < end) return;
    thinking = tool_format::trim(text.substr(0, end));
    text = text.substr(end + close.size());
}

}  // namespace

ParsedReply parse_reply(const ToolFormat& format, const std::string& text, bool tools_offered) {
    ParsedReply out;
    std::string rest = text;
    split_thinking(rest, out.thinking, format);
    if (tools_offered) format.extract_calls(rest, out.function_calls);
    out.response = out.function_calls.empty() ? rest : tool_format::trim(rest);
    return out;
}

ParsedReply parse_reply(const std::string& text, bool tools_offered) {
    return parse_reply(*make_json_format(), text, tools_offered);
}

}  // namespace cactus
