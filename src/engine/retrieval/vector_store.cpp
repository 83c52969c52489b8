#include "engine/retrieval/vector_store.h"

#include "core/error.h"

namespace cactus {

float dot(const float* a, const float* b, size_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; ++i) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
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
