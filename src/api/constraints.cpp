#include "api/constraints.h"

#include "chat/json_parse.h"

#include "chat/tool_format.h"
#include "core/error.h"

namespace cactus::api {

using json = nlohmann::ordered_json;

namespace {

// With thinking on, a constrained reply may open with the family's thinking block
// (<think>...</think>, Gemma 4's <|channel>...<channel|>) before the constrained part; when the
// prompt opened the block, the reply starts inside it and closes it first.
std::string with_thinking(const json& inner_format, const HiddenRegion& block, bool opened) {
    json think = {{"type", "tag"},
                  {"begin", opened ? std::string() : block.open},
                  {"content", json{{"type", "any_text"}}},
                  {"end", block.close}};
    json first = opened ? think : json{{"type", "optional"}, {"content", think}};
    json format = {{"type", "sequence"}, {"elements", json::array({first, inner_format})}};
    return json{{"type", "structural_tag"}, {"format", format}}.dump();
}

// A forced call grammar that ends after its first call (the family formats list calls one after
// another as "tags_with_separator").
std::string one_call_only(const std::string& tag) {
    json spec = parse_json(tag, "tool grammar");
    json& format = spec["format"];
    if (format.value("type", "") == "tags_with_separator") format["stop_after_first"] = true;
    return spec.dump();
}

struct Thinking {
    bool on;
    HiddenRegion block;
    bool opened;
};

ConstraintSpec schema_spec(const json& schema, const Thinking& t) {
    if (t.on) {
        return ConstraintSpec{ConstraintSpec::Kind::structural_tag,
                              with_thinking(json{{"type", "json_schema"}, {"json_schema", schema}}, t.block, t.opened)};
    }
    return ConstraintSpec{ConstraintSpec::Kind::json_schema, schema.dump()};
}

}  // namespace

std::optional<ConstraintSpec> constraint_for(const ToolFormat& format, const json& tools, const ApiOptions& o,
                                             bool prompt_opened_thinking) {
    if (o.force_tools && tools.empty()) fail("options: force_tools is set but no tools were given");
    // A prompt that opened the block thinks whatever the option says (the template decided).
    const Thinking thinking{o.enable_thinking || prompt_opened_thinking, format.thinking_region(),
                            prompt_opened_thinking};
    if (o.force_tools) {
        std::string tag = format.call_grammar(tools, /*force=*/true);
        if (!o.parallel_tool_calls) tag = one_call_only(tag);
        if (thinking.on)
            tag = with_thinking(parse_json(tag, "tool grammar")["format"], thinking.block, thinking.opened);
        return ConstraintSpec{ConstraintSpec::Kind::structural_tag, tag};
    }
    if (!o.response_format.is_null()) {
        const std::string type = o.response_format["type"].get<std::string>();
        if (type == "json_object") return schema_spec(json{{"type", "object"}}, thinking);
        return schema_spec(o.response_format["json_schema"]["schema"], thinking);
    }
    if (!tools.empty() && o.constrain_tool_calls)
        return ConstraintSpec{ConstraintSpec::Kind::structural_tag, format.call_grammar(tools, /*force=*/false)};
    return std::nullopt;
}

}  // namespace cactus::api
