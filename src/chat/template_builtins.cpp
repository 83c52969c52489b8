// Filters, tests, methods and globals of the chat-template engine, with jinja2 3.1 semantics
// (transformers' tojson, raise_exception and strftime_now included).
#include "chat/template_builtins.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cfenv>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "core/error.h"

namespace cactus {
namespace tmpl {
namespace {

const char* kSpaces = " \t\n\r\f\v";

Value make_callable(const std::string& name, std::function<Value(const CallArgs&)> fn) {
    Value v;
    v.kind = Kind::Callable;
    v.fn = std::make_shared<Callable>();
    v.fn->name = name;
    v.fn->call = std::move(fn);
    return v;
}

std::string expect_string(const Value* v, const char* what, int line) {
    if (!v || !v->is_string()) fail("template: %s expects a string argument at line %d", what, line);
    return v->s;
}

int64_t expect_int(const Value* v, const char* what, int line) {
    if (!v || (v->kind != Kind::Int && v->kind != Kind::Bool))
        fail("template: %s expects an integer argument at line %d", what, line);
    return v->kind == Kind::Bool ? v->b : v->i;
}

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
    size_t a = 0, b = s.size();
    if (left) a = s.find_first_not_of(chars);
    if (a == std::string::npos) return "";
    if (right) b = s.find_last_not_of(chars) + 1;
    return s.substr(a, b - a);
}

std::string strip_method(const Value& self, const CallArgs& args, bool left, bool right) {
    const Value* chars = args.arg(0, "chars");
    std::string set = (chars && !chars->is_none()) ? expect_string(chars, "strip", 0) : std::string(kSpaces);
    return strip_chars(self.s, set, left, right);
}

std::string ascii_upper(std::string s) {
    for (char& c : s)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return s;
}

std::string ascii_lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return s;
}

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string python_title(const std::string& s) {
    std::string out = s;
    bool prev_cased = false;
    for (char& c : out) {
        if (is_alpha(c)) {
            c = prev_cased ? ascii_lower(std::string(1, c))[0] : ascii_upper(std::string(1, c))[0];
            prev_cased = true;
        } else {
            prev_cased = (static_cast<unsigned char>(c) >= 0x80) && prev_cased;
        }
    }
    return out;
}

std::string capitalize(const std::string& s) {
    if (s.empty()) return s;
    return ascii_upper(s.substr(0, 1)) + ascii_lower(s.substr(1));
}

// jinja2's title filter: capitalize each piece split at runs of [-\s({\[<].
std::string jinja_title(const std::string& s) {
    std::string out, word;
    auto is_sep = [](char c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || strchr(kSpaces, c); };
    for (char c : s) {
        if (is_sep(c)) {
            out += capitalize(word);
            word.clear();
            out += c;
        } else {
            word += c;
        }
    }
    return out + capitalize(word);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string out;
    if (from.empty()) {
        std::vector<std::string> chars = utf8_chars(s);
        int64_t done = 0;
        for (const std::string& c : chars) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            out += c;
            check_string_size(out.size(), "replace", 0);
        }
        if (count < 0 || done < count) out += to;
        return out;
    }
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        size_t hit = s.find(from, pos);
        if (hit == std::string::npos) break;
        out += s.substr(pos, hit - pos) + to;
        check_string_size(out.size(), "replace", 0);
        pos = hit + from.size();
        ++done;
    }
    return out + s.substr(pos);
}

Value split_method(const Value& self, const CallArgs& args) {
    const Value* sep = args.arg(0, "sep");
    const Value* maxsplit_v = args.arg(1, "maxsplit");
    int64_t maxsplit = maxsplit_v ? expect_int(maxsplit_v, "split", 0) : -1;
    ValueList parts;
    const std::string& s = self.s;
    if (!sep || sep->is_none()) {
        size_t k = s.find_first_not_of(kSpaces);
        while (k != std::string::npos) {
            if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
                parts.push_back(Value::string(strip_chars(s.substr(k), kSpaces, false, true)));
                break;
            }
            size_t end = s.find_first_of(kSpaces, k);
            parts.push_back(Value::string(s.substr(k, end == std::string::npos ? std::string::npos : end - k)));
            k = end == std::string::npos ? end : s.find_first_not_of(kSpaces, end);
        }
        return Value::new_list(std::move(parts));
    }
    std::string delim = expect_string(sep, "split", 0);
    if (delim.empty()) fail("template: split: empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t hit = s.find(delim, pos);
        if (hit == std::string::npos) break;
        parts.push_back(Value::string(s.substr(pos, hit - pos)));
        pos = hit + delim.size();
    }
    parts.push_back(Value::string(s.substr(pos)));
    return Value::new_list(std::move(parts));
}

bool affix_matches(const Value& self, const Value* affix, bool prefix) {
    if (!affix) fail("template: startswith/endswith needs an argument");
    ValueList options = affix->kind == Kind::List ? *affix->list : ValueList{*affix};
    for (const Value& o : options) {
        std::string a = expect_string(&o, prefix ? "startswith" : "endswith", 0);
        if (a.size() > self.s.size()) continue;
        if (prefix ? self.s.compare(0, a.size(), a) == 0 : self.s.compare(self.s.size() - a.size(), a.size(), a) == 0)
            return true;
    }
    return false;
}

int64_t count_substring(const std::string& s, const std::string& sub) {
    if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
    return n;
}

Value find_substring(const std::string& s, const std::string& sub, bool reverse) {
    size_t hit = reverse ? s.rfind(sub) : s.find(sub);
    if (hit == std::string::npos) return Value::integer(-1);
    return Value::integer(static_cast<int64_t>(utf8_length(s.substr(0, hit))));
}

Value string_method(const Value& self, const std::string& name) {
    using Fn = std::function<Value(const Value&, const CallArgs&)>;
    static const std::unordered_map<std::string, Fn> methods = {
        {"strip", [](const Value& s, const CallArgs& a) { return Value::string(strip_method(s, a, true, true)); }},
        {"lstrip", [](const Value& s, const CallArgs& a) { return Value::string(strip_method(s, a, true, false)); }},
        {"rstrip", [](const Value& s, const CallArgs& a) { return Value::string(strip_method(s, a, false, true)); }},
        {"split", [](const Value& s, const CallArgs& a) { return split_method(s, a); }},
        {"startswith",
         [](const Value& s, const CallArgs& a) { return Value::boolean(affix_matches(s, a.arg(0, nullptr), true)); }},
        {"endswith",
         [](const Value& s, const CallArgs& a) { return Value::boolean(affix_matches(s, a.arg(0, nullptr), false)); }},
        {"upper", [](const Value& s, const CallArgs&) { return Value::string(ascii_upper(s.s)); }},
        {"lower", [](const Value& s, const CallArgs&) { return Value::string(ascii_lower(s.s)); }},
        {"title", [](const Value& s, const CallArgs&) { return Value::string(python_title(s.s)); }},
        {"capitalize", [](const Value& s, const CallArgs&) { return Value::string(capitalize(s.s)); }},
        {"replace",
         [](const Value& s, const CallArgs& a) {
             const Value* count = a.arg(2, "count");
             return Value::string(replace_all(s.s, expect_string(a.arg(0, "old"), "replace", 0),
                                              expect_string(a.arg(1, "new"), "replace", 0),
                                              count ? expect_int(count, "replace", 0) : -1));
         }},
        {"find",
         [](const Value& s, const CallArgs& a) {
             return find_substring(s.s, expect_string(a.arg(0, nullptr), "find", 0), false);
         }},
        {"rfind",
         [](const Value& s, const CallArgs& a) {
             return find_substring(s.s, expect_string(a.arg(0, nullptr), "rfind", 0), true);
         }},
        {"count",
         [](const Value& s, const CallArgs& a) {
             return Value::integer(count_substring(s.s, expect_string(a.arg(0, nullptr), "count", 0)));
         }},
        {"join",
         [](const Value& s, const CallArgs& a) {
             const Value* items = a.arg(0, nullptr);
             if (!items) fail("template: join needs an argument");
             std::string out;
             ValueList list = iterate(*items, 0);
             for (size_t k = 0; k < list.size(); ++k) {
                 if (k) out += s.s;
                 out += expect_string(&list[k], "str.join", 0);
                 check_string_size(out.size(), "str.join", 0);
             }
             return Value::string(out);
         }},
        {"isdigit",
         [](const Value& s, const CallArgs&) {
             return Value::boolean(!s.s.empty() &&
                                   std::all_of(s.s.begin(), s.s.end(), [](char c) { return c >= '0' && c <= '9'; }));
         }},
        {"isspace",
         [](const Value& s, const CallArgs&) {
             return Value::boolean(!s.s.empty() && s.s.find_first_not_of(kSpaces) == std::string::npos);
         }},
    };
    auto it = methods.find(name);
    if (it == methods.end()) return Value::undefined(name);
    Fn fn = it->second;
    Value bound_self = self;
    return make_callable("str." + name, [fn, bound_self](const CallArgs& args) { return fn(bound_self, args); });
}

Value dict_method(const Value& self, const std::string& name) {
    std::shared_ptr<Dict> d = self.dict;
    if (name == "items") {
        return make_callable("dict.items", [d](const CallArgs&) {
            ValueList out;
            for (const auto& kv : d->items) out.push_back(Value::new_list({kv.first, kv.second}));
            return Value::new_list(std::move(out));
        });
    }
    if (name == "keys" || name == "values") {
        bool keys = name == "keys";
        return make_callable("dict." + name, [d, keys](const CallArgs&) {
            ValueList out;
            for (const auto& kv : d->items) out.push_back(keys ? kv.first : kv.second);
            return Value::new_list(std::move(out));
        });
    }
    if (name == "get") {
        return make_callable("dict.get", [d](const CallArgs& args) {
            const Value* key = args.arg(0, nullptr);
            if (!key) fail("template: dict.get needs a key");
            const Value* found = d->find(*key);
            if (found) return *found;
            const Value* fallback = args.arg(1, nullptr);
            return fallback ? *fallback : Value::none();
        });
    }
    return Value::undefined(name);
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// jinja2's make_attrgetter: dotted path of item lookups ("a.b" or "0").
Value attribute_path(const Value& item, const std::string& path) {
    Value cur = item;
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (cur.is_mapping()) {
            const Value* found = cur.dict->find(Value::string(part));
            cur = found ? *found : Value::undefined(part);
        } else if (cur.kind == Kind::List && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
            size_t k = std::stoul(part);
            cur = k < cur.list->size() ? (*cur.list)[k] : Value::undefined(part);
        } else if (cur.is_undefined()) {
            fail("template: '%s' is undefined", cur.s.c_str());
        } else {
            cur = Value::undefined(part);
        }
        if (dot == std::string::npos) return cur;
        start = dot + 1;
    }
}

Value sort_key(const Value& v, bool case_sensitive) {
    if (v.is_string() && !case_sensitive) return Value::string(ascii_lower(v.s));
    return v;
}

// Shared by select/reject/selectattr/rejectattr: args = [attribute?], test name, test args.
Value select_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep_when, int line) {
    size_t first = 0;
    std::string attribute;
    if (by_attribute) {
        attribute = expect_string(args.arg(0, "attribute"), "selectattr", line);
        first = 1;
    }
    const Value* test = args.arg(first, nullptr);
    CallArgs test_args;
    for (size_t k = first + 1; k < args.positional.size(); ++k) test_args.positional.push_back(args.positional[k]);
    ValueList out;
    for (const Value& item : iterate(input, line)) {
        Value subject = by_attribute ? attribute_path(item, attribute) : item;
        bool pass = test ? apply_test(expect_string(test, "select", line), subject, test_args, line) : subject.truthy();
        if (pass == keep_when) out.push_back(item);
    }
    return Value::new_list(std::move(out));
}

Value map_items(const Value& input, const CallArgs& args, int line) {
    ValueList out;
    const Value* attribute = args.keyword_arg("attribute");
    if (attribute) {
        const Value* fallback = args.keyword_arg("default");
        for (const Value& item : iterate(input, line)) {
            Value v = attribute_path(item, to_str(*attribute));
            out.push_back(v.is_undefined() && fallback ? *fallback : v);
        }
        return Value::new_list(std::move(out));
    }
    std::string filter = expect_string(args.arg(0, nullptr), "map", line);
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    for (const Value& item : iterate(input, line)) out.push_back(apply_filter(filter, item, rest, line));
    return Value::new_list(std::move(out));
}

Value sort_items(const Value& input, const CallArgs& args, int line) {
    const Value* reverse = args.arg(0, "reverse");
    const Value* case_sensitive = args.arg(1, "case_sensitive");
    const Value* attribute = args.arg(2, "attribute");
    bool cs = case_sensitive && case_sensitive->truthy();
    ValueList items = iterate(input, line);
    auto key = [&](const Value& v) { return sort_key(attribute ? attribute_path(v, to_str(*attribute)) : v, cs); };
    std::stable_sort(items.begin(), items.end(),
                     [&](const Value& a, const Value& b) { return compare_values(key(a), key(b)) < 0; });
    if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
    return Value::new_list(std::move(items));
}

Value dictsort_items(const Value& input, const CallArgs& args, int line) {
    if (!input.is_mapping()) fail("template: dictsort expects a mapping at line %d", line);
    const Value* case_sensitive = args.arg(0, "case_sensitive");
    const Value* by = args.arg(1, "by");
    const Value* reverse = args.arg(2, "reverse");
    bool cs = case_sensitive && case_sensitive->truthy();
    bool by_value = by && by->is_string() && by->s == "value";
    ValueList pairs;
    for (const auto& kv : input.dict->items) pairs.push_back(Value::new_list({kv.first, kv.second}));
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
        size_t k = by_value ? 1 : 0;
        return compare_values(sort_key((*a.list)[k], cs), sort_key((*b.list)[k], cs)) < 0;
    });
    if (reverse && reverse->truthy()) std::reverse(pairs.begin(), pairs.end());
    return Value::new_list(std::move(pairs));
}

Value unique_items(const Value& input, const CallArgs& args, int line) {
    const Value* case_sensitive = args.arg(0, "case_sensitive");
    const Value* attribute = args.arg(1, "attribute");
    bool cs = case_sensitive && case_sensitive->truthy();
    ValueList out, seen;
    for (const Value& item : iterate(input, line)) {
        Value key = sort_key(attribute ? attribute_path(item, to_str(*attribute)) : item, cs);
        bool dup = false;
        for (const Value& s : seen) dup = dup || values_equal(s, key);
        if (!dup) {
            seen.push_back(key);
            out.push_back(item);
        }
    }
    return Value::new_list(std::move(out));
}

Value indent_text(const Value& input, const CallArgs& args, int line) {
    const Value* width = args.arg(0, "width");
    bool first = args.arg(1, "first") && args.arg(1, "first")->truthy();
    bool blank = args.arg(2, "blank") && args.arg(2, "blank")->truthy();
    const int64_t pad_width =
        width && !width->is_string() ? std::max<int64_t>(0, expect_int(width, "indent", line)) : 4;
    check_string_size(static_cast<size_t>(std::min<int64_t>(pad_width, INT64_MAX / 2)), "indent", line);
    std::string pad = width && width->is_string() ? width->s : std::string(static_cast<size_t>(pad_width), ' ');
    std::string s = to_str(input) + "\n";
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t nl = s.find('\n'); nl != std::string::npos; nl = s.find('\n', start)) {
        lines.push_back(s.substr(start, nl - start));
        start = nl + 1;
    }
    std::string out = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
        out += "\n" + ((blank || !lines[k].empty()) ? pad + lines[k] : lines[k]);
        check_string_size(out.size(), "indent", line);
    }
    return Value::string(first ? pad + out : out);
}

double round_half_even(double x) {
    int saved = fegetround();
    fesetround(FE_TONEAREST);
    double r = std::nearbyint(x);
    fesetround(saved);
    return r;
}

Value round_value(const Value& input, const CallArgs& args, int line) {
    const Value* precision_v = args.arg(0, "precision");
    const Value* method_v = args.arg(1, "method");
    int64_t precision = precision_v ? expect_int(precision_v, "round", line) : 0;
    std::string method = method_v ? expect_string(method_v, "round", line) : "common";
    if (!input.is_number()) fail("template: round expects a number at line %d", line);
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = input.as_double() * scale;
    double r = method == "common" ? round_half_even(x)
               : method == "ceil" ? std::ceil(x)
               : method == "floor"
                   ? std::floor(x)
                   : (fail("template: round: unknown method '%s' at line %d", method.c_str(), line), 0.0);
    if (method == "common" && input.kind != Kind::Float)
        return Value::integer(input.kind == Kind::Bool ? input.b : input.i);
    return Value::number(r / scale);
}

Value int_value(const Value& input, const CallArgs& args) {
    const Value* fallback = args.arg(0, "default");
    Value def = fallback ? *fallback : Value::integer(0);
    if (input.kind == Kind::Int) return input;
    if (input.kind == Kind::Bool) return Value::integer(input.b);
    if (input.kind == Kind::Float) return std::isfinite(input.f) ? Value::integer(static_cast<int64_t>(input.f)) : def;
    if (input.is_string()) {
        std::string s = strip_chars(input.s, kSpaces, true, true);
        char* end = nullptr;
        errno = 0;
        long long v = strtoll(s.c_str(), &end, 10);
        if (!s.empty() && *end == 0 && errno == 0) return Value::integer(v);
        double d = strtod(s.c_str(), &end);
        if (!s.empty() && *end == 0 && std::isfinite(d)) return Value::integer(static_cast<int64_t>(d));
    }
    return def;
}

Value float_value(const Value& input, const CallArgs& args) {
    const Value* fallback = args.arg(0, "default");
    Value def = fallback ? *fallback : Value::number(0.0);
    if (input.is_number()) return Value::number(input.as_double());
    if (input.is_string()) {
        std::string s = strip_chars(input.s, kSpaces, true, true);
        char* end = nullptr;
        double d = strtod(s.c_str(), &end);
        if (!s.empty() && *end == 0) return Value::number(d);
    }
    return def;
}

Value tojson_value(const Value& input, const CallArgs& args, int line) {
    const Value* indent = args.arg(0, "indent");
    const Value* ensure_ascii = args.keyword_arg("ensure_ascii");
    const Value* sort_keys = args.keyword_arg("sort_keys");
    if (ensure_ascii && ensure_ascii->truthy())
        fail("template: tojson(ensure_ascii=True) is not supported at line %d", line);
    if (args.keyword_arg("separators")) fail("template: tojson(separators=...) is not supported at line %d", line);
    Value subject = input;
    if (sort_keys && sort_keys->truthy()) fail("template: tojson(sort_keys=True) is not supported at line %d", line);
    int width = (!indent || indent->is_none()) ? -1 : static_cast<int>(expect_int(indent, "tojson", line));
    return Value::string(to_json(subject, width));
}

Value first_or_last(const Value& input, bool last, int line) {
    ValueList items = iterate(input, line);
    if (items.empty()) return Value::undefined(last ? "last" : "first");
    return last ? items.back() : items.front();
}

using FilterFn = std::function<Value(const Value&, const CallArgs&, int)>;

const std::unordered_map<std::string, FilterFn>& filter_table() {
    static const std::unordered_map<std::string, FilterFn> table = {
        {"trim",
         [](const Value& v, const CallArgs& a, int l) {
             const Value* chars = a.arg(0, "chars");
             std::string set = chars && !chars->is_none() ? expect_string(chars, "trim", l) : std::string(kSpaces);
             return Value::string(strip_chars(to_str(v), set, true, true));
         }},
        {"tojson", tojson_value},
        {"length", [](const Value& v, const CallArgs&, int l) { return Value::integer(length_of(v, l)); }},
        {"count", [](const Value& v, const CallArgs&, int l) { return Value::integer(length_of(v, l)); }},
        {"upper", [](const Value& v, const CallArgs&, int) { return Value::string(ascii_upper(to_str(v))); }},
        {"lower", [](const Value& v, const CallArgs&, int) { return Value::string(ascii_lower(to_str(v))); }},
        {"title", [](const Value& v, const CallArgs&, int) { return Value::string(jinja_title(to_str(v))); }},
        {"capitalize", [](const Value& v, const CallArgs&, int) { return Value::string(capitalize(to_str(v))); }},
        {"replace",
         [](const Value& v, const CallArgs& a, int l) {
             const Value* count = a.arg(2, "count");
             const Value* from = a.arg(0, "old");
             const Value* to = a.arg(1, "new");
             if (!from || !to) fail("template: replace needs two arguments at line %d", l);
             return Value::string(replace_all(to_str(v), to_str(*from), to_str(*to),
                                              count && !count->is_none() ? expect_int(count, "replace", l) : -1));
         }},
        {"join",
         [](const Value& v, const CallArgs& a, int l) {
             const Value* sep = a.arg(0, "d");
             const Value* attribute = a.arg(1, "attribute");
             std::string out;
             ValueList items = iterate(v, l);
             for (size_t k = 0; k < items.size(); ++k) {
                 if (k) out += sep ? to_str(*sep) : "";
                 out += to_str(attribute ? attribute_path(items[k], to_str(*attribute)) : items[k]);
                 check_string_size(out.size(), "join", l);
             }
             return Value::string(out);
         }},
        {"default",
         [](const Value& v, const CallArgs& a, int) {
             const Value* fallback = a.arg(0, "default_value");
             const Value* boolean = a.arg(1, "boolean");
             bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
             return use_default ? (fallback ? *fallback : Value::string("")) : v;
         }},
        {"first", [](const Value& v, const CallArgs&, int l) { return first_or_last(v, false, l); }},
        {"last", [](const Value& v, const CallArgs&, int l) { return first_or_last(v, true, l); }},
        {"list", [](const Value& v, const CallArgs&, int l) { return Value::new_list(iterate(v, l)); }},
        {"string", [](const Value& v, const CallArgs&, int) { return Value::string(to_str(v)); }},
        {"int", [](const Value& v, const CallArgs& a, int) { return int_value(v, a); }},
        {"float", [](const Value& v, const CallArgs& a, int) { return float_value(v, a); }},
        {"abs",
         [](const Value& v, const CallArgs&, int l) {
             if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
             if (v.kind == Kind::Int || v.kind == Kind::Bool)
                 return Value::integer(std::llabs(v.kind == Kind::Bool ? v.b : v.i));
             fail("template: abs expects a number at line %d", l);
         }},
        {"round", round_value},
        {"items",
         [](const Value& v, const CallArgs&, int l) {
             if (v.is_undefined()) return Value::new_list();
             if (!v.is_mapping()) fail("template: items expects a mapping at line %d", l);
             ValueList out;
             for (const auto& kv : v.dict->items) out.push_back(Value::new_list({kv.first, kv.second}));
             return Value::new_list(std::move(out));
         }},
        {"dictsort", dictsort_items},
        {"selectattr", [](const Value& v, const CallArgs& a, int l) { return select_items(v, a, true, true, l); }},
        {"rejectattr", [](const Value& v, const CallArgs& a, int l) { return select_items(v, a, true, false, l); }},
        {"select", [](const Value& v, const CallArgs& a, int l) { return select_items(v, a, false, true, l); }},
        {"reject", [](const Value& v, const CallArgs& a, int l) { return select_items(v, a, false, false, l); }},
        {"map", map_items},
        {"unique", unique_items},
        {"sort", sort_items},
        {"reverse",
         [](const Value& v, const CallArgs&, int l) {
             if (v.is_string()) {
                 std::vector<std::string> chars = utf8_chars(v.s);
                 std::string out;
                 for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
                 return Value::string(out);
             }
             ValueList items = iterate(v, l);
             std::reverse(items.begin(), items.end());
             return Value::new_list(std::move(items));
         }},
        {"batch",
         [](const Value& v, const CallArgs& a, int l) {
             int64_t size = expect_int(a.arg(0, "linecount"), "batch", l);
             if (size <= 0) fail("template: batch size must be positive at line %d", l);
             const Value* fill = a.arg(1, "fill_with");
             ValueList out, row;
             for (const Value& item : iterate(v, l)) {
                 row.push_back(item);
                 if (static_cast<int64_t>(row.size()) == size) {
                     out.push_back(Value::new_list(row));
                     row.clear();
                 }
             }
             if (!row.empty()) {
                 while (fill && !fill->is_none() && static_cast<int64_t>(row.size()) < size) row.push_back(*fill);
                 out.push_back(Value::new_list(row));
             }
             return Value::new_list(std::move(out));
         }},
        {"indent", indent_text},
        {"wordcount",
         [](const Value& v, const CallArgs&, int) {
             int64_t n = 0;
             bool in_word = false;
             for (char c : to_str(v)) {
                 bool w = is_alpha(c) || (c >= '0' && c <= '9') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
                 if (w && !in_word) ++n;
                 in_word = w;
             }
             return Value::integer(n);
         }},
        {"safe", [](const Value& v, const CallArgs&, int) { return v; }},
        {"escape", [](const Value& v, const CallArgs&, int) { return Value::string(html_escape(to_str(v))); }},
        {"e", [](const Value& v, const CallArgs&, int) { return Value::string(html_escape(to_str(v))); }},
        {"sum",
         [](const Value& v, const CallArgs& a, int l) {
             const Value* attribute = a.arg(0, "attribute");
             const Value* start = a.arg(1, "start");
             Value total = start ? *start : Value::integer(0);
             for (const Value& item : iterate(v, l)) {
                 Value x = attribute ? attribute_path(item, to_str(*attribute)) : item;
                 if (!x.is_number() || !total.is_number()) fail("template: sum expects numbers at line %d", l);
                 bool ints = total.kind != Kind::Float && x.kind != Kind::Float;
                 total =
                     ints
                         ? Value::integer(static_cast<int64_t>(total.as_double()) + static_cast<int64_t>(x.as_double()))
                         : Value::number(total.as_double() + x.as_double());
             }
             return total;
         }},
    };
    return table;
}

const Value* test_arg(const CallArgs& args, const char* name, int line) {
    const Value* v = args.arg(0, nullptr);
    if (!v) fail("template: test '%s' needs an argument at line %d", name, line);
    return v;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args, int line) {
    std::string key = name == "d" ? "default" : name;
    const auto& table = filter_table();
    auto it = table.find(key);
    if (it == table.end()) fail("template: unsupported filter '%s' at line %d", name.c_str(), line);
    return it->second(input, args, line);
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& args, int line) {
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.kind == Kind::Int;
    if (name == "float") return v.kind == Kind::Float;
    if (name == "boolean") return v.kind == Kind::Bool;
    if (name == "true") return v.kind == Kind::Bool && v.b;
    if (name == "false") return v.kind == Kind::Bool && !v.b;
    if (name == "mapping") return v.kind == Kind::Dict;
    if (name == "iterable") return v.is_string() || v.kind == Kind::List || v.kind == Kind::Dict || v.is_undefined();
    if (name == "sequence") return v.is_string() || v.kind == Kind::List || v.kind == Kind::Dict || v.is_undefined();
    if (name == "callable") return v.kind == Kind::Callable;
    if (name == "lower") return v.is_string() && ascii_lower(v.s) == v.s;
    if (name == "upper") return v.is_string() && ascii_upper(v.s) == v.s;
    if (name == "equalto" || name == "eq" || name == "==") return values_equal(v, *test_arg(args, "eq", line));
    if (name == "ne" || name == "!=") return !values_equal(v, *test_arg(args, "ne", line));
    if (name == "sameas") {
        const Value* other = test_arg(args, "sameas", line);
        if (v.kind != other->kind) return false;
        if (v.kind == Kind::List) return v.list == other->list;
        if (v.is_mapping()) return v.dict == other->dict;
        return values_equal(v, *other) && (v.kind == Kind::None || v.kind == Kind::Bool || v.kind == Kind::Undefined);
    }
    if (name == "lt" || name == "<") return compare_values(v, *test_arg(args, "lt", line)) < 0;
    if (name == "le" || name == "<=") return compare_values(v, *test_arg(args, "le", line)) <= 0;
    if (name == "gt" || name == ">") return compare_values(v, *test_arg(args, "gt", line)) > 0;
    if (name == "ge" || name == ">=") return compare_values(v, *test_arg(args, "ge", line)) >= 0;
    if (name == "in") {
        const Value* seq = test_arg(args, "in", line);
        if (seq->is_string()) return v.is_string() && seq->s.find(v.s) != std::string::npos;
        if (seq->is_mapping()) return seq->dict->find(v) != nullptr;
        for (const Value& item : iterate(*seq, line)) {
            if (values_equal(item, v)) return true;
        }
        return false;
    }
    if (name == "odd" || name == "even" || name == "divisibleby") {
        if (v.kind != Kind::Int && v.kind != Kind::Bool)
            fail("template: test '%s' expects an integer at line %d", name.c_str(), line);
        int64_t x = v.kind == Kind::Bool ? v.b : v.i;
        if (name == "odd") return x % 2 != 0;
        if (name == "even") return x % 2 == 0;
        int64_t d = expect_int(test_arg(args, "divisibleby", line), "divisibleby", line);
        if (d == 0) fail("template: divisibleby 0 at line %d", line);
        return x % d == 0;
    }
    fail("template: unsupported test '%s' at line %d", name.c_str(), line);
}

Value bound_method(const Value& object, const std::string& name) {
    if (object.is_string()) return string_method(object, name);
    if (object.kind == Kind::Dict) return dict_method(object, name);
    return Value::undefined(name);
}

void add_globals(Dict& globals) {
    globals.set(Value::string("range"), make_callable("range", [](const CallArgs& a) {
                    if (a.positional.empty() || a.positional.size() > 3)
                        fail("template: range expects 1 to 3 arguments");
                    int64_t start = 0, stop, step = 1;
                    if (a.positional.size() == 1) {
                        stop = expect_int(&a.positional[0], "range", 0);
                    } else {
                        start = expect_int(&a.positional[0], "range", 0);
                        stop = expect_int(&a.positional[1], "range", 0);
                        if (a.positional.size() == 3) step = expect_int(&a.positional[2], "range", 0);
                    }
                    if (step == 0) fail("template: range() step must not be zero");
                    ValueList out;
                    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
                        if (out.size() >= 100000) fail("template: range too big (more than 100000 items)");
                        out.push_back(Value::integer(k));
                    }
                    return Value::new_list(std::move(out));
                }));
    auto make_mapping = [](Kind kind) {
        return [kind](const CallArgs& a) {
            Value d = kind == Kind::Namespace ? Value::new_namespace() : Value::new_dict();
            for (const Value& p : a.positional) {
                if (!p.is_mapping()) fail("template: namespace()/dict() positional argument must be a mapping");
                for (const auto& kv : p.dict->items) d.dict->set(kv.first, kv.second);
            }
            for (const auto& kv : a.keyword) d.dict->set(Value::string(kv.first), kv.second);
            return d;
        };
    };
    globals.set(Value::string("namespace"), make_callable("namespace", make_mapping(Kind::Namespace)));
    globals.set(Value::string("dict"), make_callable("dict", make_mapping(Kind::Dict)));
    globals.set(Value::string("raise_exception"), make_callable("raise_exception", [](const CallArgs& a) -> Value {
                    const Value* message = a.arg(0, nullptr);
                    throw Error(message ? to_str(*message) : std::string("raise_exception called"));
                }));
    globals.set(Value::string("strftime_now"), make_callable("strftime_now", [](const CallArgs& a) {
                    std::string fmt = expect_string(a.arg(0, nullptr), "strftime_now", 0);
                    std::time_t now = std::time(nullptr);
                    std::tm local{};
                    localtime_r(&now, &local);
                    char buf[512];
                    size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &local);
                    return Value::string(std::string(buf, n));
                }));
}

ValueList iterate(const Value& v, int line) {
    switch (v.kind) {
        case Kind::Undefined:
            return {};
        case Kind::List:
            return *v.list;
        case Kind::Dict: {
            ValueList keys;
            for (const auto& kv : v.dict->items) keys.push_back(kv.first);
            return keys;
        }
        case Kind::String: {
            ValueList chars;
            for (std::string& c : utf8_chars(v.s)) chars.push_back(Value::string(std::move(c)));
            return chars;
        }
        default:
            fail("template: '%s' object is not iterable at line %d", kind_name(v.kind), line);
    }
}

int64_t length_of(const Value& v, int line) {
    switch (v.kind) {
        case Kind::Undefined:
            return 0;
        case Kind::String:
            return static_cast<int64_t>(utf8_length(v.s));
        case Kind::List:
            return static_cast<int64_t>(v.list->size());
        case Kind::Dict:
        case Kind::Namespace:
            return static_cast<int64_t>(v.dict->items.size());
        default:
            fail("template: object of type '%s' has no len() at line %d", kind_name(v.kind), line);
    }
}

Value slice_value(const Value& target, const Value* start_v, const Value* stop_v, const Value* step_v, int line) {
    if (target.kind != Kind::List && !target.is_string())
        fail("template: cannot slice %s at line %d", kind_name(target.kind), line);
    int64_t n = length_of(target, line);
    int64_t step = step_v ? expect_int(step_v, "slice step", line) : 1;
    if (step == 0) fail("template: slice step cannot be zero at line %d", line);
    auto clamp = [&](const Value* v, int64_t fallback) {
        if (!v) return fallback;
        int64_t k = expect_int(v, "slice index", line);
        if (k < 0) k += n;
        if (step > 0) return std::min(std::max<int64_t>(k, 0), n);
        return std::min(std::max<int64_t>(k, -1), n - 1);
    };
    int64_t start = clamp(start_v, step > 0 ? 0 : n - 1);
    int64_t stop = clamp(stop_v, step > 0 ? n : -1);
    std::vector<size_t> picks;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) picks.push_back(static_cast<size_t>(k));
    if (target.kind == Kind::List) {
        ValueList out;
        for (size_t k : picks) out.push_back((*target.list)[k]);
        return Value::new_list(std::move(out));
    }
    std::vector<std::string> chars = utf8_chars(target.s);
    std::string out;
    for (size_t k : picks) out += chars[k];
    return Value::string(out);
}

}  // namespace tmpl
}  // namespace cactus
