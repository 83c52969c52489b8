// Gemma 4's layers beyond what the transformers oracle checks (tests/models/test_gemma4_oracle.py):
// how KV sharing composes with everything the KV cache does. A small random Gemma 4 (E2B's
// structure: [s,s,s,s,f] x 2, the last 5 layers KV-shared, double-wide FFNs there, per-layer
// embeddings, window 8) runs chunked prefill across ring wraps, steps that keep only their output
// rows after the last KV layer, several sequences in one batch, and random sessions with
// compaction, truncation and resets in every KV precision.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "models/model.h"

namespace cactus {
namespace {

struct SmallGemma4 {
    size_t e = 64, n_layer = 10, n_head = 4, n_kv = 1, hd_swa = 16, hd_full = 32, n_ff = 96, ple = 8;
    size_t n_vocab = 64, shared = 5;
    uint32_t window = 8;
    size_t n_kv_full = 1;  // KV heads of the full layers (31B: fewer than the sliding ones)
    bool k_eq_v = false;   // full layers without attn_v (31B)
    uint32_t experts = 0;  // gemma4.expert_count (26B-A4B)
    bool sliding(size_t il) const { return il % 5 != 4; }
    size_t n_ff_of(size_t il) const { return il >= n_layer - shared ? 2 * n_ff : n_ff; }
};

std::vector<uint8_t> write_small_gemma4(const SmallGemma4& m, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    GgufWriter w;
    const std::string a = "gemma4.";
    w.add_string("general.architecture", "gemma4");
    w.add_u32(a + "context_length", 4096);
    w.add_u32(a + "embedding_length", static_cast<uint32_t>(m.e));
    w.add_u32(a + "block_count", static_cast<uint32_t>(m.n_layer));
    std::vector<int64_t> ff, pattern;
    for (size_t il = 0; il < m.n_layer; ++il) {
        ff.push_back(static_cast<int64_t>(m.n_ff_of(il)));
        pattern.push_back(m.sliding(il) ? 1 : 0);
    }
    w.add_int_array(a + "feed_forward_length", GgufType::U32, ff);
    w.add_int_array(a + "attention.sliding_window_pattern", GgufType::BOOL, pattern);
    w.add_u32(a + "attention.head_count", static_cast<uint32_t>(m.n_head));
    if (m.n_kv_full == m.n_kv) {
        w.add_u32(a + "attention.head_count_kv", static_cast<uint32_t>(m.n_kv));
    } else {
        std::vector<int64_t> kv;
        for (size_t il = 0; il < m.n_layer; ++il)
            kv.push_back(static_cast<int64_t>(m.sliding(il) ? m.n_kv : m.n_kv_full));
        w.add_int_array(a + "attention.head_count_kv", GgufType::U32, kv);
    }
    if (m.experts) w.add_u32(a + "expert_count", m.experts);
    w.add_u32(a + "attention.key_length", static_cast<uint32_t>(m.hd_full));
    w.add_u32(a + "attention.value_length", static_cast<uint32_t>(m.hd_full));
    w.add_u32(a + "attention.key_length_swa", static_cast<uint32_t>(m.hd_swa));
    w.add_u32(a + "attention.value_length_swa", static_cast<uint32_t>(m.hd_swa));
    w.add_u32(a + "rope.dimension_count", static_cast<uint32_t>(m.hd_full));
    w.add_u32(a + "rope.dimension_count_swa", static_cast<uint32_t>(m.hd_swa));
    w.add_f32(a + "rope.freq_base", 1000000.0f);
    w.add_f32(a + "rope.freq_base_swa", 10000.0f);
    w.add_u32(a + "attention.sliding_window", m.window);
    w.add_u32(a + "attention.shared_kv_layers", static_cast<uint32_t>(m.shared));
    w.add_u32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(m.ple));
    w.add_f32(a + "final_logit_softcapping", 30.0f);
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    auto tensor = [&](const std::string& name, std::vector<uint64_t> dims, float scale, float offset) {
        size_t n = 1;
        for (uint64_t dim : dims) n *= dim;
        std::vector<float> v(n);
        for (float& x : v) x = offset + scale * nd(rng);
        w.add_tensor(name, DType::F32, dims, v.data(), n * sizeof(float));
    };
    const float s = 1.0f / std::sqrt(static_cast<float>(m.e));
    const size_t pl = m.ple * m.n_layer;
    tensor("token_embd.weight", {m.e, m.n_vocab}, 0.1f, 0.0f);
    tensor("output_norm.weight", {m.e}, 0.1f, 1.0f);
    tensor("per_layer_token_embd.weight", {pl, m.n_vocab}, 0.3f, 0.0f);
    tensor("per_layer_model_proj.weight", {m.e, pl}, s, 0.0f);
    tensor("per_layer_proj_norm.weight", {m.ple}, 0.1f, 1.0f);
    std::vector<float> freqs(m.hd_full / 2, 1e30f);
    for (size_t i = 0; i < m.hd_full / 8; ++i) freqs[i] = 1.0f;  // a quarter of the pairs rotate
    w.add_tensor("rope_freqs.weight", DType::F32, {m.hd_full / 2}, freqs.data(), freqs.size() * sizeof(float));
    for (size_t il = 0; il < m.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const size_t hd = m.sliding(il) ? m.hd_swa : m.hd_full;
        const size_t n_kv = m.sliding(il) ? m.n_kv : m.n_kv_full;
        const bool stores = il < m.n_layer - m.shared;
        tensor(p + "attn_norm.weight", {m.e}, 0.1f, 1.0f);
        tensor(p + "attn_q.weight", {m.e, m.n_head * hd}, s, 0.0f);
        tensor(p + "attn_q_norm.weight", {hd}, 0.1f, 1.0f);
        if (stores) {
            tensor(p + "attn_k.weight", {m.e, n_kv * hd}, s, 0.0f);
            if (!(m.k_eq_v && !m.sliding(il))) tensor(p + "attn_v.weight", {m.e, n_kv * hd}, s, 0.0f);
            tensor(p + "attn_k_norm.weight", {hd}, 0.1f, 1.0f);
        }
        tensor(p + "attn_output.weight", {m.n_head * hd, m.e}, s, 0.0f);
        tensor(p + "post_attention_norm.weight", {m.e}, 0.1f, 1.0f);
        tensor(p + "ffn_norm.weight", {m.e}, 0.1f, 1.0f);
        tensor(p + "ffn_gate.weight", {m.e, m.n_ff_of(il)}, s, 0.0f);
        tensor(p + "ffn_up.weight", {m.e, m.n_ff_of(il)}, s, 0.0f);
        tensor(p + "ffn_down.weight", {m.n_ff_of(il), m.e}, 1.0f / std::sqrt(static_cast<float>(m.n_ff_of(il))), 0.0f);
        tensor(p + "post_ffw_norm.weight", {m.e}, 0.1f, 1.0f);
        tensor(p + "inp_gate.weight", {m.e, m.ple}, s, 0.0f);
        tensor(p + "proj.weight", {m.ple, m.e}, 1.0f / std::sqrt(static_cast<float>(m.ple)), 0.0f);
        tensor(p + "post_norm.weight", {m.e}, 0.1f, 1.0f);
        tensor(p + "layer_output_scale.weight", {1}, 0.2f, 1.0f);
    }
    return w.to_bytes();
}

class Gemma4Model : public ::testing::Test {
protected:
    void SetUp() override { use(SmallGemma4()); }
    void use(const SmallGemma4& m) {
        bytes_ = write_small_gemma4(m, 5);
        file_ = GgufFile::from_memory(bytes_.data(), bytes_.size());
    }
    std::unique_ptr<Model> load(KvRequest kv = KvRequest(), size_t n_seq = 1, size_t n_ctx = 256) {
        ModelOptions o;
        o.n_ctx = n_ctx;
        o.n_threads = 2;
        o.n_seq = n_seq;
        o.kv = kv;
        o.device = device_from_env("cpu");  // CACTUS_DEVICE=cuda runs the model tests on a GPU
        return Model::load(*file_, o);
    }
    static KvRequest kv_of(KvType type, bool compress) {
        KvRequest r;
        r.type = static_cast<int>(type);
        r.compress = compress ? 1 : 0;
        if (compress) {
            r.compress_at = 32;
            r.compress_to = 16;
            r.compress_sinks = 2;
        }
        return r;
    }
    static std::vector<int32_t> tokens(size_t n, unsigned seed) {
        std::mt19937 rng(seed);
        std::vector<int32_t> t(n);
        for (int32_t& x : t) x = static_cast<int32_t>(rng() % 64);
        return t;
    }
    // Logits of every token of `t` fed in calls of `chunk` tokens on a fresh sequence.
    static std::vector<float> chunked(Model& model, const std::vector<int32_t>& t, size_t chunk, int seq = 0) {
        model.reset(seq);
        std::vector<float> all, part;
        for (size_t done = 0; done < t.size(); done += chunk) {
            const size_t c = std::min(chunk, t.size() - done);
            model.forward(t.data() + done, c, nullptr, &part, seq);
            all.insert(all.end(), part.begin(), part.end());
        }
        return all;
    }
    std::vector<uint8_t> bytes_;
    std::unique_ptr<GgufFile> file_;
};

float max_abs_diff(const float* a, const float* b, size_t n) {
    float worst = 0.0f;
    for (size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    return worst;
}

TEST_F(Gemma4Model, LoadsEveryLayerKind) {
    auto model = load();
    EXPECT_EQ(model->info().architecture, "gemma4");
    EXPECT_EQ(model->info().n_layer, 10u);
    // Only the 5 layers that store keys and values hold rows: 4 sliding rings, 1 global layer.
    auto f32 = load(kv_of(KvType::F32, false));
    std::vector<float> logits;
    const std::vector<int32_t> t = tokens(12, 1);
    f32->forward(t.data(), t.size(), &logits);
    ASSERT_EQ(logits.size(), 64u);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    for (float x : logits) EXPECT_LE(std::fabs(x), 30.0f);  // soft-capped
}

TEST_F(Gemma4Model, ChunkedPrefillEqualsTokenByTokenAcrossRingWraps) {
    auto model = load(kv_of(KvType::F32, false));
    const std::vector<int32_t> t = tokens(40, 2);  // five windows of 8
    const std::vector<float> one = chunked(*model, t, 1);
    for (size_t chunk : {3, 7, 8, 40}) {
        const std::vector<float> c = chunked(*model, t, chunk);
        EXPECT_LT(max_abs_diff(one.data(), c.data(), one.size()), 1e-4f) << "chunk " << chunk;
    }
}

TEST_F(Gemma4Model, StepsThatKeepOnlyOutputRowsChangeNoBit) {
    // The KV-shared layers run only on rows whose logits are wanted: the last token's logits are
    // the same whether every row's logits are asked for or only the last one's.
    auto model = load(kv_of(KvType::F16, false));
    const std::vector<int32_t> t = tokens(29, 3);
    std::vector<float> last, all;
    model->reset();
    model->forward(t.data(), t.size(), &last);
    model->reset();
    model->forward(t.data(), t.size(), nullptr, &all);
    ASSERT_EQ(all.size(), t.size() * 64);
    EXPECT_EQ(0.0f, max_abs_diff(last.data(), all.data() + (t.size() - 1) * 64, 64));
    // A chunk without any wanted row runs no KV-shared layer; the next chunk still sees its rows.
    std::vector<float> split;
    model->reset();
    model->forward(t.data(), 20, nullptr);
    model->forward(t.data() + 20, t.size() - 20, &split);
    EXPECT_EQ(0.0f, max_abs_diff(last.data(), split.data(), 64));
}

TEST_F(Gemma4Model, SequencesInOneBatchEqualEachAlone) {
    auto model = load(kv_of(KvType::F32, false), 3);
    // Prompts of at most window + 1 tokens: a step takes at most a window of a sequence.
    std::vector<std::vector<int32_t>> seqs = {tokens(8, 4), tokens(9, 5), tokens(6, 6)};
    std::vector<std::vector<float>> alone;
    for (size_t s = 0; s < seqs.size(); ++s) {
        std::vector<float> logits;
        model->reset(static_cast<int>(s));
        model->forward(seqs[s].data(), seqs[s].size(), &logits, nullptr, static_cast<int>(s));
        alone.push_back(logits);
    }
    // One step: every prompt but its last token, then the last tokens together; only some rows
    // ask for logits, so the KV-shared layers run on a subset of each step.
    for (size_t s = 0; s < seqs.size(); ++s) model->reset(static_cast<int>(s));
    std::vector<int32_t> ids, seq;
    for (size_t s = 0; s < seqs.size(); ++s) {
        for (size_t i = 0; i + 1 < seqs[s].size(); ++i) {
            ids.push_back(seqs[s][i]);
            seq.push_back(static_cast<int32_t>(s));
        }
    }
    Batch prompt;
    prompt.n = ids.size();
    prompt.tokens = ids.data();
    prompt.seq = seq.data();
    std::vector<float> ignored;
    model->decode(prompt, &ignored);
    ids.clear();
    seq.clear();
    for (size_t s = 0; s < seqs.size(); ++s) {
        ids.push_back(seqs[s].back());
        seq.push_back(static_cast<int32_t>(s));
    }
    Batch last;
    last.n = ids.size();
    last.tokens = ids.data();
    last.seq = seq.data();
    std::vector<float> together;
    model->decode(last, &together);
    ASSERT_EQ(together.size(), 3u * 64);
    for (size_t s = 0; s < seqs.size(); ++s) {
        EXPECT_LT(max_abs_diff(alone[s].data(), together.data() + s * 64, 64), 1e-4f) << "sequence " << s;
    }
}

// Random sessions: chunks of 1-20 tokens (some asking for every row's logits, some for the last
// only), truncations to random points and resets, with and without compaction, in every KV
// precision. After an exact truncation, computing the dropped tokens again gives their logits
// again (the shared layers hold no rows of their own; their sources' rows are what the cache
// restored); every logit is finite; compaction and ring wraps both happen.
TEST_F(Gemma4Model, RandomSessionsWithCompactionAndTruncation) {
    for (KvType type : {KvType::F16, KvType::I8, KvType::F32}) {
        for (bool compress : {true, false}) {
            SCOPED_TRACE(std::string(kv_type_name(type)) + (compress ? " compaction" : " no compaction"));
            auto model = load(kv_of(type, compress), 1, 96);
            std::mt19937 rng(static_cast<unsigned>(type) * 2 + compress);
            std::vector<int32_t> history;
            std::vector<std::vector<float>> seen;  // [token] its logits when computed (empty: not asked)
            size_t exact_checks = 0;
            for (int op = 0; op < 60; ++op) {
                const size_t pick = rng() % 10;
                if (pick < 2 && !history.empty()) {
                    const size_t want = rng() % (history.size() + 1);
                    const size_t kept = model->truncate(want);
                    ASSERT_TRUE(kept == want || kept == 0);
                    if (kept == want && want < history.size()) {
                        // Recompute the dropped tokens in one call.
                        const std::vector<int32_t> again(history.begin() + static_cast<long>(want), history.end());
                        std::vector<float> all;
                        model->forward(again.data(), again.size(), nullptr, &all);
                        for (size_t i = 0; i < again.size(); ++i) {
                            const std::vector<float>& before = seen[want + i];
                            if (before.empty()) continue;
                            EXPECT_LT(max_abs_diff(before.data(), all.data() + i * 64, 64), 2e-3f)
                                << "token " << want + i;
                            ++exact_checks;
                        }
                        for (size_t i = 0; i < again.size(); ++i) {
                            seen[want + i].assign(all.begin() + static_cast<long>(i * 64),
                                                  all.begin() + static_cast<long>((i + 1) * 64));
                        }
                        continue;
                    }
                    history.resize(kept);
                    seen.resize(kept);
                    continue;
                }
                if (pick == 2) {
                    model->reset();
                    history.clear();
                    seen.clear();
                    continue;
                }
                const std::vector<int32_t> chunk = tokens(1 + rng() % 20, static_cast<unsigned>(rng()));
                if (!compress && history.size() + chunk.size() > 96) {
                    EXPECT_THROW(model->forward(chunk.data(), chunk.size(), nullptr), Error);
                    continue;  // the cache is unchanged: a clear error, the session goes on
                }
                const bool every_row = rng() % 2 == 0;
                std::vector<float> last, all;
                model->forward(chunk.data(), chunk.size(), every_row ? nullptr : &last, every_row ? &all : nullptr);
                for (size_t i = 0; i < chunk.size(); ++i) {
                    history.push_back(chunk[i]);
                    seen.emplace_back();
                    if (every_row) {
                        seen.back().assign(all.begin() + static_cast<long>(i * 64),
                                           all.begin() + static_cast<long>((i + 1) * 64));
                    } else if (i + 1 == chunk.size()) {
                        seen.back() = last;
                    }
                    for (float x : seen.back()) ASSERT_TRUE(std::isfinite(x));
                }
                ASSERT_EQ(model->n_past(), history.size());
            }
            EXPECT_GT(exact_checks, 0u);
            if (compress) {
                EXPECT_GT(model->kv_compactions(), 0u);
            }
        }
    }
}

TEST_F(Gemma4Model, KEqualsVWithFewerFullKvHeads) {
    // The 31B layout: full layers with 2 KV heads of their own and no attn_v (values are the raw key
    // projection), sliding layers with 4. Self-consistency only: no transformers run covers it.
    SmallGemma4 m;
    m.n_head = 4;
    m.n_kv = 4;
    m.n_kv_full = 2;
    m.k_eq_v = true;
    use(m);
    auto model = load(kv_of(KvType::F32, false));
    const std::vector<int32_t> t = tokens(30, 7);
    const std::vector<float> one = chunked(*model, t, 1);
    const std::vector<float> all = chunked(*model, t, 30);
    EXPECT_LT(max_abs_diff(one.data(), all.data(), one.size()), 1e-4f);
}

TEST_F(Gemma4Model, MixtureOfExpertsIsRefusedByName) {
    SmallGemma4 m;
    m.experts = 8;
    use(m);
    try {
        load();
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("mixture-of-experts"), std::string::npos) << e.what();
    }
}

TEST_F(Gemma4Model, BadSharingLayoutsAreClearErrors) {
    // Every layer shared: nothing to read. (A shared layer must find an earlier layer of its kind.)
    SmallGemma4 m;
    m.shared = 10;
    std::vector<uint8_t> bytes = write_small_gemma4(m, 5);
    auto file = GgufFile::from_memory(bytes.data(), bytes.size());
    ModelOptions o;
    o.n_ctx = 64;
    try {
        Model::load(*file, o);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("shared_kv_layers"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cactus
