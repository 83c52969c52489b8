// Shared pieces of the x86 attention row kernels (attention_avx2.cpp, attention_avx512.cpp).
// Included inside the anonymous namespace of each, so every kernel file compiles its own copy with
// its own ISA flags (no inline function compiled for AVX-512 can be picked for the AVX2 table).

constexpr size_t kRowBlock = 64;  // value rows summed per pass over an output slice (stay in L1)

inline __m256 load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Key and value rows are f16 (uint16_t) or f32 (float): 8 elements as floats, and one element.
inline __m256 load_row8(const uint16_t* p) { return load_f16(p); }
inline __m256 load_row8(const float* p) { return _mm256_loadu_ps(p); }
inline float row_element(uint16_t x) { return half_to_float(x); }
inline float row_element(float x) { return x; }

// The AVX2 reduction order of 8 lanes; the AVX-512 kernels reduce with it too, to stay bit-identical.
inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

// Lane r = hsum(v[r]) for 8 vectors, by hsum's additions (bit for bit) at a third of its
// instructions: rows r and r + 4 share a register through the three steps.
inline __m256 hsum_8(const __m256* v) {
    __m256 halves[4];  // halves[p] = [row p: lanes l + (l + 4), l < 4 | row p + 4: the same]
    for (int p = 0; p < 4; ++p) {
        halves[p] =
            _mm256_add_ps(_mm256_permute2f128_ps(v[p], v[p + 4], 0x20), _mm256_permute2f128_ps(v[p], v[p + 4], 0x31));
    }
    // pairs: [rows p, p + 1: (0 + 2), (1 + 3) each | rows p + 4, p + 5: the same]
    const __m256 pairs01 = _mm256_add_ps(_mm256_shuffle_ps(halves[0], halves[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                         _mm256_shuffle_ps(halves[0], halves[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 pairs23 = _mm256_add_ps(_mm256_shuffle_ps(halves[2], halves[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                         _mm256_shuffle_ps(halves[2], halves[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(pairs01, pairs23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(pairs01, pairs23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Scores of R rows x NQ queries of f16 or f32 keys from the pairs' 8-lane sums (lanes[j * 8 + r]):
// the horizontal sum, then the scalar tail of lengths that are not whole 8-lane chunks.
template <int NQ, int R, class T>
void scores_from_lanes(float* scores, size_t ld, const QueryBlock& qb, const T* const* k, size_t n,
                       const __m256* lanes) {
    for (int r = 0; r < R; ++r) {
        for (int j = 0; j < NQ; ++j) {
            const float* q = qb.q + j * qb.q_stride;
            float sum = hsum(lanes[j * 8 + r]);
            for (size_t i = n / 8 * 8; i < n; ++i) sum = std::fma(q[i], row_element(k[r][i]), sum);
            scores[j * ld + r] = sum;
        }
    }
}

// Scores of NQ queries over the listed f16 or f32 key rows, from the table's kernel
// lanes(integral_constant<int, R'>, out, kr): the pairs' 8-lane sums of the R' rows kr as
// out[j * 8 + r]. When the rows' length is whole 8-lane chunks, rows go in blocks of 8 and one
// hsum_8 per query and block gives 8 scores (a vector store); the other rows, and every row of
// other lengths, get one horizontal sum per pair (scores_from_lanes). Both give every pair the
// same additions.
template <int NQ, int R, class T, class Lanes>
void dots_by_row_blocks(float* scores, size_t ld, const QueryBlock& q, const T* k, size_t k_stride, const RowList& rows,
                        size_t n, Lanes lanes) {
    static_assert(8 % R == 0, "tiles fill a block of 8 rows");
    auto key_rows = [&](size_t i, int count, const T** kr) {
        for (int r = 0; r < count; ++r) kr[r] = k + rows.rows[i + r] * k_stride;
    };
    size_t i = 0;
    if (n % 8 == 0) {
        for (; i + 8 <= rows.n_rows; i += 8) {
            __m256 sums[NQ * 8];
            for (int r = 0; r < 8; r += R) {
                const T* kr[R];
                key_rows(i + r, R, kr);
                lanes(std::integral_constant<int, R>(), sums + r, kr);
            }
            for (int j = 0; j < NQ; ++j) _mm256_storeu_ps(scores + j * ld + i, hsum_8(sums + j * 8));
        }
    }
    auto tile = [&](size_t first, auto count) {
        constexpr int C = decltype(count)::value;
        const T* kr[C];
        key_rows(first, C, kr);
        __m256 sums[NQ * 8];
        lanes(count, sums, kr);
        scores_from_lanes<NQ, C>(scores + first, ld, q, kr, n, sums);
    };
    for (; i + R <= rows.n_rows; i += R) tile(i, std::integral_constant<int, R>());
    for (; i < rows.n_rows; ++i) tile(i, std::integral_constant<int, 1>());
}

// Queries in tiles of at most 4: tile(first query, integral_constant<int, tile size>).
template <class Tile>
void for_query_tiles(size_t n_q, Tile tile) {
    size_t j = 0;
    for (; j + 4 <= n_q; j += 4) tile(j, std::integral_constant<int, 4>());
    if (n_q - j == 3) tile(j, std::integral_constant<int, 3>());
    if (n_q - j == 2) tile(j, std::integral_constant<int, 2>());
    if (n_q - j == 1) tile(j, std::integral_constant<int, 1>());
}

// The list's rows in tiles of R, then one by one: tile(first index, integral_constant<int, size>).
template <int R, class Tile>
void for_row_tiles(const RowList& rows, Tile tile) {
    size_t i = 0;
    for (; i + R <= rows.n_rows; i += R) tile(i, std::integral_constant<int, R>());
    for (; i < rows.n_rows; ++i) tile(i, std::integral_constant<int, 1>());
}
