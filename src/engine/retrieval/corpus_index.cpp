#include "engine/retrieval/corpus_index.h"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "engine/retrieval/chunking.h"
#include "engine/retrieval/corpus_scan.h"
#include "engine/retrieval/fusion.h"
#include "engine/retrieval/index_store.h"

namespace cactus {

namespace {

constexpr size_t kDefaultTopK = 5;  // Cactus's RAG_TOP_K

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool all_blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

std::vector<std::string> chunk_texts(const std::vector<Chunk>& chunks) {
    std::vector<std::string> texts;
    texts.reserve(chunks.size());
    for (const Chunk& c : chunks) texts.push_back(c.content);
    return texts;
}

}  // namespace

RankMode parse_rank_mode(const std::string& name) {
    if (name == "vector") return RankMode::VECTOR;
    if (name == "bm25") return RankMode::BM25;
    if (name == "hybrid") return RankMode::HYBRID;
    fail("parse_rank_mode: unknown mode '%s' (vector, bm25, hybrid)", name.c_str());
}

const char* rank_mode_name(RankMode mode) {
    switch (mode) {
        case RankMode::VECTOR:
            return "vector";
        case RankMode::BM25:
            return "bm25";
        case RankMode::HYBRID:
            return "hybrid";
    }
    return "?";
}

std::unique_ptr<CorpusIndex> CorpusIndex::open(const std::string& corpus_dir, const CorpusEmbedder& embedder,
                                               const CorpusOptions& options) {
    auto t0 = std::chrono::steady_clock::now();
    if (embedder.dim == 0 || !embedder.embed || !embedder.count_tokens || embedder.id.empty()) {
        fail("CorpusIndex::open: the embedder needs an id, a dim, count_tokens and embed");
    }
    CorpusScan scan = scan_corpus(corpus_dir);
    std::unique_ptr<CorpusIndex> index(new CorpusIndex(embedder, options));
    CorpusBuildStats& stats = index->stats_;
    std::string root = options.index_root.empty() ? default_index_root() : options.index_root;
    stats.index_dir = index_dir(root, scan.corpus_abs, embedder.id);
    stats.files = scan.files.size();
    stats.changed_while_reading = scan.changed_while_reading;

    IndexManifest current;
    current.corpus = scan.corpus_abs;
    current.embedder_id = embedder.id;
    current.dim = embedder.dim;
    current.chunking = options.chunking;
    current.files = scan.files;
    current.changed_while_reading = scan.changed_while_reading;

    std::vector<float> vectors;
    if (options.cache_index && read_index(stats.index_dir, current, &index->chunks_, &vectors, &stats.rebuild_reason)) {
        stats.from_cache = true;
        index->store_.assign(std::move(vectors));
        index->bm25_ = Bm25Index(chunk_texts(index->chunks_));
    } else {
        if (!options.cache_index) stats.rebuild_reason = "cache_index is off";
        std::vector<std::pair<std::string, std::string>> files;
        for (size_t i = 0; i < scan.files.size(); ++i)
            files.push_back({scan.files[i].name, std::move(scan.contents[i])});
        index->build(files);
        try {
            write_index(stats.index_dir, current, index->chunks_, index->store_.values());
        } catch (const Error& e) {
            stats.stored = false;
            CACTUS_LOG_WARN("CorpusIndex: the index is not stored (%s); the next open rebuilds it", e.what());
        }
    }
    if (!scan.changed_while_reading.empty()) {
        CACTUS_LOG_WARN("CorpusIndex: %s changed while being indexed; the next open rebuilds",
                        scan.changed_while_reading.front().c_str());
    }
    stats.seconds_total = seconds_since(t0);
    return index;
}

void CorpusIndex::build(const std::vector<std::pair<std::string, std::string>>& files) {
    chunks_.clear();
    for (const auto& [name, text] : files) {
        for (Chunk& c : chunk_text(text, name, embedder_, options_.chunking)) chunks_.push_back(std::move(c));
    }
    const size_t dim = embedder_.dim, batch = options_.embed_batch == 0 ? 1 : options_.embed_batch;
    std::vector<float> values;
    values.reserve(chunks_.size() * dim);
    for (size_t first = 0; first < chunks_.size(); first += batch) {
        std::vector<std::string> texts;
        for (size_t i = first; i < chunks_.size() && i < first + batch; ++i) texts.push_back(chunks_[i].content);
        auto t0 = std::chrono::steady_clock::now();
        std::vector<std::vector<float>> vecs = embedder_.embed(texts);
        stats_.seconds_embed += seconds_since(t0);
        if (vecs.size() != texts.size())
            fail("CorpusIndex: the embedder returned %zu vectors for %zu texts", vecs.size(), texts.size());
        for (const std::vector<float>& v : vecs) {
            if (v.size() != dim)
                fail("CorpusIndex: the embedder returned a vector of %zu floats, expected %zu", v.size(), dim);
            values.insert(values.end(), v.begin(), v.end());
        }
    }
    store_.assign(std::move(values));
    bm25_ = Bm25Index(chunk_texts(chunks_));
}

std::vector<RetrievedChunk> CorpusIndex::query(const std::string& text, size_t top_k, RankMode mode) {
    if (all_blank(text)) fail("CorpusIndex::query: the query is empty");
    if (chunks_.empty()) return {};
    std::vector<float> q;
    if (mode != RankMode::BM25) {
        std::vector<std::vector<float>> v = embedder_.embed({text});
        if (v.size() != 1) fail("CorpusIndex::query: the embedder returned %zu vectors for 1 text", v.size());
        q = std::move(v[0]);
    }
    return query_with_vector(text, q, top_k, mode);
}

std::vector<RetrievedChunk> CorpusIndex::query_with_vector(const std::string& text, const std::vector<float>& q,
                                                           size_t top_k, RankMode mode) const {
    if (all_blank(text)) fail("CorpusIndex::query: the query is empty");
    if (chunks_.empty()) return {};
    if (top_k == 0) top_k = kDefaultTopK;
    if (mode != RankMode::BM25 && q.size() != dim()) {
        fail("CorpusIndex::query: query vector of %zu floats, the index has dim %zu", q.size(), dim());
    }
    std::vector<RetrievedChunk> out;
    if (mode == RankMode::VECTOR) {
        for (const ScoredId& s : store_.query(q.data(), top_k, options_.search_threads))
            out.push_back(result(s.id, s.score));
        return out;
    }
    if (mode == RankMode::BM25) {
        for (const ScoredId& s : bm25_.query(text, top_k)) out.push_back(result(s.id, s.score));
        return out;
    }
    const FusionOptions& f = options_.fusion;
    std::vector<ScoredId> by_vector = store_.query(q.data(), f.candidates, options_.search_threads);
    std::vector<ScoredId> by_bm25;
    if (f.bm25_over_candidates_only) {
        std::vector<uint32_t> ids;
        for (const ScoredId& s : by_vector) ids.push_back(s.id);
        by_bm25 = bm25_.query(text, f.candidates, &ids);
    } else {
        by_bm25 = bm25_.query(text, f.candidates);
    }
    for (const FusedId& s : rrf_fuse(by_vector, by_bm25, f, top_k)) out.push_back(result(s.id, s.score));
    return out;
}

RetrievedChunk CorpusIndex::result(uint32_t id, double score) const {
    return {id, score, chunks_[id].source, chunks_[id].content};
}

std::string rag_results_json(const std::vector<RetrievedChunk>& chunks) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const RetrievedChunk& c : chunks) {
        list.push_back({{"score", c.score}, {"source", c.source}, {"content", c.content}});
    }
    return nlohmann::ordered_json{{"chunks", list}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string rag_grounding_text(const std::vector<RetrievedChunk>& chunks) {
    if (chunks.empty()) return "";
    std::string out =
        "[Retrieved Context - Use ONLY this information to answer. If the answer is not in the context, say \"I "
        "don't have enough information to answer that.\"]\n";
    for (const RetrievedChunk& c : chunks) out += "---\n" + c.content + "\n(Source: " + c.source + ")\n";
    out += "---\n\n";
    return out;
}

}  // namespace cactus
