// f32 KV rows (kv_cache_type "f32"): the option, exact storage (write / read / move a head, and
// compaction's re-rotation), the memory arithmetic, and attention over f32 rows: the optimised
// kernel against attention_head_f32_ref on random data of odd sizes (NMSE bound), GQA groups bit
// for bit each head alone, and the query kept at f32. The f32 row primitives of every ISA table:
// tests/ops/attention_rows_f32_test.cpp (also run on aarch64 by scripts/test_aarch64.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "core/error.h"
#include "backends/cpu/host_kv_storage.h"
#include "kv/kv_cache.h"
#include "ops/ops_ref.h"
#include "ops/quant.h"

namespace cactus {
namespace {

// Normalised mean squared error of got against want: sum (got - want)^2 / sum want^2.
double nmse(const std::vector<float>& want, const std::vector<float>& got) {
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
        err += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
    }
    return norm > 0.0 ? err / norm : err;
}

std::vector<float> normal_floats(std::mt19937& rng, size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> normal(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Bound of the optimised kernel's NMSE against the double reference: f32 products and sums over
// at most 512 elements and a few hundred rows stay near 1e-13 (largest seen: see the test output);
// an error of one f16 rounding anywhere in the path is 1e-8 or more.
constexpr double kF32Nmse = 1e-11;

TEST(KvF32, OptionParsesAndNamesItself) {
    EXPECT_EQ(parse_kv_type("f32"), KvType::F32);
    EXPECT_EQ(parse_kv_type("f16"), KvType::F16);
    EXPECT_EQ(parse_kv_type("int8"), KvType::I8);
    EXPECT_STREQ(kv_type_name(KvType::F32), "f32");
    EXPECT_STREQ(kv_type_name(KvType::F16), "f16");
    EXPECT_STREQ(kv_type_name(KvType::I8), "int8");
    try {
        parse_kv_type("fp32");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("kv_cache_type"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("\"f32\""), std::string::npos) << e.what();
    }
    KvRequest r;
    r.type = static_cast<int>(KvType::F32);
    EXPECT_EQ(resolve_kv_options(r, 1024).type, KvType::F32);
    r.type = 7;
    EXPECT_THROW(resolve_kv_options(r, 1024), Error);
}

TEST(KvF32, StorageIsExactAndTakesFourBytesAnElement) {
    std::mt19937 rng(1);
    // Head dims of Gemma 4 (256 sliding, 512 global) and odd ones; values no f16 can hold.
    const std::vector<KvLayerLayout> layouts = {{3 * 33, 3 * 40, 3, 9}, {256, 256, 1, 5}, {2 * 512, 2 * 512, 2, 4}};
    HostKvStorage s(layouts, KvType::F32);
    size_t want_bytes = 0;
    for (const KvLayerLayout& l : layouts) {
        EXPECT_EQ(HostKvStorage::predict_bytes(l, KvType::F32), 2 * HostKvStorage::predict_bytes(l, KvType::F16));
        want_bytes += (l.k_width + l.v_width) * sizeof(float) * l.capacity;
    }
    EXPECT_EQ(s.bytes(), want_bytes);
    for (size_t il = 0; il < layouts.size(); ++il) {
        const KvLayerLayout& l = layouts[il];
        const size_t hk = l.k_width / l.n_head_kv, hv = l.v_width / l.n_head_kv;
        std::vector<std::vector<float>> k(l.capacity), v(l.capacity);
        for (size_t r = 0; r < l.capacity; ++r) {
            k[r] = normal_floats(rng, l.k_width, 1e3f);
            v[r] = normal_floats(rng, l.v_width, 1e-6f);
            k[r][0] = 1.0f + std::ldexp(1.0f, -20);  // rounds to 1 in f16
            s.write_row(il, r, k[r].data(), v[r].data());
        }
        std::vector<float> out(std::max(hk, hv));
        for (size_t r = 0; r < l.capacity; ++r) {
            for (size_t h = 0; h < l.n_head_kv; ++h) {
                s.read_head(il, r, h, true, out.data());
                EXPECT_TRUE(same_bits(out.data(), k[r].data() + h * hk, hk)) << il << "/" << r << "/" << h;
                EXPECT_TRUE(same_bits(s.k32(il, r) + h * hk, k[r].data() + h * hk, hk));
                s.read_head(il, r, h, false, out.data());
                EXPECT_TRUE(same_bits(out.data(), v[r].data() + h * hv, hv)) << il << "/" << r << "/" << h;
            }
        }
        // Move the last head of the last row to row 0 (the other heads of row 0 stay), rewrite a head.
        const size_t last = l.capacity - 1, h = l.n_head_kv - 1;
        s.move_head(il, 0, last, h);
        s.read_head(il, 0, h, true, out.data());
        EXPECT_TRUE(same_bits(out.data(), k[last].data() + h * hk, hk));
        s.read_head(il, 0, h, false, out.data());
        EXPECT_TRUE(same_bits(out.data(), v[last].data() + h * hv, hv));
        if (h > 0) {
            s.read_head(il, 0, 0, true, out.data());
            EXPECT_TRUE(same_bits(out.data(), k[0].data(), hk));
        }
        const std::vector<float> head = normal_floats(rng, hk, 3.0f);
        s.write_head(il, 1, 0, true, head.data());
        s.read_head(il, 1, 0, true, out.data());
        EXPECT_TRUE(same_bits(out.data(), head.data(), hk));
    }
}

TEST(KvF32, CachePredictsItsBytes) {
    KvLayerSpec global;
    global.k_width = global.v_width = 2 * 512;
    global.n_head_kv = 2;
    KvLayerSpec ring;
    ring.k_width = ring.v_width = 256;
    ring.window = 16;
    ring.sinks = 2;
    KvCacheConfig c;
    c.n_ctx = 100;
    c.max_chunk = 8;
    c.kv.type = KvType::F32;
    const std::vector<KvLayerSpec> layers = {global, ring};
    KvCache cache(layers, c, make_host_kv_storage);
    const size_t ring_rows = 2 + 16 + 8 - 1;
    const size_t want = 100 * (2 * 1024 * 4 + 4) + ring_rows * (2 * 256 * 4 + 4);  // K, V, position
    EXPECT_EQ(cache.bytes(), want);
    EXPECT_EQ(KvCache::predict_bytes(layers, c), want);
    c.kv.type = KvType::F16;
    EXPECT_EQ(KvCache::predict_bytes(layers, c), 100 * (2 * 1024 * 2 + 4) + ring_rows * (2 * 256 * 2 + 4));
}

// Compaction moves kept rows down and re-rotates their keys: with f32 rows that is rope_ref of the
// key as written, bit for bit (no storage rounding before or after the rotation).
TEST(KvF32, CompactionReRotatesKeysExactly) {
    std::mt19937 rng(2);
    KvLayerSpec spec;
    spec.n_head_kv = 2;
    spec.k_width = spec.n_head_kv * 64;
    spec.v_width = spec.n_head_kv * 24;
    spec.rope.style = RopeStyle::NEOX;
    spec.rope.n_rot = 64;
    spec.rope.freq_base = 10000.0f;
    KvCacheConfig c;
    c.n_ctx = 64;
    KvRequest req;
    req.type = static_cast<int>(KvType::F32);
    req.compress = 1;
    req.compress_at = 12;
    req.compress_to = 6;
    req.compress_sinks = 1;
    req.compress_recent = 0.34;
    c.kv = resolve_kv_options(req, c.n_ctx);
    KvCache cache({spec}, c, make_host_kv_storage);
    std::vector<std::vector<float>> k, v;
    for (size_t t = 0; t < 12; ++t) {
        ASSERT_EQ(cache.reserve(1), 1u);
        cache.append(1);
        k.push_back(normal_floats(rng, spec.k_width));
        v.push_back(normal_floats(rng, spec.v_width));
        cache.write_row(0, cache.row_of(0, t), k[t].data(), v[t].data());
    }
    cache.reserve(1);  // full: compacts 12 -> 6 rows
    ASSERT_EQ(cache.compactions(), 1u);
    std::vector<float> key(64), value(24);
    size_t moved = 0;
    for (size_t h = 0; h < spec.n_head_kv; ++h) {
        for (size_t j = 0; j < 6; ++j) {
            cache.storage().read_head(0, j, h, false, value.data());
            size_t src = 12;  // the token whose value (never rotated) row j now holds
            for (size_t t = 0; t < 12; ++t)
                if (same_bits(value.data(), v[t].data() + h * 24, 24)) src = t;
            ASSERT_LT(src, 12u) << "head " << h << " row " << j;
            std::vector<float> want(k[src].begin() + h * 64, k[src].begin() + (h + 1) * 64);
            if (src != j) rope_ref(want.data(), 1, 64, static_cast<int32_t>(j) - static_cast<int32_t>(src), spec.rope);
            moved += src != j;
            cache.storage().read_head(0, j, h, true, key.data());
            EXPECT_TRUE(same_bits(key.data(), want.data(), 64)) << "head " << h << " row " << j << " from " << src;
        }
    }
    EXPECT_GT(moved, 0u);
}

// ---- attention over f32 rows -------------------------------------------------------------------------

// n_rows rows of [dim] keys and [dim_v] values (row strides dim + 3, dim_v + 1: heads of a wider
// row), positions: a shuffled ring order with every 7th row empty.
struct F32Rows {
    std::vector<float> k, v;
    std::vector<int32_t> pos;
    size_t k_stride = 0, v_stride = 0;
};

F32Rows random_f32_rows(std::mt19937& rng, size_t n_rows, size_t dim, size_t dim_v) {
    F32Rows r;
    r.k_stride = dim + 3;
    r.v_stride = dim_v + 1;
    r.k = normal_floats(rng, n_rows * r.k_stride);
    r.v = normal_floats(rng, n_rows * r.v_stride);
    for (size_t i = 0; i < n_rows; ++i) r.pos.push_back(static_cast<int32_t>(i));
    std::shuffle(r.pos.begin(), r.pos.end(), rng);
    for (size_t i = 6; i < n_rows; i += 7) r.pos[i] = -1;
    return r;
}

// Masks of the cases: global causal, a sliding window with sinks, a window without sinks, a
// bidirectional span (ahead), and one that sees no row.
std::vector<AttentionMask> masks_for(size_t n_rows) {
    const int32_t last = static_cast<int32_t>(n_rows) - 1;
    return {AttentionMask{last, 0, 0, 0}, AttentionMask{last, 5, 2, 0}, AttentionMask{last / 2, 64, 0, 0},
            AttentionMask{last / 3, 0, 0, 4}, AttentionMask{-1, 0, 0, 0}};
}

TEST(KvF32, AttentionMatchesReferenceOnOddSizes) {
    std::mt19937 rng(6);
    AttentionWorkspace ws;
    double worst = 0.0;
    size_t cases = 0;
    for (size_t dim : {1u, 7u, 32u, 33u, 64u, 95u, 128u, 255u, 256u, 257u, 511u, 512u}) {
        const size_t dim_v = dim == 512 ? 512 : dim + 1;  // value heads of another width too
        for (size_t n_rows : {1u, 3u, 17u, 130u, 301u}) {
            const F32Rows rows = random_f32_rows(rng, n_rows, dim, dim_v);
            for (const AttentionMask& mask : masks_for(n_rows)) {
                for (size_t n_q : {1u, 2u, 3u, 4u, 5u, 8u}) {  // GQA groups
                    SCOPED_TRACE(testing::Message()
                                 << "dim " << dim << " rows " << n_rows << " n_q " << n_q << " window " << mask.window
                                 << " sinks " << mask.sinks << " q_pos " << mask.q_pos);
                    const std::vector<float> q = normal_floats(rng, n_q * dim);
                    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
                    std::vector<float> grouped(n_q * dim_v, -1.0f), alone(dim_v), want(dim_v);
                    attention_group(AttentionQueries{q.data(), dim, grouped.data(), dim_v, n_q},
                                    KvRowsF32{rows.k.data(), rows.k_stride, rows.v.data(), rows.v_stride},
                                    AttentionShape{rows.pos.data(), n_rows, dim, dim_v, scale, mask}, ws);
                    for (size_t j = 0; j < n_q; ++j) {
                        attention_head_f32(alone.data(), q.data() + j * dim, rows.k.data(), rows.k_stride,
                                           rows.v.data(), rows.v_stride, rows.pos.data(), n_rows, dim, dim_v, scale,
                                           mask, ws);
                        ASSERT_TRUE(same_bits(alone.data(), grouped.data() + j * dim_v, dim_v)) << "head " << j;
                        attention_head_f32_ref(want.data(), q.data() + j * dim, rows.k.data(), rows.k_stride,
                                               rows.v.data(), rows.v_stride, rows.pos.data(), n_rows, dim, dim_v, scale,
                                               mask);
                        if (mask.q_pos < 0) {  // no visible row: zeros
                            for (float x : alone) ASSERT_EQ(x, 0.0f);
                            continue;
                        }
                        const double e = nmse(want, alone);
                        worst = std::max(worst, e);
                        ASSERT_LE(e, kF32Nmse) << "head " << j;
                        ++cases;
                    }
                }
            }
        }
    }
    std::printf("[ f32 attention ] %zu heads, largest NMSE against the reference %.3g (bound %.0e)\n", cases, worst,
                kF32Nmse);
}

// The f32 path keeps the query at f32: its result is the reference's for the query as given, and
// measurably not the reference's for the query rounded to f16 (what the f16 path uses). The f16
// path over the same data (rows, query and weights rounded) is shown for scale.
TEST(KvF32, QueryKeepsFloatPrecision) {
    std::mt19937 rng(7);
    const size_t dim = 256, n_rows = 200;
    const F32Rows rows = random_f32_rows(rng, n_rows, dim, dim);
    // Scores of unit spread (scale 1 / sqrt(dim)): every row's weight matters, so rounding the query
    // to f16 (a relative step of 2^-11) moves the output visibly.
    const std::vector<float> q = normal_floats(rng, dim);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    const AttentionMask mask{static_cast<int32_t>(n_rows) - 1, 0, 0, 0};
    std::vector<float> q_half(dim);
    for (size_t d = 0; d < dim; ++d) q_half[d] = fp16_to_fp32(fp32_to_fp16(q[d]));
    AttentionWorkspace ws;
    std::vector<float> got(dim), want(dim), want_half_q(dim), f16_path(dim);
    attention_head_f32(got.data(), q.data(), rows.k.data(), rows.k_stride, rows.v.data(), rows.v_stride,
                       rows.pos.data(), n_rows, dim, dim, scale, mask, ws);
    attention_head_f32_ref(want.data(), q.data(), rows.k.data(), rows.k_stride, rows.v.data(), rows.v_stride,
                           rows.pos.data(), n_rows, dim, dim, scale, mask);
    attention_head_f32_ref(want_half_q.data(), q_half.data(), rows.k.data(), rows.k_stride, rows.v.data(),
                           rows.v_stride, rows.pos.data(), n_rows, dim, dim, scale, mask);
    std::vector<uint16_t> k16(rows.k.size()), v16(rows.v.size());
    for (size_t i = 0; i < k16.size(); ++i) k16[i] = fp32_to_fp16(rows.k[i]);
    for (size_t i = 0; i < v16.size(); ++i) v16[i] = fp32_to_fp16(rows.v[i]);
    attention_head(f16_path.data(), q.data(), k16.data(), rows.k_stride, v16.data(), rows.v_stride, rows.pos.data(),
                   n_rows, dim, dim, scale, mask, ws);
    const double e_f32 = nmse(want, got), e_half_q = nmse(want_half_q, got), e_f16 = nmse(want, f16_path);
    std::printf("[ f32 query ] NMSE vs reference %.3g; vs the f16-rounded query's reference %.3g; f16 path %.3g\n",
                e_f32, e_half_q, e_f16);
    EXPECT_LE(e_f32, kF32Nmse);
    EXPECT_GT(e_half_q, 1e3 * kF32Nmse);
    EXPECT_GT(e_f16, 1e3 * kF32Nmse);
}

}  // namespace
}  // namespace cactus
