// AVX-512 attention row primitives for f16 rows (see attention_rows.h); int8 rows and the softmax
// come from the AVX2 table. Bit for bit the AVX2 results: the AVX2 dot keeps two 8-lane
// accumulators (even and odd 8-element chunks of every 16), which are exactly the low and high
// halves of one 16-lane accumulator here; the weighted value sums do one fma per lane and row in
// both. The wider registers halve the instruction count and leave room for more rows per tile.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/ops_cpu.h"

namespace cactus {

namespace {

#include "backends/cpu/avx2/attention_tiles.inl"

inline __m512 load_f16x16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// R rows x NQ queries of q . k over f16 keys, before the horizontal sum: the 16-lane accumulator's
// halves (the AVX2 kernel's even and odd chunks) added, a last 8-lane chunk into the first;
// out[j * 8 + r].
template <int NQ, int R>
void dots_f16_lanes(__m256* out, const QueryBlock& qb, const uint16_t* const* k, size_t n) {
    __m512 acc[NQ][R];
    for (int j = 0; j < NQ; ++j) {
        for (int r = 0; r < R; ++r) acc[j][r] = _mm512_setzero_ps();
    }
    size_t d = 0;
    for (; d + 16 <= n; d += 16) {
        for (int r = 0; r < R; ++r) {
            const __m512 kk = load_f16x16(k[r] + d);
            for (int j = 0; j < NQ; ++j)
                acc[j][r] = _mm512_fmadd_ps(_mm512_loadu_ps(qb.q + j * qb.q_stride + d), kk, acc[j][r]);
        }
    }
    if (d + 8 <= n) {  // a last 8-lane chunk: into the low half (the AVX2 kernel's even accumulator)
        for (int r = 0; r < R; ++r) {
            const __m512 kk = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(0xFF, k[r] + d));
            for (int j = 0; j < NQ; ++j) {
                const __m512 q = _mm512_maskz_loadu_ps(0xFF, qb.q + j * qb.q_stride + d);
                acc[j][r] = _mm512_mask3_fmadd_ps(q, kk, acc[j][r], 0xFF);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j < NQ; ++j) {
            out[j * 8 + r] = _mm256_add_ps(_mm512_castps512_ps256(acc[j][r]), _mm512_extractf32x8_ps(acc[j][r], 1));
        }
    }
}

template <int NQ>
constexpr int rows_per_tile() {
    return NQ <= 3 ? 8 : 4;  // up to 24 accumulators of the 32 registers
}

template <int NQ>
void dots_f16_rows(float* scores, size_t ld, const QueryBlock& q, const uint16_t* k, size_t k_stride,
                   const RowList& rows, size_t n) {
    f16_dots_by_row_blocks<NQ, rows_per_tile<NQ>()>(scores, ld, q, k, k_stride, rows, n,
                                                    [&](auto count, __m256* out, const uint16_t* const* kr) {
                                                        dots_f16_lanes<NQ, decltype(count)::value>(out, q, kr, n);
                                                    });
}

void dots_f16(float* scores, size_t ld, const QueryBlock& q, const uint16_t* k, size_t k_stride, const RowList& rows,
              size_t n) {
    for_query_tiles(q.n_q, [&](size_t j, auto nq) {
        const QueryBlock part = {q.q + j * q.q_stride, q.q_stride, decltype(nq)::value};
        dots_f16_rows<decltype(nq)::value>(scores + j * ld, ld, part, k, k_stride, rows, n);
    });
}

// out_j[d .. d + 16 * C) += p_j,i * v_i over rows [i0, i1), one fma per lane and row in list order.
template <int NQ, int C>
void accumulate_slice(const OutputBlock& ob, const WeightBlock& pb, const uint16_t* v, size_t v_stride,
                      const uint32_t* ids, size_t d, size_t i0, size_t i1) {
    __m512 acc[NQ][C];
    for (int j = 0; j < NQ; ++j) {
        for (int c = 0; c < C; ++c) acc[j][c] = _mm512_loadu_ps(ob.out + j * ob.out_stride + d + 16 * c);
    }
    for (size_t i = i0; i < i1; ++i) {
        const uint16_t* vr = v + ids[i] * v_stride + d;
        for (int c = 0; c < C; ++c) {
            const __m512 vv = load_f16x16(vr + 16 * c);
            for (int j = 0; j < NQ; ++j)
                acc[j][c] = _mm512_fmadd_ps(_mm512_set1_ps(pb.p[j * pb.ld + i]), vv, acc[j][c]);
        }
    }
    for (int j = 0; j < NQ; ++j) {
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(ob.out + j * ob.out_stride + d + 16 * c, acc[j][c]);
    }
}

template <int NQ>
void accumulate_f16_n(const OutputBlock& ob, const WeightBlock& pb, const uint16_t* v, size_t v_stride,
                      const RowList& rows, size_t n) {
    constexpr int C = NQ <= 2 ? 8 : 4;  // up to 16 accumulators
    for (size_t i0 = 0; i0 < rows.n_rows; i0 += kRowBlock) {
        const size_t i1 = std::min(rows.n_rows, i0 + kRowBlock);
        size_t d = 0;
        for (; d + 16 * C <= n; d += 16 * C) accumulate_slice<NQ, C>(ob, pb, v, v_stride, rows.rows, d, i0, i1);
        for (; d + 16 <= n; d += 16) accumulate_slice<NQ, 1>(ob, pb, v, v_stride, rows.rows, d, i0, i1);
        for (int j = 0; j < NQ; ++j) {
            float* out = ob.out + j * ob.out_stride;
            const float* p = pb.p + j * pb.ld;
            if (d + 8 <= n) {
                __m256 acc = _mm256_loadu_ps(out + d);
                for (size_t i = i0; i < i1; ++i)
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), load_f16(v + rows.rows[i] * v_stride + d), acc);
                _mm256_storeu_ps(out + d, acc);
            }
            for (size_t e = d + 8 <= n ? d + 8 : d; e < n; ++e) {
                float o = out[e];
                for (size_t i = i0; i < i1; ++i) o = std::fma(p[i], half_to_float(v[rows.rows[i] * v_stride + e]), o);
                out[e] = o;
            }
        }
    }
}

void accumulate_f16(const OutputBlock& out, const WeightBlock& p, const uint16_t* v, size_t v_stride,
                    const RowList& rows, size_t n) {
    for_query_tiles(out.n_q, [&](size_t j, auto nq) {
        const OutputBlock part = {out.out + j * out.out_stride, out.out_stride, decltype(nq)::value};
        const WeightBlock pj = {p.p + j * p.ld, p.ld};
        accumulate_f16_n<decltype(nq)::value>(part, pj, v, v_stride, rows, n);
    });
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_avx512() {
    static const AttentionRowKernels table = [] {
        AttentionRowKernels t = attention_row_kernels_avx2();
        t.isa_name = "avx512";
        t.dots_f16 = dots_f16;
        t.accumulate_f16 = accumulate_f16;
        return t;
    }();
    return table;
}

}  // namespace cactus
