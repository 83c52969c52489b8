#pragma once
// Splits a model's raw reply into visible text, thinking, and tool calls. Understands the common
// families' formats: <think>...</think>; <tool_call>{json}</tool_call> (Qwen, Hermes);
// <|python_tag|>{json} (Llama 3); and a bare or fenced JSON object {"name", "arguments"} (Gemma
// and small models prompted with a tool list).
#include <string>

#include <nlohmann/json.hpp>

namespace cactus {

struct ParsedReply {
    std::string response;
    std::string thinking;
    nlohmann::ordered_json function_calls = nlohmann::ordered_json::array();  // [{name, arguments}]
};

ParsedReply parse_reply(const std::string& text, bool tools_offered);

}  // namespace cactus
