#pragma once
// Splits a model's raw reply into visible text, thinking, and tool calls, in the format of the
// model's family (chat/tool_format.h): the thinking block (<think>...</think>, or a leading
// "...</think>" when the prompt opened it; Gemma 4's <|channel>thought\n...<channel|>) goes to
// `thinking`; calls go to `function_calls` with typed arguments.
#include <string>

#include <nlohmann/json.hpp>

namespace cactus {

class ToolFormat;

struct ParsedReply {
    std::string response;
    std::string thinking;
    nlohmann::ordered_json function_calls = nlohmann::ordered_json::array();  // [{name, arguments}]
};

ParsedReply parse_reply(const ToolFormat& format, const std::string& text, bool tools_offered);
// The generic JSON format (kept for callers without a template).
ParsedReply parse_reply(const std::string& text, bool tools_offered);

}  // namespace cactus
