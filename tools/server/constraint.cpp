#include "constraint.h"

#include <mutex>

#include "api/constraints.h"
#include "api/request.h"
#include "params.h"
#include "server.h"

namespace cactus::server {

namespace {

json schema_format(json schema, const char* from) {
    if (schema.is_object() && schema.empty()) schema = json{{"type", "object"}};  // any object, as llama-server
    if (!schema.is_object() && !schema.is_boolean())
        throw HttpError{400, std::string("'") + from + "' must be a JSON schema object", from};
    return json{{"type", "json_schema"}, {"json_schema", {{"name", from}, {"schema", schema}}}, {"field", from}};
}

// OpenAI's response_format, with llama-server's json_object that holds a schema.
json read_response_format(const json& body) {
    const json* rf = field(body, "response_format");
    if (rf == nullptr) return json();
    if (rf->is_object() && rf->value("type", json()) == "json_object" && rf->contains("schema") &&
        !(*rf)["schema"].is_null())
        return schema_format((*rf)["schema"], "response_format");
    try {
        return api::parse_response_format(*rf);
    } catch (const std::exception& e) {
        throw HttpError{400, e.what(), "response_format"};
    }
}

}  // namespace

json openai_response_format(const json& body) {
    json format = read_response_format(body);
    const json* schema = field(body, "json_schema");
    const json* grammar = field(body, "grammar");
    if (grammar != nullptr && (!grammar->is_string() || grammar->get<std::string>().empty()))
        throw HttpError{400, "'grammar' must be a non-empty GBNF grammar string", "grammar"};
    if (grammar != nullptr && schema != nullptr)
        throw HttpError{400, "'grammar' and 'json_schema' cannot both be set", "grammar"};
    if (grammar != nullptr && !format.is_null())
        throw HttpError{400, "'grammar' and a JSON 'response_format' cannot both be set", "grammar"};
    if (grammar != nullptr)
        return json{{"type", "grammar"}, {"grammar", grammar->get<std::string>()}, {"field", "grammar"}};
    if (schema == nullptr) return format;
    // A plain json_object gives way to the schema (llama-server); a schema in both places is ambiguous.
    if (!format.is_null() && !(format["type"] == "json_object" && !format.contains("field")))
        throw HttpError{400, "'json_schema' and a 'response_format' schema cannot both be set", "json_schema"};
    return schema_format(*schema, "json_schema");
}

json ollama_format(const json& body) {
    const json* format = field(body, "format");
    if (format == nullptr || (format->is_string() && format->get<std::string>().empty())) return json();
    if (format->is_string() && format->get<std::string>() == "json") return json{{"type", "json_object"}};
    if (format->is_object())
        return json{{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *format}}}};
    throw HttpError{400, "'format' must be \"json\" or a JSON schema object", "format"};
}

std::shared_ptr<const CompiledConstraint> compile_rule(Server& server, const OutputRule& rule) {
    if (rule.response_format.is_null() && !rule.force_tools) return nullptr;
    const bool own_field = !rule.force_tools && rule.response_format.contains("field");
    const std::string param = own_field ? rule.response_format["field"].get<std::string>() : rule.param;
    if (rule.force_tools && !rule.response_format.is_null())
        throw HttpError{400,
                        "a forced tool call ('tool_choice') and '" +
                            rule.response_format.value("field", std::string("response_format")) +
                            "' cannot both constrain the reply",
                        "tool_choice"};
    api::ApiOptions options;
    options.response_format = rule.response_format;
    options.force_tools = rule.force_tools;
    options.parallel_tool_calls = rule.parallel_calls;
    options.constrain_tool_calls = false;  // free text around calls unless they are forced
    static std::mutex compile_mutex;
    std::lock_guard<std::mutex> lock(compile_mutex);
    try {
        std::optional<ConstraintSpec> spec;
        if (rule.response_format.is_object() &&
            rule.response_format.value("type", "") == "grammar")  // llama-server's GBNF: xgrammar reads GBNF
            spec = ConstraintSpec{ConstraintSpec::Kind::ebnf, rule.response_format["grammar"].get<std::string>()};
        else
            spec = api::constraint_for(server.backend().engine().tool_format(), rule.tools, options);
        if (!spec) return nullptr;
        return server.backend().grammar_vocab().compile(*spec);
    } catch (const std::exception& e) {
        throw HttpError{400, "invalid '" + param + "': " + e.what(), param};
    }
}

}  // namespace cactus::server
