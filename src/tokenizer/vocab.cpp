#include "tokenizer/vocab.h"

#include <algorithm>

#include "core/error.h"

namespace cactus {

namespace {

uint32_t attr_from_type(int32_t type) {
    switch (static_cast<TokenType>(type)) {
        case TokenType::Unknown:
            return kAttrUnknown;
        case TokenType::Unused:
            return kAttrUnused;
        case TokenType::Normal:
            return kAttrNormal;
        case TokenType::Control:
            return kAttrControl;
        case TokenType::UserDefined:
            return kAttrUserDefined;
        case TokenType::Byte:
            return kAttrByte;
        default:
            return kAttrUndefined;
    }
}

bool text_is_one_of(const std::string& text, std::initializer_list<const char*> names) {
    for (const char* name : names) {
        if (text == name) return true;
    }
    return false;
}

// Token texts that end generation (llama.cpp's list, see llama_vocab::impl::load).
const std::initializer_list<const char*> kEndOfGenerationTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81"
    "of\xe2\x96\x81"
    "sentence\xef\xbd\x9c>",
    "[e~[",
};
const std::initializer_list<const char*> kEndOfTurnTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81"
    "of\xe2\x96\x81"
    "sentence\xef\xbd\x9c>",
    "<end_of_utterance>",
};

}  // namespace

Vocab::Vocab(const TokenizerSpec& spec, VocabKind kind, BosPolicy bos_policy) {
    read_tokens(spec);
    read_special_ids(spec, kind, bos_policy);
    detect_special_tokens_by_text();
    collect_end_of_generation();
    build_special_matcher();
}

void Vocab::read_tokens(const TokenizerSpec& spec) {
    const size_t n = spec.tokens.size();
    if (n == 0) fail("Vocab: tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX)) fail("Vocab: %zu tokens is too many", n);
    if (!spec.scores.empty() && spec.scores.size() < n) {
        fail("Vocab: %zu scores for %zu tokens", spec.scores.size(), n);
    }
    if (!spec.token_types.empty() && spec.token_types.size() < n) {
        fail("Vocab: %zu token types for %zu tokens", spec.token_types.size(), n);
    }
    texts_.resize(n);
    scores_.assign(n, 0.0f);
    attrs_.assign(n, kAttrNormal);
    for (size_t i = 0; i < n; ++i) {
        texts_[i] = spec.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : spec.tokens[i];
        if (!spec.scores.empty()) scores_[i] = spec.scores[i];
        if (!spec.token_types.empty()) attrs_[i] = attr_from_type(spec.token_types[i]);
    }
    const int32_t duplicate = text_to_id_.build(texts_);
    if (duplicate >= 0) {
        fail("Vocab: duplicate token '%s' (ids %d and %d)", texts_[static_cast<size_t>(duplicate)].c_str(),
             text_to_id_.first_of(duplicate), duplicate);
    }
}

int32_t Vocab::find(std::string_view text) const { return text_to_id_.find(text); }

void Vocab::read_special_ids(const TokenizerSpec& spec, VocabKind kind, BosPolicy bos_policy) {
    if (kind == VocabKind::Spm) {
        bos = 1, eos = 2, unk = 0;
        add_space_prefix = true, add_bos = true;
    } else if (kind == VocabKind::Wpm) {
        bos = 101, unk = 100, sep = 102, pad = 0, mask = 103;
        add_bos = true, add_sep = true;
    } else {
        if (kind == VocabKind::Bpe) bos = 11, eos = 11;
        add_bos = bos_policy.add_by_default;
    }
    const auto set_id = [&](int32_t& id, const std::optional<int64_t>& value) {
        if (id >= 0 && !valid(id)) id = -1;  // a default outside the vocabulary
        if (value && *value >= 0 && *value < static_cast<int64_t>(size())) {
            id = static_cast<int32_t>(*value);
        }
    };
    set_id(bos, spec.bos_id), set_id(eos, spec.eos_id), set_id(eot, spec.eot_id);
    set_id(eom, spec.eom_id), set_id(unk, spec.unk_id), set_id(sep, spec.sep_id);
    set_id(pad, spec.pad_id), set_id(mask, spec.mask_id);
    set_id(fim_pre, spec.fim_pre_id), set_id(fim_suf, spec.fim_suf_id);
    set_id(fim_mid, spec.fim_mid_id), set_id(fim_pad, spec.fim_pad_id);
    set_id(fim_rep, spec.fim_rep_id), set_id(fim_sep, spec.fim_sep_id);

    if (spec.add_bos) add_bos = *spec.add_bos;
    if (spec.add_eos) add_eos = *spec.add_eos;
    if (spec.add_sep) add_sep = *spec.add_sep;
    if (spec.add_space_prefix) add_space_prefix = *spec.add_space_prefix;
    if (bos_policy.always) add_bos = true;
    if (add_bos && bos < 0) fail("Vocab: add_bos_token is true, but the model has no BOS token");
    if (add_eos && eos < 0) fail("Vocab: add_eos_token is true, but the model has no EOS token");
}

// Models name some special tokens only by their text; llama.cpp finds them by text and marks
// them control. Names are tried in list order, so <|im_end|> wins over <|endoftext|> (llama.cpp
// walks a hash map, so its choice among several is arbitrary; all of them end generation).
void Vocab::detect_special_tokens_by_text() {
    const auto detect = [&](int32_t& id, std::initializer_list<const char*> names) {
        if (id >= 0) return;
        for (const char* name : names) {
            const int32_t found = find(name);
            if (found >= 0) {
                id = found;
                mark_control(id);
                return;
            }
        }
    };
    detect(eot, kEndOfTurnTexts);
    detect(eom, {"<|eom_id|>"});
    detect(fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>",
                     "<|prefix|>"});
    detect(fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>",
                     "<|suffix|>"});
    detect(fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>",
                     "<|middle|>"});
    detect(fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
    detect(fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
    detect(fim_sep, {"<|file_sep|>"});
    for (size_t i = 0; i < size(); ++i) {
        if ((attrs_[i] & kAttrControl) && texts_[i].find("unused") != std::string::npos) {
            attrs_[i] |= kAttrUnused;
        }
    }
    for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
        const int32_t id = find(text);  // gpt-oss: these are always rendered
        if (id >= 0) attrs_[static_cast<size_t>(id)] = kAttrUserDefined;
    }
}

// Token texts are looked up rather than every token compared with the list: a 262k vocabulary
// makes that millions of string comparisons at load.
void Vocab::collect_end_of_generation() {
    std::vector<int32_t> ids;
    for (const int32_t id : {fim_pad, fim_rep, fim_sep, eos, eot, eom}) {
        if (id >= 0) ids.push_back(id);
    }
    for (const char* text : kEndOfGenerationTexts) {
        const int32_t id = find(text);
        if (id < 0) continue;
        ids.push_back(id);
        mark_control(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const auto eog_named = [&](std::initializer_list<const char*> names) {
        for (const int32_t id : ids) {
            if (text_is_one_of(texts_[static_cast<size_t>(id)], names)) return id;
        }
        return -1;
    };
    const int32_t end_id = eog_named({"<|end|>"}), s_id = eog_named({"</s>"});
    const bool has_call = eog_named({"<|call|>", "<|calls|>"}) >= 0;
    const bool has_return_or_flush = eog_named({"<|return|>", "<|flush|>"}) >= 0;
    const bool has_tool_response = eog_named({"<|tool_response>"}) >= 0;
    const auto drop = [&](int32_t id, uint32_t attr) {
        ids.erase(std::find(ids.begin(), ids.end(), id));
        attrs_[static_cast<size_t>(id)] = attr;
    };
    // o200k_harmony / solar-open: <|end|> ends a message, not the generation.
    if (end_id >= 0 && has_call && has_return_or_flush) drop(end_id, kAttrUserDefined);
    // gemma4 / paddleocr: </s> is ordinary text there.
    if (s_id >= 0 && has_tool_response) drop(s_id, kAttrNormal);
    eog_ = std::move(ids);
}

void Vocab::build_special_matcher() {
    for (size_t i = 0; i < size(); ++i) {
        if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
            special_order_.push_back(static_cast<int32_t>(i));
        }
    }
    // Same call as llama.cpp (std::sort, length only), so ties fall in the same order.
    std::sort(special_order_.begin(), special_order_.end(), [&](int32_t a, int32_t b) {
        return texts_[static_cast<size_t>(a)].size() > texts_[static_cast<size_t>(b)].size();
    });
    special_rank_.assign(size(), -1);
    trie_.assign(1, TrieNode{});
    for (size_t rank = 0; rank < special_order_.size(); ++rank) {
        const int32_t id = special_order_[rank];
        special_rank_[static_cast<size_t>(id)] = static_cast<int32_t>(rank);
        int32_t node = 0;
        for (const char c : texts_[static_cast<size_t>(id)]) {
            const uint8_t byte = static_cast<uint8_t>(c);
            int32_t next = -1;
            for (const auto& child : trie_[static_cast<size_t>(node)].children) {
                if (child.first == byte) next = child.second;
            }
            if (next < 0) {
                next = static_cast<int32_t>(trie_.size());
                trie_[static_cast<size_t>(node)].children.emplace_back(byte, next);
                trie_.push_back(TrieNode{});
            }
            node = next;
        }
        trie_[static_cast<size_t>(node)].token = id;
    }
}

std::vector<std::pair<size_t, int32_t>> Vocab::find_special_occurrences(const std::string& text,
                                                                        bool parse_special) const {
    std::vector<std::pair<size_t, int32_t>> found;
    for (size_t start = 0; start < text.size(); ++start) {
        int32_t node = 0;
        for (size_t i = start; i < text.size(); ++i) {
            const uint8_t byte = static_cast<uint8_t>(text[i]);
            int32_t next = -1;
            for (const auto& child : trie_[static_cast<size_t>(node)].children) {
                if (child.first == byte) {
                    next = child.second;
                    break;
                }
            }
            if (next < 0) break;
            node = next;
            const int32_t id = trie_[static_cast<size_t>(node)].token;
            if (id < 0) continue;
            const bool control_like = (attr(id) & (kAttrControl | kAttrUnknown)) != 0;
            if (parse_special || !control_like) found.emplace_back(start, id);
        }
    }
    return found;
}

// llama.cpp takes the special tokens one by one, longest first, and splits every raw fragment at
// each leftmost non-overlapping occurrence. Here all occurrences are found in one trie pass and
// then accepted in that same priority order: an occurrence is taken when its bytes are all still
// raw text and it does not overlap the previous occurrence taken for the same token.
std::vector<TextFragment> Vocab::partition(const std::string& text, bool parse_special) const {
    std::vector<TextFragment> fragments;
    if (text.empty()) return fragments;
    auto occurrences = find_special_occurrences(text, parse_special);
    std::stable_sort(occurrences.begin(), occurrences.end(), [&](const auto& a, const auto& b) {
        return special_rank_[static_cast<size_t>(a.second)] < special_rank_[static_cast<size_t>(b.second)];
    });
    std::vector<bool> taken(text.size(), false);
    std::vector<std::pair<size_t, int32_t>> accepted;
    size_t previous_end = 0;
    int32_t previous_token = -1;
    for (const auto& [start, id] : occurrences) {
        const size_t length = texts_[static_cast<size_t>(id)].size();
        if (id == previous_token && start < previous_end) continue;
        bool free = true;
        for (size_t i = start; i < start + length && free; ++i) free = !taken[i];
        if (!free) continue;
        std::fill(taken.begin() + static_cast<std::ptrdiff_t>(start),
                  taken.begin() + static_cast<std::ptrdiff_t>(start + length), true);
        accepted.emplace_back(start, id);
        previous_end = start + length;
        previous_token = id;
    }
    std::sort(accepted.begin(), accepted.end());
    size_t cursor = 0;
    for (const auto& [start, id] : accepted) {
        if (start > cursor) fragments.push_back(TextFragment{-1, cursor, start - cursor});
        fragments.push_back(TextFragment{id, start, texts_[static_cast<size_t>(id)].size()});
        cursor = start + texts_[static_cast<size_t>(id)].size();
    }
    if (cursor < text.size()) fragments.push_back(TextFragment{-1, cursor, text.size() - cursor});
    return fragments;
}

}  // namespace cactus
