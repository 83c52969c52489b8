#pragma once
// The multi-query forms of attention_rows.h as loops over (query, row) pairs around one row
// primitive each: every pair gets the one-query, one-row result by construction. Used by the
// tables whose kernels share nothing between pairs (generic, NEON).
#include "backends/cpu/attention_rows.h"

namespace cactus {

// scores[j * ld + i] = dot(q_j, rows[i]) for every query j and listed row i.
template <class Dot>
void dots_by_pair(float* scores, size_t ld, const QueryBlock& q, const RowList& rows, Dot dot) {
    for (size_t j = 0; j < q.n_q; ++j) {
        for (size_t i = 0; i < rows.n_rows; ++i) scores[j * ld + i] = dot(q.q + j * q.q_stride, rows.rows[i]);
    }
}

// axpy(out_j, p[j * ld + i], rows[i]) for every query j, rows in list order.
template <class Axpy>
void accumulate_by_pair(const OutputBlock& out, const WeightBlock& p, const RowList& rows, Axpy axpy) {
    for (size_t j = 0; j < out.n_q; ++j) {
        for (size_t i = 0; i < rows.n_rows; ++i) axpy(out.out + j * out.out_stride, p.p[j * p.ld + i], rows.rows[i]);
    }
}

}  // namespace cactus
