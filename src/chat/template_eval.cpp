// Evaluator of the chat-template AST. Scoping follows jinja2: a for-loop body (each iteration) and
// a macro call get their own scope; `if` does not; `set` writes to the innermost scope; namespaces
// are shared objects. Recursion depth is bounded (macros included) so it fits a 256 KiB stack.
#include "chat/template_eval.h"

#include <cmath>
#include <unordered_map>

#include "chat/template_builtins.h"
#include "core/error.h"

namespace cactus {
namespace tmpl {
namespace {

constexpr int kMaxRuntimeDepth = 2 * kMaxNesting;
// Macro calls active at once. Recursive macros (Gemma 4's format_argument walks a tool call's
// arguments) stop here with an error naming the macro, before the general depth bound: a value
// nested this deep is refused rather than rendered.
constexpr int kMaxMacroDepth = 40;

enum class Flow { Normal, Break, Continue };

using Scope = std::unordered_map<std::string, Value>;

[[noreturn]] void undefined_error(const Value& v, int line) {
    if (v.s.empty()) fail("template: value is undefined at line %d", line);
    fail("template: '%s' is undefined at line %d", v.s.c_str(), line);
}

int64_t as_int_operand(const Value& v) { return v.kind == Kind::Bool ? v.b : v.i; }
bool is_integral(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Bool; }

int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
    if (a.is_undefined()) undefined_error(a, line);
    if (b.is_undefined()) undefined_error(b, line);
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            check_string_size(a.s.size() + b.s.size(), "'+'", line);
            return Value::string(a.s + b.s);
        }
        if (a.kind == Kind::List && b.kind == Kind::List) {
            ValueList items = *a.list;
            items.insert(items.end(), b.list->begin(), b.list->end());
            return Value::new_list(std::move(items));
        }
    }
    if (op == "*") {
        const Value* seq =
            a.is_string() || a.kind == Kind::List ? &a : (b.is_string() || b.kind == Kind::List ? &b : nullptr);
        const Value* count = seq == &a ? &b : &a;
        if (seq && is_integral(*count)) {
            int64_t n = std::max<int64_t>(0, as_int_operand(*count));
            const int64_t length = length_of(*seq, line);
            if (n > 0 && length > 0 && n > (int64_t(1) << 24) / length) {
                fail("template: repetition too large (more than %d items or characters) at line %d", 1 << 24, line);
            }
            if (seq->is_string()) {
                std::string out;
                for (int64_t k = 0; k < n; ++k) out += seq->s;
                return Value::string(out);
            }
            ValueList items;
            for (int64_t k = 0; k < n; ++k) items.insert(items.end(), seq->list->begin(), seq->list->end());
            return Value::new_list(std::move(items));
        }
    }
    if (!a.is_number() || !b.is_number()) {
        fail("template: unsupported operand types for %s: %s and %s at line %d", op.c_str(), kind_name(a.kind),
             kind_name(b.kind), line);
    }
    bool ints = is_integral(a) && is_integral(b);
    if (op == "/") {
        if (b.as_double() == 0.0) fail("template: division by zero at line %d", line);
        return Value::number(a.as_double() / b.as_double());
    }
    if (ints) {
        // Python integers do not overflow; ours are 64-bit, and overflow is an error.
        int64_t x = as_int_operand(a), y = as_int_operand(b), r = 0;
        bool overflow = false, integer_op = true;
        if (op == "+") {
            overflow = __builtin_add_overflow(x, y, &r);
        } else if (op == "-") {
            overflow = __builtin_sub_overflow(x, y, &r);
        } else if (op == "*") {
            overflow = __builtin_mul_overflow(x, y, &r);
        } else if (op == "//" || op == "%") {
            if (y == 0) fail("template: integer division or modulo by zero at line %d", line);
            overflow = x == INT64_MIN && y == -1;
            if (!overflow) {
                int64_t q = floor_div(x, y);
                r = op == "//" ? q : x - q * y;
            }
        } else if (op == "**" && y >= 0) {
            r = 1;
            if (x == 0 || x == 1)
                r = (x == 0 && y > 0) ? 0 : 1;
            else if (x == -1)
                r = y % 2 == 0 ? 1 : -1;
            else
                for (int64_t k = 0; k < y && !overflow; ++k) overflow = __builtin_mul_overflow(r, x, &r);
        } else {
            integer_op = false;  // computed in floating point below
        }
        if (overflow) fail("template: integer overflow in %s at line %d", op.c_str(), line);
        if (integer_op) return Value::integer(r);
    }
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0.0) fail("template: float division or modulo by zero at line %d", line);
    double q = std::floor(x / y);
    if (op == "//") return Value::number(q);
    if (op == "%") return Value::number(x - q * y);
    fail("template: unknown operator %s at line %d", op.c_str(), line);
}

bool contains(const Value& container, const Value& item, int line) {
    switch (container.kind) {
        case Kind::Undefined:
            return false;
        case Kind::String:
            if (!item.is_string()) fail("template: 'in <string>' requires a string operand at line %d", line);
            return container.s.find(item.s) != std::string::npos;
        case Kind::List:
            for (const Value& v : *container.list) {
                if (values_equal(v, item)) return true;
            }
            return false;
        case Kind::Dict:
        case Kind::Namespace:
            return container.dict->find(item) != nullptr;
        default:
            fail("template: argument of type %s is not iterable at line %d", kind_name(container.kind), line);
    }
}

class Evaluator {
public:
    explicit Evaluator(const Value& context) {
        Dict globals;
        add_globals(globals);
        Scope root;
        for (auto& kv : globals.items) root[kv.first.s] = kv.second;
        for (auto& kv : context.dict->items) {
            if (kv.first.is_string()) root[kv.first.s] = kv.second;
        }
        scopes_.push_back(std::move(root));
    }

    void run(const Body& body, std::string& out) { exec_body(body, out); }

private:
    struct DepthGuard {
        DepthGuard(Evaluator& e, int line) : e_(e) {
            e_.step(line);
            if (++e_.depth_ > kMaxRuntimeDepth) {
                fail("template: evaluation nested deeper than %d levels (recursive macro?) at line %d",
                     kMaxRuntimeDepth, line);
            }
        }
        ~DepthGuard() { --e_.depth_; }
        Evaluator& e_;
    };

    // One unit of work: a statement, an expression or a loop iteration.
    void step(int line) {
        if (++steps_ > kMaxEvalSteps) {
            fail("template: evaluation took more than %ld steps (kMaxEvalSteps) at line %d", kMaxEvalSteps, line);
        }
    }

    Value lookup(const std::string& name) const {
        for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
            auto found = it->find(name);
            if (found != it->end()) return found->second;
        }
        return Value::undefined(name);
    }

    // ---- statements ----------------------------------------------------------------------------
    Flow exec_body(const Body& body, std::string& out) {
        for (const StmtPtr& stmt : body) {
            Flow flow = exec(*stmt, out);
            if (flow != Flow::Normal) return flow;
        }
        return Flow::Normal;
    }

    Flow exec(const Stmt& s, std::string& out) {
        DepthGuard guard(*this, s.line);
        switch (s.kind) {
            case StmtKind::Text:
                check_string_size(out.size() + s.text.size(), "the output", s.line);
                out += s.text;
                return Flow::Normal;
            case StmtKind::Output: {
                std::string piece = to_str(eval(*s.expr));
                check_string_size(out.size() + piece.size(), "the output", s.line);
                out += piece;
                return Flow::Normal;
            }
            case StmtKind::If:
                return exec_if(s, out);
            case StmtKind::For:
                return exec_for(s, out);
            case StmtKind::Set:
                exec_set(s);
                return Flow::Normal;
            case StmtKind::SetBlock: {
                std::string captured;
                exec_body(s.body, captured);
                scopes_.back()[s.text] = Value::string(captured);
                return Flow::Normal;
            }
            case StmtKind::Macro:
                define_macro(s);
                return Flow::Normal;
            case StmtKind::Break:
                return Flow::Break;
            case StmtKind::Continue:
                return Flow::Continue;
            case StmtKind::Block:
                return exec_body(s.body, out);
        }
        return Flow::Normal;
    }

    Flow exec_if(const Stmt& s, std::string& out) {
        for (const Branch& branch : s.branches) {
            if (!branch.condition || eval(*branch.condition).truthy()) return exec_body(branch.body, out);
        }
        return Flow::Normal;
    }

    void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& item, int line) {
        if (targets.size() == 1) {
            scope[targets[0]] = item;
            return;
        }
        ValueList parts = iterate(item, line);
        if (parts.size() != targets.size()) {
            fail("template: cannot unpack %zu values into %zu names at line %d", parts.size(), targets.size(), line);
        }
        for (size_t k = 0; k < targets.size(); ++k) scope[targets[k]] = parts[k];
    }

    ValueList loop_items(const Stmt& s) {
        Value iterable = eval(*s.expr);
        if (iterable.is_none()) fail("template: 'NoneType' object is not iterable at line %d", s.line);
        ValueList items = iterate(iterable, s.line);
        if (!s.filter) return items;
        ValueList kept;
        for (const Value& item : items) {
            step(s.line);
            scopes_.emplace_back();
            bind_targets(scopes_.back(), s.targets, item, s.line);
            bool keep = eval(*s.filter).truthy();
            scopes_.pop_back();
            if (keep) kept.push_back(item);
        }
        return kept;
    }

    static Value make_loop(const ValueList& items, size_t k) {
        int64_t n = static_cast<int64_t>(items.size()), i = static_cast<int64_t>(k);
        Value loop = Value::new_dict();
        Dict& d = *loop.dict;
        d.set(Value::string("index0"), Value::integer(i));
        d.set(Value::string("index"), Value::integer(i + 1));
        d.set(Value::string("revindex0"), Value::integer(n - i - 1));
        d.set(Value::string("revindex"), Value::integer(n - i));
        d.set(Value::string("first"), Value::boolean(i == 0));
        d.set(Value::string("last"), Value::boolean(i == n - 1));
        d.set(Value::string("length"), Value::integer(n));
        d.set(Value::string("depth"), Value::integer(1));
        d.set(Value::string("depth0"), Value::integer(0));
        d.set(Value::string("previtem"), i > 0 ? items[k - 1] : Value::undefined("loop.previtem"));
        d.set(Value::string("nextitem"), i + 1 < n ? items[k + 1] : Value::undefined("loop.nextitem"));
        auto cycle = std::make_shared<Callable>();
        cycle->name = "loop.cycle";
        cycle->call = [i](const CallArgs& args) {
            if (args.positional.empty()) fail("template: loop.cycle() needs at least one value");
            return args.positional[static_cast<size_t>(i) % args.positional.size()];
        };
        Value cycle_value;
        cycle_value.kind = Kind::Callable;
        cycle_value.fn = cycle;
        d.set(Value::string("cycle"), cycle_value);
        return loop;
    }

    Flow exec_for(const Stmt& s, std::string& out) {
        ValueList items = loop_items(s);
        if (items.empty()) return exec_body(s.else_body, out);
        for (size_t k = 0; k < items.size(); ++k) {
            step(s.line);
            scopes_.emplace_back();
            bind_targets(scopes_.back(), s.targets, items[k], s.line);
            scopes_.back()["loop"] = make_loop(items, k);
            Flow flow = exec_body(s.body, out);
            scopes_.pop_back();
            if (flow == Flow::Break) break;
        }
        return Flow::Normal;
    }

    void exec_set(const Stmt& s) {
        Value value = eval(*s.expr);
        if (!s.attribute.empty()) {
            Value target = lookup(s.text);
            if (target.kind != Kind::Namespace) {
                fail("template: cannot assign attribute on non-namespace '%s' at line %d", s.text.c_str(), s.line);
            }
            target.dict->set(Value::string(s.attribute), value);
            try {
                check_value_nesting(target, s.line);
            } catch (...) {
                target.dict->set(Value::string(s.attribute), Value::none());  // never keep a cycle
                throw;
            }
            return;
        }
        bind_targets(scopes_.back(), s.targets, value, s.line);
    }

    void define_macro(const Stmt& s) {
        auto fn = std::make_shared<Callable>();
        fn->name = s.text;
        const Stmt* macro = &s;
        fn->call = [this, macro](const CallArgs& args) { return call_macro(*macro, args); };
        Value v;
        v.kind = Kind::Callable;
        v.fn = fn;
        scopes_.back()[s.text] = v;
    }

    Value call_macro(const Stmt& m, const CallArgs& args) {
        DepthGuard guard(*this, m.line);
        struct MacroDepth {
            explicit MacroDepth(int& d) : depth(++d) {}
            ~MacroDepth() { --depth; }
            int& depth;
        } macro_depth(macro_depth_);
        if (macro_depth_ > kMaxMacroDepth) {
            fail(
                "template: macro calls nested deeper than %d (kMaxMacroDepth) in '%s' at line %d: a recursive "
                "macro without an end, or a value nested too deeply for it",
                kMaxMacroDepth, m.text.c_str(), m.line);
        }
        if (args.positional.size() > m.params.size()) {
            fail("template: macro '%s' takes %zu arguments, %zu given", m.text.c_str(), m.params.size(),
                 args.positional.size());
        }
        Scope scope;
        for (size_t k = 0; k < m.params.size(); ++k) {
            const Value* given = args.arg(k, m.params[k].name.c_str());
            if (given)
                scope[m.params[k].name] = *given;
            else if (m.params[k].default_value)
                scope[m.params[k].name] = eval(*m.params[k].default_value);
            else
                scope[m.params[k].name] = Value::undefined(m.params[k].name);
        }
        for (const auto& kw : args.keyword) {
            bool known = false;
            for (const auto& p : m.params) known = known || p.name == kw.first;
            if (!known) fail("template: macro '%s' has no argument '%s'", m.text.c_str(), kw.first.c_str());
        }
        std::vector<Scope> saved;
        saved.swap(scopes_);
        scopes_.push_back(saved.front());  // macros see the template's top-level variables
        scopes_.push_back(std::move(scope));
        std::string out;
        try {
            exec_body(m.body, out);
        } catch (...) {
            scopes_.swap(saved);
            throw;
        }
        scopes_.swap(saved);
        return Value::string(out);
    }

    // ---- expressions ---------------------------------------------------------------------------
    Value eval(const Expr& e) {
        DepthGuard guard(*this, e.line);
        switch (e.kind) {
            case ExprKind::Literal:
                return e.value;
            case ExprKind::Name:
                return lookup(e.name);
            case ExprKind::List:
                return eval_list(e);
            case ExprKind::Dict:
                return eval_dict(e);
            case ExprKind::Attr:
                return get_attribute(eval(*e.args[0]), e.name, e.line);
            case ExprKind::Index:
                return get_item(eval(*e.args[0]), eval(*e.args[1]), e.line);
            case ExprKind::Slice:
                return eval_slice(e);
            case ExprKind::Call:
                return eval_call(e);
            case ExprKind::Filter:
                return eval_filter(e);
            case ExprKind::Test:
                return eval_test(e);
            case ExprKind::Unary:
                return eval_unary(e);
            case ExprKind::Binary:
                return eval_binary(e);
            case ExprKind::Ternary: {
                if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
                return e.args[2] ? eval(*e.args[2]) : Value::undefined();
            }
        }
        return Value::undefined();
    }

    Value eval_list(const Expr& e) {
        ValueList items;
        for (const ExprPtr& item : e.args) items.push_back(eval(*item));
        return Value::new_list(std::move(items));
    }

    Value eval_dict(const Expr& e) {
        Value d = Value::new_dict();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) d.dict->set(eval(*e.args[k]), eval(*e.args[k + 1]));
        return d;
    }

    Value eval_slice(const Expr& e) {
        Value target = eval(*e.args[0]);
        Value parts[3];
        const Value* ptrs[3] = {nullptr, nullptr, nullptr};
        for (int k = 0; k < 3; ++k) {
            if (e.args[k + 1]) {
                parts[k] = eval(*e.args[k + 1]);
                if (!parts[k].is_none()) ptrs[k] = &parts[k];
            }
        }
        if (target.is_undefined()) undefined_error(target, e.line);
        return slice_value(target, ptrs[0], ptrs[1], ptrs[2], e.line);
    }

    static Value get_attribute(const Value& object, const std::string& name, int line) {
        if (object.is_undefined()) undefined_error(object, line);
        if (object.kind == Kind::Dict) {
            Value method = bound_method(object, name);
            if (!method.is_undefined()) return method;
            const Value* found = object.dict->find(Value::string(name));
            return found ? *found : Value::undefined(name);
        }
        if (object.kind == Kind::Namespace) {
            const Value* found = object.dict->find(Value::string(name));
            return found ? *found : Value::undefined(name);
        }
        Value method = bound_method(object, name);
        if (!method.is_undefined()) return method;
        return Value::undefined(name);
    }

    static Value get_item(const Value& object, const Value& key, int line) {
        if (object.is_undefined()) undefined_error(object, line);
        if (object.is_mapping()) {
            const Value* found = object.dict->find(key);
            if (found) return *found;
            if (key.is_string() && object.kind == Kind::Dict) return get_attribute(object, key.s, line);
            return Value::undefined(key.is_string() ? key.s : to_str(key));
        }
        if ((object.kind == Kind::List || object.is_string()) && is_integral(key)) {
            int64_t n = length_of(object, line);
            int64_t k = as_int_operand(key);
            if (k < 0) k += n;
            if (k < 0 || k >= n) return Value::undefined();
            if (object.kind == Kind::List) return (*object.list)[static_cast<size_t>(k)];
            Value one = Value::integer(k), end = Value::integer(k + 1);
            return slice_value(object, &one, &end, nullptr, line);
        }
        if (key.is_string()) return get_attribute(object, key.s, line);
        return Value::undefined();
    }

    CallArgs eval_args(const Expr& e, size_t first) {
        CallArgs args;
        for (size_t k = first; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k]));
        for (const auto& kw : e.kwargs) args.keyword.emplace_back(kw.first, eval(*kw.second));
        return args;
    }

    Value eval_call(const Expr& e) {
        Value fn = eval(*e.args[0]);
        if (fn.is_undefined()) undefined_error(fn, e.line);
        if (fn.kind != Kind::Callable)
            fail("template: %s object is not callable at line %d", kind_name(fn.kind), e.line);
        CallArgs args = eval_args(e, 1);
        return fn.fn->call(args);
    }

    Value eval_filter(const Expr& e) {
        Value input = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        return apply_filter(e.name, input, args, e.line);
    }

    Value eval_test(const Expr& e) {
        Value input = eval(*e.args[0]);
        CallArgs args = eval_args(e, 1);
        bool result = apply_test(e.name, input, args, e.line);
        return Value::boolean(e.negated ? !result : result);
    }

    Value eval_unary(const Expr& e) {
        Value v = eval(*e.args[0]);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.is_undefined()) undefined_error(v, e.line);
        if (!v.is_number())
            fail("template: bad operand type for unary %s: %s at line %d", e.name.c_str(), kind_name(v.kind), e.line);
        if (e.name == "+") return v.kind == Kind::Bool ? Value::integer(v.b) : v;
        if (v.kind == Kind::Float) return Value::number(-v.f);
        return Value::integer(-as_int_operand(v));
    }

    Value eval_binary(const Expr& e) {
        const std::string& op = e.name;
        Value a = eval(*e.args[0]);
        if (op == "and") return a.truthy() ? eval(*e.args[1]) : a;
        if (op == "or") return a.truthy() ? a : eval(*e.args[1]);
        Value b = eval(*e.args[1]);
        if (op == "==") return Value::boolean(values_equal(a, b));
        if (op == "!=") return Value::boolean(!values_equal(a, b));
        if (op == "in") return Value::boolean(contains(b, a, e.line));
        if (op == "not in") return Value::boolean(!contains(b, a, e.line));
        if (op == "~") {
            std::string left = to_str(a), right = to_str(b);
            check_string_size(left.size() + right.size(), "'~'", e.line);
            return Value::string(left + right);
        }
        if (op == "<" || op == ">" || op == "<=" || op == ">=") {
            if (a.is_undefined()) undefined_error(a, e.line);
            if (b.is_undefined()) undefined_error(b, e.line);
            int c = compare_values(a, b);
            bool r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
            return Value::boolean(r);
        }
        return arithmetic(op, a, b, e.line);
    }

    std::vector<Scope> scopes_;
    int depth_ = 0;
    int macro_depth_ = 0;
    long steps_ = 0;
};

}  // namespace

std::string render_template(const Body& body, const Value& context) {
    CACTUS_ASSERT(context.kind == Kind::Dict);
    Evaluator evaluator(context);
    std::string out;
    evaluator.run(body, out);
    return out;
}

}  // namespace tmpl
}  // namespace cactus
