#include "chat/output_parser.h"

#include "chat/tool_format.h"

namespace cactus {

namespace {

// Moves <think>...</think> (or a leading "...</think>" when the template opened the block) into
// `thinking`.
void split_thinking(std::string& text, std::string& thinking) {
    const std::string open = "<think>", close = "</think>";
    size_t end = text.find(close);
    if (end == std::string::npos) {
        size_t start = text.find(open);
        if (start != std::string::npos) {  // unterminated: all after <think> is thinking
            thinking = tool_format::trim(text.substr(start + open.size()));
            text = text.substr(0, start);
        }
        return;
    }
    size_t start = text.rfind(open, end);
    size_t body = start == std::string::npos ? 0 : start + open.size();
    size_t cut_from = start == std::string::npos ? 0 : start;
    thinking = tool_format::trim(text.substr(body, end - body));
    text = text.substr(0, cut_from) + text.substr(end + close.size());
}

}  // namespace

ParsedReply parse_reply(const ToolFormat& format, const std::string& text, bool tools_offered) {
    ParsedReply out;
    std::string rest = text;
    split_thinking(rest, out.thinking);
    if (tools_offered) format.extract_calls(rest, out.function_calls);
    out.response = out.function_calls.empty() ? rest : tool_format::trim(rest);
    return out;
}

ParsedReply parse_reply(const std::string& text, bool tools_offered) {
    return parse_reply(*make_json_format(), text, tools_offered);
}

}  // namespace cactus
