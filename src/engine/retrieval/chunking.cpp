#include "engine/retrieval/chunking.h"

#include <algorithm>

#include "core/error.h"

namespace cactus {

namespace {

bool is_blank(const std::string& line) {
    return std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

std::string trim(const std::string& s) {
    const char* ws = " \t\r\n";
    size_t begin = s.find_first_not_of(ws);
    if (begin == std::string::npos) return "";
    return s.substr(begin, s.find_last_not_of(ws) - begin + 1);
}

// A chunk under construction: its paragraphs joined by '\n' and their summed token counts.
struct Packer {
    std::vector<Chunk>* out;
    const std::string* source;
    std::string text;
    size_t tokens = 0;

    void flush() {
        if (text.empty()) return;
        out->push_back({*source, text, out->size()});
        text.clear();
        tokens = 0;
    }
    void add(const std::string& paragraph, size_t n) {
        if (!text.empty()) text += '\n';
        text += paragraph;
        tokens += n;
    }
};

}  // namespace

std::vector<std::string> split_paragraphs(const std::string& text) {
    std::vector<std::string> paragraphs;
    std::string current;
    auto close = [&] {
        std::string p = trim(current);
        if (!p.empty()) paragraphs.push_back(p);
        current.clear();
    };
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        if (is_blank(line)) {
            close();
            continue;
        }
        if (line[0] == '#') close();  // a heading starts its own paragraph
        if (!current.empty()) current += '\n';
        current += line;
    }
    close();
    return paragraphs;
}

std::vector<std::string> split_words(const std::string& text, size_t max_tokens, size_t overlap,
                                     const std::function<size_t(const std::string&)>& count_tokens) {
    if (max_tokens == 0 || overlap >= max_tokens)
        fail("split_words: overlap %zu must be below max_tokens %zu", overlap, max_tokens);
    std::vector<std::string> words;
    std::vector<size_t> counts;
    for (size_t pos = 0; pos < text.size();) {
        size_t begin = text.find_first_not_of(" \t\r\n", pos);
        if (begin == std::string::npos) break;
        size_t end = text.find_first_of(" \t\r\n", begin);
        if (end == std::string::npos) end = text.size();
        words.push_back(text.substr(begin, end - begin));
        counts.push_back(count_tokens(words.back()));
        pos = end;
    }
    std::vector<std::string> windows;
    size_t first = 0;
    while (first < words.size()) {
        // Per-word counts bound the window; the sum over words can only over-count merged pieces.
        size_t last = first, tokens = 0;
        while (last < words.size() && (last == first || tokens + counts[last] <= max_tokens)) tokens += counts[last++];
        std::string window = words[first];
        for (size_t i = first + 1; i < last; ++i) window += ' ' + words[i];
        windows.push_back(window);
        if (last == words.size()) break;
        // Step back over whole words until about `overlap` tokens repeat, always moving forward.
        size_t next = last, repeated = 0;
        while (next > first + 1 && repeated + counts[next - 1] <= overlap) repeated += counts[--next];
        first = next;
    }
    return windows;
}

std::vector<Chunk> chunk_text(const std::string& text, const std::string& source, const CorpusEmbedder& embedder,
                              const ChunkingOptions& options) {
    std::vector<Chunk> chunks;
    std::vector<size_t> chunk_tokens;
    Packer packer{&chunks, &source, {}, 0};
    auto flush = [&] {
        if (packer.text.empty()) return;
        chunk_tokens.push_back(packer.tokens);
        packer.flush();
    };
    for (const std::string& paragraph : split_paragraphs(text)) {
        size_t n = embedder.count_tokens(paragraph);
        if (n > options.max_tokens) {
            flush();
            std::vector<std::string> windows =
                embedder.split_tokens
                    ? embedder.split_tokens(paragraph, options.max_tokens, options.overlap)
                    : split_words(paragraph, options.max_tokens, options.overlap, embedder.count_tokens);
            for (const std::string& w : windows) {
                packer.add(w, embedder.count_tokens(w));
                flush();
            }
            continue;
        }
        if (packer.tokens + n > options.max_tokens) flush();
        packer.add(paragraph, n);
    }
    flush();
    if (chunks.size() >= 2 && chunk_tokens.back() < options.min_tokens) {
        chunks[chunks.size() - 2].content += '\n' + chunks.back().content;
        chunks.pop_back();
    }
    return chunks;
}

}  // namespace cactus
