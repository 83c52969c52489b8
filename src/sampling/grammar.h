#pragma once
// Constrained decoding: a grammar engine behind the sampler. Built on xgrammar's C++ core
// (Apache-2.0, compiled from its sdist; see cmake/xgrammar.cmake): its persistent-stack Earley
// matcher with an adaptive token-mask cache gives a vocabulary-wide mask in microseconds for
// context-independent tokens, and it converts JSON Schema and "structural tags" (free text until
// a trigger, then a grammar) itself.
//
//   GrammarVocab       once per model: token bytes + stop ids; compiles constraints and caches
//                      them per spec text (the same tools or schema compile once).
//   GrammarConstraint  once per request: the matcher state; masks logits, accepts tokens.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace cactus {

struct ConstraintSpec {
    // ebnf: llama.cpp's GBNF (xgrammar's EBNF is GBNF but for empty alternatives, gbnf_to_xgrammar).
    enum class Kind { json_schema, json_object, structural_tag, ebnf };
    Kind kind = Kind::json_object;
    std::string text;  // the schema / structural-tag JSON / EBNF; empty for json_object
    std::string key() const;
};

struct CompiledConstraint;  // opaque: a compiled grammar

// GBNF allows an empty alternative ("ws ::= | \" \"", "( | x)"); xgrammar's parser wants "" there.
// The rest of the text (strings, classes, comments) is copied as is.
std::string gbnf_to_xgrammar(const std::string& gbnf);

class GrammarVocab {
public:
    // token_bytes[i]: the bytes token i stands for in generated text ("" = never allowed by a
    // grammar, e.g. control tokens); stop_ids: tokens that end generation (allowed once the
    // grammar is complete).
    GrammarVocab(const std::vector<std::string>& token_bytes, const std::vector<int32_t>& stop_ids);
    ~GrammarVocab();

    // Compiles (or returns the cached) constraint. Bad schemas are cactus::Error naming the spec.
    std::shared_ptr<const CompiledConstraint> compile(const ConstraintSpec& spec);
    size_t vocab_size() const { return n_vocab_; }
    size_t cached() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    size_t n_vocab_ = 0;
};

class GrammarConstraint {
public:
    explicit GrammarConstraint(std::shared_ptr<const CompiledConstraint> compiled);
    ~GrammarConstraint();
    GrammarConstraint(GrammarConstraint&&) noexcept;

    // Sets the logits of tokens the grammar rejects next to -inf. logits: [n_logits]; ids past
    // the grammar's vocabulary are rejected too.
    void mask(std::vector<float>& logits);
    // Advances the matcher; false when the grammar rejects the token (the state is unchanged).
    bool accept(int32_t token);
    bool accept_text(const std::string& text);  // for tests: advance by raw text
    // The grammar reached its end and accepted a stop token.
    bool terminated() const;
    // The input so far is a complete sentence of the grammar (a stop token would be accepted).
    bool complete() const;
    // The grammar shapes the reply: always for a plain grammar; for a lazy one (a structural tag
    // of triggered tags: free text until a trigger), once a trigger appeared in the accepted text.
    // Before that the text is free and an end-of-turn token says nothing about the grammar.
    bool engaged() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cactus
