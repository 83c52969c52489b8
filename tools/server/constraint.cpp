#include "constraint.h"

#include <mutex>

#include "api/constraints.h"
#include "api/request.h"
#include "params.h"
#include "server.h"

namespace cactus::server {

json openai_response_format(const json& body) {
    const json* rf = field(body, "response_format");
    if (rf == nullptr) return json();
    try {
        return api::parse_response_format(*rf);
    } catch (const std::exception& e) {
        throw HttpError{400, e.what(), "response_format"};
    }
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
    api::ApiOptions options;
    options.response_format = rule.response_format;
    options.force_tools = rule.force_tools;
    options.parallel_tool_calls = rule.parallel_calls;
    options.constrain_tool_calls = false;  // free text around calls unless they are forced
    static std::mutex compile_mutex;
    std::lock_guard<std::mutex> lock(compile_mutex);
    try {
        std::optional<ConstraintSpec> spec =
            api::constraint_for(server.backend().engine().tool_format(), rule.tools, options);
        if (!spec) return nullptr;
        return server.backend().grammar_vocab().compile(*spec);
    } catch (const std::exception& e) {
        throw HttpError{400, std::string("invalid '") + rule.param + "': " + e.what(), rule.param};
    }
}

}  // namespace cactus::server
