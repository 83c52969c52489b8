#include "chat/call_syntax.h"

#include "chat/json_parse.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "chat/tool_format.h"
#include "core/error.h"
#include "core/utf8.h"

namespace cactus {

using json = nlohmann::ordered_json;

namespace {

bool is_gemma(CallSyntax syntax) { return syntax == CallSyntax::gemma || syntax == CallSyntax::gemma4; }

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

// Reads literals of one syntax from text[p...]; every read_* returns false on a syntax error.
// Nesting is bounded by kMaxCallDepth.
class LiteralReader {
public:
    LiteralReader(const std::string& s, CallSyntax syntax)
        : s_(s), syntax_(syntax), delim_(is_gemma(syntax) ? string_delimiter(syntax) : std::string()) {}
    size_t p = 0;

    void skip_ws() {
        while (p < s_.size() && std::isspace(static_cast<unsigned char>(s_[p]))) ++p;
    }
    bool eat(char c) {
        skip_ws();
        if (p < s_.size() && s_[p] == c) {
            ++p;
            return true;
        }
        return false;
    }
    bool eat_word(const std::string& w) {
        skip_ws();
        if (s_.compare(p, w.size(), w) != 0) return false;
        size_t end = p + w.size();
        if (end < s_.size() && is_ident_char(s_[end]) && is_ident_char(w.back())) return false;
        p = end;
        return true;
    }
    bool at_end() {
        skip_ws();
        return p >= s_.size();
    }
    bool read_identifier(std::string& out) {
        skip_ws();
        if (p >= s_.size() || !is_ident_start(s_[p])) return false;
        size_t b = p;
        while (p < s_.size() && is_ident_char(s_[p])) ++p;
        out = s_.substr(b, p - b);
        return true;
    }

    bool read_value(json& out, int depth) {
        if (depth > kMaxCallDepth) return false;
        skip_ws();
        if (p >= s_.size()) return false;
        char c = s_[p];
        if (at_delimiter()) return read_delimited(out);
        if (syntax_ == CallSyntax::python && (c == '"' || c == '\'')) return read_quoted(out);
        if (c == '[' || (syntax_ == CallSyntax::python && c == '(')) return read_list(out, depth);
        if (c == '{') return read_object(out, depth);
        if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return read_number(out);
        for (const auto& word : {std::make_pair("True", json(true)), std::make_pair("true", json(true)),
                                 std::make_pair("False", json(false)), std::make_pair("false", json(false)),
                                 std::make_pair("None", json(nullptr)), std::make_pair("null", json(nullptr))}) {
            if (eat_word(word.first)) {
                out = word.second;
                return true;
            }
        }
        return false;
    }

    bool read_object_key(std::string& key) {
        skip_ws();
        const bool quoted =
            p < s_.size() && (syntax_ == CallSyntax::python ? s_[p] == '"' || s_[p] == '\'' : at_delimiter());
        if (quoted) {
            json k;
            if (!read_value(k, 0) || !k.is_string()) return false;
            key = k.get<std::string>();
            return true;
        }
        return syntax_ == CallSyntax::python ? read_identifier(key) : read_bare_key(key);
    }

    // A Gemma call's name: the text up to '{' (names such as "get-time" or "fs.read" included).
    bool read_call_name(std::string& name) {
        skip_ws();
        size_t end = s_.find('{', p);
        if (end == std::string::npos) return false;
        name = tool_format::trim(s_.substr(p, end - p));
        if (name.empty() || name.find_first_of(" \t\r\n:<>{}[],\"") != std::string::npos) return false;
        p = end;
        return true;
    }

private:
    bool at_delimiter() const { return !delim_.empty() && s_.compare(p, delim_.size(), delim_) == 0; }

    // Raw text up to the closing delimiter: the first delimiter followed (after spaces) by one of
    // , } ] or the end; an earlier one is part of the text. Without such a delimiter among the
    // next kMaxInnerDelimiters (a bound on the work for hostile text) the first one closes, and
    // the caller's syntax check decides.
    bool read_delimited(json& out) {
        constexpr int kMaxInnerDelimiters = 16;
        const size_t body = p + delim_.size();
        size_t first = std::string::npos, close = std::string::npos;
        int seen = 0;
        for (size_t at = s_.find(delim_, body); at != std::string::npos && seen++ <= kMaxInnerDelimiters;
             at = s_.find(delim_, at + delim_.size())) {
            if (first == std::string::npos) first = at;
            size_t next = at + delim_.size();
            while (next < s_.size() && std::isspace(static_cast<unsigned char>(s_[next]))) ++next;
            if (next == s_.size() || s_[next] == ',' || s_[next] == '}' || s_[next] == ']') {
                close = at;
                break;
            }
        }
        if (close == std::string::npos) close = first;
        if (close == std::string::npos) return false;
        out = s_.substr(body, close - body);
        p = close + delim_.size();
        return true;
    }

    // A bare Gemma key: the text up to ':' (spaces around it dropped), without structural
    // characters or the string delimiter.
    bool read_bare_key(std::string& key) {
        skip_ws();
        size_t end = s_.find(':', p);
        if (end == std::string::npos) return false;
        key = tool_format::trim(s_.substr(p, end - p));
        if (key.empty() || key.find_first_of("{}[],\n") != std::string::npos) return false;
        if (key.find(delim_) != std::string::npos) return false;
        p = end;
        return true;
    }

    bool read_hex4(uint32_t& cp) {
        if (p + 4 > s_.size()) return false;
        cp = 0;
        for (int i = 0; i < 4; ++i) {
            char h = s_[p++];
            if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
            cp = cp * 16 + static_cast<uint32_t>(
                               std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        return true;
    }

    bool read_quoted(json& out) {
        const char quote = s_[p++];
        std::string text;
        while (p < s_.size() && s_[p] != quote) {
            char c = s_[p++];
            if (c != '\\') {
                text += c;
                continue;
            }
            if (p >= s_.size()) return false;
            char e = s_[p++];
            switch (e) {
                case 'n':
                    text += '\n';
                    break;
                case 't':
                    text += '\t';
                    break;
                case 'r':
                    text += '\r';
                    break;
                case 'b':
                    text += '\b';
                    break;
                case 'f':
                    text += '\f';
                    break;
                case '0':
                    text += '\0';
                    break;
                case 'u': {
                    uint32_t cp;
                    if (!read_hex4(cp)) return false;
                    if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(p, 2, "\\u") == 0) {
                        p += 2;
                        uint32_t lo;
                        if (!read_hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    utf8::append(text, cp);
                    break;
                }
                default:
                    text += e;
                    break;  // \\ \" \' \/ and unknown escapes keep the character
            }
        }
        if (p >= s_.size()) return false;
        ++p;
        out = text;
        return true;
    }

    bool read_number(json& out) {
        size_t b = p;
        if (s_[p] == '-' || s_[p] == '+') ++p;
        while (p < s_.size() &&
               (std::isdigit(static_cast<unsigned char>(s_[p])) || s_[p] == '.' || s_[p] == 'e' || s_[p] == 'E' ||
                ((s_[p] == '-' || s_[p] == '+') && (s_[p - 1] == 'e' || s_[p - 1] == 'E')))) {
            ++p;
        }
        std::string text = s_.substr(b, p - b);
        if (!text.empty() && text[0] == '+') text.erase(0, 1);
        if (text.empty() || text == "-") return false;
        // Integers beyond 64 bits come back as doubles, and are kept (a schema's "integer" accepts
        // a double of integral value).
        json parsed;
        if (try_parse_json(text, parsed) && parsed.is_number()) {
            out = parsed;
            return true;
        }
        // A well-formed number beyond the double range (the grammar lets any digits through:
        // 1e309) saturates to the largest finite double instead of losing the whole call.
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || !std::isdigit(static_cast<unsigned char>(text.back()))) return false;
        out = std::isfinite(v) ? v : std::copysign(std::numeric_limits<double>::max(), v);
        return true;
    }

    bool read_list(json& out, int depth) {
        const char close = s_[p] == '(' ? ')' : ']';
        ++p;
        out = json::array();
        if (eat(close)) return true;
        for (;;) {
            json item;
            if (!read_value(item, depth + 1)) return false;
            out.push_back(item);
            if (eat(close)) return true;
            if (!eat(',')) return false;
            if (eat(close)) return true;  // trailing comma
        }
    }

    bool read_object(json& out, int depth) {
        ++p;
        out = json::object();
        if (eat('}')) return true;
        for (;;) {
            std::string key;
            if (!read_object_key(key) || !eat(':')) return false;
            json value;
            if (!read_value(value, depth + 1)) return false;
            out[key] = value;
            if (eat('}')) return true;
            if (!eat(',')) return false;
            if (eat('}')) return true;
        }
    }

    const std::string& s_;
    CallSyntax syntax_;
    std::string delim_;  // Gemma syntaxes' string delimiter; empty for python
};

bool read_one_python_call(LiteralReader& r, json& call) {
    std::string name;
    if (!r.read_identifier(name) || !r.eat('(')) return false;
    json args = json::object();
    if (!r.eat(')')) {
        for (;;) {
            std::string key;
            if (!r.read_identifier(key) || !r.eat('=')) return false;
            json value;
            if (!r.read_value(value, 1)) return false;
            args[key] = value;
            if (r.eat(')')) break;
            if (!r.eat(',')) return false;
            if (r.eat(')')) break;
        }
    }
    call = json{{"name", name}, {"arguments", args}};
    return true;
}

}  // namespace

bool read_python_calls(const std::string& text, json& calls) {
    LiteralReader r(text, CallSyntax::python);
    json found = json::array();
    if (r.at_end()) return false;
    for (;;) {
        json call;
        if (!read_one_python_call(r, call)) return false;
        found.push_back(call);
        if (r.at_end()) break;
        if (!r.eat(',')) return false;
        if (r.at_end()) break;
    }
    for (json& c : found) calls.push_back(std::move(c));
    return true;
}

const std::string& string_delimiter(CallSyntax syntax) {
    static const std::string escape = "<escape>", quote = "<|\"|>", none;
    return syntax == CallSyntax::gemma ? escape : syntax == CallSyntax::gemma4 ? quote : none;
}

size_t read_gemma_call_at(const std::string& text, size_t pos, json& calls, CallSyntax syntax) {
    if (!is_gemma(syntax)) fail("read_gemma_call_at: not a Gemma call syntax");
    LiteralReader r(text, syntax);
    r.p = pos;
    if (!r.eat_word("call") || !r.eat(':')) return std::string::npos;
    std::string name;
    if (!r.read_call_name(name)) return std::string::npos;
    json args;
    if (!r.read_value(args, 0) || !args.is_object()) return std::string::npos;
    calls.push_back(json{{"name", name}, {"arguments", args}});
    return r.p;
}

bool read_gemma_call(const std::string& text, json& calls, CallSyntax syntax) {
    json found = json::array();
    const size_t end = read_gemma_call_at(text, 0, found, syntax);
    if (end == std::string::npos || text.find_first_not_of(" \t\r\n", end) != std::string::npos) return false;
    calls.push_back(found[0]);
    return true;
}

// ---- writers -----------------------------------------------------------------------------------

namespace {

// Writes value iteratively (an explicit stack: values may be nested deeply).
std::string write_value(const json& root, CallSyntax syntax) {
    const bool py = syntax == CallSyntax::python;
    const std::string sep = py ? ", " : ",";
    std::string out;
    struct Frame {
        const json* v;
        json::const_iterator it;
        bool started;
    };
    std::vector<Frame> stack;
    auto scalar = [&](const json& v) {
        if (v.is_string())
            out += py ? v.dump(-1, ' ', false, json::error_handler_t::replace)
                      : string_delimiter(syntax) + v.get<std::string>() + string_delimiter(syntax);
        else if (v.is_boolean())
            out += v.get<bool>() ? (py ? "True" : "true") : (py ? "False" : "false");
        else if (v.is_null())
            out += py ? "None" : "null";
        else
            out += v.dump();
    };
    auto open = [&](const json& v) {
        if (v.is_array() || v.is_object()) {
            out += v.is_array() ? '[' : '{';
            stack.push_back(Frame{&v, v.begin(), false});
        } else {
            scalar(v);
        }
    };
    open(root);
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.it == f.v->end()) {
            out += f.v->is_array() ? ']' : '}';
            stack.pop_back();
            continue;
        }
        if (f.started) out += sep;
        f.started = true;
        const json& item = *f.it;
        if (f.v->is_object()) {
            out += py ? json(f.it.key()).dump() + ": " : f.it.key() + ":";
        }
        ++f.it;
        open(item);
    }
    return out;
}

}  // namespace

std::string write_literal(const json& value, CallSyntax syntax) { return write_value(value, syntax); }

std::string write_call(const json& call, CallSyntax syntax) {
    const std::string name = call["name"].get<std::string>();
    const json& args = call.contains("arguments") ? call["arguments"] : json::object();
    std::string out = syntax == CallSyntax::python ? name + "(" : "call:" + name + "{";
    bool first = true;
    for (auto it = args.begin(); it != args.end(); ++it) {
        if (!first) out += syntax == CallSyntax::python ? ", " : ",";
        first = false;
        out += it.key() + (syntax == CallSyntax::python ? "=" : ":") + write_value(it.value(), syntax);
    }
    return out + (syntax == CallSyntax::python ? ")" : "}");
}

}  // namespace cactus
