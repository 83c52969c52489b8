#include "models/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model_budget.h"

namespace cactus {

namespace {

constexpr size_t kMaxSequences = 256;
// Rows of logits the output head computes at once (all-logits requests go in groups of these).
constexpr size_t kLogitRowsMin = 16;
constexpr size_t kNoKvLayer = std::numeric_limits<size_t>::max();

size_t checked_seq(const Batch& b, size_t i, size_t n_seq) {
    const int32_t s = b.seq ? b.seq[i] : 0;
    if (s < 0 || static_cast<size_t>(s) >= n_seq) fail("Model::decode: sequence id %d is not in [0, %zu)", s, n_seq);
    return static_cast<size_t>(s);
}

// A layer that reads another's keys and values must find rows laid out as its own would be.
void check_kv_source(const std::vector<LayerSpec>& layers, size_t il) {
    const AttentionSpec& a = layers[il].attn;
    const size_t src = a.kv_source;
    if (src >= il || layers[src].mixer != Mixer::ATTENTION || !layers[src].attn.stores_kv()) {
        fail(
            "load model: layer %zu reads the keys and values of layer %zu, which is not an earlier layer that stores "
            "them",
            il, src);
    }
    const AttentionSpec& s = layers[src].attn;
    if (s.n_head_kv != a.n_head_kv || s.head_dim_k != a.head_dim_k || s.head_dim_v != a.head_dim_v ||
        s.window != a.window) {
        fail(
            "load model: layer %zu (%zu x %zu/%zu, window %u) cannot read the rows of layer %zu (%zu x %zu/%zu, window "
            "%u)",
            il, a.n_head_kv, a.head_dim_k, a.head_dim_v, a.window, src, s.n_head_kv, s.head_dim_k, s.head_dim_v,
            s.window);
    }
}

}  // namespace

DecoderModel::DecoderModel(const GgufFile& file, const ModelOptions& options, const HParams& hparams)
    : hp_(hparams),
      backend_(make_backend(BackendOptions{options.device, options.n_threads, options.gpu_timeout_ms})),
      weights_(file, *backend_),
      nn_(*backend_) {
    info_.architecture = hp_.arch;
    info_.name = file.get_string("general.name", "");
    info_.n_vocab = hp_.n_vocab;
    info_.n_embd = hp_.n_embd;
    info_.n_layer = hp_.n_layer;
    info_.n_head = hp_.n_head;
    info_.n_head_kv = hp_.n_head_kv;
    info_.n_ctx_train = hp_.n_ctx_train;
    info_.n_ctx = options.n_ctx ? options.n_ctx : std::min<size_t>(hp_.n_ctx_train, 8192);
    info_.kv = resolve_kv_options(options.kv, info_.n_ctx);
    info_.device = backend_->describe();
    if (options.n_batch == 0) fail("Model::load: n_batch must be > 0");
    if (options.n_seq == 0 || options.n_seq > kMaxSequences) {
        fail("Model::load: n_seq %zu is not in [1, %zu]", options.n_seq, kMaxSequences);
    }
    info_.n_seq = options.n_seq;
    memory_budget_ = options.memory_budget;
    n_batch_ = std::min(options.n_batch, info_.n_ctx * options.n_seq);
    token_embd_ = weights_.table("token_embd.weight", hp_.n_embd, hp_.n_vocab);
}

DecoderModel::~DecoderModel() = default;

void DecoderModel::load_layers(const std::vector<LayerSpec>& specs) {
    CACTUS_ASSERT(specs.size() == hp_.n_layer && layers_.empty());
    layers_ = specs;
    attention_.resize(specs.size());
    ffn_.resize(specs.size());
    kv_layer_.assign(specs.size(), kNoKvLayer);
    size_t n_kv = 0;
    for (size_t il = 0; il < specs.size(); ++il) {
        const LayerSpec& spec = specs[il];
        if (spec.mixer != Mixer::ATTENTION) last_state_writer_ = il;  // LFM2's conv rows
        if (spec.mixer == Mixer::ATTENTION) {
            if (spec.attn.stores_kv()) {
                kv_layer_[il] = n_kv++;
                last_state_writer_ = il;
            } else {
                check_kv_source(specs, il);
                kv_layer_[il] = kv_layer_[spec.attn.kv_source];
            }
            attention_[il] = load_attention_weights(weights_, il, spec, hp_.n_embd);
        }
        ffn_[il] = load_ffn_weights(weights_, il, spec, hp_.n_embd);
    }
    if (n_kv == 0) fail("load model: no layer stores keys and values");
}

void DecoderModel::init(const Tensor& output, const Tensor& output_norm, size_t extra_bytes) {
    CACTUS_ASSERT(!layers_.empty() && kv_.empty());
    output_ = output;
    output_norm_ = output_norm;
    // The KV cache holds the layers that store keys and values, in order; the activations are as
    // wide as the widest layer.
    std::vector<KvLayerSpec> kv_specs;
    ActivationDims dims;
    for (const LayerSpec& l : layers_) {
        dims.n_ff = std::max(dims.n_ff, l.ffn.n_ff);
        if (l.mixer != Mixer::ATTENTION) continue;
        const AttentionSpec& a = l.attn;
        dims.q_width = std::max(dims.q_width, a.q_width());
        dims.k_width = std::max(dims.k_width, a.k_width());
        dims.v_width = std::max(dims.v_width, a.v_width());
        dims.attn_width = std::max(dims.attn_width, a.out_width());
        dims.head_group = std::max(dims.head_group, a.n_head / a.n_head_kv);
        if (!a.stores_kv()) continue;
        KvLayerSpec spec;
        spec.k_width = a.k_width();
        spec.v_width = a.v_width();
        spec.window = a.window;
        spec.n_head_kv = a.n_head_kv;
        spec.rope = a.rope;
        kv_specs.push_back(spec);
    }
    KvCacheConfig config;
    config.n_ctx = info_.n_ctx;
    config.max_chunk = n_batch_;
    config.kv = info_.kv;
    const KvStorageFactory storage = [this](const std::vector<KvLayerLayout>& l, KvType type) {
        return backend_->make_kv_storage(l, type);
    };
    // Activations, in one buffer: [n_batch, width] each, then ids / positions / logits.
    const size_t b = n_batch_;
    n_logit_rows_ = std::min(b, std::max(kLogitRowsMin, info_.n_seq));
    const size_t widths[] = {hp_.n_embd,   hp_.n_embd,      hp_.n_embd, dims.q_width, dims.k_width,
                             dims.v_width, dims.attn_width, dims.n_ff,  dims.n_ff};
    size_t floats = 0;
    for (size_t w : widths) floats += w * b;
    const size_t bytes = floats * sizeof(float) + 3 * b * sizeof(int32_t) + n_logit_rows_ * hp_.n_vocab * sizeof(float);
    // Every weight is checked by now (the architecture calls init() last), so these sizes are backed
    // by tensors in the file: predict, check against the budget, then allocate (model_budget.h).
    dims.n_batch = b;
    dims.n_embd = hp_.n_embd;
    dims.n_vocab = hp_.n_vocab * n_logit_rows_;
    dims.n_threads = static_cast<size_t>(backend_->n_threads());
    dims.scratch_rows = info_.n_ctx + b;
    ModelMemoryPlan plan;
    const size_t kv_one = KvCache::predict_bytes(kv_specs, config);
    plan.kv_bytes = kv_one > SIZE_MAX / info_.n_seq ? SIZE_MAX : kv_one * info_.n_seq;
    plan.activation_bytes = predict_activation_bytes(dims);
    plan.activation_bytes =
        extra_bytes > SIZE_MAX - plan.activation_bytes ? SIZE_MAX : plan.activation_bytes + extra_bytes;
    check_memory_budget(plan, info_.n_ctx, hp_.n_ctx_train, memory_budget_);
    for (size_t s = 0; s < info_.n_seq; ++s) kv_.push_back(std::make_unique<KvCache>(kv_specs, config, storage));
    for (const KvLayerSpec& spec : kv_specs) ring_layer_.push_back(spec.window != 0);
    act_buffer_ = backend_->alloc(bytes);
    size_t offset = 0;
    auto next = [&](DType type, size_t width, size_t rows) {
        const Tensor t = make_tensor(act_buffer_.get(), offset, type, width, rows);
        offset += t.nb[2];
        return t;
    };
    Tensor* slots[] = {&full_.x, &full_.cur,  &full_.tmp,  &full_.q, &full_.k,
                       &full_.v, &full_.attn, &full_.gate, &full_.up};
    for (size_t i = 0; i < 9; ++i) *slots[i] = next(DType::F32, widths[i], b);
    ids_ = next(DType::I32, 1, b);
    pos_ring_ = next(DType::I32, 1, b);
    pos_full_ = next(DType::I32, 1, b);
    logits_ = next(DType::F32, hp_.n_vocab, n_logit_rows_);
    step_cache_.reserve(b);
    step_token_.reserve(b);
    host_i32_.reserve(b);
    out_rows_.reserve(b);
}

Activations DecoderModel::act(size_t n) const {
    CACTUS_ASSERT(n <= n_batch_);
    return {full_.x.rows_view(0, n),    full_.cur.rows_view(0, n),  full_.tmp.rows_view(0, n),
            full_.q.rows_view(0, n),    full_.k.rows_view(0, n),    full_.v.rows_view(0, n),
            full_.attn.rows_view(0, n), full_.gate.rows_view(0, n), full_.up.rows_view(0, n)};
}

const Tensor& DecoderModel::positions(const Step& step, size_t il) const {
    CACTUS_ASSERT(il < kv_layer_.size() && kv_layer_[il] < ring_layer_.size());
    return ring_layer_[kv_layer_[il]] ? step.pos_ring : step.pos_full;
}

size_t DecoderModel::n_past(int seq) const { return kv_cache(seq).n_past(); }

size_t DecoderModel::truncate(size_t n, int seq) { return kv_.at(static_cast<size_t>(seq))->truncate(n); }

size_t DecoderModel::reserve(size_t wanted, int seq) {
    return kv_.at(static_cast<size_t>(seq))->reserve(std::min(wanted, n_batch_));
}

size_t DecoderModel::kv_bytes() const {
    size_t total = 0;
    for (const auto& kv : kv_) total += kv->bytes();
    return total;
}

size_t DecoderModel::kv_compactions() const {
    size_t total = 0;
    for (const auto& kv : kv_) total += kv->compactions();
    return total;
}

size_t DecoderModel::context_room(int seq) const {
    if (info_.kv.compress.enabled) return std::numeric_limits<size_t>::max();
    return info_.n_ctx - std::min(info_.n_ctx, kv_cache(seq).n_past());
}

void DecoderModel::check_batch(const Batch& b) const {
    CACTUS_ASSERT(!kv_.empty() && !output_.empty());
    if (b.n == 0) fail("Model::decode: no tokens");
    if (b.n > n_batch_) fail("Model::decode: %zu tokens exceed the step of %zu (n_batch)", b.n, n_batch_);
    if (!b.tokens && !b.embd) fail("Model::decode: the batch has neither tokens nor embeddings");
    for (size_t i = 0; i < b.n; ++i) {
        checked_seq(b, i, info_.n_seq);
        const bool from_embd = !b.tokens || b.tokens[i] < 0;
        if (from_embd && !b.embd) fail("Model::decode: token %zu asks for an embedding row but embd is null", i);
        if (!from_embd && static_cast<size_t>(b.tokens[i]) >= hp_.n_vocab) {
            fail("Model::forward: token id %d is outside the vocabulary of %zu", b.tokens[i], hp_.n_vocab);
        }
    }
}

void DecoderModel::decode(const Batch& b, std::vector<float>* logits) {
    run_step(b, logits != nullptr);
    if (!logits) return;
    logits->assign(out_rows_.size() * (head_hidden_ ? hp_.n_embd : hp_.n_vocab), 0.0f);
    if (!out_rows_.empty()) output_head(logits);
}

void DecoderModel::decode_top(const Batch& b, size_t k, std::vector<TopCandidates>* out, const TopBans* bans) {
    if (k < 1 || k > kTopKMax || k > hp_.n_vocab)
        fail("Model::decode_top: k = %zu must be in [1, %zu] and at most n_vocab = %zu", k, kTopKMax, hp_.n_vocab);
    run_step(b, true);
    if (bans != nullptr && !bans->rows.empty() && bans->rows.size() != out_rows_.size())
        fail("Model::decode_top: %zu ban flags for %zu marked tokens", bans->rows.size(), out_rows_.size());
    out->clear();
    if (!out_rows_.empty()) top_head(k, out, bans);
}

void DecoderModel::last_logits(std::vector<float>* logits) {
    if (logits_rows_ == 0)
        fail("Model::last_logits: the last step was not a decode_top() step of 1 to %zu marked tokens", n_logit_rows_);
    logits->resize(logits_rows_ * hp_.n_vocab);
    backend_->download(logits->data(), logits_.rows_view(0, logits_rows_), logits->size() * sizeof(float));
}

void DecoderModel::run_step(const Batch& b, bool outputs) {
    logits_rows_ = 0;
    check_batch(b);
    // Room and positions are checked for every sequence before any cache changes.
    std::vector<size_t> count(info_.n_seq, 0);
    for (size_t i = 0; i < b.n; ++i) ++count[checked_seq(b, i, info_.n_seq)];
    for (size_t s = 0; s < info_.n_seq; ++s) {
        if (count[s] == 0) continue;
        const size_t room = kv_[s]->reserve(count[s]);
        if (room < count[s]) {
            fail(
                "Model::decode: sequence %zu has %zu tokens in this step but its cache takes %zu now; split the "
                "batch",
                s, count[s], room);
        }
    }
    std::vector<size_t> next(info_.n_seq);
    for (size_t s = 0; s < info_.n_seq; ++s) next[s] = kv_[s]->n_past();
    for (size_t i = 0; i < b.n && b.pos; ++i) {
        const size_t s = checked_seq(b, i, info_.n_seq);
        if (b.pos[i] < 0 || static_cast<size_t>(b.pos[i]) != next[s]) {
            fail("Model::decode: token %zu of sequence %zu has position %d; the sequence continues at %zu", i, s,
                 b.pos[i], next[s]);
        }
        ++next[s];
    }
    // Commit: claim the rows, then run the step.
    for (size_t s = 0; s < info_.n_seq; ++s) next[s] = count[s] ? kv_[s]->append(count[s]) : 0;
    step_cache_.clear();
    step_token_.clear();
    for (size_t i = 0; i < b.n; ++i) {
        const size_t s = checked_seq(b, i, info_.n_seq);
        step_cache_.push_back(kv_[s].get());
        step_token_.push_back(next[s]++);
    }
    Step step;
    step.n = b.n;
    step.kv = KvTokens{b.n, step_cache_.data(), step_token_.data(), b.group ? span_ends(b) : nullptr};
    step.tokens = ids_.rows_view(0, b.n);
    output_rows(b);
    if (!outputs) out_rows_.clear();
    embed(b, act(b.n).x);
    tap("embd", -1, act(b.n).x);
    upload_positions(step);
    begin_step(step);
    for (size_t il = 0; il < layers_.size() && step.n > 0; ++il) {
        forward_layer(step, il);
        tap("layer_out", static_cast<int>(il), act(step.n).x);
        if (il == last_state_writer_ && il + 1 < layers_.size() && !recording()) narrow_to_outputs(step);
    }
}

void DecoderModel::decode_hidden(const Batch& batch, std::vector<float>* hidden) {
    struct HeadMode {
        bool& flag;
        ~HeadMode() { flag = false; }
    } restore{head_hidden_};
    head_hidden_ = true;
    decode(batch, hidden);
}

const size_t* DecoderModel::span_ends(const Batch& b) {
    // Each run of adjacent rows with one group id >= 0 and one sequence sees up to its last row.
    step_last_.assign(step_token_.begin(), step_token_.end());
    for (size_t i = 0; i < b.n;) {
        size_t j = i + 1;
        if (b.group[i] >= 0)
            while (j < b.n && b.group[j] == b.group[i] && step_cache_[j] == step_cache_[i]) ++j;
        for (size_t k = i; k < j; ++k) step_last_[k] = step_token_[j - 1];
        i = j;
    }
    return step_last_.data();
}

void DecoderModel::embed(const Batch& b, const Tensor& x) {
    // Token rows through the embedding table, media rows copied as they are, run by run.
    host_i32_.assign(b.n, 0);
    for (size_t i = 0; i < b.n; ++i) host_i32_[i] = b.tokens && b.tokens[i] >= 0 ? b.tokens[i] : 0;
    backend_->upload(ids_.rows_view(0, b.n), host_i32_.data(), b.n * sizeof(int32_t));
    for (size_t begin = 0; begin < b.n;) {
        const bool media = !b.tokens || b.tokens[begin] < 0;
        size_t end = begin + 1;
        while (end < b.n && (!b.tokens || b.tokens[end] < 0) == media) ++end;
        const Tensor rows = x.rows_view(begin, end - begin);
        if (media) {
            backend_->upload(rows, b.embd + begin * hp_.n_embd, (end - begin) * hp_.n_embd * sizeof(float));
        } else {
            backend_->get_rows(rows, token_embd_, ids_.rows_view(begin, end - begin), embedding_scale());
        }
        begin = end;
    }
}

void DecoderModel::upload_positions(Step& step) {
    // Positions depend on the layer only through its layout: sliding rings see the token index,
    // global layers the index minus the rows compaction dropped (per sequence).
    const auto first = [&](bool ring) {
        const auto it = std::find(ring_layer_.begin(), ring_layer_.end(), ring);
        return it == ring_layer_.end() ? ring_layer_.size() : static_cast<size_t>(it - ring_layer_.begin());
    };
    const size_t ring_il = first(true);
    const size_t full_il = first(false);
    step.pos_ring = pos_ring_.rows_view(0, step.n);
    step.pos_full = pos_full_.rows_view(0, step.n);
    for (const auto& [il, dst] : {std::pair<size_t, Tensor>{ring_il, step.pos_ring}, {full_il, step.pos_full}}) {
        if (il == ring_layer_.size()) continue;
        host_i32_.resize(step.n);
        for (size_t t = 0; t < step.n; ++t) host_i32_[t] = step_cache_[t]->position(il, step_token_[t]);
        backend_->upload(dst, host_i32_.data(), step.n * sizeof(int32_t));
    }
}

void DecoderModel::output_rows(const Batch& b) {
    // Rows whose logits are wanted: marked ones, or the last token of each sequence.
    out_rows_.clear();
    for (size_t i = 0; i < b.n; ++i) {
        bool wanted = false;
        if (b.logits) {
            wanted = b.logits[i] != 0;
        } else {
            wanted = true;
            for (size_t j = i + 1; j < b.n && wanted; ++j) wanted = (b.seq ? b.seq[j] : 0) != (b.seq ? b.seq[i] : 0);
        }
        if (wanted) out_rows_.push_back(static_cast<int32_t>(i));
    }
}

void DecoderModel::narrow_to_outputs(Step& step) {
    const size_t m = out_rows_.size();
    if (m == step.n) return;  // every row is an output row (out_rows_ ascend, so they are 0..n-1)
    const Activations a = act(step.n);
    const Tensor ids = ids_.rows_view(0, m);
    if (m > 0) {
        // x rows out_rows_ -> rows 0..m-1, through cur (a gather may not write its own table).
        backend_->upload(ids, out_rows_.data(), m * sizeof(int32_t));
        backend_->get_rows(a.cur.rows_view(0, m), a.x, ids, 1.0f);
        backend_->scale(a.x.rows_view(0, m), a.cur.rows_view(0, m), 1.0f);
    }
    source_rows_.assign(out_rows_.begin(), out_rows_.end());
    for (size_t i = 0; i < m; ++i) {
        const size_t src = static_cast<size_t>(source_rows_[i]);
        step_cache_[i] = step_cache_[src];
        step_token_[i] = step_token_[src];
        if (step.kv.last) step_last_[i] = step_last_[src];
        out_rows_[i] = static_cast<int32_t>(i);
    }
    step.n = m;
    step.kv.n = m;
    step.tokens = Tensor();
    if (m == 0) return;
    upload_positions(step);
    narrowed_rows(step, source_rows_);
}

Tensor DecoderModel::head_rows(size_t done, size_t m) {
    const Activations a = act(static_cast<size_t>(out_rows_.back()) + 1);
    const Tensor ids = ids_.rows_view(0, m);
    const Tensor gathered = full_.cur.rows_view(0, m);  // [m, n_embd]
    const Tensor out = logits_.rows_view(0, m);         // [m, n_vocab]
    backend_->upload(ids, out_rows_.data() + done, m * sizeof(int32_t));
    backend_->get_rows(gathered, a.x, ids, 1.0f);
    nn_.rms_norm(gathered, gathered, output_norm_, hp_.rms_eps);
    tap("result_norm", -1, gathered);
    if (head_hidden_) return gathered;
    nn_.linear(out, output_, gathered);
    if (hp_.final_logit_softcap > 0.0f) backend_->softcap(out, out, hp_.final_logit_softcap);
    tap("logits", -1, out);
    return out;
}

void DecoderModel::output_head(std::vector<float>* logits) {
    const size_t width = head_hidden_ ? hp_.n_embd : hp_.n_vocab;
    for (size_t done = 0; done < out_rows_.size(); done += n_logit_rows_) {
        const size_t m = std::min(n_logit_rows_, out_rows_.size() - done);
        const Tensor rows = head_rows(done, m);  // [m, width]
        backend_->download(logits->data() + done * width, rows, m * width * sizeof(float));
    }
}

void DecoderModel::ban_logits(const Tensor& logits, size_t done, size_t m, const TopBans& bans) {
    const std::vector<int32_t>& ids = *bans.ids;
    const size_t n_vocab = hp_.n_vocab;
    // Every row gets its entries (-1 where it bans none), so a repeated step keeps its shape (graphs).
    ban_host_.assign(m * ids.size(), -1);
    bool any = false;
    for (size_t r = 0; r < m; ++r) {
        if (!bans.rows.empty() && bans.rows[done + r] == 0) continue;
        for (size_t j = 0; j < ids.size(); ++j) {
            if (ids[j] < 0 || static_cast<size_t>(ids[j]) >= n_vocab) continue;
            ban_host_[r * ids.size() + j] = static_cast<int32_t>(r * n_vocab + static_cast<size_t>(ids[j]));
            any = true;
        }
    }
    if (!any) return;
    const size_t n = ban_host_.size();
    const auto minus_inf = [&](size_t count) {  // [count, 1], after the ids' room
        return make_tensor(ban_buffer_.get(), ban_capacity_ * sizeof(int32_t), DType::F32, 1, count);
    };
    if (n > ban_capacity_) {  // the -inf values are written once per buffer
        ban_buffer_ = backend_->alloc(n * (sizeof(int32_t) + sizeof(float)));
        ban_capacity_ = n;
        const std::vector<float> values(n, -INFINITY);
        backend_->upload(minus_inf(n), values.data(), n * sizeof(float));
    }
    const Tensor where = make_tensor(ban_buffer_.get(), 0, DType::I32, n, 1);  // [n]
    backend_->upload(where, ban_host_.data(), n * sizeof(int32_t));
    backend_->set_rows(logits.reshaped(1, m * n_vocab), minus_inf(n), where);  // one-float rows
}

void DecoderModel::top_head(size_t k, std::vector<TopCandidates>* out, const TopBans* bans) {
    if (!top_buffer_) top_buffer_ = backend_->alloc(n_logit_rows_ * (2 * kTopKMax + 2) * sizeof(float));
    const bool banning = bans != nullptr && bans->ids != nullptr && !bans->ids->empty();
    out->resize(out_rows_.size());
    for (size_t done = 0; done < out_rows_.size(); done += n_logit_rows_) {
        const size_t m = std::min(n_logit_rows_, out_rows_.size() - done);
        const Tensor logits = head_rows(done, m);  // [m, n_vocab]
        if (banning) ban_logits(logits, done, m, *bans);
        const size_t n_ids = m * k;
        const Tensor ids = make_tensor(top_buffer_.get(), 0, DType::I32, k, m);                            // [m, k]
        const Tensor vals = make_tensor(top_buffer_.get(), n_ids * sizeof(float), DType::F32, k, m);       // [m, k]
        const Tensor stats = make_tensor(top_buffer_.get(), 2 * n_ids * sizeof(float), DType::F32, 2, m);  // [m, 2]
        backend_->top_k(ids, vals, stats, logits, k);
        top_host_.resize(2 * n_ids + 2 * m);
        const Tensor packed = make_tensor(top_buffer_.get(), 0, DType::F32, top_host_.size(), 1);
        backend_->download(top_host_.data(), packed, top_host_.size() * sizeof(float));
        for (size_t r = 0; r < m; ++r) {
            TopCandidates& c = (*out)[done + r];
            c.ids.resize(k);
            c.logits.resize(k);
            std::memcpy(c.ids.data(), top_host_.data() + r * k, k * sizeof(int32_t));
            std::memcpy(c.logits.data(), top_host_.data() + n_ids + r * k, k * sizeof(float));
            c.max_logit = top_host_[2 * n_ids + 2 * r];
            c.sum_exp = static_cast<double>(top_host_[2 * n_ids + 2 * r + 1]);
            c.n_vocab = hp_.n_vocab;
            const bool banned = banning && (bans->rows.empty() || bans->rows[done + r] != 0);
            c.banned = banned ? bans->ids : nullptr;
        }
    }
    // The logits of a single head pass are still in logits_.
    logits_rows_ = out_rows_.size() <= n_logit_rows_ ? out_rows_.size() : 0;
}

}  // namespace cactus
