// Shared pieces of the x86 attention row kernels (attention_avx2.cpp, attention_avx512.cpp).
// Included inside the anonymous namespace of each, so every kernel file compiles its own copy with
// its own ISA flags (no inline function compiled for AVX-512 can be picked for the AVX2 table).

constexpr size_t kRowBlock = 64;  // value rows summed per pass over an output slice (stay in L1)

// The AVX2 reduction order of 8 lanes; the AVX-512 kernels reduce with it too, to stay bit-identical.
inline float hsum(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

inline __m256 load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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
