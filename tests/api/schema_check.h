#pragma once
// Checks a JSON value against the JSON Schema subset that tool parameters use here: type, enum,
// const, properties, required, additionalProperties (false unless true or a schema: strict mode,
// as the grammar applies it), items, minItems, maxItems, minimum, maximum, minLength, maxLength,
// pattern (ECMAScript), anyOf and $ref into the root's $defs. An independent check of what the
// grammar let through (python/tests use the jsonschema package for the same).
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

namespace cactus::testing {

// Returns "" when v is valid, else the first problem with its JSON path.
inline std::string schema_problem(const nlohmann::ordered_json& v, const nlohmann::ordered_json& schema,
                                  const nlohmann::ordered_json& root, const std::string& at = "$") {
    using json = nlohmann::ordered_json;
    const json* s = &schema;
    if (s->contains("$ref")) {
        const std::string ref = (*s)["$ref"].get<std::string>(), prefix = "#/$defs/";
        if (ref.rfind(prefix, 0) != 0 || !root.contains("$defs") || !root["$defs"].contains(ref.substr(prefix.size())))
            return at + ": unresolvable $ref " + ref;
        s = &root["$defs"][ref.substr(prefix.size())];
    }
    if (s->contains("anyOf")) {
        for (const json& alt : (*s)["anyOf"])
            if (schema_problem(v, alt, root, at).empty()) return "";
        return at + ": no anyOf branch matches " + v.dump();
    }
    if (s->contains("enum")) {
        for (const json& e : (*s)["enum"])
            if (e == v) return "";
        return at + ": " + v.dump() + " not in enum";
    }
    if (s->contains("const") && (*s)["const"] != v) return at + ": not the const";
    const std::string type = s->value("type", "");
    const bool type_ok = type.empty() || (type == "string" && v.is_string()) ||
                         (type == "integer" && v.is_number_integer()) || (type == "number" && v.is_number()) ||
                         (type == "boolean" && v.is_boolean()) || (type == "null" && v.is_null()) ||
                         (type == "array" && v.is_array()) || (type == "object" && v.is_object());
    if (!type_ok) return at + ": " + v.dump() + " is not of type " + type;
    if (v.is_number()) {
        const double x = v.get<double>();
        if (s->contains("minimum") && x < (*s)["minimum"].get<double>()) return at + ": below minimum";
        if (s->contains("maximum") && x > (*s)["maximum"].get<double>()) return at + ": above maximum";
    }
    if (v.is_string()) {
        const std::string text = v.get<std::string>();
        // Lengths in characters (UTF-8 continuation bytes do not count).
        size_t chars = 0;
        for (unsigned char c : text) chars += (c & 0xC0) != 0x80;
        if (s->contains("minLength") && chars < (*s)["minLength"].get<size_t>()) return at + ": shorter than minLength";
        if (s->contains("maxLength") && chars > (*s)["maxLength"].get<size_t>()) return at + ": longer than maxLength";
        if (s->contains("pattern") && !std::regex_search(text, std::regex((*s)["pattern"].get<std::string>())))
            return at + ": " + v.dump() + " does not match " + (*s)["pattern"].get<std::string>();
    }
    if (v.is_array()) {
        if (s->contains("minItems") && v.size() < (*s)["minItems"].get<size_t>()) return at + ": fewer than minItems";
        if (s->contains("maxItems") && v.size() > (*s)["maxItems"].get<size_t>()) return at + ": more than maxItems";
        if (s->contains("items")) {
            for (size_t i = 0; i < v.size(); ++i) {
                std::string p = schema_problem(v[i], (*s)["items"], root, at + "[" + std::to_string(i) + "]");
                if (!p.empty()) return p;
            }
        }
    }
    if (v.is_object()) {
        const json properties = s->value("properties", json::object());
        for (const json& r : s->value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return at + ": missing required " + r.dump();
        const json extra = s->value("additionalProperties", json(false));
        for (auto it = v.begin(); it != v.end(); ++it) {
            const std::string here = at + "." + it.key();
            if (properties.contains(it.key())) {
                std::string p = schema_problem(it.value(), properties[it.key()], root, here);
                if (!p.empty()) return p;
            } else if (extra.is_object()) {
                std::string p = schema_problem(it.value(), extra, root, here);
                if (!p.empty()) return p;
            } else if (extra != json(true)) {
                return here + ": not a property of the schema";
            }
        }
    }
    return "";
}

}  // namespace cactus::testing
