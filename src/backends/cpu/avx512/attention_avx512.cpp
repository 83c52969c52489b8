// AVX-512 attention row primitives for f16 and f32 rows (see attention_rows.h); int8 rows and the
// softmax come from the AVX2 table. Bit for bit the AVX2 results: the AVX2 dot keeps two 8-lane
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

// 16 elements of an f16 or f32 row as floats; 8 elements into the low half (the high half zero).
inline __m512 load_row16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_row16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_row8_low(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(0xFF, p)); }
inline __m512 load_row8_low(const float* p) { return _mm512_maskz_loadu_ps(0xFF, p); }

// R rows x NQ queries of q . k over f16 or f32 keys, before the horizontal sum: the 16-lane
// accumulator's halves (the AVX2 kernel's even and odd chunks) added, a last 8-lane chunk into the
// first; out[j * 8 + r].
template <int NQ, int R, class T>
void dots_lanes(__m256* out, const QueryBlock& qb, const T* const* k, size_t n) {
    __m512 acc[NQ][R];
    for (int j = 0; j < NQ; ++j) {
        for (int r = 0; r < R; ++r) acc[j][r] = _mm512_setzero_ps();
    }
    size_t d = 0;
    for (; d + 16 <= n; d += 16) {
        for (int r = 0; r < R; ++r) {
            const __m512 kk = load_row16(k[r] + d);
            for (int j = 0; j < NQ; ++j)
                acc[j][r] = _mm512_fmadd_ps(_mm512_loadu_ps(qb.q + j * qb.q_stride + d), kk, acc[j][r]);
        }
    }
    if (d + 8 <= n) {  // a last 8-lane chunk: into the low half (the AVX2 kernel's even accumulator)
        for (int r = 0; r < R; ++r) {
            const __m512 kk = load_row8_low(k[r] + d);
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

template <int NQ, class T>
void dots_rows(float* scores, size_t ld, const QueryBlock& q, const T* k, size_t k_stride, const RowList& rows,
               size_t n) {
    dots_by_row_blocks<NQ, rows_per_tile<NQ>()>(
        scores, ld, q, k, k_stride, rows, n,
        [&](auto count, __m256* out, const T* const* kr) { dots_lanes<NQ, decltype(count)::value>(out, q, kr, n); });
}

// dots_f16 (T = uint16_t) and dots_f32 (T = float).
template <class T>
void dots(float* scores, size_t ld, const QueryBlock& q, const T* k, size_t k_stride, const RowList& rows, size_t n) {
    for_query_tiles(q.n_q, [&](size_t j, auto nq) {
        const QueryBlock part = {q.q + j * q.q_stride, q.q_stride, decltype(nq)::value};
        dots_rows<decltype(nq)::value>(scores + j * ld, ld, part, k, k_stride, rows, n);
    });
}

// out_j[d .. d + 16 * C) += p_j,i * v_i over rows [i0, i1), one fma per lane and row in list order.
template <int NQ, int C, class T>
void accumulate_slice(const OutputBlock& ob, const WeightBlock& pb, const T* v, size_t v_stride, const uint32_t* ids,
                      size_t d, size_t i0, size_t i1) {
    __m512 acc[NQ][C];
    for (int j = 0; j < NQ; ++j) {
        for (int c = 0; c < C; ++c) acc[j][c] = _mm512_loadu_ps(ob.out + j * ob.out_stride + d + 16 * c);
    }
    for (size_t i = i0; i < i1; ++i) {
        const T* vr = v + ids[i] * v_stride + d;
        for (int c = 0; c < C; ++c) {
            const __m512 vv = load_row16(vr + 16 * c);
            for (int j = 0; j < NQ; ++j)
                acc[j][c] = _mm512_fmadd_ps(_mm512_set1_ps(pb.p[j * pb.ld + i]), vv, acc[j][c]);
        }
    }
    for (int j = 0; j < NQ; ++j) {
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(ob.out + j * ob.out_stride + d + 16 * c, acc[j][c]);
    }
}

template <int NQ, class T>
void accumulate_float_rows(const OutputBlock& ob, const WeightBlock& pb, const T* v, size_t v_stride,
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
                    acc = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), load_row8(v + rows.rows[i] * v_stride + d), acc);
                _mm256_storeu_ps(out + d, acc);
            }
            for (size_t e = d + 8 <= n ? d + 8 : d; e < n; ++e) {
                float o = out[e];
                for (size_t i = i0; i < i1; ++i) o = std::fma(p[i], row_element(v[rows.rows[i] * v_stride + e]), o);
                out[e] = o;
            }
        }
    }
}

// accumulate_f16 (T = uint16_t) and accumulate_f32 (T = float).
template <class T>
void accumulate(const OutputBlock& out, const WeightBlock& p, const T* v, size_t v_stride, const RowList& rows,
                size_t n) {
    for_query_tiles(out.n_q, [&](size_t j, auto nq) {
        const OutputBlock part = {out.out + j * out.out_stride, out.out_stride, decltype(nq)::value};
        const WeightBlock pj = {p.p + j * p.ld, p.ld};
        accumulate_float_rows<decltype(nq)::value>(part, pj, v, v_stride, rows, n);
    });
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_avx512() {
    static const AttentionRowKernels table = [] {
        AttentionRowKernels t = attention_row_kernels_avx2();
        t.isa_name = "avx512";
        t.dots_f16 = dots<uint16_t>;
        t.accumulate_f16 = accumulate<uint16_t>;
        t.dots_f32 = dots<float>;
        t.accumulate_f32 = accumulate<float>;
        return t;
    }();
    return table;
}

}  // namespace cactus
