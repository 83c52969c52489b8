// AVX2 + FMA + F16C attention row primitives (see attention_rows.h). Each (query, row) pair runs
// the same instruction sequence whatever the query count (scalar steps are explicit fmas, so the
// compiler cannot contract them differently per instantiation): the tiles only share the loads (and the
// f16 / int8 conversions) of a key or value row between queries, and interleave independent rows.
// f32 rows run the f16 kernels' instruction sequence with plain loads (templates on the row type T).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/avx2/exp_avx2.h"
#include "backends/cpu/ops_cpu.h"

namespace cactus {

namespace {

constexpr size_t kGroup = 32;  // kKvGroup (src/kv/kv_options.h)
#include "backends/cpu/avx2/attention_tiles.inl"

inline __m256 load_i8(const int8_t* p) {
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// ---- softmax ------------------------------------------------------------------------------------

inline __m256 round_to_half(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Lanes [i, n) of s as one vector, the missing lanes filled with `fill`; store_tail writes them back.
inline __m256 load_tail(const float* s, size_t i, size_t n, float fill) {
    alignas(32) float buf[8];
    for (size_t l = 0; l < 8; ++l) buf[l] = i + l < n ? s[i + l] : fill;
    return _mm256_load_ps(buf);
}

inline void store_tail(float* s, size_t i, size_t n, __m256 v) {
    alignas(32) float buf[8];
    _mm256_store_ps(buf, v);
    for (size_t l = 0; i + l < n; ++l) s[i + l] = buf[l];
}

void to_half_row(uint16_t* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    if (i < n) {
        alignas(16) uint16_t buf[8];
        _mm_store_si128(reinterpret_cast<__m128i*>(buf),
                        _mm256_cvtps_ph(load_tail(src, i, n, 0.0f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        for (size_t l = 0; i + l < n; ++l) dst[i + l] = buf[l];
    }
}

void round_half_row(float* dst, const float* src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, round_to_half(_mm256_loadu_ps(src + i)));
    if (i < n) store_tail(dst, i, n, round_to_half(load_tail(src, i, n, 0.0f)));
}

// Three passes over the row (in L1): s * scale and its max, exp(s - max) and its sum, the
// normalisation. s * scale is stored by the first pass: recomputed in the second, GCC would fuse
// it with the subtraction, and the rounding would differ from the other tiers'.
void softmax(float* s, size_t n, float scale, bool round_half) {
    const __m256 vscale = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), vscale);
        _mm256_storeu_ps(s + i, x);
        vmax = _mm256_max_ps(vmax, x);
    }
    if (i < n) {
        const __m256 x = _mm256_mul_ps(load_tail(s, i, n, -INFINITY), vscale);
        store_tail(s, i, n, x);
        vmax = _mm256_max_ps(vmax, x);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    float max = lanes[0];
    for (float l : lanes) max = l > max ? l : max;
    const __m256 vm = _mm256_set1_ps(max);
    constexpr int kTogether = 4;  // exps in flight (exp_nonpositive_avx2_n)
    __m256 sums[kTogether] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (i = 0; i + 8 * kTogether <= n; i += 8 * kTogether) {
        __m256 e[kTogether];
        for (int k = 0; k < kTogether; ++k) e[k] = _mm256_sub_ps(_mm256_loadu_ps(s + i + 8 * k), vm);
        exp_nonpositive_avx2_n<kTogether>(e);
        for (int k = 0; k < kTogether; ++k) {
            _mm256_storeu_ps(s + i + 8 * k, e[k]);
            sums[k] = _mm256_add_ps(sums[k], e[k]);
        }
    }
    __m256 vsum = _mm256_add_ps(_mm256_add_ps(sums[0], sums[1]), _mm256_add_ps(sums[2], sums[3]));
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp_nonpositive_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
        _mm256_storeu_ps(s + i, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    if (i < n) {
        const __m256 e = exp_nonpositive_avx2(_mm256_sub_ps(load_tail(s, i, n, -INFINITY), vm));
        store_tail(s, i, n, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum(vsum));
    for (i = 0; i < n; i += 8) {
        const __m256 x = i + 8 <= n ? _mm256_loadu_ps(s + i) : load_tail(s, i, n, 0.0f);
        __m256 p = _mm256_mul_ps(x, inv);
        if (round_half) p = round_to_half(p);
        if (i + 8 <= n) {
            _mm256_storeu_ps(s + i, p);
        } else {
            store_tail(s, i, n, p);
        }
    }
}

// ---- scores -------------------------------------------------------------------------------------

// R rows x NQ queries of q . k over f16 or f32 keys, before the horizontal sum: two accumulators
// per pair (even / odd 8-lane chunks of each 16) added, a last 8-lane chunk into the first;
// out[j * 8 + r].
template <int NQ, int R, class T>
void dots_lanes(__m256* out, const QueryBlock& qb, const T* const* k, size_t n) {
    __m256 acc0[NQ][R], acc1[NQ][R];
    for (int j = 0; j < NQ; ++j) {
        for (int r = 0; r < R; ++r) acc0[j][r] = acc1[j][r] = _mm256_setzero_ps();
    }
    size_t d = 0;
    for (; d + 16 <= n; d += 16) {
        for (int r = 0; r < R; ++r) {
            const __m256 ka = load_row8(k[r] + d), kb = load_row8(k[r] + d + 8);
            for (int j = 0; j < NQ; ++j) {
                const float* q = qb.q + j * qb.q_stride + d;
                acc0[j][r] = _mm256_fmadd_ps(_mm256_loadu_ps(q), ka, acc0[j][r]);
                acc1[j][r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), kb, acc1[j][r]);
            }
        }
    }
    const bool chunk8 = d + 8 <= n;
    for (int r = 0; r < R; ++r) {
        const __m256 ka = chunk8 ? load_row8(k[r] + d) : _mm256_setzero_ps();
        for (int j = 0; j < NQ; ++j) {
            if (chunk8) acc0[j][r] = _mm256_fmadd_ps(_mm256_loadu_ps(qb.q + j * qb.q_stride + d), ka, acc0[j][r]);
            out[j * 8 + r] = _mm256_add_ps(acc0[j][r], acc1[j][r]);
        }
    }
}

// Groups of 32: each group's 8-lane products summed, scaled by the group's scale, added in order.
template <int NQ, int R>
void dots_q8_tile(float* scores, size_t ld, const QueryBlock& qb, const int8_t* const* k, const float* const* k_scale,
                  size_t n) {
    float sum[NQ][R] = {};
    size_t g0 = 0;
    for (; g0 + kGroup <= n; g0 += kGroup) {
        for (int r = 0; r < R; ++r) {
            const __m256 k0 = load_i8(k[r] + g0), k1 = load_i8(k[r] + g0 + 8);
            const __m256 k2 = load_i8(k[r] + g0 + 16), k3 = load_i8(k[r] + g0 + 24);
            const float scale = k_scale[r][g0 / kGroup];
            for (int j = 0; j < NQ; ++j) {
                const float* q = qb.q + j * qb.q_stride + g0;
                __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), k0);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), k1, acc);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), k2, acc);
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), k3, acc);
                sum[j][r] = std::fma(hsum(acc), scale, sum[j][r]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j < NQ; ++j) {
            const float* q = qb.q + j * qb.q_stride;
            if (g0 < n) {
                float part = 0.0f;
                for (size_t i = g0; i < n; ++i) part = std::fma(q[i], static_cast<float>(k[r][i]), part);
                sum[j][r] = std::fma(part, k_scale[r][g0 / kGroup], sum[j][r]);
            }
            scores[j * ld + r] = sum[j][r];
        }
    }
}

// Rows per tile: more independent rows when few queries share them.
template <int NQ>
constexpr int rows_per_tile() {
    return NQ == 1 ? 4 : (NQ == 2 ? 2 : 1);
}

template <int NQ, class T>
void dots_rows(float* scores, size_t ld, const QueryBlock& q, const T* k, size_t k_stride, const RowList& rows,
               size_t n) {
    dots_by_row_blocks<NQ, rows_per_tile<NQ>()>(
        scores, ld, q, k, k_stride, rows, n,
        [&](auto count, __m256* out, const T* const* kr) { dots_lanes<NQ, decltype(count)::value>(out, q, kr, n); });
}

template <int NQ>
void dots_q8_rows(float* scores, size_t ld, const QueryBlock& q, const int8_t* k, size_t k_stride, const float* k_scale,
                  size_t k_scale_stride, const RowList& rows, size_t n) {
    for_row_tiles<rows_per_tile<NQ>()>(rows, [&](size_t i, auto tile_rows) {
        constexpr int R = decltype(tile_rows)::value;
        const int8_t* kr[R];
        const float* sr[R];
        for (int r = 0; r < R; ++r) {
            kr[r] = k + rows.rows[i + r] * k_stride;
            sr[r] = k_scale + rows.rows[i + r] * k_scale_stride;
        }
        dots_q8_tile<NQ, R>(scores + i, ld, q, kr, sr, n);
    });
}

// dots_f16 (T = uint16_t) and dots_f32 (T = float).
template <class T>
void dots(float* scores, size_t ld, const QueryBlock& q, const T* k, size_t k_stride, const RowList& rows, size_t n) {
    for_query_tiles(q.n_q, [&](size_t j, auto nq) {
        const QueryBlock part = {q.q + j * q.q_stride, q.q_stride, decltype(nq)::value};
        dots_rows<decltype(nq)::value>(scores + j * ld, ld, part, k, k_stride, rows, n);
    });
}

void dots_q8(float* scores, size_t ld, const QueryBlock& q, const int8_t* k, size_t k_stride, const float* k_scale,
             size_t k_scale_stride, const RowList& rows, size_t n) {
    for_query_tiles(q.n_q, [&](size_t j, auto nq) {
        const QueryBlock part = {q.q + j * q.q_stride, q.q_stride, decltype(nq)::value};
        dots_q8_rows<decltype(nq)::value>(scores + j * ld, ld, part, k, k_stride, k_scale, k_scale_stride, rows, n);
    });
}

// ---- weighted sums of value rows ------------------------------------------------------------------

// out_j[d .. d + 8 * C) += p_j,i * v_i over rows [i0, i1) of the list, each lane one fma per row in
// list order, as a one-row, one-query call would do. Value row i's lanes: value(i, chunk).
template <int NQ, int C, class Value, class Weight>
void accumulate_slice(const OutputBlock& ob, size_t d, size_t i0, size_t i1, Value value, Weight weight) {
    __m256 acc[NQ][C];
    for (int j = 0; j < NQ; ++j) {
        for (int c = 0; c < C; ++c) acc[j][c] = _mm256_loadu_ps(ob.out + j * ob.out_stride + d + 8 * c);
    }
    for (size_t i = i0; i < i1; ++i) {
        for (int c = 0; c < C; ++c) {
            const __m256 v = value(i, d + 8 * c);
            for (int j = 0; j < NQ; ++j) acc[j][c] = _mm256_fmadd_ps(weight(j, i, d + 8 * c), v, acc[j][c]);
        }
    }
    for (int j = 0; j < NQ; ++j) {
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(ob.out + j * ob.out_stride + d + 8 * c, acc[j][c]);
    }
}

// Lanes [0, n_vec) in slices of 8 * C (C chunks keep enough fma chains in flight), then 8 at a time.
template <int NQ, class Value, class Weight>
void accumulate_vectors(const OutputBlock& ob, size_t n_vec, size_t i0, size_t i1, Value value, Weight weight) {
    constexpr int C = NQ == 1 ? 8 : (NQ == 2 ? 4 : 2);
    size_t d = 0;
    for (; d + 8 * C <= n_vec; d += 8 * C) accumulate_slice<NQ, C>(ob, d, i0, i1, value, weight);
    for (; d + 8 <= n_vec; d += 8) accumulate_slice<NQ, 1>(ob, d, i0, i1, value, weight);
}

// Rows in blocks of kRowBlock: lanes [0, n_vec) vectorised, [n_vec, n) one at a time, each lane
// adding fma(scalar_weight(j, i, d), scalar_value(i, d)) per row in list order.
template <int NQ, class Value, class Weight, class ScalarWeight, class ScalarValue>
void accumulate_rows(const OutputBlock& ob, const RowList& rows, size_t n_vec, size_t n, Value value, Weight weight,
                     ScalarWeight scalar_weight, ScalarValue scalar_value) {
    for (size_t i0 = 0; i0 < rows.n_rows; i0 += kRowBlock) {
        const size_t i1 = std::min(rows.n_rows, i0 + kRowBlock);
        accumulate_vectors<NQ>(ob, n_vec, i0, i1, value, weight);
        for (int j = 0; j < NQ; ++j) {
            for (size_t d = n_vec; d < n; ++d) {
                float o = ob.out[j * ob.out_stride + d];
                for (size_t i = i0; i < i1; ++i) o = std::fma(scalar_weight(j, i, d), scalar_value(i, d), o);
                ob.out[j * ob.out_stride + d] = o;
            }
        }
    }
}

template <int NQ, class T>
void accumulate_float_rows(const OutputBlock& ob, const WeightBlock& pb, const T* v, size_t v_stride,
                           const RowList& rows, size_t n) {
    auto at = [&](size_t i, size_t d) { return v + rows.rows[i] * v_stride + d; };
    accumulate_rows<NQ>(
        ob, rows, n / 8 * 8, n, [&](size_t i, size_t d) { return load_row8(at(i, d)); },
        [&](int j, size_t i, size_t) { return _mm256_broadcast_ss(pb.p + j * pb.ld + i); },
        [&](int j, size_t i, size_t) { return pb.p[j * pb.ld + i]; },
        [&](size_t i, size_t d) { return row_element(*at(i, d)); });
}

template <int NQ>
void accumulate_q8_n(const OutputBlock& ob, const WeightBlock& pb, const int8_t* v, size_t v_stride,
                     const float* v_scale, size_t v_scale_stride, const RowList& rows, size_t n) {
    auto at = [&](size_t i, size_t d) { return v + rows.rows[i] * v_stride + d; };
    auto scaled_weight = [&](int j, size_t i, size_t d) {
        return pb.p[j * pb.ld + i] * v_scale[rows.rows[i] * v_scale_stride + d / kGroup];
    };
    accumulate_rows<NQ>(
        ob, rows, n / kGroup * kGroup, n,  // whole groups vectorised; the last partial group scalar
        [&](size_t i, size_t d) { return load_i8(at(i, d)); },
        [&](int j, size_t i, size_t d) { return _mm256_set1_ps(scaled_weight(j, i, d)); }, scaled_weight,
        [&](size_t i, size_t d) { return static_cast<float>(*at(i, d)); });
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

void accumulate_q8(const OutputBlock& out, const WeightBlock& p, const int8_t* v, size_t v_stride, const float* v_scale,
                   size_t v_scale_stride, const RowList& rows, size_t n) {
    for_query_tiles(out.n_q, [&](size_t j, auto nq) {
        const OutputBlock part = {out.out + j * out.out_stride, out.out_stride, decltype(nq)::value};
        const WeightBlock pj = {p.p + j * p.ld, p.ld};
        accumulate_q8_n<decltype(nq)::value>(part, pj, v, v_stride, v_scale, v_scale_stride, rows, n);
    });
}

}  // namespace

const AttentionRowKernels& attention_row_kernels_avx2() {
    static const AttentionRowKernels table = {"avx2",         to_half_row,          round_half_row, softmax,
                                              dots<uint16_t>, accumulate<uint16_t>, dots_q8,        accumulate_q8,
                                              dots<float>,    accumulate<float>};
    return table;
}

}  // namespace cactus
