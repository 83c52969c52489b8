#pragma once
// The vocabulary shared by every tokenizer: token texts, scores and attributes, the special ids,
// the end-of-generation set, and the split of text around special tokens. Built from a
// TokenizerSpec (the tokenizer.ggml.* metadata, or a hand-made vocabulary in tests); the rules
// follow llama.cpp's llama-vocab.cpp so that ids match it token for token.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/flat_index.h"

namespace cactus {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// Attribute bits of a token (a control token may also be unused, for example).
enum TokenAttr : uint32_t {
    kAttrUndefined = 0,
    kAttrUnknown = 1u << 0,
    kAttrUnused = 1u << 1,
    kAttrNormal = 1u << 2,
    kAttrControl = 1u << 3,
    kAttrUserDefined = 1u << 4,
    kAttrByte = 1u << 5,
};

// Everything a tokenizer is built from: the tokenizer.ggml.* metadata.
struct TokenizerSpec {
    std::string model;  // "gpt2" (byte-level BPE), "llama" (SentencePiece BPE), "gemma4" or "bert" (WordPiece)
    std::string pre;    // pre-tokenizer name (gpt2 only; gemma4 always uses "gemma4"); empty: "default"
    std::vector<std::string> tokens;
    std::vector<float> scores;         // empty: all 0
    std::vector<int32_t> token_types;  // empty: all Normal
    std::vector<std::string> merges;   // "left right", rank = index (gpt2 and gemma4)

    // Special ids; unset means the model's default. Out-of-range ids are ignored (as llama.cpp).
    std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, mask_id;
    std::optional<int64_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
    std::optional<bool> add_bos, add_eos, add_sep, add_space_prefix;
};

// A piece of input after special tokens were split out: either raw text or one token.
struct TextFragment {
    int32_t token = -1;  // -1: raw text
    size_t offset = 0;   // raw text: byte range in the input
    size_t length = 0;
};

// Which defaults apply to special ids the metadata leaves out (llama.cpp's per-model defaults):
// Bpe (gpt2) BOS = EOS = 11, Spm (llama) BOS 1, EOS 2, UNK 0, Gemma4 (a BPE model) none, and
// Wpm (bert) BOS ([CLS]) 101, UNK 100, SEP 102, PAD 0, MASK 103.
enum class VocabKind { Bpe, Spm, Gemma4, Wpm };

// When BOS is added, where a BPE pre-tokenizer decides it (llama.cpp sets it per
// tokenizer.ggml.pre): the default when add_bos_token is absent, and whether to add it always.
struct BosPolicy {
    bool add_by_default = false;
    bool always = false;
};

class Vocab {
public:
    // Reads the token list and special ids; throws cactus::Error on inconsistent metadata.
    Vocab(const TokenizerSpec& spec, VocabKind kind, BosPolicy bos_policy = {});
    // text_to_id_ points into texts_, so a Vocab never moves.
    Vocab(const Vocab&) = delete;
    Vocab& operator=(const Vocab&) = delete;

    size_t size() const { return texts_.size(); }
    const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
    float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
    uint32_t attr(int32_t id) const { return attrs_[static_cast<size_t>(id)]; }
    bool valid(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < texts_.size(); }
    int32_t find(std::string_view text) const;  // -1 when absent

    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
    bool add_bos = false, add_eos = false, add_sep = false, add_space_prefix = false;

    const std::vector<int32_t>& end_of_generation() const { return eog_; }

    // Splits `text` around special tokens (control, user-defined, unknown; only user-defined
    // when parse_special is false). Longer tokens win, as in llama.cpp's tokenizer_st_partition.
    std::vector<TextFragment> partition(const std::string& text, bool parse_special) const;

private:
    void read_tokens(const TokenizerSpec& spec);
    void read_special_ids(const TokenizerSpec& spec, VocabKind kind, BosPolicy bos_policy);
    void detect_special_tokens_by_text();
    void collect_end_of_generation();
    void build_special_matcher();
    void mark_control(int32_t id) { attrs_[static_cast<size_t>(id)] |= kAttrControl; }
    // Finds every place a special token's text occurs: (start, token) pairs in start order.
    std::vector<std::pair<size_t, int32_t>> find_special_occurrences(const std::string& text, bool parse_special) const;

    std::vector<std::string> texts_;
    std::vector<float> scores_;
    std::vector<uint32_t> attrs_;
    TextIndex text_to_id_;  // over texts_
    std::vector<int32_t> eog_;

    // Special tokens in llama.cpp's priority order (longest text first) and a byte trie over them.
    std::vector<int32_t> special_order_;
    std::vector<int32_t> special_rank_;  // token id -> position in special_order_, or -1
    struct TrieNode {
        std::vector<std::pair<uint8_t, int32_t>> children;  // byte -> node index
        int32_t token = -1;
    };
    std::vector<TrieNode> trie_;
};

}  // namespace cactus
