#include "engine/retrieval/vector_store.h"

#include <algorithm>
#include <thread>

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

std::vector<ScoredId> VectorStore::query(const float* query, size_t top_k, size_t n_threads) const {
    const size_t n = size();
    if (n_threads == 0) {
        // One thread below ~4 M floats (10^4 rows of 384): starting threads costs more than it saves.
        n_threads = n * dim_ < (size_t(4) << 20) ? 1 : std::max(1u, std::thread::hardware_concurrency());
    }
    n_threads = std::min(n_threads, std::max<size_t>(n, 1));
    auto scan = [&](size_t begin, size_t end) {
        TopK top(top_k);
        for (size_t r = begin; r < end; ++r)
            top.push(static_cast<uint32_t>(r), dot(values_.data() + r * dim_, query, dim_));
        return top.take_sorted();
    };
    if (n_threads <= 1) return scan(0, n);
    // Each thread keeps its slice's top_k; merging them through one TopK gives the same ids and
    // order as a single scan (ties go to the lower id either way).
    std::vector<std::vector<ScoredId>> parts(n_threads);
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n_threads; ++t) {
        threads.emplace_back([&, t] { parts[t] = scan(n * t / n_threads, n * (t + 1) / n_threads); });
    }
    parts[0] = scan(0, n / n_threads);
    for (std::thread& th : threads) th.join();
    TopK top(top_k);
    for (const std::vector<ScoredId>& part : parts) {
        for (const ScoredId& s : part) top.push(s.id, s.score);
    }
    return top.take_sorted();
}

}  // namespace cactus
