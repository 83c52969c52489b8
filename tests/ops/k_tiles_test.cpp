// The K-quant register tiles (Q4_K, Q5_K, Q6_K with Q8_K activations) of every kernel table: each
// tile shape (every token count a GemmTileFn takes, padded row strides) gives exactly the table's
// vec_dot, and vec_dot stays within float rounding of the scalar reference, also on the extreme
// operands (6-bit quants at 63, scales at -128, activations at +-127) where int16 sums could
// saturate or int32 lanes overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

const DType kKTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};

struct Rows {
    std::vector<uint8_t> bytes;  // [kGemmTileRows] rows of `stride` bytes
    size_t stride = 0;
};

Rows random_rows(DType type, size_t n, std::mt19937& rng, bool raw) {
    Rows w;
    w.stride = dtype_row_bytes(type, n) + 24;  // padded rows
    w.bytes.assign(w.stride * kGemmTileRows, 0xEE);
    for (size_t r = 0; r < kGemmTileRows; ++r) {
        std::vector<uint8_t> row = raw ? test::random_raw_row(type, n, rng) : test::quantized_row(type, n, rng);
        std::copy(row.begin(), row.end(), w.bytes.begin() + r * w.stride);
    }
    return w;
}

std::vector<uint8_t> random_tokens(size_t n_tokens, size_t n, std::mt19937& rng, size_t* row_bytes) {
    *row_bytes = dtype_row_bytes(DType::Q8_K, n) + 8;
    std::vector<uint8_t> x(*row_bytes * n_tokens, 0xAB);
    for (size_t t = 0; t < n_tokens; ++t) {
        std::vector<uint8_t> q =
            test::quantized_activations(DType::Q8_K, test::random_floats(n, rng, t % 3 ? 1.0f : 50.0f));
        std::copy(q.begin(), q.end(), x.begin() + t * *row_bytes);
    }
    return x;
}

// gemm_tile(rows, tokens) == vec_dot(row, token) bit for bit, for 1 .. kGemmTileTokens tokens.
void expect_tile_equals_vec_dot(const CpuKernels& k, DType type, const Rows& w, const std::vector<uint8_t>& x,
                                size_t x_row_bytes, size_t n) {
    const GemmTileFn tile = k.gemm_tile[static_cast<size_t>(type)];
    const VecDotFn dot = k.vec_dot[static_cast<size_t>(type)];
    ASSERT_NE(dot, nullptr) << k.isa_name << " " << dtype_name(type);
    if (tile == nullptr) return;
    for (size_t n_tokens = 1; n_tokens <= kGemmTileTokens; ++n_tokens) {
        const size_t y_stride = kGemmTileRows + 3;
        std::vector<float> y(y_stride * n_tokens, NAN);
        tile(y.data(), y_stride, w.bytes.data(), w.stride, x.data(), x_row_bytes, n, n_tokens);
        for (size_t t = 0; t < n_tokens; ++t) {
            for (size_t r = 0; r < kGemmTileRows; ++r) {
                const float want = dot(w.bytes.data() + r * w.stride, x.data() + t * x_row_bytes, n);
                ASSERT_EQ(y[t * y_stride + r], want) << k.isa_name << " " << dtype_name(type) << " n=" << n
                                                     << " tokens=" << n_tokens << " t=" << t << " r=" << r;
            }
            for (size_t r = kGemmTileRows; r < y_stride; ++r) EXPECT_TRUE(std::isnan(y[t * y_stride + r]));
        }
    }
}

TEST(KTiles, EveryTileShapeEqualsVecDot) {
    for (const CpuKernels* k : cpu_kernel_tables()) {
        std::mt19937 rng(29);
        for (DType type : kKTypes) {
            for (size_t blocks : {1, 3, 5}) {
                const size_t n = blocks * 256;
                for (bool raw : {false, true}) {
                    const Rows w = random_rows(type, n, rng, raw);
                    size_t x_row_bytes = 0;
                    const std::vector<uint8_t> x = random_tokens(kGemmTileTokens, n, rng, &x_row_bytes);
                    expect_tile_equals_vec_dot(*k, type, w, x, x_row_bytes, n);
                }
            }
        }
    }
}

// Fills every quant and sub-scale of a K-quant block with its largest unsigned value, and the
// half scales with `d`.
std::vector<uint8_t> extreme_row(DType type, size_t n, float d) {
    std::vector<uint8_t> row(dtype_row_bytes(type, n), 0xFF);
    const size_t block_bytes = dtype_traits(type).block_bytes;
    for (size_t b = 0; b < n / 256; ++b) {
        for (size_t off : test::half_fields(type)) {
            const uint16_t h = fp32_to_fp16(d);
            std::memcpy(row.data() + b * block_bytes + off, &h, sizeof(h));
        }
        if (type == DType::Q6_K) {  // scales -128, quants 63 - 32 = 31
            BlockQ6_K* blk = reinterpret_cast<BlockQ6_K*>(row.data()) + b;
            for (int8_t& s : blk->scales) s = -128;
        }
    }
    return row;
}

TEST(KTiles, ExtremeOperandsMatchReference) {
    const size_t n = 512;
    std::vector<float> xs[2] = {std::vector<float>(n, 1.0f), std::vector<float>(n)};
    for (size_t i = 0; i < n; ++i) xs[1][i] = (i % 3 == 0) ? -1.0f : 1.0f;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kKTypes) {
            for (const std::vector<float>& xf : xs) {
                const std::vector<uint8_t> xq = test::quantized_activations(DType::Q8_K, xf);
                const std::vector<uint8_t> w = extreme_row(type, n, 0.01f);
                const float ref = vec_dot_ref(type, w.data(), xq.data(), n);
                const float got = k->vec_dot[static_cast<size_t>(type)](w.data(), xq.data(), n);
                EXPECT_LE(std::fabs(got - ref), 1e-6 * std::fabs(ref) + 1e-6)
                    << k->isa_name << " " << dtype_name(type) << " got " << got << " ref " << ref;
                Rows rows;
                rows.stride = w.size();
                for (size_t r = 0; r < kGemmTileRows; ++r) rows.bytes.insert(rows.bytes.end(), w.begin(), w.end());
                std::vector<uint8_t> x;
                for (size_t t = 0; t < kGemmTileTokens; ++t) x.insert(x.end(), xq.begin(), xq.end());
                expect_tile_equals_vec_dot(*k, type, rows, x, xq.size(), n);
            }
        }
    }
}

// The K-quant matmul of an 8-token-multiple prompt (the shape prefill uses) against the reference
// dot products of each (row, token).
TEST(KTiles, MatmulMatchesReferenceDots) {
    ThreadPool pool(2);
    std::mt19937 rng(31);
    const size_t n_in = 768, n_out = 20, n_tokens = 24;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kKTypes) {
            const size_t stride = dtype_row_bytes(type, n_in);
            std::vector<uint8_t> w;
            for (size_t o = 0; o < n_out; ++o) {
                const std::vector<uint8_t> row = test::quantized_row(type, n_in, rng);
                w.insert(w.end(), row.begin(), row.end());
            }
            const std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
            std::vector<float> y(n_tokens * n_out, NAN);
            matmul_with(*k, y.data(), w.data(), type, stride, x.data(), n_tokens, n_in, n_out, pool);
            for (size_t t = 0; t < n_tokens; ++t) {
                const std::vector<float> xt(x.begin() + t * n_in, x.begin() + (t + 1) * n_in);
                const std::vector<uint8_t> xq = test::quantized_activations(DType::Q8_K, xt);
                for (size_t o = 0; o < n_out; ++o) {
                    const float ref = vec_dot_ref(type, w.data() + o * stride, xq.data(), n_in);
                    const std::vector<float> wf = [&] {
                        std::vector<float> v(n_in);
                        dequantize_row_ref(type, v.data(), w.data() + o * stride, n_in);
                        return v;
                    }();
                    std::vector<float> xd(n_in);
                    dequantize_row_ref(DType::Q8_K, xd.data(), xq.data(), n_in);
                    EXPECT_LE(std::fabs(y[t * n_out + o] - ref), 2e-6 * test::abs_dot(wf, xd) + 1e-30)
                        << k->isa_name << " " << dtype_name(type) << " t=" << t << " o=" << o;
                }
            }
        }
    }
}

}  // namespace
}  // namespace cactus
