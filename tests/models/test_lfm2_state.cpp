// LFM2's short convolution and its per-sequence conv state (src/kv/conv_state.h) on a small
// random-weight lfm2 file built in memory: the op against a direct per-sequence convolution (odd
// sizes, several sequences interleaved, history split between the state and the batch), the default
// (host round trip) op against the CPU one, and the model: chunked prefill (1, 7, all) equal to one
// call, two sequences in one batch equal to each alone, prefix reuse after a rewind equal to a fresh
// run, rewinds past the ring recomputed, KV compaction and sliding attention layers, and clear load
// errors. Agreement with llama.cpp at real widths: tests/models/test_lfm2_synthetic.py. The model
// tests run on $CACTUS_DEVICE (default cpu), so a GPU backend is checked by the same assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kv/conv_state.h"
#include "models/model.h"
#include "ops/ops_ref.h"

namespace cactus {
namespace {

// ---- the op -----------------------------------------------------------------------------------

// y of token t of a sequence with Bx rows bx_seq [T, e]: C * sum_k w[c, k] bx(t - (L - 1) + k).
std::vector<float> direct_conv(const std::vector<std::vector<float>>& bx_seq, const std::vector<float>& c_row,
                               const std::vector<float>& w, size_t t, size_t e, size_t L) {
    std::vector<float> y(e);
    for (size_t ch = 0; ch < e; ++ch) {
        float sum = 0.0f;
        for (size_t k = 0; k < L; ++k) {
            const long src = static_cast<long>(t) - static_cast<long>(L - 1) + static_cast<long>(k);
            if (src >= 0) sum += bx_seq[static_cast<size_t>(src)][ch] * w[ch * L + k];
        }
        y[ch] = c_row[ch] * sum;
    }
    return y;
}

struct OpCase {
    size_t e, L;
};

class ShortConvOp : public ::testing::TestWithParam<OpCase> {};

TEST_P(ShortConvOp, MatchesDirectConvolution) {
    const size_t e = GetParam().e, L = GetParam().L, d = L - 1;
    std::mt19937 rng(17);
    std::normal_distribution<float> nd;
    // Two sequences: seq 0 has 5 tokens in the state and 4 in the batch; seq 1 has 1 and 6.
    const size_t before[2] = {5, 1}, in_batch[2] = {4, 6}, ring = 8;
    std::vector<std::vector<float>> bcx_seq[2], bx_seq[2];
    for (int s = 0; s < 2; ++s) {
        for (size_t t = 0; t < before[s] + in_batch[s]; ++t) {
            std::vector<float> row(3 * e), bx(e);
            for (float& v : row) v = nd(rng);
            for (size_t c = 0; c < e; ++c) bx[c] = row[c] * row[2 * e + c];
            bcx_seq[s].push_back(row);
            bx_seq[s].push_back(bx);
        }
    }
    std::vector<float> w(e * L);
    for (float& v : w) v = nd(rng);
    std::vector<float> state(2 * ring * e, 0.0f);  // [2 * ring, e]: seq s at rows s * ring + t % ring
    for (int s = 0; s < 2; ++s)
        for (size_t t = 0; t < before[s]; ++t)
            std::copy(bx_seq[s][t].begin(), bx_seq[s][t].end(), state.begin() + (s * ring + t % ring) * e);
    // Batch: the sequences interleaved (1, 0, 1, 1, 0, ...), each in order.
    const int order[] = {1, 0, 1, 1, 0, 0, 1, 1, 0, 1};
    const size_t n = 10;
    std::vector<float> bcx(n * 3 * e);
    std::vector<int32_t> hist(n * d, -1);
    std::vector<size_t> token(n);
    std::vector<std::vector<size_t>> rows(2);
    for (size_t i = 0; i < n; ++i) {
        const int s = order[i];
        const size_t t = before[s] + rows[s].size();
        token[i] = t;
        std::copy(bcx_seq[s][t].begin(), bcx_seq[s][t].end(), bcx.begin() + i * 3 * e);
        for (size_t lag = 1; lag <= d && lag <= t; ++lag) {
            hist[i * d + lag - 1] = lag <= rows[s].size() ? static_cast<int32_t>(rows[s][rows[s].size() - lag])
                                                          : -2 - static_cast<int32_t>(s * ring + (t - lag) % ring);
        }
        rows[s].push_back(i);
    }
    std::vector<float> y(n * e), bx(n * e);
    short_conv_ref(y.data(), bx.data(), bcx.data(), w.data(), state.data(), 2 * ring, hist.data(), n, e, L);
    for (size_t i = 0; i < n; ++i) {
        const int s = order[i];
        const std::vector<float> c_row(bcx_seq[s][token[i]].begin() + e, bcx_seq[s][token[i]].begin() + 2 * e);
        const std::vector<float> want = direct_conv(bx_seq[s], c_row, w, token[i], e, L);
        for (size_t c = 0; c < e; ++c) {
            ASSERT_NEAR(y[i * e + c], want[c], 1e-4f * (1.0f + std::fabs(want[c]))) << "row " << i << " ch " << c;
            ASSERT_EQ(bx[i * e + c], bx_seq[s][token[i]][c]);
        }
    }
    // The CPU backend and the default (host round trip) implementation give the same numbers.
    std::unique_ptr<Backend> be = make_backend(BackendOptions{});
    auto buffer = be->alloc((n * 3 * e + 2 * n * e + e * L + 2 * ring * e) * sizeof(float) + n * (d + 1) * 4);
    size_t off = 0;
    auto next = [&](DType type, size_t width, size_t rows_n) {
        Tensor t = make_tensor(buffer.get(), off, type, width, rows_n);
        off += t.nb[2];
        return t;
    };
    const Tensor t_bcx = next(DType::F32, 3 * e, n), t_y = next(DType::F32, e, n), t_bx = next(DType::F32, e, n);
    const Tensor t_w = next(DType::F32, L, e), t_state = next(DType::F32, e, 2 * ring);
    const Tensor t_hist = next(DType::I32, d, n);
    be->upload(t_bcx, bcx.data(), bcx.size() * 4);
    be->upload(t_w, w.data(), w.size() * 4);
    be->upload(t_state, state.data(), state.size() * 4);
    be->upload(t_hist, hist.data(), hist.size() * 4);
    for (int variant = 0; variant < 2; ++variant) {
        if (variant == 0) be->short_conv(t_y, t_bx, t_bcx, t_w, t_state, t_hist);
        if (variant == 1) be->Backend::short_conv(t_y, t_bx, t_bcx, t_w, t_state, t_hist);
        EXPECT_EQ(download_f32(*be, t_y), y) << variant;
        EXPECT_EQ(download_f32(*be, t_bx), bx) << variant;
    }
    // set_rows: rows with id -1 are skipped, both implementations.
    std::vector<int32_t> ids(n, -1);
    ids[2] = 5;
    ids[7] = 0;
    const Tensor t_ids = next(DType::I32, 1, n);
    be->upload(t_ids, ids.data(), ids.size() * 4);
    for (int variant = 0; variant < 2; ++variant) {
        be->upload(t_state, state.data(), state.size() * 4);
        if (variant == 0) be->set_rows(t_state, t_bx, t_ids);
        if (variant == 1) be->Backend::set_rows(t_state, t_bx, t_ids);
        std::vector<float> want = state;
        std::copy(bx.begin() + 2 * e, bx.begin() + 3 * e, want.begin() + 5 * e);
        std::copy(bx.begin() + 7 * e, bx.begin() + 8 * e, want.begin());
        EXPECT_EQ(download_f32(*be, t_state), want) << variant;
    }
    ids[3] = static_cast<int32_t>(2 * ring);  // outside the table
    be->upload(t_ids, ids.data(), ids.size() * 4);
    EXPECT_THROW(be->set_rows(t_state, t_bx, t_ids), Error);
    EXPECT_THROW(be->short_conv(t_y, t_bx, t_bcx, t_w, t_state, t_ids), Error);  // hist of the wrong shape
}

INSTANTIATE_TEST_SUITE_P(OddSizes, ShortConvOp, ::testing::Values(OpCase{37, 3}, OpCase{5, 2}, OpCase{19, 4}));

TEST(ConvState, RewindRule) {
    const size_t every = ConvState::kCheckpointEvery;
    std::vector<std::pair<size_t, size_t>> copies;
    ConvState c(2, 8, 4, 16);  // ring of 8 rows at 16, 4 checkpoint slots of 2 rows at 24
    EXPECT_EQ(ConvState::rows(2, 8, 4), 16u);
    EXPECT_EQ(c.restorable(0), 0u);
    c.append(5);
    EXPECT_EQ(c.row_of(5), 16u + 5u);
    EXPECT_EQ(c.restorable(3), 3u);
    c.append(10);  // 15 tokens, the ring keeps 7..14
    EXPECT_TRUE(c.holds(7));
    EXPECT_FALSE(c.holds(6));
    EXPECT_EQ(c.restorable(9), 9u);   // needs 7, 8
    EXPECT_EQ(c.restorable(8), 0u);   // needs 6: gone, no checkpoint before
    EXPECT_EQ(c.restorable(16), 0u);  // past the end
    EXPECT_THROW(c.truncate(8, &copies), Error);
    c.truncate(9, &copies);
    EXPECT_TRUE(copies.empty());
    EXPECT_EQ(c.n_past(), 9u);
    // Checkpoints: tokens every-2 and every-1 (and 2*every-2, 2*every-1) are also kept in slots.
    EXPECT_EQ(c.checkpoint_row(every - 3), -1);
    for (size_t t = 9; t < 2 * every + 20; ++t) {
        const long row = c.checkpoint_row(t);
        if (t == every - 2) EXPECT_EQ(row, 16 + 8 + 1 * 2 + 0);
        if (t == 2 * every - 1) EXPECT_EQ(row, 16 + 8 + 2 * 2 + 1);
        c.append(1);
    }
    EXPECT_EQ(c.n_past(), 2 * every + 20);  // the ring holds the last 8
    EXPECT_EQ(c.restorable(2 * every + 19), 2 * every + 19);
    EXPECT_EQ(c.restorable(2 * every + 5), 2 * every);  // the last checkpoint before it
    EXPECT_EQ(c.restorable(2 * every - 1), every);
    EXPECT_EQ(c.restorable(every - 1), 0u);
    c.truncate(every, &copies);  // checkpoint 1's rows go back into the ring (tokens every-2, every-1)
    ASSERT_EQ(copies.size(), 2u);
    EXPECT_EQ(copies[0], std::make_pair(size_t(16 + 8 + 2), c.row_of(every - 2)));
    EXPECT_EQ(copies[1], std::make_pair(size_t(16 + 8 + 3), c.row_of(every - 1)));
    EXPECT_EQ(c.n_past(), every);
    EXPECT_TRUE(c.holds(every - 2));
    EXPECT_EQ(c.restorable(every), every);
    c.append(every + 20);
    EXPECT_EQ(c.restorable(2 * every + 1), 2 * every);  // (the caller rewrote its rows on the way)
    c.truncate(0, &copies);
    EXPECT_EQ(c.n_past(), 0u);
    EXPECT_THROW(ConvState(3, 2, 0, 0), Error);
}

// ---- the model --------------------------------------------------------------------------------

struct SmallLfm2 {
    size_t e = 64, n_layer = 5, n_head = 4, n_kv = 2, n_ff = 96, L = 3, n_vocab = 50;
    std::vector<int> attn = {1, 3};
    uint32_t sliding_window = 0;
    std::string skip;  // a tensor left out
    bool causal = true;
};

std::vector<uint8_t> write_small_lfm2(const SmallLfm2& m, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    GgufWriter w;
    w.add_string("general.architecture", "lfm2");
    w.add_u32("lfm2.context_length", 4096);
    w.add_u32("lfm2.embedding_length", static_cast<uint32_t>(m.e));
    w.add_u32("lfm2.block_count", static_cast<uint32_t>(m.n_layer));
    w.add_u32("lfm2.feed_forward_length", static_cast<uint32_t>(m.n_ff));
    w.add_u32("lfm2.attention.head_count", static_cast<uint32_t>(m.n_head));
    std::vector<int64_t> kv(m.n_layer, 0);
    for (int il : m.attn) kv[static_cast<size_t>(il)] = static_cast<int64_t>(m.n_kv);
    w.add_int_array("lfm2.attention.head_count_kv", GgufType::U32, kv);
    w.add_f32("lfm2.rope.freq_base", 1000000.0f);
    w.add_f32("lfm2.attention.layer_norm_rms_epsilon", 1e-5f);
    w.add_u32("lfm2.shortconv.l_cache", static_cast<uint32_t>(m.L));
    if (m.sliding_window) w.add_u32("lfm2.attention.sliding_window", m.sliding_window);
    if (!m.causal) w.add_bool("lfm2.attention.causal", false);
    auto tensor = [&](const std::string& name, std::vector<uint64_t> dims, float scale, float offset) {
        if (name == m.skip) return;
        size_t n = 1;
        for (uint64_t dim : dims) n *= dim;
        std::vector<float> v(n);
        for (float& x : v) x = offset + scale * nd(rng);
        w.add_tensor(name, DType::F32, dims, v.data(), n * sizeof(float));
    };
    const float s = 1.0f / std::sqrt(static_cast<float>(m.e));
    const size_t hd = m.e / m.n_head;
    tensor("token_embd.weight", {m.e, m.n_vocab}, 1.0f, 0.0f);
    tensor("output.weight", {m.e, m.n_vocab}, 3.0f * s, 0.0f);
    tensor("token_embd_norm.weight", {m.e}, 0.1f, 1.0f);
    for (size_t il = 0; il < m.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        tensor(p + "attn_norm.weight", {m.e}, 0.1f, 1.0f);
        if (kv[il]) {
            tensor(p + "attn_q.weight", {m.e, m.n_head * hd}, s, 0.0f);
            tensor(p + "attn_k.weight", {m.e, m.n_kv * hd}, s, 0.0f);
            tensor(p + "attn_v.weight", {m.e, m.n_kv * hd}, s, 0.0f);
            tensor(p + "attn_q_norm.weight", {hd}, 0.1f, 1.0f);
            tensor(p + "attn_k_norm.weight", {hd}, 0.1f, 1.0f);
            tensor(p + "attn_output.weight", {m.n_head * hd, m.e}, s, 0.0f);
        } else {
            tensor(p + "shortconv.in_proj.weight", {m.e, 3 * m.e}, s, 0.0f);
            tensor(p + "shortconv.conv.weight", {m.L, m.e}, 0.6f, 0.0f);
            tensor(p + "shortconv.out_proj.weight", {m.e, m.e}, s, 0.0f);
        }
        tensor(p + "ffn_norm.weight", {m.e}, 0.1f, 1.0f);
        tensor(p + "ffn_gate.weight", {m.e, m.n_ff}, s, 0.0f);
        tensor(p + "ffn_up.weight", {m.e, m.n_ff}, s, 0.0f);
        tensor(p + "ffn_down.weight", {m.n_ff, m.e}, 1.0f / std::sqrt(static_cast<float>(m.n_ff)), 0.0f);
    }
    return w.to_bytes();
}

class Lfm2Model : public ::testing::Test {
protected:
    void open(const SmallLfm2& m = SmallLfm2()) {
        bytes_ = write_small_lfm2(m, 3);
        file_ = GgufFile::from_memory(bytes_.data(), bytes_.size());
    }
    std::unique_ptr<Model> load(size_t n_seq = 1, size_t n_ctx = 256, KvRequest kv = KvRequest(),
                                size_t memory_budget = 0) {
        ModelOptions o;
        o.memory_budget = memory_budget;
        o.n_ctx = n_ctx;
        o.n_threads = 2;
        o.n_seq = n_seq;
        o.kv = kv;
        o.device = device_from_env("cpu");  // CACTUS_DEVICE=cuda runs the model tests on a GPU
        return Model::load(*file_, o);
    }
    static std::vector<int32_t> tokens(size_t n, unsigned seed) {
        std::mt19937 rng(seed);
        std::vector<int32_t> t(n);
        for (int32_t& x : t) x = static_cast<int32_t>(rng() % 50);
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

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    EXPECT_LT(worst, tol) << what;
}

TEST_F(Lfm2Model, ChunkedPrefillEqualsOneCall) {
    open();
    auto model = load();
    EXPECT_EQ(model->info().architecture, "lfm2");
    const std::vector<int32_t> t = tokens(40, 1);
    const std::vector<float> whole = chunked(*model, t, t.size());
    for (size_t chunk : {1, 7, 13}) expect_close(chunked(*model, t, chunk), whole, 2e-3f, "chunked");
}

TEST_F(Lfm2Model, SlidingAttentionLayersChunked) {
    SmallLfm2 m;
    m.sliding_window = 8;
    open(m);
    auto model = load();
    const std::vector<int32_t> t = tokens(40, 2);
    const std::vector<float> whole = chunked(*model, t, 8);
    for (size_t chunk : {1, 3}) expect_close(chunked(*model, t, chunk), whole, 2e-3f, "sliding chunked");
}

TEST_F(Lfm2Model, TwoSequencesInOneBatchEqualEachAlone) {
    open();
    auto model = load(2);
    const std::vector<int32_t> a = tokens(17, 3), b = tokens(12, 4);
    const size_t n_vocab = model->info().n_vocab;
    const std::vector<float> alone_a = chunked(*model, a, a.size(), 0);
    const std::vector<float> alone_b = chunked(*model, b, b.size(), 1);
    model->reset(0);
    model->reset(1);
    // Steps of up to 3 tokens of a and 2 of b, interleaved (a b a b a), every token's logits.
    std::vector<float> got_a, got_b, logits;
    size_t ia = 0, ib = 0;
    while (ia < a.size() || ib < b.size()) {
        std::vector<int32_t> ids, seq;
        size_t take_a = std::min<size_t>(3, a.size() - ia), take_b = std::min<size_t>(2, b.size() - ib);
        while (take_a + take_b > 0) {
            if (take_a > 0 && (take_a >= take_b || take_b == 0)) {
                ids.push_back(a[ia++]), seq.push_back(0), --take_a;
            }
            if (take_b > 0) ids.push_back(b[ib++]), seq.push_back(1), --take_b;
        }
        std::vector<uint8_t> marks(ids.size(), 1);
        Batch batch;
        batch.n = ids.size();
        batch.tokens = ids.data();
        batch.seq = seq.data();
        batch.logits = marks.data();
        model->decode(batch, &logits);
        for (size_t k = 0; k < ids.size(); ++k) {
            std::vector<float>& dst = seq[k] == 0 ? got_a : got_b;
            dst.insert(dst.end(), logits.begin() + k * n_vocab, logits.begin() + (k + 1) * n_vocab);
        }
    }
    expect_close(got_a, alone_a, 2e-3f, "sequence a in a shared batch");
    expect_close(got_b, alone_b, 2e-3f, "sequence b in a shared batch");
}

TEST_F(Lfm2Model, PrefixReuseAfterRewindEqualsFreshRun) {
    open();
    auto model = load();
    const std::vector<int32_t> turn1 = tokens(30, 5), turn2 = tokens(9, 6);
    std::vector<float> first;
    model->forward(turn1.data(), turn1.size(), &first);
    // The second turn keeps the first 21 tokens (rewinds 9, inside the ring) and adds new ones.
    ASSERT_EQ(model->truncate(21), 21u);
    EXPECT_EQ(model->n_past(), 21u);
    std::vector<float> reused, fresh;
    model->forward(turn2.data(), turn2.size(), nullptr, &reused);
    std::vector<int32_t> all(turn1.begin(), turn1.begin() + 21);
    all.insert(all.end(), turn2.begin(), turn2.end());
    const std::vector<float> whole = chunked(*model, all, all.size());
    fresh.assign(whole.end() - static_cast<std::ptrdiff_t>(reused.size()), whole.end());
    expect_close(reused, fresh, 2e-3f, "reused prefix");
    // Appending again after a rewind to the end is a no-op rewind.
    EXPECT_EQ(model->truncate(model->n_past()), model->n_past());
}

TEST_F(Lfm2Model, RewindsPastTheRingRestoreACheckpoint) {
    open();
    auto model = load();
    const size_t every = ConvState::kCheckpointEvery;
    const std::vector<int32_t> t = tokens(3 * every + 30, 7);
    std::vector<float> logits, again, fresh;
    model->forward(t.data(), t.size(), &logits);
    // Before the first checkpoint nothing can be restored; n - 2 inside the ring restores n.
    EXPECT_EQ(model->truncate(every - 10), 0u);
    EXPECT_EQ(model->n_past(), 0u);
    model->forward(t.data(), t.size(), &logits);
    const size_t n = t.size() - (ConvState::kRingTokens - 2);
    EXPECT_EQ(model->truncate(n), n);
    model->forward(t.data() + n, t.size() - n, &again);
    model->reset();
    model->forward(t.data(), t.size(), &fresh);
    expect_close(again, fresh, 2e-3f, "rewind at the ring's edge");
    // Further back: the last checkpoint before the target; recomputing from it matches.
    for (size_t target : {2 * every + 5, every + 1, 2 * every}) {
        const size_t kept = model->truncate(target);
        EXPECT_EQ(kept, target / every * every) << target;
        EXPECT_EQ(model->n_past(), kept);
        std::vector<float> all;
        model->forward(t.data() + kept, t.size() - kept, nullptr, &all);
        const std::vector<float> whole = chunked(*model, t, 50);
        const size_t n_vocab = model->info().n_vocab;
        expect_close(all, std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(kept * n_vocab), whole.end()),
                     2e-3f, "recomputed from a checkpoint");
    }
}

TEST_F(Lfm2Model, KvCompactionTouchesAttentionLayersOnly) {
    open();
    KvRequest kv;
    kv.compress = 1;
    kv.compress_at = 48;
    kv.compress_to = 24;
    kv.compress_sinks = 4;
    auto model = load(1, 64, kv);
    const std::vector<int32_t> t = tokens(150, 8);
    std::vector<float> logits;
    for (size_t done = 0; done < t.size(); done += 10) model->forward(t.data() + done, 10, &logits);
    EXPECT_EQ(model->n_past(), t.size());
    EXPECT_GT(model->kv_compactions(), 0u);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    // Conv state bytes are reported with the KV cache: 3 conv layers * 64 rows * 64 floats.
    EXPECT_GE(model->kv_bytes(), 3u * ConvState::kRingTokens * 64u * sizeof(float));
}

TEST_F(Lfm2Model, MemoryBudgetIsChecked) {
    open();
    // The budget covers KV rows, activations and the conv buffers (init's extra_bytes): a budget
    // of just the reported KV + conv state is too small, a generous one loads.
    const size_t state = load(16)->kv_bytes();
    try {
        load(16, 256, KvRequest(), state);
        ADD_FAILURE() << "loaded within " << state << " bytes";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(load(16, 256, KvRequest(), 64u << 20));
}

TEST_F(Lfm2Model, ClearLoadErrors) {
    {
        SmallLfm2 m;
        m.causal = false;
        open(m);
        EXPECT_THROW(load(), Error);
    }
    const char* missing[] = {"blk.0.shortconv.conv.weight", "blk.1.attn_q_norm.weight", "token_embd_norm.weight"};
    for (const char* name : missing) {
        SmallLfm2 m;
        m.skip = name;
        open(m);
        try {
            load();
            ADD_FAILURE() << "loaded without " << name;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
    }
}

}  // namespace
}  // namespace cactus
