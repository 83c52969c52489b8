#pragma once
// Options of speculative decoding (src/engine/speculative.h): which drafters may propose tokens for
// the model to verify, and how many at most per step. The output is the same with or without it
// (greedy: the same tokens; sampling: the same distribution); only the speed changes.
#include <cstddef>
#include <string>

namespace cactus {

enum class SpecType {
    off,    // plain decoding, one token per step
    ngram,  // prompt lookup: drafts copied from the conversation itself (no second model)
    draft,  // a small draft model (SpecOptions::draft_model) and prompt lookup, the faster one chosen per step
};

struct SpecOptions {
    SpecType type = SpecType::off;
    std::string draft_model;  // GGUF path (or a known name resolved by the caller) of the draft model
    size_t draft_max = 16;    // most tokens drafted per step (llama.cpp's --spec-draft-n-max)
    size_t draft_min = 1;     // fewer drafted tokens than this are not verified (--spec-draft-n-min)
    size_t ngram_min = 2;     // prompt lookup: shortest suffix of the history matched
    size_t ngram_max = 4;     // prompt lookup: longest suffix tried first
    int draft_threads = 0;    // threads of the draft model; 0 = the model's
    bool adaptive = true;     // false: draft at every step whatever it measures (tests, measurements)
};

// "off", "none", "ngram", "draft" (llama.cpp's "ngram-simple"/"ngram-cache"/... spellings read as
// "ngram"); throws cactus::Error naming the accepted values otherwise.
SpecType parse_spec_type(const std::string& name);
const char* spec_type_name(SpecType type);

}  // namespace cactus
