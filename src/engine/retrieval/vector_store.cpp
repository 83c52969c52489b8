#include "engine/retrieval/vector_store.h"

#include "core/error.h"

namespace cactus {

float dot(const float* a, const float* b, size_t n) {
    // 16 independent sums: the compiler turns them into several vector accumulators, so the adds
    // do not wait on one another (rag_bench query_ms_vector).
    float acc[16] = {};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (size_t k = 0; k < 16; ++k) acc[k] += a[i + k] * b[i + k];
    }
    float s = 0;
    for (; i < n; ++i) s += a[i] * b[i];
    for (size_t k = 0; k < 16; k += 4) s += (acc[k] + acc[k + 1]) + (acc[k + 2] + acc[k + 3]);
    return s;
}

void VectorStore::add(const float* row) { values_.insert(values_.end(), row, row + dim_); }

void VectorStore::assign(std::vector<float> values) {
    if (dim_ == 0 || values.size() % dim_ != 0)
        fail("VectorStore::assign: %zu floats are not rows of %zu", values.size(), dim_);
    values_ = std::move(values);
}

std::vector<ScoredId> VectorStore::query(const float* query, size_t top_k) const {
    TopK top(top_k);
    const size_t n = size();
    for (size_t r = 0; r < n; ++r) top.push(static_cast<uint32_t>(r), dot(values_.data() + r * dim_, query, dim_));
    return top.take_sorted();
}

}  // namespace cactus
