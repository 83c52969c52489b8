#pragma once
// Non-JSON tool-call syntaxes: reading and writing their literals, and their grammars.
//   python (LFM2):   [f(a="x", n=1, ok=True, v=None, l=[1, 2], d={"k": "v"}), g()]
//   gemma (FunctionGemma): call:f{a:<escape>x<escape>,n:1,ok:true,l:[1,2],d:{k:<escape>v<escape>}}
// Readers bound their nesting (kMaxCallDepth) and report failure instead of guessing.
#include <string>

#include <nlohmann/json.hpp>

namespace cactus {

constexpr int kMaxCallDepth = 32;

enum class CallSyntax { python, gemma };

// Reads the calls in `text` (python: the inside of [...], without the brackets; gemma: one
// "call:name{...}"), appending {name, arguments} objects to `calls`. False on a syntax error
// (calls is then unchanged).
bool read_python_calls(const std::string& text, nlohmann::ordered_json& calls);
bool read_gemma_call(const std::string& text, nlohmann::ordered_json& calls);

// A JSON value written as a literal of the syntax.
std::string write_literal(const nlohmann::ordered_json& value, CallSyntax syntax);
// One call written in the syntax: f(a="x") or call:f{a:<escape>x<escape>}.
std::string write_call(const nlohmann::ordered_json& call, CallSyntax syntax);

// An xgrammar EBNF grammar (root rule "root") for the calls of `tools` in the syntax: python,
// one or more calls separated by ", "; gemma, the body of one call, "name{...}" after "call:".
// Supported schema subset: type (one or a list), properties with required, enum, const, items,
// minItems, anyOf/oneOf, $ref to #/$defs or #/definitions. Other keywords are not enforced.
std::string calls_ebnf(const nlohmann::ordered_json& tools, CallSyntax syntax);

}  // namespace cactus
