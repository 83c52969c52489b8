#pragma once
// cactus_complete's cloud hand-off (the client is api/handoff.h): with CACTUS_HANDOFF_URL set and
// auto_handoff on, a completion whose first tokens have a mean probability below
// confidence_threshold (or any completion when it is >= 1) is sent to the endpoint as an OpenAI chat
// request, and the endpoint's answer replaces the local one in the response JSON.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/handoff.h"
#include "api/request.h"

namespace cactus::api {

// The endpoint for this call (CACTUS_HANDOFF_*, cloud_timeout_ms), or nullopt when there is none
// or auto_handoff is off.
std::optional<HandoffConfig> handoff_config(const ApiOptions& options);

// Whether the options force the hand-off (confidence_threshold >= 1).
inline bool handoff_forced(const ApiOptions& options) { return options.confidence_threshold >= 1.0; }

// The conversation as an OpenAI chat request: messages (tool-call arguments as JSON text), tools,
// max_tokens, temperature, top_p, seed, stop, tool_choice (force_tools), response_format.
nlohmann::ordered_json chat_request(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                    const ApiOptions& options);

struct CloudOutcome {
    bool answered = false;
    std::string reason;  // why it was handed off
    std::string error;   // set when the hand-off failed (the local answer stands)
    nlohmann::ordered_json answer;
};

// POSTs request to <url>/chat/completions; never throws (a bad URL is an error like a refused connection).
CloudOutcome hand_off(const HandoffConfig& config, const nlohmann::ordered_json& request, const std::string& reason);

// Puts the outcome into a completion response: the endpoint's text, function_calls (arguments
// parsed when they are JSON), finish_reason and model with cloud_handoff true, or
// cloud_handoff_error next to the local answer.
void apply_outcome(nlohmann::ordered_json& response, const CloudOutcome& outcome);

}  // namespace cactus::api
