#pragma once
// Helpers of the protocols translated into chat requests (responses_api.cpp, anthropic_api.cpp).
#include <string>

#include "server.h"

namespace cactus::server {

// Chat content parts → one string when they are all text: chat templates concatenate a message's
// content as a string, and only messages with images need the parts kept.
inline json joined_text_parts(const json& parts) {
    std::string text;
    for (const json& part : parts) {
        if (part.value("type", "") != "text") return parts;
        text += part.value("text", "");
    }
    return text;
}

// One server-sent event with an `event:` line, as the Responses and Messages APIs send them.
inline std::string sse_event(const std::string& type, const json& data) {
    return "event: " + type + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace cactus::server
