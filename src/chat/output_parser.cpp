#include "chat/output_parser.h"

#include "chat/tool_format.h"

namespace cactus {

ParsedReply parse_reply(const ToolFormat& format, const std::string& text, bool tools_offered) {
    ParsedReply out;
    std::string rest = text;
    format.extract_thinking(rest, out.thinking);
    if (tools_offered) format.extract_calls(rest, out.function_calls);
    out.response = out.function_calls.empty() ? rest : tool_format::trim(rest);
    return out;
}

ParsedReply parse_reply(const std::string& text, bool tools_offered) {
    return parse_reply(*make_json_format(), text, tools_offered);
}

}  // namespace cactus
