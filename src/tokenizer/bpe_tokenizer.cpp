// GPT-2 byte-level BPE (tokenizer.ggml.model = "gpt2").
#include <algorithm>
#include <queue>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace cactus {

namespace {

// Unambiguous key of a merge pair, even for token texts that contain spaces.
std::string merge_key(const std::string& left, const std::string& right) {
    std::string key;
    key.reserve(left.size() + right.size() + 4);
    key += left;
    key += right;
    const uint32_t n = static_cast<uint32_t>(left.size());
    for (int shift = 0; shift < 32; shift += 8) key.push_back(static_cast<char>((n >> shift) & 0xFF));
    return key;
}

TokenizerSpec with_pre_defaults(const TokenizerSpec& spec, const PreTokenizerConfig& config) {
    TokenizerSpec out = spec;
    if (!out.add_bos) out.add_bos = config.add_bos;
    if (!out.add_eos) out.add_eos = false;
    out.add_space_prefix = false;  // llama.cpp: byte-level BPE never adds a prefix space
    return out;
}

// Text re-encoded from llama.cpp's lenient decoding, with code points PCRE2 cannot take
// (surrogates) replaced by U+FFFD, so that the regexes see valid UTF-8.
std::string regex_safe_text(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    size_t offset = 0;
    while (offset < text.size()) {
        const uint32_t cp = utf8::decode_one(text, offset);
        utf8::append(out, (cp >= 0xD800 && cp <= 0xDFFF) ? utf8::kReplacementChar : cp);
    }
    return out;
}

struct Symbol {
    int prev;
    int next;
    size_t offset;  // into the word
    size_t n;       // bytes; 0 once merged into the left neighbour
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

BpeTokenizer::BpeTokenizer(const TokenizerSpec& spec)
    : VocabTokenizer(with_pre_defaults(spec, pre_tokenizer_config(spec.pre)), VocabKind::Bpe),
      config_(pre_tokenizer_config(spec.pre)),
      pre_tokenizer_(config_.regexes) {
    decode_cleans_spaces_ = config_.clean_spaces;
    if (spec.merges.empty()) fail("BpeTokenizer: tokenizer.ggml.merges is missing or empty");
    ranks_.reserve(spec.merges.size());
    for (size_t i = 0; i < spec.merges.size(); ++i) {
        const std::string& merge = spec.merges[i];
        const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
        std::string left, right;
        if (space != std::string::npos) {
            left = merge.substr(0, space);
            right = merge.substr(space + 1);
        }
        ranks_.emplace(merge_key(left, right), static_cast<int>(i));  // first rank wins
    }
}

int BpeTokenizer::rank(const std::string& left, const std::string& right) const {
    const auto it = ranks_.find(merge_key(left, right));
    return it == ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_text(const std::string& text, bool /*after_special*/, std::vector<int32_t>& out) const {
    for (const std::string& word : pre_tokenizer_.split(regex_safe_text(text))) {
        std::string mapped;
        mapped.reserve(word.size() * 2);
        for (const char c : word) mapped += utf8::byte_to_unicode(static_cast<uint8_t>(c));
        if (config_.ignore_merges) {
            const int32_t id = vocab_.find(mapped);
            if (id >= 0) {
                out.push_back(id);
                continue;
            }
        }
        encode_word(mapped, out);
    }
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>& out) const {
    std::vector<Symbol> symbols;
    for (size_t offset = 0; offset < word.size();) {
        const size_t n = std::min(word.size() - offset, utf8::sequence_length(static_cast<uint8_t>(word[offset])));
        const int index = static_cast<int>(symbols.size());
        symbols.push_back(Symbol{index - 1, offset + n == word.size() ? -1 : index + 1, offset, n});
        offset += n;
    }
    const auto text_of = [&](int i) { return word.substr(symbols[i].offset, symbols[i].n); };
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto add_bigram = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const int r = rank(text_of(left), text_of(right));
        if (r >= 0) queue.push(Bigram{left, right, r, symbols[left].n, symbols[right].n});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[bigram.left];
        Symbol& right = symbols[bigram.right];
        if (left.n == 0 || right.n == 0 || left.n != bigram.left_n || right.n != bigram.right_n) {
            continue;  // outdated: one side has changed since
        }
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = bigram.left;
        add_bigram(left.prev, bigram.left);
        add_bigram(bigram.left, left.next);
    }

    for (const Symbol& symbol : symbols) {
        if (symbol.n == 0) continue;
        const std::string text = word.substr(symbol.offset, symbol.n);
        const int32_t id = vocab_.find(text);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        for (const char c : text) {  // as llama.cpp: single bytes that are tokens, others dropped
            const int32_t byte_id = vocab_.find(std::string(1, c));
            if (byte_id >= 0) out.push_back(byte_id);
        }
    }
}

std::string BpeTokenizer::normal_piece(int32_t id) const {
    const std::string& text = vocab_.text(id);
    std::string bytes;
    size_t offset = 0;
    while (offset < text.size()) {
        const uint32_t cp = utf8::decode_one(text, offset);
        const int byte = utf8::unicode_to_byte(cp);
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
