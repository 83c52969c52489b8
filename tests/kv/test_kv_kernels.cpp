// Attention kernels over int8 KV rows: the optimised CPU kernel against the scalar reference on
// random data of odd sizes, and the int8 group quantizer's error bound; every precision at
// Gemma 4's head dims (256 sliding, 512 global). f32 rows: test_kv_f32.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "kv/kv_cache.h"
#include "ops/ops_ref.h"
#include "ops/quant.h"

namespace cactus {
namespace {

struct Q8Rows {
    std::vector<int8_t> q;      // [n_rows, stride]
    std::vector<float> scales;  // [n_rows, groups]
    size_t stride = 0;
    size_t groups = 0;
};

Q8Rows random_rows(std::mt19937& rng, size_t n_rows, size_t dim, size_t pad) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Q8Rows rows;
    rows.stride = dim + pad;
    rows.groups = (dim + kKvGroup - 1) / kKvGroup + 1;
    rows.q.assign(n_rows * rows.stride, 0);
    rows.scales.assign(n_rows * rows.groups, 0.0f);
    std::vector<float> x(dim);
    for (size_t r = 0; r < n_rows; ++r) {
        for (float& v : x) v = normal(rng) * 2.0f;
        kv_quantize_i8(rows.q.data() + r * rows.stride, rows.scales.data() + r * rows.groups, x.data(), dim);
    }
    return rows;
}

TEST(KvKernels, Int8AttentionMatchesReferenceOnOddSizes) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t dim : {1u, 7u, 31u, 32u, 33u, 64u, 95u, 256u}) {
        for (size_t n_rows : {1u, 3u, 17u, 130u}) {
            for (uint32_t window : {0u, 5u}) {
                const Q8Rows k = random_rows(rng, n_rows, dim, 3);
                const Q8Rows v = random_rows(rng, n_rows, dim + 1, 1);
                std::vector<float> q(dim);
                for (float& x : q) x = normal(rng);
                std::vector<int32_t> pos(n_rows);
                for (size_t r = 0; r < n_rows; ++r) pos[r] = (r % 5 == 4) ? -1 : static_cast<int32_t>(r);
                AttentionMask mask;
                mask.q_pos = static_cast<int32_t>(n_rows) - 1;
                mask.window = window;
                mask.sinks = window ? 2 : 0;
                std::vector<float> want(dim + 1), got(dim + 1);
                AttentionWorkspace scratch;
                const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
                attention_head_q8_ref(want.data(), q.data(), k.q.data(), k.stride, k.scales.data(), k.groups,
                                      v.q.data(), v.stride, v.scales.data(), v.groups, pos.data(), n_rows, dim, dim + 1,
                                      scale, mask);
                attention_head_q8(got.data(), q.data(), k.q.data(), k.stride, k.scales.data(), k.groups, v.q.data(),
                                  v.stride, v.scales.data(), v.groups, pos.data(), n_rows, dim, dim + 1, scale, mask,
                                  scratch);
                double err = 0.0, norm = 0.0;
                for (size_t d = 0; d <= dim; ++d) {
                    err += (want[d] - got[d]) * (want[d] - got[d]);
                    norm += want[d] * want[d];
                }
                EXPECT_LE(err, 1e-9 * norm + 1e-12) << "dim " << dim << " rows " << n_rows;
            }
        }
    }
}

double nmse(const std::vector<float>& want, const std::vector<float>& got) {
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
    }
    return err / norm;
}

// A GQA group of 8 query heads over 700 rows of one KV head (a sliding ring of 512 with 4 sinks,
// and a global layer) in each precision, against its reference. NMSE bounds: f16 1e-6 (the query
// and the weights are rounded to f16 in both; a weight whose f32 value sits at a rounding tie can
// round the other way), int8 1e-9 and f32 1e-11 (f32 sums against double sums).
TEST(KvKernels, EveryPrecisionAtGemma4HeadDims) {
    std::mt19937 rng(21);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t n_rows = 700, n_q = 8;
    AttentionWorkspace ws;
    for (size_t dim : {256u, 511u, 512u}) {
        const size_t stride = 2 * dim;  // heads of a two-head row
        std::vector<float> k(n_rows * stride), v(n_rows * stride), q(n_q * dim);
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        for (float& x : q) x = normal(rng);
        std::vector<uint16_t> k16(k.size()), v16(v.size());
        for (size_t i = 0; i < k.size(); ++i) {
            k16[i] = fp32_to_fp16(k[i]);
            v16[i] = fp32_to_fp16(v[i]);
        }
        const Q8Rows k8 = random_rows(rng, n_rows, dim, dim), v8 = random_rows(rng, n_rows, dim, dim);
        std::vector<int32_t> pos(n_rows);
        for (size_t r = 0; r < n_rows; ++r) pos[r] = static_cast<int32_t>((r * 37) % n_rows);  // a rotated ring
        const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
        for (const AttentionMask& mask : {AttentionMask{699, 512, 4, 0}, AttentionMask{650, 0, 0, 0}}) {
            std::vector<float> got(n_q * dim), want(dim);
            const AttentionShape shape = {pos.data(), n_rows, dim, dim, scale, mask};
            const AttentionQueries aq = {q.data(), dim, got.data(), dim, n_q};
            double worst[3] = {0.0, 0.0, 0.0};  // f16, int8, f32
            attention_group(aq, KvRowsF16{k16.data() + dim, stride, v16.data() + dim, stride}, shape, ws);
            for (size_t j = 0; j < n_q; ++j) {
                attention_head_ref(want.data(), q.data() + j * dim, k16.data() + dim, stride, v16.data() + dim, stride,
                                   pos.data(), n_rows, dim, dim, scale, mask);
                worst[0] = std::max(worst[0], nmse(want, std::vector<float>(&got[j * dim], &got[j * dim] + dim)));
            }
            attention_group(aq,
                            KvRowsQ8{k8.q.data(), k8.stride, k8.scales.data(), k8.groups, v8.q.data(), v8.stride,
                                     v8.scales.data(), v8.groups},
                            shape, ws);
            for (size_t j = 0; j < n_q; ++j) {
                attention_head_q8_ref(want.data(), q.data() + j * dim, k8.q.data(), k8.stride, k8.scales.data(),
                                      k8.groups, v8.q.data(), v8.stride, v8.scales.data(), v8.groups, pos.data(),
                                      n_rows, dim, dim, scale, mask);
                worst[1] = std::max(worst[1], nmse(want, std::vector<float>(&got[j * dim], &got[j * dim] + dim)));
            }
            attention_group(aq, KvRowsF32{k.data() + dim, stride, v.data() + dim, stride}, shape, ws);
            for (size_t j = 0; j < n_q; ++j) {
                attention_head_f32_ref(want.data(), q.data() + j * dim, k.data() + dim, stride, v.data() + dim, stride,
                                       pos.data(), n_rows, dim, dim, scale, mask);
                worst[2] = std::max(worst[2], nmse(want, std::vector<float>(&got[j * dim], &got[j * dim] + dim)));
            }
            std::printf("[ head_dim %zu window %u ] NMSE f16 %.3g, int8 %.3g, f32 %.3g\n", dim, mask.window, worst[0],
                        worst[1], worst[2]);
            EXPECT_LE(worst[0], 1e-6) << "f16, head_dim " << dim;
            EXPECT_LE(worst[1], 1e-9) << "int8, head_dim " << dim;
            EXPECT_LE(worst[2], 1e-11) << "f32, head_dim " << dim;
        }
    }
}

TEST(KvKernels, Int8QuantizerErrorIsWithinHalfAStep) {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (size_t n : {1u, 5u, 32u, 45u, 100u}) {
        std::vector<float> x(n), back(n), scales((n + 31) / 32);
        std::vector<int8_t> q(n);
        for (float& v : x) v = normal(rng);
        kv_quantize_i8(q.data(), scales.data(), x.data(), n);
        kv_dequantize_i8(back.data(), q.data(), scales.data(), n);
        for (size_t i = 0; i < n; ++i) EXPECT_LE(std::fabs(back[i] - x[i]), 0.5f * scales[i / 32] + 1e-6f);
    }
    std::vector<float> zeros(40, 0.0f), back(40);
    std::vector<int8_t> q(40);
    std::vector<float> scales(2);
    kv_quantize_i8(q.data(), scales.data(), zeros.data(), 40);
    kv_dequantize_i8(back.data(), q.data(), scales.data(), 40);
    for (float b : back) EXPECT_EQ(b, 0.0f);
}

}  // namespace
}  // namespace cactus
