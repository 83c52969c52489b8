// WordPiece (tokenizer.ggml.model = "bert"): BERT's normaliser and pre-tokenizer, then greedy
// longest-match-first pieces over llama.cpp's phantom-space vocabulary.
//
// Invalid UTF-8: each invalid byte decodes to U+FFFD (utf8::decode_one), and the text cleaner
// removes U+FFFD as Hugging Face's BertNormalizer and llama.cpp both do, so invalid bytes vanish
// and the bytes around them may join into one word. Surrogates and code points above U+10FFFF
// (which lenient decoding can produce) are removed the same way.
#include <algorithm>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_bert.h"

namespace cactus {

namespace {

namespace uni = bert_unicode;

// tokenizers' WordPiece max_input_chars_per_word (all-MiniLM-L6-v2 and BERT use 100): a longer
// word is one [UNK]. llama.cpp has no such limit; Hugging Face's ids are the reference here.
constexpr size_t kMaxWordChars = 100;

bool removed_by_cleaner(uint32_t cp) {
    return cp == 0 || cp == utf8::kReplacementChar || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF ||
           uni::is_control(cp);
}

// BertNormalizer in its order: clean text (controls removed, whitespace to ' '), spaces around
// CJK ideographs, NFD with nonspacing marks dropped, lowercase. Canonical reordering of NFD is
// left out: it moves only combining marks, all but 25 of which (spacing marks such as U+1D165)
// are Mn and dropped; two of those 25 out of order is the only case it changes, and BERT's
// vocabulary has none of them, so such a word is [UNK] in either order.
std::vector<uint32_t> normalize(const std::string& text) {
    std::vector<uint32_t> out;
    out.reserve(text.size() + 8);
    std::vector<uint32_t> decomposed;
    for (size_t offset = 0; offset < text.size();) {
        const uint32_t cp = utf8::decode_one(text, offset);
        if (removed_by_cleaner(cp)) continue;
        if (uni::is_whitespace(cp)) {
            out.push_back(' ');
            continue;
        }
        const bool cjk = uni::is_cjk_ideograph(cp);
        if (cjk) out.push_back(' ');
        decomposed.clear();
        uni::append_nfd(cp, decomposed);
        for (const uint32_t d : decomposed) {
            if (!uni::is_nonspacing_mark(d)) out.push_back(uni::to_lower(d));
        }
        if (cjk) out.push_back(' ');
    }
    return out;
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(const TokenizerSpec& spec) : VocabTokenizer(spec, VocabKind::Wpm) {
    if (vocab_.unk < 0) fail("WordPieceTokenizer: the vocabulary has no [UNK] token (tokenizer.ggml.unknown_token_id)");
    for (size_t id = 0; id < vocab_.size(); ++id) {
        max_token_bytes_ = std::max(max_token_bytes_, vocab_.text(static_cast<int32_t>(id)).size());
    }
    decode_strips_leading_space_ = true;
    decode_cleans_spaces_ = true;  // llama.cpp's WPM detokenizer cleans " ," and " 's"
    add_bos_ = true;
    add_eos_ = vocab_.sep >= 0;
}

std::vector<int32_t> WordPieceTokenizer::encode(const std::string& text, bool add_special, bool parse_special) const {
    std::vector<int32_t> ids = VocabTokenizer::encode(text, false, parse_special);
    if (!add_special) return ids;
    if (vocab_.bos < 0) fail("WordPieceTokenizer::encode: the model has no [CLS] (BOS) token");
    const int32_t sep = vocab_.sep >= 0 ? vocab_.sep : vocab_.eos;
    if (sep < 0) fail("WordPieceTokenizer::encode: the model has no [SEP] token");
    ids.insert(ids.begin(), vocab_.bos);
    ids.push_back(sep);
    return ids;
}

// BertPreTokenizer: words end at whitespace; every punctuation character is a word of its own.
void WordPieceTokenizer::encode_text(const std::string& text, bool /*after_special*/, std::vector<int32_t>& out) const {
    const std::vector<uint32_t> cps = normalize(text);
    std::vector<uint32_t> word;
    for (const uint32_t cp : cps) {
        if (uni::is_whitespace(cp)) {
            encode_word(word, out);
            word.clear();
        } else if (uni::is_punctuation(cp)) {
            encode_word(word, out);
            word.assign(1, cp);
            encode_word(word, out);
            word.clear();
        } else {
            word.push_back(cp);
        }
    }
    encode_word(word, out);
}

// Greedy longest match from the word's start, then from the end of each match; a continuation
// piece is looked up without "##" (phantom-space form), a word-initial one with U+2581 in front.
// When some position has no piece, the whole word becomes one [UNK].
void WordPieceTokenizer::encode_word(const std::vector<uint32_t>& word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (word.size() > kMaxWordChars) {
        out.push_back(vocab_.unk);
        return;
    }
    std::string text = kEscapedSpace;  // "▁" + word, and the byte offset where each character ends
    std::vector<size_t> ends;
    ends.reserve(word.size());
    for (const uint32_t cp : word) {
        utf8::append(text, cp);
        ends.push_back(text.size());
    }
    const size_t first_out = out.size();
    size_t start_char = 0;
    size_t start_byte = 0;  // the first piece includes the "▁"
    while (start_char < word.size()) {
        int32_t id = -1;
        size_t end_char = word.size();
        // A continuation starting with U+2581 would find a word-initial piece ("a▁a" is not
        // "a" + "##▁a" in HF's vocabulary), so none is looked up.
        const bool continuation_blocked = start_char > 0 && word[start_char] == 0x2581;
        for (; end_char > start_char && !continuation_blocked; --end_char) {
            const size_t length = ends[end_char - 1] - start_byte;
            if (length > max_token_bytes_) continue;
            id = vocab_.find(std::string_view(text).substr(start_byte, length));
            if (id >= 0) break;
        }
        if (id < 0) {
            out.resize(first_out);
            out.push_back(vocab_.unk);
            return;
        }
        out.push_back(id);
        start_byte = ends[end_char - 1];
        start_char = end_char;
    }
}

}  // namespace cactus
