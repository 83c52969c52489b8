#pragma once
// Non-JSON tool-call syntaxes: reading and writing their literals, and their grammars.
//   python (LFM2):   [f(a="x", n=1, ok=True, v=None, l=[1, 2], d={"k": "v"}), g()]
//   gemma (FunctionGemma): call:f{a:<escape>x<escape>,n:1,ok:true,l:[1,2],d:{k:<escape>v<escape>}}
//   gemma4 (Gemma 4):      call:f{a:<|"|>x<|"|>,n:1,ok:true,l:[1,2],d:{k:<|"|>v<|"|>}}
// The two Gemma syntaxes differ only in the string delimiter: strings are raw text between two
// delimiters (no escapes), keys are bare, numbers, booleans and null are written as in JSON.
// Readers bound their nesting (kMaxCallDepth) and report failure instead of guessing.
#include <string>

#include <nlohmann/json.hpp>

namespace cactus {

constexpr int kMaxCallDepth = 32;

enum class CallSyntax { python, gemma, gemma4 };

// The string delimiter of a Gemma syntax: "<escape>" or "<|\"|>" (Gemma 4's token 52).
const std::string& string_delimiter(CallSyntax syntax);

// Reads the calls in `text` (python: the inside of [...], without the brackets; gemma, gemma4: one
// "call:name{...}"), appending {name, arguments} objects to `calls`. False on a syntax error
// (calls is then unchanged). A Gemma string delimiter that is not followed by `,`, `}` or `]`
// belongs to the string's text (the syntax has no escapes, so that is the only reading left).
bool read_python_calls(const std::string& text, nlohmann::ordered_json& calls);
bool read_gemma_call(const std::string& text, nlohmann::ordered_json& calls, CallSyntax syntax = CallSyntax::gemma);
// Reads one "call:name{...}" starting at text[pos] (spaces first are skipped) and appends it to
// `calls`; returns the offset just past its closing '}', or npos on a syntax error. The syntax
// delimits itself, so a call whose strings hold a block's close marker is still read whole.
size_t read_gemma_call_at(const std::string& text, size_t pos, nlohmann::ordered_json& calls, CallSyntax syntax);

// A JSON value written as a literal of the syntax.
std::string write_literal(const nlohmann::ordered_json& value, CallSyntax syntax);
// One call written in the syntax: f(a="x"), call:f{a:<escape>x<escape>} or call:f{a:<|"|>x<|"|>}.
std::string write_call(const nlohmann::ordered_json& call, CallSyntax syntax);

// An xgrammar EBNF grammar (root rule "root") for the calls of `tools` in the syntax: python,
// one or more calls separated by ", "; gemma, the body of one call, "name{...}" after "call:".
// (Gemma 4 uses xgrammar's own JSON Schema converter in its "gemma" style instead.)
// Supported schema subset: type (one or a list), properties with required, enum, const, items,
// minItems, anyOf/oneOf, $ref to #/$defs or #/definitions. Other keywords are not enforced.
std::string calls_ebnf(const nlohmann::ordered_json& tools, CallSyntax syntax);

}  // namespace cactus
