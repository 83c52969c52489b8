#include "api/constraints.h"

#include "chat/json_parse.h"

#include "chat/tool_format.h"
#include "core/error.h"

namespace cactus::api {

using json = nlohmann::ordered_json;

namespace {

// With thinking on, a constrained reply may open with <think>...</think> first.
std::string with_thinking(const json& inner_format) {
    json think = {{"type", "tag"}, {"begin", "<think>"}, {"content", json{{"type", "any_text"}}}, {"end", "</think>"}};
    json format = {{"type", "sequence"},
                   {"elements", json::array({json{{"type", "optional"}, {"content", think}}, inner_format})}};
    return json{{"type", "structural_tag"}, {"format", format}}.dump();
}

ConstraintSpec schema_spec(const json& schema, bool thinking) {
    if (thinking) {
        return ConstraintSpec{ConstraintSpec::Kind::structural_tag,
                              with_thinking(json{{"type", "json_schema"}, {"json_schema", schema}})};
    }
    return ConstraintSpec{ConstraintSpec::Kind::json_schema, schema.dump()};
}

}  // namespace

std::optional<ConstraintSpec> constraint_for(const ToolFormat& format, const json& tools, const ApiOptions& o) {
    if (o.force_tools && tools.empty()) fail("options: force_tools is set but no tools were given");
    if (o.force_tools) {
        std::string tag = format.call_grammar(tools, /*force=*/true);
        if (o.enable_thinking) tag = with_thinking(parse_json(tag, "tool grammar")["format"]);
        return ConstraintSpec{ConstraintSpec::Kind::structural_tag, tag};
    }
    if (!o.response_format.is_null()) {
        const std::string type = o.response_format["type"].get<std::string>();
        if (type == "json_object") return schema_spec(json{{"type", "object"}}, o.enable_thinking);
        return schema_spec(o.response_format["json_schema"]["schema"], o.enable_thinking);
    }
    if (!tools.empty() && o.constrain_tool_calls)
        return ConstraintSpec{ConstraintSpec::Kind::structural_tag, format.call_grammar(tools, /*force=*/false)};
    return std::nullopt;
}

}  // namespace cactus::api
