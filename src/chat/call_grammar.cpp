// JSON Schema -> xgrammar EBNF for the non-JSON call syntaxes (python for LFM2, gemma for
// FunctionGemma). JSON-syntax families (hermes, json) and Gemma 4 use xgrammar's own JSON Schema
// converter (Gemma 4 in its "gemma" style).
#include <map>
#include <set>

#include "chat/call_syntax.h"
#include "chat/tool_format.h"
#include "core/error.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

std::string ebnf_literal(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                out += c;
        }
    }
    return out + "\"";
}

class EbnfBuilder {
public:
    explicit EbnfBuilder(CallSyntax syntax) : syntax_(syntax), py_(syntax == CallSyntax::python) {}

    std::string grammar(const json& tools) {
        std::vector<std::string> calls;
        for (const auto& sig : tool_format::tool_signatures(tools)) {
            root_schema_ = &sig.second;
            refs_.clear();
            std::string args = object_members(sig.second, /*kwargs=*/true, 1);
            std::string body = py_ ? ebnf_literal(sig.first + "(") + " " + args + " " + ebnf_literal(")")
                                   : ebnf_literal(sig.first + "{") + " " + args + " " + ebnf_literal("}");
            calls.push_back(add_rule(body));
        }
        if (calls.empty()) fail("calls_ebnf: no tools");
        std::string any_call;
        for (size_t i = 0; i < calls.size(); ++i) any_call += (i ? " | " : "") + calls[i];
        std::string call = add_rule(any_call);
        std::string root = py_ ? call + " (" + ebnf_literal(", ") + " " + call + ")*" : call;
        std::string out = "root ::= " + root + "\n";
        out += primitives();
        for (const std::string& r : rules_) out += r + "\n";
        return out;
    }

private:
    std::string add_rule(const std::string& body) {
        std::string name = "r" + std::to_string(rules_.size());
        rules_.push_back(name + " ::= " + body);
        return name;
    }
    std::string reserve_rule() {
        std::string name = "r" + std::to_string(rules_.size());
        rules_.push_back("");
        return name;
    }
    void set_rule(const std::string& name, const std::string& body) {
        rules_[std::stoul(name.substr(1))] = name + " ::= " + body;
    }

    std::string sep() const { return ebnf_literal(py_ ? ", " : ","); }

    std::string primitives() const {
        std::string s;
        if (py_)
            s += "str ::= \"\\\"\" ([^\"\\\\\\n\\r] | \"\\\\\" [\"\\\\/bfnrtu'])* \"\\\"\"\n";
        else
            s += "str ::= \"<escape>\" [^<]* \"<escape>\"\n";
        s += "int ::= \"-\"? (\"0\" | [1-9] [0-9]*)\n";
        s += "num ::= int (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?\n";
        s += py_ ? "bool ::= \"True\" | \"False\"\nnul ::= \"None\"\n"
                 : "bool ::= \"true\" | \"false\"\nnul ::= \"null\"\n";
        std::string key = py_ ? "str " + ebnf_literal(": ") : "[a-zA-Z_] [a-zA-Z0-9_]* " + ebnf_literal(":");
        s += "anyval ::= str | num | bool | nul | anyarr | anyobj\n";
        s += "anyarr ::= \"[\" (anyval (" + sep() + " anyval)*)? \"]\"\n";
        s += "anyobj ::= \"{\" (" + key + " anyval (" + sep() + " " + key + " anyval)*)? \"}\"\n";
        return s;
    }

    // Members of an object schema, in schema order: required ones always, optional ones maybe.
    // kwargs: top-level call arguments (python k=v; gemma k:v); else a dict's inside.
    std::string object_members(const json& schema, bool kwargs, int depth) {
        if (!schema.contains("properties") || !schema["properties"].is_object() || schema["properties"].empty())
            return kwargs ? "\"\"" : "(" + any_members() + ")?";
        std::set<std::string> required;
        if (schema.contains("required") && schema["required"].is_array())
            for (const json& r : schema["required"])
                if (r.is_string()) required.insert(r.get<std::string>());
        std::vector<std::pair<std::string, bool>> members;  // (key-value expression, required)
        for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it) {
            std::string key;
            if (py_)
                key = kwargs ? ebnf_literal(it.key() + "=") : ebnf_literal(json(it.key()).dump() + ": ");
            else
                key = ebnf_literal(it.key() + ":");
            members.emplace_back(key + " " + value(it.value(), depth + 1), required.count(it.key()) > 0);
        }
        // first_i: members i.. with no separator yet; after_i: members i.. each after a separator.
        std::string first = "\"\"", after = "\"\"";
        for (size_t k = members.size(); k-- > 0;) {
            const auto& m = members[k];
            std::string f = m.first + " " + after;
            std::string a = sep() + " " + m.first + " " + after;
            if (!m.second) {
                f += " | " + first;
                a += " | " + after;
            }
            first = add_rule(f);
            after = add_rule(a);
        }
        return first;
    }

    std::string any_members() const {
        std::string key = py_ ? "str " + ebnf_literal(": ") : "[a-zA-Z_] [a-zA-Z0-9_]* " + ebnf_literal(":");
        return key + " anyval (" + sep() + " " + key + " anyval)*";
    }

    std::string resolve_ref(const std::string& ref, int depth) {
        auto known = refs_.find(ref);
        if (known != refs_.end()) return known->second;
        const json* target = nullptr;
        for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
            std::string p = prefix;
            if (ref.compare(0, p.size(), p) != 0) continue;
            std::string section = p.substr(2, p.size() - 3), name = ref.substr(p.size());
            if (root_schema_->contains(section) && (*root_schema_)[section].contains(name))
                target = &(*root_schema_)[section][name];
        }
        if (target == nullptr) fail("calls_ebnf: cannot resolve $ref '%s'", ref.c_str());
        std::string name = reserve_rule();
        refs_[ref] = name;
        set_rule(name, value(*target, depth + 1));
        return name;
    }

    std::string literal_of(const json& v) const { return ebnf_literal(write_literal(v, syntax_)); }

    std::string value(const json& schema, int depth) {
        if (depth > kMaxCallDepth) fail("calls_ebnf: schema nested deeper than %d levels", kMaxCallDepth);
        if (!schema.is_object() || schema.empty()) return "anyval";
        if (schema.contains("$ref") && schema["$ref"].is_string())
            return resolve_ref(schema["$ref"].get<std::string>(), depth);
        if (schema.contains("const")) return literal_of(schema["const"]);
        if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
            std::string alts;
            for (const json& v : schema["enum"]) alts += (alts.empty() ? "" : " | ") + literal_of(v);
            return "(" + alts + ")";
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!schema.contains(key) || !schema[key].is_array() || schema[key].empty()) continue;
            std::string alts;
            for (const json& s : schema[key]) alts += (alts.empty() ? "" : " | ") + value(s, depth + 1);
            return "(" + alts + ")";
        }
        if (schema.contains("type") && schema["type"].is_array()) {
            std::string alts;
            for (const json& t : schema["type"]) {
                json one = schema;
                one["type"] = t;
                alts += (alts.empty() ? "" : " | ") + value(one, depth + 1);
            }
            return alts.empty() ? "anyval" : "(" + alts + ")";
        }
        std::string type =
            schema.contains("type") && schema["type"].is_string() ? schema["type"].get<std::string>() : "";
        if (type.empty() && schema.contains("properties")) type = "object";
        if (type.empty() && schema.contains("items")) type = "array";
        if (type == "string") return "str";
        if (type == "integer") return "int";
        if (type == "number") return "num";
        if (type == "boolean") return "bool";
        if (type == "null") return "nul";
        if (type == "array") return array(schema, depth);
        if (type == "object") return add_rule("\"{\" " + object_members(schema, false, depth) + " \"}\"");
        return "anyval";
    }

    std::string array(const json& schema, int depth) {
        std::string item = schema.contains("items") ? value(schema["items"], depth + 1) : "anyval";
        size_t min_items = 0;
        if (schema.contains("minItems") && schema["minItems"].is_number_unsigned())
            min_items = std::min<size_t>(schema["minItems"].get<size_t>(), 16);
        std::string more = "(" + sep() + " " + item + ")*";
        if (min_items == 0) return add_rule("\"[\" (" + item + " " + more + ")? \"]\"");
        std::string body = "\"[\" " + item;
        for (size_t i = 1; i < min_items; ++i) body += " " + sep() + " " + item;
        return add_rule(body + " " + more + " \"]\"");
    }

    CallSyntax syntax_;
    bool py_;
    const json* root_schema_ = nullptr;
    std::vector<std::string> rules_;
    std::map<std::string, std::string> refs_;
};

}  // namespace

std::string calls_ebnf(const json& tools, CallSyntax syntax) {
    // Gemma 4's strings may hold '<'; its grammar is xgrammar's JSON Schema converter ("gemma" style).
    if (syntax == CallSyntax::gemma4) fail("calls_ebnf: Gemma 4 calls use xgrammar's gemma style, not this grammar");
    return EbnfBuilder(syntax).grammar(tools);
}

}  // namespace cactus
