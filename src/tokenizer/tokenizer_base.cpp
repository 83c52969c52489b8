// VocabTokenizer (special-token split, BOS/EOS, pieces), Tokenizer::decode and the constructors.
#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer_impl.h"

namespace cactus {

std::string unescape_spaces(const std::string& text) {
    std::string piece;
    piece.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 3, kEscapedSpace) == 0) {
            piece.push_back(' ');
            i += 3;
        } else {
            piece.push_back(text[i++]);
        }
    }
    return piece;
}

VocabTokenizer::VocabTokenizer(const TokenizerSpec& spec, VocabKind kind, BosPolicy bos_policy)
    : vocab_(spec, kind, bos_policy) {
    bos_id_ = vocab_.bos;
    eos_id_ = vocab_.eos;
    eot_id_ = vocab_.eot;
    add_bos_ = vocab_.add_bos;
    add_eos_ = vocab_.add_eos;
    eog_ids_ = vocab_.end_of_generation();
}

void VocabTokenizer::check_id(int32_t id, const char* function) const {
    if (!vocab_.valid(id)) fail("%s: token id %d is outside the vocabulary of %zu", function, id, vocab_.size());
}

std::vector<int32_t> VocabTokenizer::encode(const std::string& text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
    bool after_special = true;
    for (const TextFragment& fragment : vocab_.partition(text, parse_special)) {
        if (fragment.token >= 0) {
            out.push_back(fragment.token);
            after_special = true;
            continue;
        }
        encode_text(text.substr(fragment.offset, fragment.length), after_special, out);
        after_special = false;
    }
    if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
    return out;
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
    check_id(id, "Tokenizer::token_text");
    return vocab_.text(id);
}

bool VocabTokenizer::is_control(int32_t id) const {
    check_id(id, "Tokenizer::is_control");
    return (vocab_.attr(id) & kAttrControl) != 0;
}

std::string VocabTokenizer::token_to_piece(int32_t id, bool render_special) const {
    check_id(id, "Tokenizer::token_to_piece");
    const uint32_t attr = vocab_.attr(id);
    const uint32_t special = kAttrUnknown | kAttrControl;
    if (!render_special && (attr & special)) return "";
    if (attr & (special | kAttrUserDefined)) return vocab_.text(id);
    if (attr & kAttrNormal) return normal_piece(id);
    if (attr & kAttrByte) {
        const std::string& text = vocab_.text(id);  // "<0xAB>"
        if (text.size() < 5) return "";
        const std::string hex = text.substr(3, 2);
        return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
    }
    return "";  // unused / undefined tokens stand for nothing
}

namespace {

// llama.cpp's clean_spaces passes over detokenized text.
std::string clean_spaces(const std::string& in) {
    std::string a;  // " ?", " !", " .", " ," lose the space
    for (size_t i = 0; i < in.size(); ++i) {
        const char x = in[i];
        if (i > 0 && in[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
        a.push_back(x);
    }
    std::string b;                     // " ' " becomes "'"
    bool after_removed_space = false;  // llama.cpp zeroes the removed space in place
    for (size_t i = 0; i < a.size(); ++i) {
        const char x = a[i];
        const char prev = i == 0 || after_removed_space ? '\0' : a[i - 1];
        after_removed_space = false;
        if (i > 0 && x == '\'' && i + 1 < a.size() && prev == ' ' && a[i + 1] == ' ') {
            b.pop_back();
            b.push_back(x);
            ++i;
            after_removed_space = true;
            continue;
        }
        b.push_back(x);
    }
    std::string c;  // " 's", " 'm", " 're", " 've" lose the space
    for (size_t i = 0; i < b.size(); ++i) {
        const char x = b[i];
        if (i > 0 && b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
            const char x1 = b[i + 1];
            const char x2 = i + 2 < b.size() ? b[i + 2] : '\0';
            const bool drop =
                x1 == 's' || x1 == 'm' || (i + 2 < b.size() && ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')));
            if (drop) c.pop_back();
        }
        c.push_back(x);
    }
    return c;
}

}  // namespace

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
    std::string text;
    bool first = true;
    for (const int32_t id : ids) {
        std::string piece = token_to_piece(id, render_special);
        if (first && decode_strips_prefix_space_ && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        first = false;
        text += piece;
    }
    if (decode_strips_leading_space_ && !text.empty() && text[0] == ' ') text.erase(0, 1);
    return decode_cleans_spaces_ ? clean_spaces(text) : text;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
    return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

std::unique_ptr<Tokenizer> Tokenizer::from_spec(const TokenizerSpec& spec) {
    if (spec.model == "gpt2") return std::make_unique<BpeTokenizer>(spec, VocabKind::Bpe, spec.pre);
    if (spec.model == "llama") return std::make_unique<SpmTokenizer>(spec);
    // llama.cpp ignores the file's pre-tokenizer name for gemma4
    if (spec.model == "gemma4") return std::make_unique<BpeTokenizer>(spec, VocabKind::Gemma4, "gemma4");
    if (spec.model == "bert") return std::make_unique<WordPieceTokenizer>(spec);
    fail("Tokenizer::from_spec: unsupported tokenizer.ggml.model '%s' (expected gpt2, llama, gemma4 or bert)",
         spec.model.c_str());
}

}  // namespace cactus
