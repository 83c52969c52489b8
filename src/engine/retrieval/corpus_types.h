#pragma once
// Types shared by the retrieval library (src/engine/retrieval/): what the index needs from an
// embedding model, the chunks it stores and the options of an index. Nothing here knows a model,
// so the whole library runs in tests with a fake embedder.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace cactus {

// What the index needs from a model. `embed` returns one unit-length vector of `dim` floats per
// text, in order (texts come in batches of CorpusOptions::embed_batch).
struct CorpusEmbedder {
    std::string id;  // names the model and its pooling; part of the cache key (another id rebuilds)
    size_t dim = 0;
    std::function<size_t(const std::string&)> count_tokens;  // tokens of a text, no special tokens
    // Optional: cuts a long paragraph into windows of <= max_tokens tokens that overlap by
    // `overlap` tokens, decoded back to text. Unset: windows of whole words (see chunking.h).
    std::function<std::vector<std::string>(const std::string&, size_t max_tokens, size_t overlap)> split_tokens;
    std::function<std::vector<std::vector<float>>(const std::vector<std::string>&)> embed;
};

// Cactus's chunking constants (cactus-engine/src/init.cpp: RAG_MAX_CHUNK_TOKENS and friends).
struct ChunkingOptions {
    size_t max_tokens = 128;  // a chunk's paragraphs together stay within this
    size_t overlap = 32;      // between the windows of one paragraph longer than max_tokens
    size_t min_tokens = 24;   // a file's last chunk below this joins the chunk before it
};

enum class RankMode { VECTOR, BM25, HYBRID };

// "vector", "bm25", "hybrid"; throws cactus::Error otherwise.
RankMode parse_rank_mode(const std::string& name);
const char* rank_mode_name(RankMode mode);

// Reciprocal rank fusion: score = w_vector / (rrf_k + rank_vector) + w_bm25 / (rrf_k + rank_bm25),
// ranks from 1, over the top `candidates` of each ranking (a chunk missing from one ranking gets
// nothing from it). The defaults score best on the man-page benchmark with all-MiniLM-L6-v2
// (docs/RAG.md, bench/results/rag/rag_eval.jsonl: recall@5 0.758 against vector 0.728, BM25
// 0.673 and Cactus's recipe 0.735). cactus_compatible() gives Cactus's recipe.
struct FusionOptions {
    double rrf_k = 60.0;
    double w_vector = 0.7;
    double w_bm25 = 0.3;
    size_t candidates = 100;  // from each ranking
    // true: BM25 ranks only the vector candidates (Cactus: it re-orders, never recalls);
    // false: BM25 ranks the whole corpus, so it can add chunks the vectors missed.
    bool bm25_over_candidates_only = false;

    static FusionOptions cactus_compatible() { return {60.0, 0.8, 0.2, 20, true}; }
};

struct CorpusOptions {
    bool cache_index = true;    // reuse a stored index when the corpus and the embedder match it
    std::string index_root;     // where indexes live; empty: <model cache>/index (model_store.h)
    size_t embed_batch = 16;    // texts per CorpusEmbedder::embed call
    size_t search_threads = 0;  // threads of one vector scan; 0: by size (VectorStore::query)
    ChunkingOptions chunking;
    FusionOptions fusion;
};

struct Chunk {
    std::string source;   // the file's name inside the corpus folder
    std::string content;  // the text embedded and returned
    size_t ordinal = 0;   // position of the chunk in its file, from 0
};

struct RetrievedChunk {
    size_t id = 0;       // the chunk's index in the corpus
    double score = 0.0;  // cosine (vector), BM25 score (bm25) or fused RRF score (hybrid)
    std::string source;
    std::string content;
};

}  // namespace cactus
