#pragma once
// Values of the chat-template engine (a Jinja2 subset): Python-like semantics for truthiness,
// equality, str()/repr() and json.dumps, because renders must equal what transformers'
// apply_chat_template (jinja2) produces. Lists, dicts and namespaces are shared by reference, as
// in Python; dicts keep insertion order.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace cactus {
namespace tmpl {

struct Value;
using ValueList = std::vector<Value>;
struct Dict;
struct Callable;

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

struct Value {
    Kind kind = Kind::Undefined;
    bool b = false;
    int64_t i = 0;
    double f = 0.0;
    std::string s;                    // String; for Undefined: the name that was missing (hint)
    std::shared_ptr<ValueList> list;  // List
    std::shared_ptr<Dict> dict;       // Dict, Namespace
    std::shared_ptr<Callable> fn;     // Callable

    static Value undefined(const std::string& hint = "") {
        Value v;
        v.s = hint;
        return v;
    }
    static Value none() {
        Value v;
        v.kind = Kind::None;
        return v;
    }
    static Value boolean(bool x) {
        Value v;
        v.kind = Kind::Bool;
        v.b = x;
        return v;
    }
    static Value integer(int64_t x) {
        Value v;
        v.kind = Kind::Int;
        v.i = x;
        return v;
    }
    static Value number(double x) {
        Value v;
        v.kind = Kind::Float;
        v.f = x;
        return v;
    }
    static Value string(std::string x) {
        Value v;
        v.kind = Kind::String;
        v.s = std::move(x);
        return v;
    }
    static Value new_list(ValueList items = {});
    static Value new_dict();
    static Value new_namespace();

    bool is_undefined() const { return kind == Kind::Undefined; }
    bool is_none() const { return kind == Kind::None; }
    bool is_string() const { return kind == Kind::String; }
    bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
    bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
    double as_double() const;
    bool truthy() const;
};

// Insertion-ordered map; keys are hashable Values (strings, numbers, booleans, none).
struct Dict {
    std::vector<std::pair<Value, Value>> items;
    const Value* find(const Value& key) const;
    void set(const Value& key, Value value);
};

struct CallArgs {
    ValueList positional;
    std::vector<std::pair<std::string, Value>> keyword;
    const Value* keyword_arg(const char* name) const;
    // Positional index `index` or keyword `name`, else nullptr.
    const Value* arg(size_t index, const char* name) const;
};

struct Callable {
    std::string name;
    std::function<Value(const CallArgs&)> call;
};

const char* kind_name(Kind kind);
bool values_equal(const Value& a, const Value& b);
// <0, 0, >0 like Python's ordering; throws for unorderable types.
int compare_values(const Value& a, const Value& b);
std::string to_str(const Value& v);   // Python str(); Undefined renders as ""
std::string to_repr(const Value& v);  // Python repr()
std::string python_float_repr(double x);
// json.dumps(v, ensure_ascii=False, indent=indent (<0: none), separators=None, sort_keys=False).
std::string to_json(const Value& v, int indent);

Value from_json(const nlohmann::ordered_json& j);

// Containers inside containers, at most: namespaces are the one way a template can feed a value
// back into itself (a loop doing `set ns.x = [ns.x]`, or `set ns.me = ns`), so every namespace
// assignment checks the value it stores; the recursive walks over values (str, repr, tojson, the
// destructor) then stay within a 256 KiB stack.
constexpr int kMaxValueNesting = 128;
// Bytes of any string a template builds (the rendered prompt included), and evaluation steps
// (statements and expressions evaluated) of one render: a template cannot exhaust memory or hang.
constexpr size_t kMaxStringBytes = size_t(64) << 20;
constexpr long kMaxEvalSteps = 1000000;
// Fails naming kMaxStringBytes when a string of `bytes` would exceed it.
void check_string_size(size_t bytes, const char* what, int line);
// Fails naming kMaxValueNesting and `line` when v nests deeper or contains a cycle. Visits each
// container once (shared ones included), recursing at most kMaxValueNesting levels.
void check_value_nesting(const Value& v, int line);

// UTF-8 helpers: strings index by code point, as Python does.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace tmpl
}  // namespace cactus
