#pragma once
// Reciprocal rank fusion of a vector ranking and a BM25 ranking (FusionOptions in corpus_types.h).
#include <vector>

#include "engine/retrieval/bm25.h"
#include "engine/retrieval/corpus_types.h"

namespace cactus {

struct FusedId {
    uint32_t id;
    double score;
};

// Fuses two rankings (best first; only the first options.candidates of each count) into the
// top_k ids by RRF score, best first; ties go to the better vector rank, then the lower id.
std::vector<FusedId> rrf_fuse(const std::vector<ScoredId>& by_vector, const std::vector<ScoredId>& by_bm25,
                              const FusionOptions& options, size_t top_k);

}  // namespace cactus
