#include "engine/retrieval/bm25.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <unordered_set>

#include "core/utf8.h"

namespace cactus {

namespace {

bool is_separator(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 ||  // Latin-1 controls, symbols, ×, ÷
           (cp >= 0x2000 && cp <= 0x2BFF) ||                          // punctuation, symbols, arrows
           (cp >= 0x3000 && cp <= 0x303F) ||                          // CJK punctuation
           (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF20) ||
           (cp >= 0x1F000 && cp <= 0x1FAFF);  // emoji
}

bool is_cjk(uint32_t cp) {
    return (cp >= 0x3040 && cp <= 0x30FF) ||  // hiragana, katakana
           (cp >= 0x3400 && cp <= 0x4DBF) ||  // CJK extension A
           (cp >= 0x4E00 && cp <= 0x9FFF) ||  // CJK unified ideographs
           (cp >= 0xF900 && cp <= 0xFAFF) ||  // compatibility ideographs
           (cp >= 0xFF10 && cp <= 0xFFEF) ||  // fullwidth forms
           (cp >= 0x20000 && cp <= 0x2FFFF);  // extensions B+
}

}  // namespace

std::vector<std::string> bm25_terms(const std::string& text) {
    std::vector<std::string> terms;
    std::string word;
    auto flush = [&] {
        if (!word.empty()) terms.push_back(std::move(word));
        word.clear();
    };
    for (size_t i = 0; i < text.size();) {
        size_t next = i;
        const uint32_t cp = utf8::decode_one(text, next);
        const size_t n = next - i;
        if (cp == utf8::kReplacementChar && n == 1) {  // an invalid byte (a real U+FFFD is 3 bytes)
            flush();
            ++i;
            continue;
        }
        if (cp < 0x80) {
            char c = static_cast<char>(cp);
            if (std::isalnum(static_cast<unsigned char>(c))) {
                word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            } else {
                flush();
            }
        } else if (is_cjk(cp)) {
            flush();
            terms.push_back(text.substr(i, n));
        } else if (is_separator(cp)) {
            flush();
        } else {
            word.append(text, i, n);
        }
        i += n;
    }
    flush();
    return terms;
}

void TopK::push(uint32_t id, float score) {
    auto worse = [](const ScoredId& a, const ScoredId& b) {  // heap top = worst kept
        return a.score != b.score ? a.score > b.score : a.id < b.id;
    };
    if (k_ == 0) return;
    if (heap_.size() < k_) {
        heap_.push_back({id, score});
        std::push_heap(heap_.begin(), heap_.end(), worse);
    } else if (worse({id, score}, heap_.front())) {
        std::pop_heap(heap_.begin(), heap_.end(), worse);
        heap_.back() = {id, score};
        std::push_heap(heap_.begin(), heap_.end(), worse);
    }
}

std::vector<ScoredId> TopK::take_sorted() {
    std::sort(heap_.begin(), heap_.end(), [](const ScoredId& a, const ScoredId& b) {
        return a.score != b.score ? a.score > b.score : a.id < b.id;
    });
    return std::move(heap_);
}

double bm25_idf(double n_docs, double df) { return std::log((n_docs - df + 0.5) / (df + 0.5) + 1.0); }

double bm25_term_score(double tf, double doc_length, double avg_length) {
    double norm = avg_length > 0 ? doc_length / avg_length : 0.0;
    return tf * (Bm25Index::kK1 + 1.0) / (tf + Bm25Index::kK1 * (1.0 - Bm25Index::kB + Bm25Index::kB * norm));
}

Bm25Index::Bm25Index(const std::vector<std::string>& documents) {
    doc_length_.reserve(documents.size());
    std::vector<uint32_t> ids;  // the document's term ids, sorted so equal terms are runs
    double total = 0;
    for (size_t d = 0; d < documents.size(); ++d) {
        std::vector<std::string> terms = bm25_terms(documents[d]);
        ids.clear();
        for (std::string& t : terms) {
            auto it = term_id_.try_emplace(std::move(t), static_cast<uint32_t>(postings_.size())).first;
            if (it->second == postings_.size()) postings_.emplace_back();
            ids.push_back(it->second);
        }
        std::sort(ids.begin(), ids.end());
        for (size_t i = 0; i < ids.size();) {
            size_t j = i;
            while (j < ids.size() && ids[j] == ids[i]) ++j;
            postings_[ids[i]].push_back({static_cast<uint32_t>(d), static_cast<uint32_t>(j - i)});
            i = j;
        }
        doc_length_.push_back(static_cast<uint32_t>(terms.size()));
        total += static_cast<double>(terms.size());
    }
    avg_length_ = documents.empty() ? 0.0 : total / static_cast<double>(documents.size());
}

std::vector<ScoredId> Bm25Index::query(const std::string& text, size_t top_k, const std::vector<uint32_t>* only) const {
    std::vector<std::string> terms = bm25_terms(text);
    std::unordered_set<std::string> seen;
    terms.erase(
        std::remove_if(terms.begin(), terms.end(), [&](const std::string& t) { return !seen.insert(t).second; }),
        terms.end());
    if (only != nullptr) return query_subset(terms, top_k, *only);
    // Scores accumulate in a dense array; only the touched documents are ranked.
    std::vector<float> scores(doc_length_.size(), 0.0f);
    std::vector<uint32_t> touched;
    double n = static_cast<double>(doc_length_.size());
    for (const std::string& t : terms) {
        auto it = term_id_.find(t);
        if (it == term_id_.end()) continue;
        const std::vector<Posting>& list = postings_[it->second];
        double idf = bm25_idf(n, static_cast<double>(list.size()));
        for (const Posting& p : list) {
            if (scores[p.doc] == 0.0f) touched.push_back(p.doc);
            scores[p.doc] += static_cast<float>(idf * bm25_term_score(p.tf, doc_length_[p.doc], avg_length_));
        }
    }
    TopK top(top_k);
    for (uint32_t d : touched) top.push(d, scores[d]);
    return top.take_sorted();
}

std::vector<ScoredId> Bm25Index::query_subset(const std::vector<std::string>& terms, size_t top_k,
                                              const std::vector<uint32_t>& only) const {
    std::unordered_map<uint32_t, size_t> slot;  // doc -> position in `only`
    double total = 0;
    for (uint32_t d : only) {
        if (d >= doc_length_.size() || !slot.emplace(d, slot.size()).second) continue;
        total += doc_length_[d];
    }
    std::vector<uint32_t> docs(slot.size());
    for (const auto& [d, i] : slot) docs[i] = d;
    double n = static_cast<double>(docs.size()), avg = n > 0 ? total / n : 0.0;
    std::vector<double> scores(docs.size(), 0.0);
    for (const std::string& t : terms) {
        auto it = term_id_.find(t);
        if (it == term_id_.end()) continue;
        std::vector<std::pair<size_t, uint32_t>> hits;  // (slot, tf)
        for (const Posting& p : postings_[it->second]) {
            auto s = slot.find(p.doc);
            if (s != slot.end()) hits.push_back({s->second, p.tf});
        }
        double idf = bm25_idf(n, static_cast<double>(hits.size()));
        for (const auto& [i, tf] : hits) scores[i] += idf * bm25_term_score(tf, doc_length_[docs[i]], avg);
    }
    TopK top(top_k);
    for (size_t i = 0; i < docs.size(); ++i) {
        if (scores[i] > 0) top.push(docs[i], static_cast<float>(scores[i]));
    }
    return top.take_sorted();
}

}  // namespace cactus
