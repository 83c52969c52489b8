// Property test of the KV cache: random sequences of operations (chunked appends of random sizes,
// decode steps, compactions, truncations, resets, multi-turn appends) on random layouts (global,
// sliding rings with and without sinks) and precisions (f16, int8, f32), checked after every step
// against a simple reference model that keeps every row of every token in plain lists (no rings,
// no physical rows) and does its own KeyDiff compaction.
// Invariants: kernels get row ranges within the physical capacity; the rows a query sees are
// exactly the positions the reference says it should see; attention outputs (optimised kernels)
// match the reference within tolerance; truncate() is exact whenever it says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/host_kv_storage.h"
#include "backends/cpu/ops_cpu.h"
#include "core/error.h"
#include "kv/kv_cache.h"
#include "ops/quant.h"

namespace cactus {
namespace {

struct RefRow {
    int32_t pos = 0;
    size_t token = 0;
    std::vector<float> k, v;  // one head, as stored (quantization round trip)
};

struct RefLayer {
    KvLayerSpec spec;
    size_t hk = 0, hv = 0;
    std::vector<std::vector<RefRow>> heads;  // [n_head_kv][rows]
};

// Storage round trip of one head's values.
std::vector<float> stored(const float* x, size_t n, KvType type) {
    std::vector<float> out(n);
    if (type == KvType::F16) {
        for (size_t i = 0; i < n; ++i) out[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
    } else if (type == KvType::F32) {
        out.assign(x, x + n);
    } else {
        std::vector<int8_t> q(n);
        std::vector<float> s((n + kKvGroup - 1) / kKvGroup);
        kv_quantize_i8(q.data(), s.data(), x, n);
        kv_dequantize_i8(out.data(), q.data(), s.data(), n);
    }
    return out;
}

class RefCache {
public:
    RefCache(const std::vector<KvLayerSpec>& specs, const KvCacheConfig& c) : c_(c) {
        for (const KvLayerSpec& s : specs) {
            RefLayer l;
            l.spec = s;
            l.hk = s.k_width / s.n_head_kv;
            l.hv = s.v_width / s.n_head_kv;
            l.heads.resize(s.n_head_kv);
            layers_.push_back(l);
        }
    }
    size_t global_rows() const {
        for (const RefLayer& l : layers_)
            if (l.spec.window == 0) return l.heads[0].size();
        return 0;
    }
    void append(size_t token, const std::vector<std::vector<float>>& k, const std::vector<std::vector<float>>& v) {
        const int32_t gpos = static_cast<int32_t>(global_rows());
        for (size_t il = 0; il < layers_.size(); ++il) {
            RefLayer& l = layers_[il];
            for (size_t h = 0; h < l.heads.size(); ++h) {
                RefRow row;
                row.token = token;
                row.pos = l.spec.window ? static_cast<int32_t>(token) : gpos;
                row.k = stored(k[il].data() + h * l.hk, l.hk, c_.kv.type);
                row.v = stored(v[il].data() + h * l.hv, l.hv, c_.kv.type);
                l.heads[h].push_back(row);
            }
        }
        n_tokens_ = token + 1;
    }
    void truncate(size_t n) {
        for (RefLayer& l : layers_)
            for (auto& rows : l.heads)
                rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const RefRow& r) { return r.token >= n; }),
                           rows.end());
        n_tokens_ = n;
    }
    void compact() {
        for (RefLayer& l : layers_)
            if (l.spec.window == 0)
                for (auto& rows : l.heads) compact_head(l, rows);
    }
    const std::vector<RefLayer>& layers() const { return layers_; }

private:
    void compact_head(const RefLayer& l, std::vector<RefRow>& rows) {
        const KvCompressOptions& c = c_.kv.compress;
        const size_t n = rows.size();
        const size_t sinks = std::min(c.sinks, c.to);
        const size_t recent = std::min(c.recent, c.to - sinks);
        std::vector<float> mean(l.hk, 0.0f), norms(n), cosine(n);
        for (size_t r = 0; r < n; ++r) {
            double ss = 0.0;
            for (float x : rows[r].k) ss += static_cast<double>(x) * x;
            norms[r] = static_cast<float>(std::sqrt(ss));
            const float inv = norms[r] > 0.0f ? 1.0f / norms[r] : 0.0f;
            for (size_t i = 0; i < l.hk; ++i) mean[i] += rows[r].k[i] * inv;
        }
        double mss = 0.0;
        for (float x : mean) mss += static_cast<double>(x) * x;
        for (size_t r = 0; r < n; ++r) {
            double dot = 0.0;
            for (size_t i = 0; i < l.hk; ++i) dot += static_cast<double>(rows[r].k[i]) * mean[i];
            const double d = static_cast<double>(norms[r]) * std::sqrt(mss);
            cosine[r] = d > 0.0 ? static_cast<float>(dot / d) : 0.0f;
        }
        std::vector<size_t> mid(n - sinks - recent);
        std::iota(mid.begin(), mid.end(), sinks);
        std::stable_sort(mid.begin(), mid.end(), [&](size_t a, size_t b) { return cosine[a] < cosine[b]; });
        mid.resize(c.to - sinks - recent);
        std::vector<bool> keep(n, false);
        for (size_t r = 0; r < sinks; ++r) keep[r] = true;
        for (size_t r : mid) keep[r] = true;
        for (size_t r = n - recent; r < n; ++r) keep[r] = true;
        std::vector<RefRow> out;
        for (size_t r = 0; r < n; ++r) {
            if (!keep[r]) continue;
            RefRow row = rows[r];
            const int32_t new_pos = static_cast<int32_t>(out.size());
            if (new_pos != row.pos) {
                if (l.spec.rope.n_rot) rope_ref(row.k.data(), 1, l.hk, new_pos - row.pos, l.spec.rope);
                row.k = stored(row.k.data(), l.hk, c_.kv.type);
                row.pos = new_pos;
            }
            out.push_back(row);
        }
        rows = out;
    }

    KvCacheConfig c_;
    std::vector<RefLayer> layers_;
    size_t n_tokens_ = 0;
};

bool visible(const RefLayer& l, int32_t q_pos, int32_t pos) {
    AttentionMask m;
    m.q_pos = q_pos;
    m.window = l.spec.window;
    m.sinks = l.spec.sinks;
    return attention_row_visible(m, pos);
}

// out = softmax(scale q.k) v over the reference rows visible from q_pos.
std::vector<float> ref_attention(const RefLayer& l, size_t h, const std::vector<float>& q, int32_t q_pos) {
    const std::vector<RefRow>& rows = l.heads[h];
    std::vector<double> s(rows.size(), -INFINITY);
    double max = -INFINITY;
    const double scale = 1.0 / std::sqrt(static_cast<double>(l.hk));
    for (size_t r = 0; r < rows.size(); ++r) {
        if (!visible(l, q_pos, rows[r].pos)) continue;
        double dot = 0.0;
        for (size_t i = 0; i < l.hk; ++i) dot += static_cast<double>(q[i]) * rows[r].k[i];
        s[r] = dot * scale;
        max = std::max(max, s[r]);
    }
    std::vector<double> acc(l.hv, 0.0);
    double sum = 0.0;
    for (size_t r = 0; r < rows.size(); ++r) {
        if (s[r] == -INFINITY) continue;
        const double p = std::exp(s[r] - max);
        sum += p;
        for (size_t i = 0; i < l.hv; ++i) acc[i] += p * rows[r].v[i];
    }
    std::vector<float> out(l.hv, 0.0f);
    for (size_t i = 0; i < l.hv; ++i) out[i] = sum > 0.0 ? static_cast<float>(acc[i] / sum) : 0.0f;
    return out;
}

struct Harness {
    std::mt19937 rng;
    std::vector<KvLayerSpec> specs;
    KvCacheConfig config;
    size_t checks = 0;

    explicit Harness(uint32_t seed) : rng(seed) {}
    size_t pick(size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); }

    void random_config() {
        specs.clear();
        const size_t n_layer = pick(1, 3);
        bool any_ring = false;
        for (size_t il = 0; il < n_layer; ++il) {
            KvLayerSpec s;
            s.n_head_kv = pick(1, 2);
            const size_t dims[] = {4, 6, 33, 40};
            const size_t hk = dims[pick(0, 3)];
            const size_t hv = pick(0, 1) ? hk : dims[pick(0, 3)];
            s.k_width = hk * s.n_head_kv;
            s.v_width = hv * s.n_head_kv;
            s.rope.style = pick(0, 1) ? RopeStyle::NEOX : RopeStyle::NORMAL;
            s.rope.n_rot = pick(0, 2) ? (hk / 2) * 2 : 0;
            s.rope.freq_base = 100.0f;
            if (pick(0, 2) == 0 || (il == n_layer - 1 && !any_ring && pick(0, 1))) {
                s.window = static_cast<uint32_t>(pick(1, 12));
                s.sinks = static_cast<uint32_t>(pick(0, 1) ? pick(0, 3) : 0);
                any_ring = true;
            }
            specs.push_back(s);
        }
        config = KvCacheConfig{};
        config.n_ctx = pick(6, 48);
        config.max_chunk = pick(1, 16);
        config.kv.type = static_cast<KvType>(pick(0, 2));  // f16, int8, f32
        KvRequest req;
        req.compress = static_cast<int>(pick(0, 1));
        req.compress_at = pick(3, config.n_ctx);
        req.compress_to = pick(1, req.compress_at - 1);
        req.compress_sinks = static_cast<int64_t>(pick(0, std::min<size_t>(4, req.compress_to)));
        req.compress_recent = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        config.kv = resolve_kv_options(req, config.n_ctx);
        config.kv.type = static_cast<KvType>(pick(0, 2));  // f16, int8, f32
    }

    std::vector<std::vector<float>> random_rows(bool key) {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<std::vector<float>> rows;
        for (const KvLayerSpec& s : specs) {
            std::vector<float> r(key ? s.k_width : s.v_width);
            for (float& x : r) x = normal(rng);
            rows.push_back(r);
        }
        return rows;
    }

    // Everything the layer's query at `token` sees, against the reference.
    void check_query(const KvCache& cache, const RefCache& ref, size_t il, size_t token) {
        const RefLayer& rl = ref.layers()[il];
        const KvLayerSpec& s = specs[il];
        const RowRange rows = cache.rows_for_query(il, token);
        ASSERT_LE(rows.end, cache.capacity(il));
        ASSERT_LE(rows.begin, rows.end);
        const AttentionMask mask = cache.mask_for(il, token);
        // The visible positions are exactly the reference's.
        std::vector<int32_t> got, want;
        for (size_t r = rows.begin; r < rows.end; ++r)
            if (attention_row_visible(mask, cache.row_positions(il)[r])) got.push_back(cache.row_positions(il)[r]);
        for (const RefRow& r : rl.heads[0])
            if (visible(rl, mask.q_pos, r.pos)) want.push_back(r.pos);
        std::sort(got.begin(), got.end());
        ASSERT_EQ(got, want) << "layer " << il << " token " << token;
        std::normal_distribution<float> normal(0.0f, 1.0f);
        const size_t n = rows.end - rows.begin;
        std::vector<float> out(rl.hv);
        AttentionWorkspace scratch;
        const auto& rows_of = dynamic_cast<const HostKvStorage&>(cache.storage());  // made without a backend
        for (size_t h = 0; h < s.n_head_kv; ++h) {
            std::vector<float> q(rl.hk);
            for (float& x : q) x = normal(rng);
            const float scale = 1.0f / std::sqrt(static_cast<float>(rl.hk));
            const int32_t* pos = cache.row_positions(il) + rows.begin;
            if (cache.type() == KvType::F16) {
                attention_head(out.data(), q.data(), rows_of.k16(il, rows.begin) + h * rl.hk, s.k_width,
                               rows_of.v16(il, rows.begin) + h * rl.hv, s.v_width, pos, n, rl.hk, rl.hv, scale, mask,
                               scratch);
            } else if (cache.type() == KvType::F32) {
                attention_head_f32(out.data(), q.data(), rows_of.k32(il, rows.begin) + h * rl.hk, s.k_width,
                                   rows_of.v32(il, rows.begin) + h * rl.hv, s.v_width, pos, n, rl.hk, rl.hv, scale,
                                   mask, scratch);
            } else {
                const size_t gk = (rl.hk + kKvGroup - 1) / kKvGroup, gv = (rl.hv + kKvGroup - 1) / kKvGroup;
                attention_head_q8(out.data(), q.data(), rows_of.k8(il, rows.begin) + h * rl.hk, s.k_width,
                                  rows_of.k_scales(il, rows.begin) + h * gk, rows_of.k_scale_stride(il),
                                  rows_of.v8(il, rows.begin) + h * rl.hv, s.v_width,
                                  rows_of.v_scales(il, rows.begin) + h * gv, rows_of.v_scale_stride(il), pos, n, rl.hk,
                                  rl.hv, scale, mask, scratch);
            }
            const std::vector<float> want_out = ref_attention(rl, h, q, mask.q_pos);
            // f16 rounds the query and the weights; int8 and f32 differ from the reference by f32 sums.
            const float tol = cache.type() == KvType::F16 ? 2e-2f : (cache.type() == KvType::I8 ? 1e-4f : 1e-5f);
            for (size_t i = 0; i < rl.hv; ++i)
                ASSERT_NEAR(out[i], want_out[i], tol) << "layer " << il << " head " << h << " token " << token;
            ++checks;
        }
    }

    void check_rows(const KvCache& cache, const RefCache& ref) {
        for (size_t il = 0; il < specs.size(); ++il) {
            size_t valid = 0;
            for (size_t r = 0; r < cache.capacity(il); ++r) {
                const int32_t p = cache.row_positions(il)[r];
                ASSERT_GE(p, -1);
                if (p >= 0) ++valid;
            }
            ASSERT_LE(valid, cache.capacity(il));
            if (specs[il].window == 0) ASSERT_EQ(valid, ref.layers()[il].heads[0].size());
        }
    }

    // cache.reserve() with the reference following its compactions; 0 when the context is full.
    size_t reserve(KvCache& cache, RefCache& ref, size_t wanted) {
        const size_t before = cache.compactions();
        const size_t ref_rows = ref.global_rows();
        const bool full = !config.kv.compress.enabled && ref_rows >= config.n_ctx &&
                          std::any_of(specs.begin(), specs.end(), [](const KvLayerSpec& s) { return s.window == 0; });
        if (full) {
            EXPECT_THROW(cache.reserve(wanted), Error);
            return 0;
        }
        const size_t room = cache.reserve(wanted);
        if (cache.compactions() != before) {
            EXPECT_EQ(ref_rows, config.kv.compress.at);
            ref.compact();
        }
        EXPECT_GE(room, 1u);
        EXPECT_LE(room, wanted);
        return room;
    }

    void append(KvCache& cache, RefCache& ref, size_t wanted) {
        while (wanted > 0) {
            const size_t room = reserve(cache, ref, wanted);
            if (room == 0 || ::testing::Test::HasFailure()) return;
            const size_t first = cache.append(room);
            ASSERT_EQ(first, cache.n_past() - room);
            for (size_t t = first; t < first + room; ++t) {
                const auto k = random_rows(true);
                const auto v = random_rows(false);
                for (size_t il = 0; il < specs.size(); ++il)
                    cache.write_row(il, cache.row_of(il, t), k[il].data(), v[il].data());
                ref.append(t, k, v);
            }
            // Queries of the whole chunk run after all its rows are written (as in the model).
            for (size_t il = 0; il < specs.size(); ++il) {
                check_query(cache, ref, il, first);
                check_query(cache, ref, il, first + room - 1);
                if (room > 2) check_query(cache, ref, il, first + pick(1, room - 2));
            }
            wanted -= room;
        }
    }

    // A verification step of speculative decoding: a token and its drafts appended in one step (at
    // most a chunk), then the rows of the rejected drafts dropped. The engine relies on that
    // rollback being exact on every layout (rings keep a chunk of slack rows; a full cache compacts
    // at the reserve before the step), so it never recomputes.
    void speculative_step(KvCache& cache, RefCache& ref) {
        // As the engine: reserve first (a full cache compacts now), then draft only what fits.
        const size_t step = reserve(cache, ref, pick(1, config.max_chunk));
        if (step == 0 || ::testing::Test::HasFailure()) return;  // context full
        const size_t before = cache.n_past();
        const size_t compactions = cache.compactions();
        append(cache, ref, step);
        ASSERT_EQ(cache.compactions(), compactions) << "a compaction inside a verification step";
        ASSERT_EQ(cache.n_past(), before + step);
        const size_t keep = before + 1 + pick(0, step - 1);
        const size_t kept = cache.truncate(keep);
        ASSERT_EQ(kept, keep) << "rolling back drafts from " << before + step << " to " << keep;
        ref.truncate(kept);
    }

    void run_sequence() {
        random_config();
        KvCache cache(specs, config, make_host_kv_storage);
        if (std::getenv("KV_DEBUG")) {
            for (const KvLayerSpec& s : specs)
                std::printf("layer w%u sinks%u cap? k%zu h%zu\n", s.window, s.sinks, s.k_width, s.n_head_kv);
            std::printf("n_ctx %zu chunk %zu compress %d at %zu to %zu\n", config.n_ctx, config.max_chunk,
                        (int)config.kv.compress.enabled, config.kv.compress.at, config.kv.compress.to);
        }
        ASSERT_EQ(cache.bytes(), KvCache::predict_bytes(specs, config));
        RefCache ref(specs, config);
        const size_t n_ops = pick(5, 30);
        for (size_t op = 0; op < n_ops; ++op) {
            const size_t kind = pick(0, 10);
            if (std::getenv("KV_DEBUG")) std::printf("op %zu n_past %zu\n", kind, cache.n_past());
            if (kind <= 3) {
                append(cache, ref, pick(1, 2 * config.max_chunk + 3));  // prefill chunk(s)
            } else if (kind <= 6) {
                append(cache, ref, 1);  // decode step
            } else if (kind <= 8 && cache.n_past() > 0) {
                // Multi-turn: go back a little (or to anywhere) and continue.
                const size_t n = pick(0, 2) ? cache.n_past() - pick(0, std::min<size_t>(cache.n_past(), 4))
                                            : pick(0, cache.n_past());
                const size_t floor = cache.truncate_floor();
                const size_t had = cache.n_past();
                const size_t kept = cache.truncate(n);
                ASSERT_TRUE(kept == n || kept == 0);
                if (n == had || (n >= floor && std::all_of(specs.begin(), specs.end(),
                                                           [](const KvLayerSpec& s) { return s.window == 0; }))) {
                    ASSERT_EQ(kept, n);
                }
                ASSERT_EQ(cache.n_past(), kept);
                ref.truncate(kept);
                if (kept == 0) ref = RefCache(specs, config);
            } else if (kind == 9) {
                speculative_step(cache, ref);
            } else {
                cache.clear();
                ref = RefCache(specs, config);
            }
            check_rows(cache, ref);
            if (::testing::Test::HasFatalFailure()) return;
        }
    }
};

TEST(KvProperty, RandomSequencesMatchTheReferenceModel) {
    size_t checks = 0;
    const uint32_t first = std::getenv("KV_SEED") ? std::atoi(std::getenv("KV_SEED")) : 1;
    for (uint32_t seed = first; seed <= 10000; ++seed) {
        Harness h(seed);
        h.run_sequence();
        checks += h.checks;
        if (::testing::Test::HasFatalFailure()) {
            ADD_FAILURE() << "seed " << seed;
            return;
        }
    }
    EXPECT_GT(checks, 100000u);
    std::printf("kv property: 10000 sequences, %zu attention checks\n", checks);
}

TEST(KvProperty, ContextFullWithoutCompactionIsAClearError) {
    KvLayerSpec s;
    s.k_width = s.v_width = 8;
    KvCache cache({s}, KvCacheConfig{4, 0, KvOptions{}}, make_host_kv_storage);
    EXPECT_EQ(cache.reserve(10), 4u);
    cache.append(4);
    try {
        cache.reserve(1);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("kv_compress"), std::string::npos) << e.what();
    }
}

TEST(KvProperty, OptionValidationNamesTheKey) {
    auto message = [](KvRequest r, size_t n_ctx) {
        try {
            resolve_kv_options(r, n_ctx);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    KvRequest r;
    r.compress = 1;
    r.compress_at = 5000;
    EXPECT_NE(message(r, 4096).find("kv_compress_at"), std::string::npos);
    r.compress_at = 2048;
    r.compress_to = 2048;
    EXPECT_NE(message(r, 4096).find("kv_compress_to"), std::string::npos);
    r.compress_to = 1024;
    r.compress_sinks = 2000;
    EXPECT_NE(message(r, 4096).find("kv_compress_sinks"), std::string::npos);
    r.compress_sinks = 4;
    EXPECT_EQ(message(r, 4096), "");
    EXPECT_THROW(parse_kv_type("q4"), Error);
    const KvOptions d = resolve_kv_options(KvRequest{}, 8192);
    EXPECT_TRUE(d.compress.enabled);
    EXPECT_EQ(d.compress.at, 4096u);
    EXPECT_EQ(d.compress.to, 2048u);
    EXPECT_EQ(d.compress.sinks, 4u);
    EXPECT_EQ(d.compress.recent, 614u);
    EXPECT_FALSE(resolve_kv_options(KvRequest{}, 2048).compress.enabled);
}

}  // namespace
}  // namespace cactus
