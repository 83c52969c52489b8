#include "engine/retrieval/fusion.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace cactus {

std::vector<FusedId> rrf_fuse(const std::vector<ScoredId>& by_vector, const std::vector<ScoredId>& by_bm25,
                              const FusionOptions& options, size_t top_k) {
    struct Entry {
        double score = 0.0;
        size_t vector_rank = std::numeric_limits<size_t>::max();
    };
    std::unordered_map<uint32_t, Entry> fused;
    size_t nv = std::min(by_vector.size(), options.candidates);
    for (size_t r = 0; r < nv; ++r) {
        Entry& e = fused[by_vector[r].id];
        e.score += options.w_vector / (options.rrf_k + static_cast<double>(r + 1));
        e.vector_rank = r;
    }
    size_t nb = std::min(by_bm25.size(), options.candidates);
    for (size_t r = 0; r < nb; ++r)
        fused[by_bm25[r].id].score += options.w_bm25 / (options.rrf_k + static_cast<double>(r + 1));
    std::vector<std::pair<uint32_t, Entry>> all(fused.begin(), fused.end());
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
        if (a.second.score != b.second.score) return a.second.score > b.second.score;
        if (a.second.vector_rank != b.second.vector_rank) return a.second.vector_rank < b.second.vector_rank;
        return a.first < b.first;
    });
    std::vector<FusedId> out;
    for (size_t i = 0; i < all.size() && i < top_k; ++i) out.push_back({all[i].first, all[i].second.score});
    return out;
}

}  // namespace cactus
