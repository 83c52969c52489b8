#pragma once
// Brute-force nearest neighbours over unit vectors: exact, deterministic and fast enough for a
// folder of notes (bench/results/rag/rag_bench.jsonl: 10^5 chunks x 384 dims). fp32 rows keep the
// dot product a plain loop the compiler vectorises.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/retrieval/bm25.h"

namespace cactus {

class VectorStore {
public:
    explicit VectorStore(size_t dim) : dim_(dim) {}

    size_t dim() const { return dim_; }
    size_t size() const { return dim_ == 0 ? 0 : values_.size() / dim_; }
    const std::vector<float>& values() const { return values_; }  // [size(), dim()]

    // Appends one row of dim() floats.
    void add(const float* row);
    // Replaces every row: values holds [n, dim()] floats.
    void assign(std::vector<float> values);

    // The top_k rows by dot product with `query` (dim() floats), best first. n_threads 0: one
    // thread for small stores, every hardware thread for large ones (the scan is memory-bound).
    std::vector<ScoredId> query(const float* query, size_t top_k, size_t n_threads = 0) const;

private:
    size_t dim_;
    std::vector<float> values_;
};

// Dot product of two float arrays; written so the loop vectorises.
float dot(const float* a, const float* b, size_t n);

}  // namespace cactus
