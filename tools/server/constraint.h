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
    json response_format;  // null, {"type":"json_object"}, {"type":"json_schema","json_schema":{...}} or
                           // {"type":"grammar","grammar":GBNF}; "field": the request field it came from
    json tools;            // the tools shown to the model
    bool force_tools = false;
    const char* param = "response_format";  // the field an invalid schema is reported against
    bool parallel_calls = false;            // several forced calls in one reply (llama-server's default: no)
};

// The request's output constraint, validated (400 naming the field): OpenAI's response_format
// (llama-server's json_object may hold a "schema"), or llama-server's top-level json_schema or
// grammar (GBNF) as {"type":"json_schema"|"grammar", ..., "field": the request field}; null for
// free text. Two of them at once is a 400 (a plain json_object gives way to json_schema).
json openai_response_format(const json& body);
// Ollama's format: "json" → json_object, an object → that schema; null for "" or absent.
json ollama_format(const json& body);

// The compiled grammar for the rule, or null when the output is free. An invalid schema is a 400
// naming rule.param. Compiles are serialized (the vocabulary is built on first use) and cached.
std::shared_ptr<const CompiledConstraint> compile_rule(Server& server, const OutputRule& rule);

}  // namespace cactus::server
