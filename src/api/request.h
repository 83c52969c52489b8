#pragma once
// The C API's JSON inputs, parsed with a real parser and validated: messages, tools and options.
// Every problem is a cactus::Error naming the key or the message index.
#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace cactus::api {

// ours: speculative decoding (docs/API.md). Like the context options, a key a request leaves out
// keeps the handle's current setting, so the draft model loads once, not per request.
struct SpecRequest {
    std::optional<SpecType> type;            // spec_type
    std::optional<std::string> draft_model;  // as given: a .gguf path or a known model name
    std::optional<size_t> draft_max, draft_min;
    bool given() const { return type || draft_model || draft_max || draft_min; }
};

struct ApiOptions {
    GenerationOptions generation;
    bool force_tools = false;                // the reply must be one or more calls of the given tools
    bool parallel_tool_calls = true;         // with force_tools: false = exactly one call, then the end
    bool constrain_tool_calls = true;        // lazy grammar: free text until a call marker, then the call grammar
    nlohmann::ordered_json response_format;  // null, {"type":"json_object"} or {"type":"json_schema",...}
    int tool_rag_top_k = 2;
    bool enable_thinking = false;
    bool auto_handoff = true;
    double confidence_threshold = 0.7;
    int cloud_timeout_ms = 15000;
    bool handoff_with_images = true;
    bool timestamps = false;
    std::string language;
    // ours: context and KV cache (see docs/API.md)
    EngineContextOptions context;
    SpecRequest spec;
};

// Parses options_json (NULL or "" = defaults). Unknown keys, wrong types and out-of-range values
// are errors naming the key.
ApiOptions parse_options(const char* options_json);

// The handle's speculative settings `current` with the request's keys applied. A draft_model is
// resolved like cactus_init's model_path and implies spec_type "draft" when that is not given; with
// spec_type "ngram" or "off" it is not used. spec_type "draft" without a draft model, or draft_min
// above draft_max, are errors naming the options. The draft model is loaded later
// (Engine::set_speculative).
SpecOptions speculative_options(const SpecOptions& current, const SpecRequest& request);

// Validates OpenAI's response_format ({"type": "text" | "json_object" | "json_schema", ...});
// returns null for text. Errors name response_format.
nlohmann::ordered_json parse_response_format(const nlohmann::ordered_json& value);

// Parses and normalizes messages_json: a non-empty array of {role, content, ...}. Content-part
// arrays are accepted; tool_calls arguments given as JSON strings become objects.
nlohmann::ordered_json parse_messages(const char* messages_json);

// Parses tools_json (NULL or "" = no tools): an array of {type:"function", function:{name, ...}}.
nlohmann::ordered_json parse_tools(const char* tools_json);

// Keeps the k tools most relevant to the last user message (k <= 0 keeps all), in their order.
nlohmann::ordered_json select_tools(const nlohmann::ordered_json& tools, const nlohmann::ordered_json& messages, int k);

// Parses JSON text after checking its nesting depth (deep nesting is rejected before parsing, so
// hostile inputs cannot exhaust a small thread stack). `what` names the argument in errors.
nlohmann::ordered_json parse_json_text(const char* text, const char* what);

}  // namespace cactus::api
