// SentencePiece BPE (tokenizer.ggml.model = "llama"; llama, gemma).
#include <algorithm>
#include <queue>

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer_impl.h"

namespace cactus {

namespace {

struct Symbol {
    int prev;
    int next;
    const char* text;
    size_t n;  // bytes; 0 once merged into the left neighbour
};

struct Bigram {
    int left;
    int right;
    float score;
    size_t size;
};

struct BigramOrder {  // highest score first, then leftmost (as llama.cpp)
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

}  // namespace

SpmTokenizer::SpmTokenizer(const TokenizerSpec& spec) : VocabTokenizer(spec, VocabKind::Spm) {
    decode_strips_prefix_space_ = vocab_.add_space_prefix;
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
        int32_t id = vocab_.find(name);
        if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
        byte_tokens_[static_cast<size_t>(b)] = id;
    }
}

void SpmTokenizer::encode_text(const std::string& text, bool after_special, std::vector<int32_t>& out) const {
    std::string escaped;
    escaped.reserve(text.size() + 8);
    if (vocab_.add_space_prefix && after_special) escaped += kEscapedSpace;
    for (const char c : text) {
        if (c == ' ') {
            escaped += kEscapedSpace;
        } else {
            escaped.push_back(c);
        }
    }
    encode_escaped(escaped, out);
}

void SpmTokenizer::append_bytes(const char* bytes, size_t n, std::vector<int32_t>& out) const {
    for (size_t i = 0; i < n; ++i) {
        int32_t id = byte_tokens_[static_cast<uint8_t>(bytes[i])];
        if (id < 0) id = vocab_.unk;
        if (id < 0) {
            fail("SpmTokenizer: byte 0x%02x has no token and the model has no unknown token",
                 static_cast<unsigned>(static_cast<uint8_t>(bytes[i])));
        }
        out.push_back(id);
    }
}

void SpmTokenizer::encode_escaped(const std::string& text, std::vector<int32_t>& out) const {
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (size_t offset = 0; offset < text.size();) {
        const size_t n = std::min(text.size() - offset, utf8::sequence_length(static_cast<uint8_t>(text[offset])));
        const int index = static_cast<int>(symbols.size());
        symbols.push_back(Symbol{index - 1, offset + n == text.size() ? -1 : index + 1, text.data() + offset, n});
        offset += n;
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto add_bigram = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const size_t size = symbols[left].n + symbols[right].n;
        const int32_t id = vocab_.find(std::string_view(symbols[left].text, size));
        if (id >= 0) queue.push(Bigram{left, right, vocab_.score(id), size});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add_bigram(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[bigram.left];
        Symbol& right = symbols[bigram.right];
        if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
        left.n += right.n;
        right.n = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = bigram.left;
        add_bigram(left.prev, bigram.left);
        add_bigram(bigram.left, left.next);
    }

    // Every merged symbol is a token; a symbol that is not is one unknown character -> bytes.
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
        const Symbol& symbol = symbols[i];
        const int32_t id = vocab_.find(std::string_view(symbol.text, symbol.n));
        if (id >= 0) {
            out.push_back(id);
        } else {
            append_bytes(symbol.text, symbol.n, out);
        }
    }
}

std::string SpmTokenizer::normal_piece(int32_t id) const { return unescape_spaces(vocab_.text(id)); }

}  // namespace cactus
