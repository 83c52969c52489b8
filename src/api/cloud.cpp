#include "api/cloud.h"

#include <exception>

#include "chat/json_parse.h"

namespace cactus::api {

using json = nlohmann::ordered_json;

namespace {

// OpenAI's shape of an assistant message's calls: {id, type, function: {name, arguments: "JSON"}}.
json openai_tool_calls(const json& calls) {
    json out = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        json call = calls[i];
        if (!call.contains("id")) call["id"] = "call_" + std::to_string(i);
        if (!call.contains("type")) call["type"] = "function";
        if (call.contains("function") && call["function"].is_object()) {
            json& args = call["function"]["arguments"];
            if (!args.is_string()) args = args.is_null() ? std::string("{}") : args.dump();
        }
        out.push_back(std::move(call));
    }
    return out;
}

// [{name, arguments}] from the endpoint's tool_calls; arguments that are not JSON stay strings.
json function_calls_of(const json& message) {
    json calls = json::array();
    const json tool_calls = message.value("tool_calls", json::array());
    if (!tool_calls.is_array()) return calls;
    for (const json& call : tool_calls) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        const json& f = call["function"];
        json args = f.value("arguments", json::object());
        json parsed;
        if (args.is_string() && try_parse_json(args.get<std::string>(), parsed)) args = parsed;
        calls.push_back(json{{"name", f.value("name", "")}, {"arguments", args}});
    }
    return calls;
}

}  // namespace

std::optional<HandoffConfig> handoff_config(const ApiOptions& options) {
    if (!options.auto_handoff) return std::nullopt;
    HandoffConfig config;
    handoff_from_environment(config);
    if (config.url.empty()) return std::nullopt;
    config.timeout_ms = options.cloud_timeout_ms;
    config.confidence_threshold = options.confidence_threshold;
    return config;
}

json chat_request(const json& messages, const json& tools, const ApiOptions& options) {
    json body = json::object();
    json sent = messages;
    for (json& m : sent)
        if (m.contains("tool_calls") && m["tool_calls"].is_array())
            m["tool_calls"] = openai_tool_calls(m["tool_calls"]);
    body["messages"] = std::move(sent);
    const GenerationOptions& g = options.generation;
    body["max_tokens"] = g.max_tokens;
    body["temperature"] = g.sampling.temperature;
    if (g.sampling.top_p > 0.0f && g.sampling.top_p < 1.0f) body["top_p"] = g.sampling.top_p;
    if (g.sampling.seed != 0) body["seed"] = g.sampling.seed;
    if (!g.stop_sequences.empty()) body["stop"] = g.stop_sequences;
    if (!tools.empty()) {
        body["tools"] = tools;
        if (options.force_tools) body["tool_choice"] = "required";
    }
    if (!options.response_format.is_null()) body["response_format"] = options.response_format;
    return body;
}

CloudOutcome hand_off(const HandoffConfig& config, const json& request, const std::string& reason) {
    CloudOutcome out;
    out.reason = reason;
    try {
        HandoffClient client(config);
        out.answered = client.post("chat/completions", request, &out.answer, &out.error);
    } catch (const std::exception& e) {
        out.error = e.what();
    }
    return out;
}

void apply_outcome(json& response, const CloudOutcome& outcome) {
    if (!outcome.answered) {
        if (!outcome.error.empty()) response["cloud_handoff_error"] = outcome.error;
        return;
    }
    const json& choice = outcome.answer["choices"][0];
    const json message = choice.value("message", json::object());
    const json content = message.is_object() ? message.value("content", json(nullptr)) : json(nullptr);
    response["cloud_handoff"] = true;
    response["cloud_handoff_reason"] = outcome.reason;
    response["cloud_handoff_model"] = outcome.answer.value("model", "");
    response["response"] = content.is_string() ? content.get<std::string>() : std::string();
    response["thinking"] = "";
    response["function_calls"] = message.is_object() ? function_calls_of(message) : json::array();
    response["finish_reason"] = choice.value("finish_reason", json("stop"));
}

}  // namespace cactus::api
