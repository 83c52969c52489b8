#pragma once
// Retrieval over a folder of the user's notes (Cactus's corpus_dir, research/EMBEDDINGS_RAG.md
// §1.2-1.3): the folder's .txt/.md files are chunked, embedded by a CorpusEmbedder and indexed for
// vector, BM25 and hybrid (RRF) ranking. The index is stored under the model cache and reused
// while the files, the embedder and the chunking are unchanged (index_store.h).
//
// Errors (cactus::Error): a missing or unreadable corpus folder; a .txt/.md entry that cannot be
// stat'ed or read (a dangling link, no permission) names the file, because silently answering
// from part of the user's notes is worse than a clear message; an embedder that returns the wrong
// number or size of vectors. An empty folder is an index of 0 chunks.
#include <memory>
#include <string>
#include <vector>

#include "engine/retrieval/bm25.h"
#include "engine/retrieval/corpus_types.h"
#include "engine/retrieval/vector_store.h"

namespace cactus {

struct CorpusBuildStats {
    bool from_cache = false;                         // the stored index was reused (nothing embedded)
    std::string index_dir;                           // where it is stored
    std::string rebuild_reason;                      // why a stored index was not reused (empty when it was)
    std::vector<std::string> changed_while_reading;  // files that changed during the scan
    size_t files = 0;
    double seconds_total = 0.0;  // open() from start to end
    double seconds_embed = 0.0;  // inside CorpusEmbedder::embed
    bool stored = true;          // false when the index folder could not be written (a warning)
};

class CorpusIndex {
public:
    static std::unique_ptr<CorpusIndex> open(const std::string& corpus_dir, const CorpusEmbedder& embedder,
                                             const CorpusOptions& options = {});

    // The top_k chunks for a query (top_k 0: Cactus's 5), best first. Throws for an empty query.
    std::vector<RetrievedChunk> query(const std::string& text, size_t top_k, RankMode mode = RankMode::HYBRID);
    // The same with the query's vector given (dim() floats), so evaluations embed a query once.
    std::vector<RetrievedChunk> query_with_vector(const std::string& text, const std::vector<float>& query_vector,
                                                  size_t top_k, RankMode mode) const;

    size_t size() const { return chunks_.size(); }
    size_t dim() const { return store_.dim(); }
    const std::vector<Chunk>& chunks() const { return chunks_; }
    const CorpusBuildStats& stats() const { return stats_; }
    const FusionOptions& fusion() const { return options_.fusion; }
    void set_fusion(const FusionOptions& fusion) { options_.fusion = fusion; }

private:
    CorpusIndex(const CorpusEmbedder& embedder, const CorpusOptions& options)
        : embedder_(embedder), options_(options), store_(embedder.dim), bm25_(std::vector<std::string>{}) {}
    void build(const std::vector<std::pair<std::string, std::string>>& files);
    RetrievedChunk result(uint32_t id, double score) const;

    CorpusEmbedder embedder_;
    CorpusOptions options_;
    std::vector<Chunk> chunks_;
    VectorStore store_;
    Bm25Index bm25_;
    CorpusBuildStats stats_;
};

// Cactus's cactus_rag_query JSON: {"chunks":[{"score","source","content"}]}.
std::string rag_results_json(const std::vector<RetrievedChunk>& chunks);
// The context Cactus prepends to the system prompt (complete.cpp inject_rag_context): a header,
// then per chunk "---\n<content>\n(Source: <file>)\n", then "---\n\n". Empty for no chunks.
std::string rag_grounding_text(const std::vector<RetrievedChunk>& chunks);

}  // namespace cactus
