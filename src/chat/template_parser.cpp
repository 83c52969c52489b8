// Lexer and parser of the chat-template Jinja2 subset. Lexing follows jinja2's rules as
// transformers configures them: trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
// `-`/`+` whitespace control on tags.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "chat/template_ast.h"
#include "core/error.h"
#include "core/utf8.h"

namespace cactus {
namespace tmpl {
namespace {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
    Tok kind;
    std::string text;
    int line;
    int64_t int_value = 0;
    double float_value = 0.0;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string rstrip_space(const std::string& s) {
    size_t end = s.size();
    while (end > 0 && is_space(s[end - 1])) --end;
    return s.substr(0, end);
}

class Lexer {
public:
    explicit Lexer(const std::string& source) : src_(normalize(source)) {}

    std::vector<Token> run() {
        bool line_starting = true;
        while (pos_ < src_.size()) {
            size_t start = find_tag(pos_);
            std::string text = src_.substr(pos_, start == std::string::npos ? std::string::npos : start - pos_);
            if (start == std::string::npos) {
                emit_text(text);
                break;
            }
            char kind = src_[start + 1];  // '{', '%' or '#'
            char sign = start + 2 < src_.size() ? src_[start + 2] : 0;
            if (sign == '-') {
                text = rstrip_space(text);
            } else if (sign != '+' && kind != '{') {
                size_t l_pos = text.rfind('\n');
                l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
                bool blank = true;
                for (size_t k = l_pos; k < text.size(); ++k) blank = blank && is_space(text[k]);
                if ((l_pos > 0 || line_starting) && blank) text = text.substr(0, l_pos);
            }
            emit_text(text);
            line_ += count_newlines(pos_, start);
            pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
            if (kind == '#') {
                line_starting = skip_comment(start);
            } else {
                line_starting = lex_tag(kind);
            }
        }
        tokens_.push_back({Tok::End, "", line_});
        return std::move(tokens_);
    }

private:
    static std::string normalize(const std::string& source) {
        std::string out;
        out.reserve(source.size());
        for (size_t k = 0; k < source.size(); ++k) {
            if (source[k] == '\r') {
                out += '\n';
                if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
            } else {
                out += source[k];
            }
        }
        if (!out.empty() && out.back() == '\n') out.pop_back();
        return out;
    }

    size_t find_tag(size_t from) const {
        size_t k = src_.find('{', from);
        while (k != std::string::npos && k + 1 < src_.size()) {
            char c = src_[k + 1];
            if (c == '{' || c == '%' || c == '#') return k;
            k = src_.find('{', k + 1);
        }
        return std::string::npos;
    }

    int count_newlines(size_t a, size_t b) const {
        int n = 0;
        for (size_t k = a; k < b && k < src_.size(); ++k) n += src_[k] == '\n';
        return n;
    }

    void emit_text(const std::string& text) {
        if (!text.empty()) tokens_.push_back({Tok::Text, text, line_});
    }

    // Skips whitespace after a tag per its closing sign; returns whether the match ended on '\n'.
    bool after_tag_end(char sign, bool is_block) {
        size_t before = pos_;
        if (sign == '-') {
            while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
        } else if (sign != '+' && is_block && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
        }
        line_ += count_newlines(before, pos_);
        return pos_ > before && src_[pos_ - 1] == '\n';
    }

    bool skip_comment(size_t start) {
        size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) fail("template: unclosed comment starting at line %d", line_);
        char sign = end > pos_ ? src_[end - 1] : 0;
        line_ += count_newlines(pos_, end);
        pos_ = end + 2;
        return after_tag_end(sign == '-' || sign == '+' ? sign : 0, true);
    }

    bool lex_tag(char kind) {
        int open_line = line_;
        tokens_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line_});
        const char* close = kind == '{' ? "}}" : "%}";
        while (true) {
            while (pos_ < src_.size() && is_space(src_[pos_])) {
                line_ += src_[pos_] == '\n';
                ++pos_;
            }
            if (pos_ >= src_.size()) fail("template: unclosed tag starting at line %d", open_line);
            char sign = src_[pos_];
            if ((sign == '-' || sign == '+') && src_.compare(pos_ + 1, 2, close) == 0) {
                if (sign == '+' && kind == '{') fail("template: unexpected '+' at line %d", line_);
                pos_ += 3;
                tokens_.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", line_});
                return after_tag_end(sign, kind == '%');
            }
            if (src_.compare(pos_, 2, close) == 0) {
                pos_ += 2;
                tokens_.push_back({kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", line_});
                return after_tag_end(0, kind == '%');
            }
            lex_token();
        }
    }

    void lex_token() {
        char c = src_[pos_];
        if (is_name_start(c)) {
            size_t start = pos_;
            while (pos_ < src_.size() && (is_name_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
            tokens_.push_back({Tok::Name, src_.substr(start, pos_ - start), line_});
        } else if (is_digit(c)) {
            lex_number();
        } else if (c == '\'' || c == '"') {
            lex_string(c);
        } else {
            static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                        ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
            for (const char* op : ops) {
                size_t n = strlen(op);
                if (src_.compare(pos_, n, op) == 0) {
                    tokens_.push_back({Tok::Op, op, line_});
                    pos_ += n;
                    return;
                }
            }
            fail("template: unexpected character '%c' at line %d", c, line_);
        }
    }

    void lex_number() {
        size_t start = pos_;
        bool is_float = false;
        while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
        if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
            is_float = true;
            ++pos_;
            while (pos_ < src_.size() && (is_digit(src_[pos_]) || src_[pos_] == '_')) ++pos_;
        }
        if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
            size_t k = pos_ + 1;
            if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
            if (k < src_.size() && is_digit(src_[k])) {
                is_float = true;
                pos_ = k;
                while (pos_ < src_.size() && is_digit(src_[pos_])) ++pos_;
            }
        }
        std::string digits;
        for (size_t k = start; k < pos_; ++k) {
            if (src_[k] != '_') digits += src_[k];
        }
        Token t{is_float ? Tok::Float : Tok::Int, digits, line_};
        if (is_float) {
            t.float_value = strtod(digits.c_str(), nullptr);
        } else {
            errno = 0;
            t.int_value = strtoll(digits.c_str(), nullptr, 10);
            if (errno == ERANGE) fail("template: integer literal %s too large at line %d", digits.c_str(), line_);
        }
        tokens_.push_back(t);
    }

    uint32_t read_hex(size_t count) {
        if (pos_ + count > src_.size()) fail("template: truncated escape in string at line %d", line_);
        uint32_t cp = 0;
        for (size_t k = 0; k < count; ++k) {
            char h = src_[pos_ + k];
            int d = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
            if (d < 0) fail("template: bad hex escape in string at line %d", line_);
            cp = cp * 16 + static_cast<uint32_t>(d);
        }
        pos_ += count;
        if (cp > 0x10FFFF) fail("template: escape beyond U+10FFFF at line %d", line_);
        return cp;
    }

    void lex_string(char quote) {
        int start_line = line_;
        ++pos_;
        std::string out;
        while (true) {
            if (pos_ >= src_.size()) fail("template: unterminated string starting at line %d", start_line);
            char c = src_[pos_++];
            if (c == quote) break;
            if (c == '\n') ++line_;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= src_.size()) fail("template: unterminated string starting at line %d", start_line);
            char e = src_[pos_++];
            switch (e) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'a':
                    out += '\a';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case '0':
                    out += '\0';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case '\n':
                    ++line_;
                    break;
                case 'x':
                    utf8::append(out, read_hex(2));
                    break;
                case 'u':
                    utf8::append(out, read_hex(4));
                    break;
                case 'U':
                    utf8::append(out, read_hex(8));
                    break;
                default:
                    out += '\\';
                    out += e;
            }
        }
        tokens_.push_back({Tok::String, out, start_line});
    }

    std::string src_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> tokens_;
};

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

    Body parse_all() {
        std::string end_tag;
        Body body = parse_body({}, end_tag);
        return body;
    }

private:
    struct DepthGuard {
        explicit DepthGuard(Parser& p) : p_(p) {
            if (++p_.depth_ > kMaxNesting) {
                fail("template: nesting deeper than %d levels at line %d", kMaxNesting, p_.peek().line);
            }
        }
        ~DepthGuard() { --p_.depth_; }
        Parser& p_;
    };

    const Token& peek(size_t ahead = 0) const {
        size_t k = pos_ + ahead;
        return k < toks_.size() ? toks_[k] : toks_.back();
    }
    const Token& next() {
        const Token& t = peek();
        if (pos_ < toks_.size() - 1) ++pos_;
        return t;
    }
    bool at_op(const char* op) const { return peek().kind == Tok::Op && peek().text == op; }
    bool at_name(const char* name) const { return peek().kind == Tok::Name && peek().text == name; }
    bool accept_op(const char* op) {
        if (!at_op(op)) return false;
        next();
        return true;
    }
    bool accept_name(const char* name) {
        if (!at_name(name)) return false;
        next();
        return true;
    }
    [[noreturn]] void unexpected(const char* wanted) const {
        const Token& t = peek();
        std::string got = t.kind == Tok::End        ? "end of template"
                          : t.kind == Tok::BlockEnd ? "'%}'"
                          : t.kind == Tok::VarEnd   ? "'}}'"
                                                    : "'" + t.text + "'";
        fail("template: expected %s but found %s at line %d", wanted, got.c_str(), t.line);
    }
    void expect_op(const char* op) {
        if (!accept_op(op)) unexpected((std::string("'") + op + "'").c_str());
    }
    std::string expect_name() {
        if (peek().kind != Tok::Name) unexpected("a name");
        return next().text;
    }
    void expect_block_end() {
        if (peek().kind != Tok::BlockEnd) unexpected("'%}'");
        next();
    }

    // Records e's height once its children are attached; fails past kMaxExprHeight, so no tree
    // deeper than the limit ever exists (its destruction recurses too).
    static ExprPtr seal(ExprPtr e) {
        int h = 0;
        for (const ExprPtr& a : e->args) {
            if (a) h = std::max(h, a->height);
        }
        for (const auto& kw : e->kwargs) {
            if (kw.second) h = std::max(h, kw.second->height);
        }
        e->height = h + 1;
        if (e->height > kMaxExprHeight) {
            fail(
                "template: expression nested deeper than %d levels (kMaxExprHeight; chains of operators, "
                "filters, attributes, subscripts and calls count) at line %d",
                kMaxExprHeight, e->line);
        }
        return e;
    }

    ExprPtr make(ExprKind kind, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = line;
        return e;
    }

    // ---- statements ----------------------------------------------------------------------------
    Body parse_body(const std::set<std::string>& end_tags, std::string& found_end) {
        DepthGuard guard(*this);
        Body body;
        while (true) {
            const Token& t = peek();
            if (t.kind == Tok::End) {
                if (!end_tags.empty()) {
                    std::string wanted;
                    for (const std::string& tag : end_tags) wanted += (wanted.empty() ? "" : " or ") + tag;
                    fail("template: missing {%% %s %%} before end of template (line %d)", wanted.c_str(), t.line);
                }
                return body;
            }
            if (t.kind == Tok::Text) {
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::Text;
                s->line = t.line;
                s->text = next().text;
                body.push_back(std::move(s));
            } else if (t.kind == Tok::VarBegin) {
                next();
                auto s = std::make_unique<Stmt>();
                s->kind = StmtKind::Output;
                s->line = t.line;
                s->expr = parse_expression();
                if (peek().kind != Tok::VarEnd) unexpected("'}}'");
                next();
                body.push_back(std::move(s));
            } else if (t.kind == Tok::BlockBegin) {
                next();
                const Token& name = peek();
                if (name.kind != Tok::Name) unexpected("a tag name");
                if (end_tags.count(name.text)) {
                    found_end = next().text;
                    return body;
                }
                body.push_back(parse_statement());
            } else {
                unexpected("text or a tag");
            }
        }
    }

    StmtPtr parse_statement() {
        const Token& t = next();
        std::string tag = t.text;
        auto s = std::make_unique<Stmt>();
        s->line = t.line;
        if (tag == "if") return parse_if(std::move(s));
        if (tag == "for") return parse_for(std::move(s));
        if (tag == "set") return parse_set(std::move(s));
        if (tag == "macro") return parse_macro(std::move(s));
        if (tag == "break" || tag == "continue") {
            s->kind = tag == "break" ? StmtKind::Break : StmtKind::Continue;
            if (loop_depth_ == 0) fail("template: '%s' outside a loop at line %d", tag.c_str(), t.line);
            expect_block_end();
            return s;
        }
        if (tag == "generation") {
            s->kind = StmtKind::Block;
            expect_block_end();
            std::string end;
            s->body = parse_body({"endgeneration"}, end);
            expect_block_end();
            return s;
        }
        static const std::set<std::string> known_unsupported = {
            "call", "filter", "raw", "include", "import", "from", "extends", "block", "with", "autoescape", "do"};
        if (known_unsupported.count(tag)) {
            fail("template: unsupported tag '%s' at line %d", tag.c_str(), t.line);
        }
        fail("template: unknown tag '%s' at line %d", tag.c_str(), t.line);
    }

    StmtPtr parse_if(StmtPtr s) {
        s->kind = StmtKind::If;
        std::string end = "elif";
        ExprPtr condition = parse_expression();
        while (true) {
            expect_block_end();
            Branch branch;
            branch.condition = std::move(condition);
            std::string found;
            if (branch.condition) {
                branch.body = parse_body({"elif", "else", "endif"}, found);
            } else {
                branch.body = parse_body({"endif"}, found);
            }
            s->branches.push_back(std::move(branch));
            if (found == "endif") break;
            condition = found == "elif" ? parse_expression() : nullptr;
        }
        expect_block_end();
        return s;
    }

    std::vector<std::string> parse_targets() {
        std::vector<std::string> targets;
        bool parens = accept_op("(");
        targets.push_back(expect_name());
        while (accept_op(",")) {
            if (peek().kind != Tok::Name) break;
            targets.push_back(expect_name());
        }
        if (parens) expect_op(")");
        return targets;
    }

    StmtPtr parse_for(StmtPtr s) {
        s->kind = StmtKind::For;
        s->targets = parse_targets();
        if (!accept_name("in")) unexpected("'in'");
        s->expr = parse_expression(false);
        if (accept_name("if")) s->filter = parse_expression(false);
        if (at_name("recursive")) fail("template: unsupported 'recursive' loop at line %d", s->line);
        expect_block_end();
        ++loop_depth_;
        std::string found;
        s->body = parse_body({"else", "endfor"}, found);
        --loop_depth_;
        if (found == "else") {
            expect_block_end();
            s->else_body = parse_body({"endfor"}, found);
        }
        expect_block_end();
        return s;
    }

    StmtPtr parse_set(StmtPtr s) {
        std::string first = expect_name();
        if (accept_op(".")) {
            s->kind = StmtKind::Set;
            s->text = first;
            s->attribute = expect_name();
            expect_op("=");
            s->expr = parse_expression();
            expect_block_end();
            return s;
        }
        s->targets.push_back(first);
        while (accept_op(",")) s->targets.push_back(expect_name());
        if (accept_op("=")) {
            s->kind = StmtKind::Set;
            s->text = first;
            s->expr = parse_expression();
            expect_block_end();
            return s;
        }
        if (s->targets.size() != 1) unexpected("'='");
        if (at_op("|")) fail("template: unsupported filtered set block at line %d", s->line);
        s->kind = StmtKind::SetBlock;
        s->text = first;
        expect_block_end();
        std::string found;
        int saved_loops = loop_depth_;
        s->body = parse_body({"endset"}, found);
        loop_depth_ = saved_loops;
        expect_block_end();
        return s;
    }

    StmtPtr parse_macro(StmtPtr s) {
        s->kind = StmtKind::Macro;
        s->text = expect_name();
        expect_op("(");
        while (!accept_op(")")) {
            MacroParam p;
            p.name = expect_name();
            if (accept_op("=")) p.default_value = parse_expression();
            s->params.push_back(std::move(p));
            if (!at_op(")")) expect_op(",");
        }
        expect_block_end();
        std::string found;
        int saved_loops = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_body({"endmacro"}, found);
        loop_depth_ = saved_loops;
        if (peek().kind == Tok::Name) next();  // {% endmacro name %}
        expect_block_end();
        return s;
    }

    // ---- expressions ---------------------------------------------------------------------------
public:
    ExprPtr parse_expression(bool with_condexpr = true) {
        DepthGuard guard(*this);
        // A bare tuple `a, b` is only meaningful in a few spots; we parse single expressions and
        // let `(a, b)` produce a list.
        ExprPtr expr = parse_or();
        if (!with_condexpr) return expr;
        while (at_name("if")) {
            int line = next().line;
            auto t = make(ExprKind::Ternary, line);
            t->args.push_back(parse_or());       // condition
            t->args.push_back(std::move(expr));  // value when true
            t->args.push_back(accept_name("else") ? parse_expression() : nullptr);
            expr = seal(std::move(t));
        }
        return expr;
    }

private:
    ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
        auto e = make(ExprKind::Binary, line);
        e->name = op;
        e->args.push_back(std::move(left));
        e->args.push_back(std::move(right));
        return seal(std::move(e));
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (at_name("or")) {
            int line = next().line;
            left = binary("or", std::move(left), parse_and(), line);
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (at_name("and")) {
            int line = next().line;
            left = binary("and", std::move(left), parse_not(), line);
        }
        return left;
    }

    ExprPtr parse_not() {
        if (at_name("not")) {
            DepthGuard guard(*this);
            int line = next().line;
            auto e = make(ExprKind::Unary, line);
            e->name = "not";
            e->args.push_back(parse_not());
            return seal(std::move(e));
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        ExprPtr left = parse_math1();
        static const std::set<std::string> ops = {"==", "!=", "<", ">", "<=", ">="};
        while (true) {
            int line = peek().line;
            if (peek().kind == Tok::Op && ops.count(peek().text)) {
                std::string op = next().text;
                left = binary(op, std::move(left), parse_math1(), line);
            } else if (at_name("in")) {
                next();
                left = binary("in", std::move(left), parse_math1(), line);
            } else if (at_name("not") && peek(1).kind == Tok::Name && peek(1).text == "in") {
                next();
                next();
                left = binary("not in", std::move(left), parse_math1(), line);
            } else {
                return left;
            }
        }
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (at_op("+") || at_op("-")) {
            const Token& t = next();
            std::string op = t.text;
            left = binary(op, std::move(left), parse_concat(), t.line);
        }
        return left;
    }

    ExprPtr parse_concat() {
        ExprPtr left = parse_math2();
        while (at_op("~")) {
            int line = next().line;
            left = binary("~", std::move(left), parse_math2(), line);
        }
        return left;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
            const Token& t = next();
            std::string op = t.text;
            left = binary(op, std::move(left), parse_pow(), t.line);
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (at_op("**")) {
            int line = next().line;
            left = binary("**", std::move(left), parse_unary(true), line);
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        ExprPtr node;
        if (at_op("-") || at_op("+")) {
            const Token& t = next();
            node = make(ExprKind::Unary, t.line);
            node->name = t.text;
            node->args.push_back(parse_unary(false));
            node = seal(std::move(node));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filters(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token& t = peek();
        int line = t.line;
        if (t.kind == Tok::Name) {
            std::string name = next().text;
            auto e = make(ExprKind::Literal, line);
            if (name == "true" || name == "True")
                e->value = Value::boolean(true);
            else if (name == "false" || name == "False")
                e->value = Value::boolean(false);
            else if (name == "none" || name == "None")
                e->value = Value::none();
            else {
                e->kind = ExprKind::Name;
                e->name = name;
            }
            return e;
        }
        if (t.kind == Tok::String) {
            std::string s;
            while (peek().kind == Tok::String) s += next().text;
            auto e = make(ExprKind::Literal, line);
            e->value = Value::string(s);
            return e;
        }
        if (t.kind == Tok::Int || t.kind == Tok::Float) {
            const Token& n = next();
            auto e = make(ExprKind::Literal, line);
            e->value = n.kind == Tok::Int ? Value::integer(n.int_value) : Value::number(n.float_value);
            return e;
        }
        if (accept_op("(")) {
            if (accept_op(")")) return make(ExprKind::List, line);
            ExprPtr first = parse_expression();
            if (accept_op(")")) return first;
            auto tuple = make(ExprKind::List, line);
            tuple->args.push_back(std::move(first));
            while (accept_op(",")) {
                if (at_op(")")) break;
                tuple->args.push_back(parse_expression());
            }
            expect_op(")");
            return seal(std::move(tuple));
        }
        if (accept_op("[")) {
            auto list = make(ExprKind::List, line);
            while (!accept_op("]")) {
                list->args.push_back(parse_expression());
                if (!at_op("]")) expect_op(",");
            }
            return seal(std::move(list));
        }
        if (accept_op("{")) {
            auto dict = make(ExprKind::Dict, line);
            while (!accept_op("}")) {
                dict->args.push_back(parse_expression());
                expect_op(":");
                dict->args.push_back(parse_expression());
                if (!at_op("}")) expect_op(",");
            }
            return seal(std::move(dict));
        }
        unexpected("an expression");
    }

    void parse_call_args(Expr& call) {
        // '(' already consumed
        while (!accept_op(")")) {
            if (peek().kind == Tok::Name && peek(1).kind == Tok::Op && peek(1).text == "=") {
                std::string key = next().text;
                next();
                call.kwargs.emplace_back(key, parse_expression());
            } else {
                if (at_op("*") || at_op("**")) fail("template: unsupported *args/**kwargs at line %d", peek().line);
                call.args.push_back(parse_expression());
            }
            if (!at_op(")")) expect_op(",");
        }
    }

    ExprPtr parse_subscript(ExprPtr target, int line) {
        // '[' already consumed
        ExprPtr parts[3];
        int part = 0;
        bool is_slice = false;
        while (true) {
            if (at_op(":")) {
                next();
                is_slice = true;
                if (++part > 2) unexpected("']'");
                continue;
            }
            if (at_op("]")) break;
            if (parts[part]) unexpected("':' or ']'");
            parts[part] = parse_expression();
        }
        next();
        auto e = make(is_slice ? ExprKind::Slice : ExprKind::Index, line);
        e->args.push_back(std::move(target));
        if (!is_slice && !parts[0]) fail("template: empty subscript at line %d", line);
        for (int k = 0; k < (is_slice ? 3 : 1); ++k) e->args.push_back(std::move(parts[k]));
        return seal(std::move(e));
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            int line = peek().line;
            if (accept_op(".")) {
                auto e = make(ExprKind::Attr, line);
                if (peek().kind == Tok::Int) {
                    e->kind = ExprKind::Index;
                    e->args.push_back(std::move(node));
                    auto idx = make(ExprKind::Literal, line);
                    idx->value = Value::integer(next().int_value);
                    e->args.push_back(std::move(idx));
                } else {
                    e->name = expect_name();
                    e->args.push_back(std::move(node));
                }
                node = seal(std::move(e));
            } else if (accept_op("[")) {
                node = parse_subscript(std::move(node), line);
            } else if (accept_op("(")) {
                auto e = make(ExprKind::Call, line);
                e->args.push_back(std::move(node));
                parse_call_args(*e);
                node = seal(std::move(e));
            } else {
                return node;
            }
        }
    }

    bool starts_test_argument() const {
        const Token& t = peek();
        if (t.kind == Tok::String || t.kind == Tok::Int || t.kind == Tok::Float) return true;
        if (t.kind == Tok::Op) return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-";
        if (t.kind == Tok::Name) {
            return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" && t.text != "in" &&
                   t.text != "not" && t.text != "is";
        }
        return false;
    }

    ExprPtr parse_filters(ExprPtr node) {
        while (true) {
            int line = peek().line;
            if (accept_op("|")) {
                auto e = make(ExprKind::Filter, line);
                e->name = expect_name();
                e->args.push_back(std::move(node));
                if (accept_op("(")) parse_call_args(*e);
                node = seal(std::move(e));
            } else if (accept_name("is")) {
                auto e = make(ExprKind::Test, line);
                e->negated = accept_name("not");
                e->name = expect_name();
                e->args.push_back(std::move(node));
                if (accept_op("(")) {
                    parse_call_args(*e);
                } else if (starts_test_argument()) {
                    e->args.push_back(parse_postfix(parse_primary()));
                }
                node = seal(std::move(e));
            } else if (accept_op("(")) {
                auto e = make(ExprKind::Call, line);
                e->args.push_back(std::move(node));
                parse_call_args(*e);
                node = seal(std::move(e));
            } else {
                return node;
            }
        }
    }

    std::vector<Token> toks_;
    size_t pos_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) {
    Parser parser(Lexer(source).run());
    return parser.parse_all();
}

}  // namespace tmpl
}  // namespace cactus
