// BPE (tokenizer.ggml.model = "gpt2", and "gemma4": SentencePiece-style BPE on raw UTF-8).
#include <algorithm>
#include <queue>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace cactus {

namespace {

// Unambiguous key of a merge pair, even for token texts that contain spaces.
std::string merge_key(std::string_view left, std::string_view right) {
    std::string key;
    key.reserve(left.size() + right.size() + 4);
    key += left;
    key += right;
    const uint32_t n = static_cast<uint32_t>(left.size());
    for (int shift = 0; shift < 32; shift += 8) key.push_back(static_cast<char>((n >> shift) & 0xFF));
    return key;
}

BosPolicy bos_policy(const PreTokenizerConfig& config) { return BosPolicy{config.add_bos, config.force_add_bos}; }

// The text as llama.cpp's pre-tokenizer sees it: decoded leniently (each invalid byte becomes
// U+FFFD; surrogates and overlong forms decode to their value) and written back as UTF-8, with
// spaces as U+2581 where the model escapes them. Code points above U+10FFFF become U+FFFD;
// llama.cpp's re-encoding throws there.
std::string lenient_text(const std::string& text, bool escape_whitespaces) {
    std::string out;
    out.reserve(text.size() + text.size() / 4);
    size_t offset = 0;
    while (offset < text.size()) {
        if (escape_whitespaces && text[offset] == ' ') {
            out += kEscapedSpace;
            ++offset;
            continue;
        }
        utf8::append(out, utf8::decode_one(text, offset));
    }
    return out;
}

// lenient_text with each surrogate (ED A0..BF xx, the only invalid UTF-8 it holds) replaced by
// U+FFFD, also three bytes, so PCRE2 can match it and every offset stays the same. The regexes
// treat both alike: neither is a letter, a number, whitespace or punctuation.
std::string regex_safe_text(std::string lenient) {
    for (size_t i = 0; i + 2 < lenient.size(); ++i) {
        if (static_cast<uint8_t>(lenient[i]) == 0xED && static_cast<uint8_t>(lenient[i + 1]) >= 0xA0) {
            lenient.replace(i, 3, "\xef\xbf\xbd");
            i += 2;
        }
    }
    return lenient;
}

struct Symbol {
    int prev;
    int next;
    size_t offset;  // into the word
    size_t n;       // bytes; 0 once merged into the left neighbour
    int32_t id;     // the token these bytes are, or -1
};

struct Bigram {
    int left;
    int right;
    int rank;
    size_t left_n;
    size_t right_n;
};

struct BigramOrder {  // lowest rank first, then leftmost (as llama.cpp)
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

}  // namespace

BpeTokenizer::BpeTokenizer(const TokenizerSpec& spec, VocabKind kind, const std::string& pre)
    : VocabTokenizer(spec, kind, bos_policy(pre_tokenizer_config(pre))),
      config_(pre_tokenizer_config(pre)),
      pre_tokenizer_(config_.regexes) {
    decode_cleans_spaces_ = config_.clean_spaces;
    // llama.cpp: BPE never adds a prefix space; the flag, when the file sets it, only makes
    // detokenization drop the first piece's leading space.
    decode_strips_prefix_space_ = vocab_.add_space_prefix;
    if (spec.merges.empty()) fail("BpeTokenizer: tokenizer.ggml.merges is missing or empty");
    read_merges(spec.merges);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const std::string name = config_.byte_encode ? std::string(1, static_cast<char>(b))
                                                     : std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
        byte_fallback_[static_cast<size_t>(b)] = vocab_.find(name);
    }
}

void BpeTokenizer::read_merges(const std::vector<std::string>& merges) {
    merges_by_id_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string_view merge = merges[i];
        // "left right", split at the first space after the first byte (as llama.cpp); a merge
        // without one pairs two empty texts, which no symbol ever is.
        const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
        if (space == std::string_view::npos) continue;
        const std::string_view left = merge.substr(0, space), right = merge.substr(space + 1);
        const int rank = static_cast<int>(i);
        const int32_t left_id = vocab_.find(left), right_id = vocab_.find(right);
        if (left_id >= 0 && right_id >= 0) {
            merges_by_id_.insert(left_id, right_id, rank);  // first rank wins
        } else {
            merges_by_text_.emplace(merge_key(left, right), rank);
        }
    }
}

int BpeTokenizer::merge_rank(std::string_view left, int32_t left_id, std::string_view right, int32_t right_id) const {
    if (left_id >= 0 && right_id >= 0) return merges_by_id_.find(left_id, right_id);
    if (merges_by_text_.empty()) return -1;
    const auto it = merges_by_text_.find(merge_key(left, right));
    return it == merges_by_text_.end() ? -1 : it->second;
}

std::vector<std::string> BpeTokenizer::split_words(const std::string& text) const {
    const std::string lenient = lenient_text(text, config_.escape_whitespaces);
    if (!config_.byte_encode) return pre_tokenizer_.split(lenient);
    // The regexes run on the surrogate-free copy; the words keep llama.cpp's bytes.
    std::vector<std::string> words;
    size_t begin = 0;
    for (const size_t end : pre_tokenizer_.split_ends(regex_safe_text(lenient))) {
        std::string mapped;
        mapped.reserve((end - begin) * 2);
        for (size_t i = begin; i < end; ++i) mapped += byte_level::byte_to_unicode(static_cast<uint8_t>(lenient[i]));
        words.push_back(std::move(mapped));
        begin = end;
    }
    return words;
}

bool BpeTokenizer::emitted_whole(const std::string& word) const {
    if (config_.ignore_merges) return true;
    // gemma4 (llama.cpp PR #21343): a newline run that is a token is that token, although its
    // merges could build it in another order.
    return config_.whole_newline_runs && word.find_first_not_of('\n') == std::string::npos;
}

void BpeTokenizer::encode_text(const std::string& text, bool /*after_special*/, std::vector<int32_t>& out) const {
    for (const std::string& word : split_words(text)) {
        if (emitted_whole(word)) {
            const int32_t id = vocab_.find(word);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
        }
        encode_word(word, out);
    }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
    const std::string_view text(word);
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    for (size_t offset = 0; offset < word.size();) {
        const size_t n = std::min(word.size() - offset, utf8::sequence_length(static_cast<uint8_t>(word[offset])));
        const int index = static_cast<int>(symbols.size());
        const int next = offset + n == word.size() ? -1 : index + 1;
        symbols.push_back(Symbol{index - 1, next, offset, n, vocab_.find(text.substr(offset, n))});
        offset += n;
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto add_bigram = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[static_cast<size_t>(left)];
        const Symbol& r = symbols[static_cast<size_t>(right)];
        const int rank = merge_rank(text.substr(l.offset, l.n), l.id, text.substr(r.offset, r.n), r.id);
        if (rank >= 0) queue.push(Bigram{left, right, rank, l.n, r.n});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[static_cast<size_t>(bigram.left)];
        Symbol& right = symbols[static_cast<size_t>(bigram.right)];
        if (left.n == 0 || right.n == 0 || left.n != bigram.left_n || right.n != bigram.right_n) {
            continue;  // outdated: one side has changed since
        }
        left.n += right.n;
        left.id = vocab_.find(text.substr(left.offset, left.n));
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = bigram.left;
        add_bigram(left.prev, bigram.left);
        add_bigram(bigram.left, left.next);
    }

    for (const Symbol& symbol : symbols) {
        if (symbol.n == 0) continue;
        if (symbol.id >= 0) {
            out.push_back(symbol.id);
            continue;
        }
        for (size_t i = symbol.offset; i < symbol.offset + symbol.n; ++i) {
            // as llama.cpp: bytes without a fallback token are dropped
            const int32_t byte_id = byte_fallback_[static_cast<uint8_t>(word[i])];
            if (byte_id >= 0) out.push_back(byte_id);
        }
    }
}

std::string BpeTokenizer::normal_piece(int32_t id) const {
    const std::string& text = vocab_.text(id);
    if (config_.escape_whitespaces) return unescape_spaces(text);
    std::string bytes;
    size_t offset = 0;
    while (offset < text.size()) {
        const uint32_t cp = utf8::decode_one(text, offset);
        const int byte = byte_level::unicode_to_byte(cp);
        if (byte >= 0) {
            bytes.push_back(static_cast<char>(byte));
            continue;
        }
        // llama.cpp's marker for a code point outside the byte map
        bytes += "[UNK_BYTE_0x";
        const std::string encoded = utf8::encode(cp);
        for (const char c : encoded) bytes += format("%02x", static_cast<unsigned>(static_cast<uint8_t>(c)));
        bytes += text + "]";
    }
    return bytes;
}

}  // namespace cactus
