#pragma once
// Constrained decoding for the server's requests: OpenAI's response_format (json_object,
// json_schema), Ollama's format ("json" or a schema) and forced tool calls (tool_choice required or
// a named function) become one compiled grammar (src/api/constraints.h picks it, as for the C API);
// each slot then samples under its own GrammarConstraint (scheduler.cpp).
#include <memory>

#include <nlohmann/json.hpp>

#include "sampling/grammar.h"

namespace cactus::server {

class Server;
using json = nlohmann::ordered_json;

struct OutputRule {
    json response_format;  // null, {"type":"json_object"} or {"type":"json_schema","json_schema":{...}}
    json tools;            // the tools shown to the model
    bool force_tools = false;
    const char* param = "response_format";  // the field an invalid schema is reported against
    bool parallel_calls = false;            // several forced calls in one reply (llama-server's default: no)
};

// OpenAI's response_format, validated (400 naming it); null for text or absent.
json openai_response_format(const json& body);
// Ollama's format: "json" → json_object, an object → that schema; null for "" or absent.
json ollama_format(const json& body);

// The compiled grammar for the rule, or null when the output is free. An invalid schema is a 400
// naming rule.param. Compiles are serialized (the vocabulary is built on first use) and cached.
std::shared_ptr<const CompiledConstraint> compile_rule(Server& server, const OutputRule& rule);

}  // namespace cactus::server
