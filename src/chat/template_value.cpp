#include "chat/template_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/json_escape.h"

namespace cactus {
namespace tmpl {

Value Value::new_list(ValueList items) {
    Value v;
    v.kind = Kind::List;
    v.list = std::make_shared<ValueList>(std::move(items));
    return v;
}

Value Value::new_dict() {
    Value v;
    v.kind = Kind::Dict;
    v.dict = std::make_shared<Dict>();
    return v;
}

Value Value::new_namespace() {
    Value v = new_dict();
    v.kind = Kind::Namespace;
    return v;
}

double Value::as_double() const {
    switch (kind) {
        case Kind::Int:
            return static_cast<double>(i);
        case Kind::Float:
            return f;
        case Kind::Bool:
            return b ? 1.0 : 0.0;
        default:
            fail("template: expected a number, got %s", kind_name(kind));
    }
}

bool Value::truthy() const {
    switch (kind) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
            return b;
        case Kind::Int:
            return i != 0;
        case Kind::Float:
            return f != 0.0;
        case Kind::String:
            return !s.empty();
        case Kind::List:
            return !list->empty();
        case Kind::Dict:
            return !dict->items.empty();
        case Kind::Namespace:
        case Kind::Callable:
            return true;
    }
    return false;
}

const Value* Dict::find(const Value& key) const {
    for (const auto& kv : items) {
        if (values_equal(kv.first, key)) return &kv.second;
    }
    return nullptr;
}

void Dict::set(const Value& key, Value value) {
    for (auto& kv : items) {
        if (values_equal(kv.first, key)) {
            kv.second = std::move(value);
            return;
        }
    }
    items.emplace_back(key, std::move(value));
}

const Value* CallArgs::keyword_arg(const char* name) const {
    for (const auto& kv : keyword) {
        if (kv.first == name) return &kv.second;
    }
    return nullptr;
}

const Value* CallArgs::arg(size_t index, const char* name) const {
    if (index < positional.size()) return &positional[index];
    return name ? keyword_arg(name) : nullptr;
}

const char* kind_name(Kind kind) {
    switch (kind) {
        case Kind::Undefined:
            return "undefined";
        case Kind::None:
            return "none";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::String:
            return "string";
        case Kind::List:
            return "list";
        case Kind::Dict:
            return "dict";
        case Kind::Namespace:
            return "namespace";
        case Kind::Callable:
            return "callable";
    }
    return "?";
}

bool values_equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind != Kind::Float && b.kind != Kind::Float) {
            int64_t x = a.kind == Kind::Bool ? a.b : a.i;
            int64_t y = b.kind == Kind::Bool ? b.b : b.i;
            return x == y;
        }
        return a.as_double() == b.as_double();
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
        case Kind::Undefined:
        case Kind::None:
            return true;
        case Kind::String:
            return a.s == b.s;
        case Kind::List: {
            if (a.list->size() != b.list->size()) return false;
            for (size_t k = 0; k < a.list->size(); ++k) {
                if (!values_equal((*a.list)[k], (*b.list)[k])) return false;
            }
            return true;
        }
        case Kind::Dict: {
            if (a.dict->items.size() != b.dict->items.size()) return false;
            for (const auto& kv : a.dict->items) {
                const Value* other = b.dict->find(kv.first);
                if (!other || !values_equal(kv.second, *other)) return false;
            }
            return true;
        }
        case Kind::Namespace:
            return a.dict == b.dict;
        case Kind::Callable:
            return a.fn == b.fn;
        default:
            return false;
    }
}

int compare_values(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind == Kind::Int && b.kind == Kind::Int) return a.i < b.i ? -1 : (a.i > b.i ? 1 : 0);
        double x = a.as_double(), y = b.as_double();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_string() && b.is_string()) {
        int c = a.s.compare(b.s);
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    if (a.kind == Kind::List && b.kind == Kind::List) {
        size_t n = std::min(a.list->size(), b.list->size());
        for (size_t k = 0; k < n; ++k) {
            if (!values_equal((*a.list)[k], (*b.list)[k])) return compare_values((*a.list)[k], (*b.list)[k]);
        }
        return a.list->size() < b.list->size() ? -1 : (a.list->size() > b.list->size() ? 1 : 0);
    }
    fail("template: cannot order %s and %s", kind_name(a.kind), kind_name(b.kind));
}

std::string python_float_repr(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[64];
    int precision = 1;
    for (; precision <= 17; ++precision) {
        snprintf(buf, sizeof buf, "%.*e", precision - 1, x);
        if (strtod(buf, nullptr) == x) break;
    }
    // buf = "d.ddde[+-]XX": split digits and exponent, then lay out as Python's repr does.
    std::string text(buf);
    size_t e_pos = text.find('e');
    int exponent = atoi(text.c_str() + e_pos + 1);
    bool negative = text[0] == '-';
    std::string digits;
    for (size_t k = negative ? 1 : 0; k < e_pos; ++k) {
        if (text[k] != '.') digits += text[k];
    }
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
    std::string out = negative ? "-" : "";
    if (exponent < -4 || exponent >= 16) {
        out += digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out + buf;
    }
    if (exponent < 0) return out + "0." + std::string(-exponent - 1, '0') + digits;
    if (static_cast<int>(digits.size()) <= exponent + 1) {
        return out + digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    }
    return out + digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
}

static std::string repr_string(const std::string& s) {
    bool has_single = s.find('\'') != std::string::npos;
    bool has_double = s.find('"') != std::string::npos;
    char quote = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        if (c == '\\')
            out += "\\\\";
        else if (c == static_cast<unsigned char>(quote)) {
            out += '\\';
            out += quote;
        } else if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (c == '\t')
            out += "\\t";
        else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else
            out += static_cast<char>(c);
    }
    return out + quote;
}

std::string to_repr(const Value& v) {
    switch (v.kind) {
        case Kind::String:
            return repr_string(v.s);
        case Kind::List: {
            std::string out = "[";
            for (size_t k = 0; k < v.list->size(); ++k) {
                if (k) out += ", ";
                out += to_repr((*v.list)[k]);
            }
            return out + "]";
        }
        case Kind::Dict: {
            std::string out = "{";
            bool first = true;
            for (const auto& kv : v.dict->items) {
                if (!first) out += ", ";
                first = false;
                out += to_repr(kv.first) + ": " + to_repr(kv.second);
            }
            return out + "}";
        }
        case Kind::Namespace: {
            Value plain = v;
            plain.kind = Kind::Dict;
            return "<Namespace " + to_repr(plain) + ">";
        }
        default:
            return to_str(v);
    }
}

std::string to_str(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined:
            return "";
        case Kind::None:
            return "None";
        case Kind::Bool:
            return v.b ? "True" : "False";
        case Kind::Int:
            return std::to_string(v.i);
        case Kind::Float:
            return python_float_repr(v.f);
        case Kind::String:
            return v.s;
        case Kind::Callable:
            return "<function " + v.fn->name + ">";
        default:
            return to_repr(v);
    }
}

static std::string json_float(double x) {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    return python_float_repr(x);
}

static std::string json_key(const Value& key) {
    switch (key.kind) {
        case Kind::String:
            return key.s;
        case Kind::Int:
            return std::to_string(key.i);
        case Kind::Float:
            return json_float(key.f);
        case Kind::Bool:
            return key.b ? "true" : "false";
        case Kind::None:
            return "null";
        default:
            fail("template: tojson: keys must be str, int, float, bool or None, not %s", kind_name(key.kind));
    }
}

static void json_dump(const Value& v, int indent, int level, std::string& out, int depth) {
    if (depth > 256) fail("template: tojson: value nested deeper than 256 levels");
    std::string newline;
    if (indent >= 0) newline = "\n" + std::string(static_cast<size_t>(indent) * (level + 1), ' ');
    const char* item_sep = indent >= 0 ? "," : ", ";
    std::string close_line = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent) * level, ' ') : "";
    switch (v.kind) {
        case Kind::None:
            out += "null";
            return;
        case Kind::Bool:
            out += v.b ? "true" : "false";
            return;
        case Kind::Int:
            out += std::to_string(v.i);
            return;
        case Kind::Float:
            out += json_float(v.f);
            return;
        case Kind::String:
            append_json_string(out, v.s);
            return;
        case Kind::List: {
            if (v.list->empty()) {
                out += "[]";
                return;
            }
            out += "[";
            for (size_t k = 0; k < v.list->size(); ++k) {
                if (k) out += item_sep;
                out += newline;
                json_dump((*v.list)[k], indent, level + 1, out, depth + 1);
            }
            out += close_line + "]";
            return;
        }
        case Kind::Dict: {
            if (v.dict->items.empty()) {
                out += "{}";
                return;
            }
            out += "{";
            bool first = true;
            for (const auto& kv : v.dict->items) {
                if (!first) out += item_sep;
                first = false;
                out += newline;
                append_json_string(out, json_key(kv.first));
                out += ": ";
                json_dump(kv.second, indent, level + 1, out, depth + 1);
            }
            out += close_line + "}";
            return;
        }
        default:
            fail("template: tojson: object of type %s is not JSON serializable", kind_name(v.kind));
    }
}

std::string to_json(const Value& v, int indent) {
    std::string out;
    json_dump(v, indent, 0, out, 0);
    return out;
}

static Value from_json_at(const nlohmann::ordered_json& j, int depth) {
    if (depth > 512) fail("template: context JSON nested deeper than 512 levels");
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value::boolean(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value::integer(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            uint64_t u = j.get<uint64_t>();
            if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
            return Value::integer(static_cast<int64_t>(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value::number(j.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value::string(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            ValueList items;
            items.reserve(j.size());
            for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
            return Value::new_list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            Value d = Value::new_dict();
            for (auto it = j.begin(); it != j.end(); ++it) {
                d.dict->items.emplace_back(Value::string(it.key()), from_json_at(it.value(), depth + 1));
            }
            return d;
        }
        default:
            fail("template: unsupported JSON value in context");
    }
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

std::vector<std::string> utf8_chars(const std::string& s) {
    std::vector<std::string> out;
    size_t k = 0;
    while (k < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[k]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (k + len > s.size()) len = 1;
        out.push_back(s.substr(k, len));
        k += len;
    }
    return out;
}

size_t utf8_length(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

namespace {

// Nesting of v's containers (0 for a scalar). depth_of caches finished containers; on_path holds
// the containers being walked, so reaching one again is a cycle.
struct NestingWalk {
    int line;
    std::unordered_map<const void*, int> depth_of;
    std::unordered_set<const void*> on_path;

    int walk(const Value& v, int level) {
        const void* id = v.list   ? static_cast<const void*>(v.list.get())
                         : v.dict ? static_cast<const void*>(v.dict.get())
                                  : nullptr;
        if (id == nullptr) return 0;
        auto known = depth_of.find(id);
        if (known != depth_of.end()) return known->second;
        if (level >= kMaxValueNesting || on_path.count(id)) {
            fail(
                "template: value nested deeper than %d levels or containing itself (kMaxValueNesting) "
                "at line %d",
                kMaxValueNesting, line);
        }
        on_path.insert(id);
        int deepest = 0;
        if (v.list) {
            for (const Value& item : *v.list) deepest = std::max(deepest, walk(item, level + 1));
        } else {
            for (const auto& kv : v.dict->items) deepest = std::max(deepest, walk(kv.second, level + 1));
        }
        on_path.erase(id);
        depth_of[id] = deepest + 1;
        return deepest + 1;
    }
};

}  // namespace

void check_string_size(size_t bytes, const char* what, int line) {
    if (bytes > kMaxStringBytes) {
        fail("template: %s would make a string of %zu bytes, more than %zu (kMaxStringBytes) at line %d", what, bytes,
             kMaxStringBytes, line);
    }
}

void check_value_nesting(const Value& v, int line) {
    NestingWalk walk{line, {}, {}};
    walk.walk(v, 0);
}

}  // namespace tmpl
}  // namespace cactus
