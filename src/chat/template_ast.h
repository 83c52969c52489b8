#pragma once
// Syntax tree of a chat template, produced by parse_template() (template_parser.cpp) and walked by
// the evaluator (template_eval.cpp). Nesting is bounded at parse time, so the recursive walks
// (parsing, evaluation and destruction of the tree) stay within a 256 KiB stack:
// - kMaxNesting: blocks inside blocks, parentheses, literals inside literals, unary operators
//   (the parser's own recursion);
// - kMaxExprHeight: the height of any expression tree, which also counts the chains the parser
//   builds in loops (a + b + c ..., x|f|g ..., a.b[c](d) ..., v if c if d ...).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/template_value.h"

namespace cactus {
namespace tmpl {

constexpr int kMaxNesting = 128;
constexpr int kMaxExprHeight = 128;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
    Literal,  // value
    Name,     // name
    List,     // args = items
    Dict,     // args = key0, value0, key1, value1, ...
    Attr,     // args[0].name
    Index,    // args[0][args[1]]
    Slice,    // args[0][args[1]:args[2]:args[3]] (null parts are omitted bounds)
    Call,     // args[0](args[1..], kwargs)
    Filter,   // name(args[0], args[1..], kwargs)
    Test,     // args[0] is [not] name(args[1..]); negated
    Unary,    // op args[0]  ("not", "-", "+")
    Binary,   // args[0] op args[1]
    Ternary,  // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr {
    ExprKind kind;
    int line = 0;
    int height = 1;        // 1 + the largest height of args and kwargs (<= kMaxExprHeight)
    Value value;           // Literal
    std::string name;      // Name, Attr, Filter, Test; operator for Unary/Binary
    bool negated = false;  // Test
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue, Block };

struct Branch {
    ExprPtr condition;  // null for the final else
    Body body;
};

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // may be null
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::string text;                  // Text; target name for Set/SetBlock/Macro
    std::string attribute;             // Set ns.attribute
    std::vector<std::string> targets;  // For / Set tuple targets
    ExprPtr expr;                      // Output, For iterable, Set value
    ExprPtr filter;                    // For `if` filter
    std::vector<Branch> branches;      // If
    Body body;                         // For, SetBlock, Macro, Block
    Body else_body;                    // For
    std::vector<MacroParam> params;    // Macro
};

// Parses with Jinja2 lexing rules as transformers configures them (trim_blocks, lstrip_blocks,
// loopcontrols). Throws cactus::Error naming the construct and the line.
Body parse_template(const std::string& source);

}  // namespace tmpl
}  // namespace cactus
