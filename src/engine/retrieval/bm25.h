#pragma once
// BM25 over an inverted index of the whole corpus, so lexical matches the vectors miss can be
// recalled. Terms are Unicode-aware (see bm25_terms) so non-Latin notes get lexical search too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace cactus {

// The terms of a text: runs of ASCII letters/digits (lower-cased) and non-ASCII letters form
// words; every other ASCII character, Unicode punctuation/space blocks and invalid UTF-8 separate
// words; each CJK ideograph, kana or fullwidth form is a term by itself (CJK writes no spaces).
std::vector<std::string> bm25_terms(const std::string& text);

struct ScoredId {
    uint32_t id;
    float score;
};

// Keeps the k best (score desc, then id asc) of a stream of scores with a min-heap.
class TopK {
public:
    explicit TopK(size_t k) : k_(k) {}
    void push(uint32_t id, float score);
    std::vector<ScoredId> take_sorted();  // best first

private:
    size_t k_;
    std::vector<ScoredId> heap_;
};

class Bm25Index {
public:
    static constexpr double kK1 = 1.5;
    static constexpr double kB = 0.75;

    explicit Bm25Index(const std::vector<std::string>& documents);

    // The top_k documents containing a query term, best first; `only` (if not null) restricts
    // the ranking to those documents and computes df, N and avgdl over them alone (Cactus's
    // candidate-only BM25).
    std::vector<ScoredId> query(const std::string& text, size_t top_k,
                                const std::vector<uint32_t>* only = nullptr) const;

    size_t size() const { return doc_length_.size(); }
    size_t n_terms() const { return postings_.size(); }

private:
    struct Posting {
        uint32_t doc;
        uint32_t tf;
    };
    std::unordered_map<std::string, uint32_t> term_id_;
    std::vector<std::vector<Posting>> postings_;  // per term, docs ascending
    std::vector<uint32_t> doc_length_;            // terms per document
    double avg_length_ = 0.0;
    std::vector<ScoredId> query_subset(const std::vector<std::string>& terms, size_t top_k,
                                       const std::vector<uint32_t>& only) const;
};

// idf and tf saturation, shared by both query paths and the tests' hand computation.
double bm25_idf(double n_docs, double df);
double bm25_term_score(double tf, double doc_length, double avg_length);

}  // namespace cactus
