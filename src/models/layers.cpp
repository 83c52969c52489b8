#include "models/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/ops_cpu.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "models/model_budget.h"
#include "ops/quant.h"

namespace cactus {

namespace {

constexpr size_t kMaxDim = size_t(1) << 20;  // sanity bound on any hyper-parameter
// Row-wise ops (norms, RoPE, GLU) use the thread pool from this many rows on (prefill); below it
// (decode) waking the workers costs more than the work.
constexpr size_t kMinParallelRows = 8;

size_t read_dim(const GgufFile& file, const std::string& key) {
    const uint64_t v = file.get_uint(key);
    if (v == 0 || v > kMaxDim) fail("read_hparams: %s = %llu is out of range", key.c_str(), (unsigned long long)v);
    return static_cast<size_t>(v);
}

size_t read_dim(const GgufFile& file, const std::string& key, size_t fallback) {
    return file.has(key) ? read_dim(file, key) : fallback;
}

std::string shape_string(const std::vector<uint64_t>& dims) {
    std::string s = "{";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "}";
}

const GgufTensor& require_tensor(const GgufFile& file, const std::string& name,
                                 const std::vector<uint64_t>& dims) {
    const GgufTensor* t = file.find_tensor(name);
    if (!t) fail("load model: tensor %s is missing", name.c_str());
    std::vector<uint64_t> actual = t->dims;
    while (actual.size() > dims.size() && actual.back() == 1) actual.pop_back();
    if (actual != dims) {
        fail("load model: tensor %s has shape %s, expected %s", name.c_str(),
             shape_string(t->dims).c_str(), shape_string(dims).c_str());
    }
    if (dims[0] % dtype_traits(t->type).block_size != 0) {
        fail("load model: tensor %s: row of %llu is not a multiple of %s blocks", name.c_str(),
             (unsigned long long)dims[0], dtype_name(t->type));
    }
    return *t;
}

void dequantize_row(DType type, float* dst, const void* src, size_t n) {
    if (type == DType::F32) {
        std::memcpy(dst, src, n * sizeof(float));
        return;
    }
    dequantize_row_cpu(type, dst, src, n);  // unknown type ids are errors (cpu_kernels.h)
}

}  // namespace

HParams read_hparams(const GgufFile& file, const std::string& arch) {
    HParams hp;
    hp.arch = arch;
    const std::string p = arch + ".";
    hp.n_layer = read_dim(file, p + "block_count");
    check_layer_count(file, hp.n_layer);  // model_budget.h: no per-layer allocation past the file
    hp.n_embd = read_dim(file, p + "embedding_length");
    hp.n_ff = read_dim(file, p + "feed_forward_length");
    hp.n_head = read_dim(file, p + "attention.head_count");
    hp.n_head_kv = read_dim(file, p + "attention.head_count_kv", hp.n_head);
    hp.head_dim_k = read_dim(file, p + "attention.key_length", hp.n_embd / hp.n_head);
    hp.head_dim_v = read_dim(file, p + "attention.value_length", hp.head_dim_k);
    hp.n_rot = read_dim(file, p + "rope.dimension_count", hp.head_dim_k);
    hp.n_ctx_train = read_dim(file, p + "context_length", 2048);
    hp.rms_eps = static_cast<float>(file.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
    hp.rope_base = static_cast<float>(file.get_float(p + "rope.freq_base", 10000.0));
    const std::string scaling = file.get_string(p + "rope.scaling.type", "none");
    if (scaling == "linear") {
        const double factor = file.get_float(p + "rope.scaling.factor", 1.0);
        if (!(factor > 0.0)) fail("read_hparams: %srope.scaling.factor %g must be > 0", p.c_str(), factor);
        hp.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (scaling != "none") {
        fail("read_hparams: rope scaling '%s' is not supported", scaling.c_str());
    }
    hp.sliding_window = static_cast<uint32_t>(std::min<uint64_t>(
        file.get_uint(p + "attention.sliding_window", 0), uint64_t(1) << 30));
    hp.final_logit_softcap = static_cast<float>(file.get_float(p + "final_logit_softcapping", 0.0));

    if (hp.n_head % hp.n_head_kv != 0) {
        fail("read_hparams: head_count %zu is not a multiple of head_count_kv %zu", hp.n_head, hp.n_head_kv);
    }
    if (hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim_k) {
        fail("read_hparams: rope.dimension_count %zu must be even and <= key_length %zu", hp.n_rot, hp.head_dim_k);
    }
    if (!(hp.rms_eps > 0.0f) || !(hp.rope_base > 0.0f) || hp.final_logit_softcap < 0.0f) {
        fail("read_hparams: bad epsilon %g, rope base %g or softcap %g", hp.rms_eps, hp.rope_base,
             hp.final_logit_softcap);
    }
    const GgufTensor* embd = file.find_tensor("token_embd.weight");
    if (!embd) fail("load model: tensor token_embd.weight is missing");
    if (embd->dims.size() != 2 || embd->dims[0] != hp.n_embd || embd->dims[1] == 0) {
        fail("load model: tensor token_embd.weight has shape %s, expected {%zu, n_vocab}",
             shape_string(embd->dims).c_str(), hp.n_embd);
    }
    hp.n_vocab = static_cast<size_t>(embd->dims[1]);
    return hp;
}

Matrix require_matrix(const GgufFile& file, const std::string& name, size_t n_in, size_t n_out) {
    const GgufTensor& t = require_tensor(file, name, {n_in, n_out});
    Matrix m;
    m.data = t.data;
    m.type = t.type;
    m.n_in = n_in;
    m.n_out = n_out;
    m.row_bytes = dtype_row_bytes(t.type, n_in);
    return m;
}

std::vector<float> require_vector(const GgufFile& file, const std::string& name, size_t n) {
    const GgufTensor& t = require_tensor(file, name, {n});
    std::vector<float> out(n);
    dequantize_row(t.type, out.data(), t.data, n);
    return out;
}

std::string layer_tensor(size_t il, const char* suffix) {
    return "blk." + std::to_string(il) + "." + suffix;
}

// ---- DecoderModel -------------------------------------------------------------------------------

DecoderModel::DecoderModel(const GgufFile& file, const ModelOptions& options, const HParams& hparams)
    : hp_(hparams), file_(file) {
    info_.architecture = hp_.arch;
    info_.name = file.get_string("general.name", "");
    info_.n_vocab = hp_.n_vocab;
    info_.n_embd = hp_.n_embd;
    info_.n_layer = hp_.n_layer;
    info_.n_head = hp_.n_head;
    info_.n_head_kv = hp_.n_head_kv;
    info_.n_ctx_train = hp_.n_ctx_train;
    info_.n_ctx = options.n_ctx ? options.n_ctx : std::min<size_t>(hp_.n_ctx_train, 8192);
    kv_request_ = options.kv;
    info_.kv = resolve_kv_options(options.kv, info_.n_ctx);
    if (options.n_batch == 0) fail("Model::load: n_batch must be > 0");
    n_batch_ = std::min(options.n_batch, info_.n_ctx);
    const int n_threads = options.n_threads > 0 ? options.n_threads : ThreadPool::default_threads();
    pool_ = std::make_unique<ThreadPool>(n_threads);

    const GgufTensor& embd = require_tensor(file, "token_embd.weight", {hp_.n_embd, hp_.n_vocab});
    token_embd_ = embd.data;
    token_embd_type_ = embd.type;
    token_embd_row_bytes_ = dtype_row_bytes(embd.type, hp_.n_embd);
    memory_budget_ = options.memory_budget;
    // Activations are allocated in init_cache(), once the architecture has checked every weight.
}

DecoderModel::~DecoderModel() = default;

void DecoderModel::init_cache(const std::vector<KvLayerSpec>& layers) {
    KvCacheConfig config;
    config.n_ctx = info_.n_ctx;
    config.max_chunk = n_batch_;
    config.kv = info_.kv;
    // Every weight is checked by now (the architecture calls this last), so the widths below are
    // backed by tensors in the file. Predict, check against the budget, then allocate.
    ActivationDims dims;
    dims.n_batch = n_batch_;
    dims.n_embd = hp_.n_embd;
    dims.q_width = hp_.n_head * hp_.head_dim_k;
    dims.k_width = hp_.n_head_kv * hp_.head_dim_k;
    dims.v_width = hp_.n_head_kv * hp_.head_dim_v;
    dims.attn_width = hp_.n_head * hp_.head_dim_v;
    dims.n_ff = hp_.n_ff;
    dims.n_vocab = hp_.n_vocab;
    dims.n_threads = static_cast<size_t>(pool_->size());
    dims.scratch_rows = info_.n_ctx + n_batch_;
    dims.head_group = hp_.n_head / hp_.n_head_kv;
    ModelMemoryPlan plan;
    plan.kv_bytes = KvCache::predict_bytes(layers, config);
    plan.activation_bytes = predict_activation_bytes(dims);
    check_memory_budget(plan, info_.n_ctx, hp_.n_ctx_train, memory_budget_);
    kv_ = std::make_unique<KvCache>(layers, config);
    const size_t b = n_batch_;
    x_.assign(b * hp_.n_embd, 0.0f);
    cur_.assign(b * hp_.n_embd, 0.0f);
    tmp_.assign(b * hp_.n_embd, 0.0f);
    q_.assign(b * dims.q_width, 0.0f);
    k_.assign(b * dims.k_width, 0.0f);
    v_.assign(b * dims.v_width, 0.0f);
    attn_.assign(b * dims.attn_width, 0.0f);
    gate_.assign(b * hp_.n_ff, 0.0f);
    up_.assign(b * hp_.n_ff, 0.0f);
    attn_ws_.assign(static_cast<size_t>(pool_->size()), AttentionWorkspace());
    for (AttentionWorkspace& ws : attn_ws_) ws.reserve(hp_.n_head / hp_.n_head_kv, kv_->max_capacity(), hp_.head_dim_k);
}

void DecoderModel::set_output(const Matrix& output, std::vector<float> output_norm) {
    output_ = output;
    output_norm_ = std::move(output_norm);
}

size_t DecoderModel::n_past() const { return kv_->n_past(); }
size_t DecoderModel::truncate(size_t n) { return kv_->truncate(n); }
size_t DecoderModel::kv_bytes() const { return kv_->bytes(); }
size_t DecoderModel::kv_compactions() const { return kv_->compactions(); }

size_t DecoderModel::context_room() const {
    if (info_.kv.compress.enabled) return std::numeric_limits<size_t>::max();
    return info_.n_ctx - std::min(info_.n_ctx, kv_->n_past());
}

void DecoderModel::embed(const int32_t* tokens, size_t n) {
    const float scale = embedding_scale();
    for (size_t t = 0; t < n; ++t) {
        if (tokens[t] < 0 || static_cast<size_t>(tokens[t]) >= hp_.n_vocab) {
            fail("Model::forward: token id %d is outside the vocabulary of %zu", tokens[t], hp_.n_vocab);
        }
        float* row = x_.data() + t * hp_.n_embd;
        const uint8_t* src = static_cast<const uint8_t*>(token_embd_) +
                             static_cast<size_t>(tokens[t]) * token_embd_row_bytes_;
        dequantize_row(token_embd_type_, row, src, hp_.n_embd);
        if (scale != 1.0f) {
            for (size_t i = 0; i < hp_.n_embd; ++i) row[i] *= scale;
        }
    }
}

void DecoderModel::forward(const int32_t* tokens, size_t n, std::vector<float>* logits,
                           std::vector<float>* all_logits) {
    CACTUS_ASSERT(kv_ && output_.data);
    if (n == 0) fail("Model::forward: no tokens");
    if (!tokens) fail("Model::forward: tokens is null");
    if (n > context_room()) {
        fail("Model::forward: %zu tokens after %zu exceed the context of %zu tokens (kv_compress is off)",
             n, kv_->n_past(), info_.n_ctx);
    }
    for (size_t t = 0; t < n; ++t) {
        if (tokens[t] < 0 || static_cast<size_t>(tokens[t]) >= hp_.n_vocab) {
            fail("Model::forward: token id %d is outside the vocabulary of %zu", tokens[t], hp_.n_vocab);
        }
    }
    if (all_logits) all_logits->assign(n * hp_.n_vocab, 0.0f);
    if (logits) logits->assign(hp_.n_vocab, 0.0f);
    for (size_t done = 0; done < n;) {
        // The cache may compact here and may take fewer tokens (sliding rings, compaction).
        const size_t chunk = kv_->reserve(std::min(n_batch_, n - done));
        const bool last = done + chunk == n;
        if (all_logits) {
            forward_chunk(tokens + done, chunk, all_logits->data() + done * hp_.n_vocab, true);
        } else {
            forward_chunk(tokens + done, chunk, last && logits ? logits->data() : nullptr, false);
        }
        done += chunk;
    }
    if (all_logits && logits) {
        std::copy(all_logits->end() - static_cast<std::ptrdiff_t>(hp_.n_vocab), all_logits->end(),
                  logits->begin());
    }
}

void DecoderModel::forward_chunk(const int32_t* tokens, size_t n, float* logits_out, bool all_rows) {
    embed(tokens, n);
    Batch batch;
    batch.n = n;
    batch.pos0 = kv_->append(n);
    forward_layers(batch);
    if (!logits_out) return;
    // Output head over the last row, or every row.
    const size_t first = all_rows ? 0 : n - 1;
    const size_t rows = n - first;
    build_norm(cur_.data(), x_.data() + first * hp_.n_embd, output_norm_, rows, hp_.n_embd);
    build_matmul(logits_out, output_, cur_.data(), rows);
    const float cap = hp_.final_logit_softcap;
    if (cap > 0.0f) {
        for (size_t i = 0; i < rows * hp_.n_vocab; ++i) logits_out[i] = cap * std::tanh(logits_out[i] / cap);
    }
}

void DecoderModel::build_norm(float* y, const float* x, const std::vector<float>& w, size_t n_rows,
                              size_t width) const {
    CACTUS_ASSERT(w.size() == width);
    if (n_rows < kMinParallelRows) {
        rms_norm_rows(y, x, w.data(), n_rows, width, hp_.rms_eps);
        return;
    }
    pool_->parallel_for(n_rows, [&](size_t begin, size_t end) {
        rms_norm_rows(y + begin * width, x + begin * width, w.data(), end - begin, width, hp_.rms_eps);
    });
}

void DecoderModel::build_matmul(float* y, const Matrix& w, const float* x, size_t n) const {
    matmul(y, w.data, w.type, w.row_bytes, x, n, w.n_in, w.n_out, *pool_);
}

void DecoderModel::build_rope(size_t il, const Batch& batch, const RopeParams& params) {
    const size_t q_width = hp_.n_head * hp_.head_dim_k;
    const size_t k_width = hp_.n_head_kv * hp_.head_dim_k;
    // A batch's positions are consecutive (one per token); the table holds exactly those.
    const int32_t lo = kv_->position(il, batch.pos0);
    const int32_t hi = kv_->position(il, batch.pos0 + batch.n - 1);
    CACTUS_ASSERT(hi >= lo && static_cast<size_t>(hi - lo) + 1 == batch.n);
    const float* angles = rope_angles_.table(params, lo, hi, *pool_);  // [hi - lo + 1, n_rot]
    auto rotate = [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) {
            const float* cos_sin = angles + static_cast<size_t>(kv_->position(il, batch.pos0 + t) - lo) * params.n_rot;
            rope_rotate(q_.data() + t * q_width, hp_.n_head, hp_.head_dim_k, cos_sin, params);
            rope_rotate(k_.data() + t * k_width, hp_.n_head_kv, hp_.head_dim_k, cos_sin, params);
        }
    };
    if (batch.n < kMinParallelRows) {
        rotate(0, batch.n);
    } else {
        pool_->parallel_for(batch.n, rotate);
    }
}

void DecoderModel::store_kv(size_t il, const Batch& batch) {
    const size_t k_width = hp_.n_head_kv * hp_.head_dim_k;
    const size_t v_width = hp_.n_head_kv * hp_.head_dim_v;
    for (size_t t = 0; t < batch.n; ++t) {
        const size_t row = kv_->row_of(il, batch.pos0 + t);
        kv_->write_row(il, row, k_.data() + t * k_width, v_.data() + t * v_width);
    }
}

void DecoderModel::build_attention(size_t il, const Batch& batch, float scale) {
    // Work items: (token, KV head) with the group's query heads together; with too few of those to
    // keep every thread busy (decode), (token, head). Either way each head's output is the same.
    const size_t group = hp_.n_head / hp_.n_head_kv;
    const bool whole_groups = batch.n * hp_.n_head_kv >= 2 * static_cast<size_t>(pool_->size());
    const size_t n_q = whole_groups ? group : 1;
    const size_t n_items = batch.n * hp_.n_head / n_q;
    pool_->run([&](int index, int count) {
        const size_t per = (n_items + static_cast<size_t>(count) - 1) / static_cast<size_t>(count);
        const size_t begin = std::min(n_items, per * static_cast<size_t>(index));
        const size_t end = std::min(n_items, begin + per);
        AttentionWorkspace& ws = attn_ws_[static_cast<size_t>(index)];
        for (size_t item = begin; item < end; ++item) {
            const size_t t = item / (hp_.n_head / n_q);
            const size_t h = item % (hp_.n_head / n_q) * n_q;  // first query head of the item
            attend_heads(il, batch.pos0 + t, t * hp_.n_head + h, n_q, scale, ws);
        }
    });
}

// Query heads [head, head + n_q) of the batch (flat index t * n_head + h; one KV head) at `token`.
void DecoderModel::attend_heads(size_t il, size_t token, size_t head, size_t n_q, float scale,
                                AttentionWorkspace& ws) {
    const size_t dk = hp_.head_dim_k;
    const size_t dv = hp_.head_dim_v;
    const size_t kvh = head % hp_.n_head / (hp_.n_head / hp_.n_head_kv);
    const KvLayerSpec& spec = kv_->spec(il);
    const KvCache& kv = *kv_;
    const RowRange rows = kv.rows_for_query(il, token);  // physical bounds
    CACTUS_ASSERT(rows.begin <= rows.end && rows.end <= kv.capacity(il));
    const AttentionQueries q = {q_.data() + head * dk, dk, attn_.data() + head * dv, dv, n_q};
    const AttentionShape shape = {kv.row_positions(il) + rows.begin, rows.end - rows.begin, dk, dv, scale,
                                  kv.mask_for(il, token)};
    if (kv.type() == KvType::F16) {
        const KvRowsF16 k = {kv.k16(il, rows.begin) + kvh * dk, spec.k_width, kv.v16(il, rows.begin) + kvh * dv,
                             spec.v_width};
        attention_group(q, k, shape, ws);
        return;
    }
    const size_t gph_k = (dk + kKvGroup - 1) / kKvGroup;  // int8 scale groups per head
    const size_t gph_v = (dv + kKvGroup - 1) / kKvGroup;
    const KvRowsQ8 k = {kv.k8(il, rows.begin) + kvh * dk, spec.k_width,
                        kv.k_scales(il, rows.begin) + kvh * gph_k, kv.k_scale_stride(il),
                        kv.v8(il, rows.begin) + kvh * dv, spec.v_width,
                        kv.v_scales(il, rows.begin) + kvh * gph_v, kv.v_scale_stride(il)};
    attention_group(q, k, shape, ws);
}

void DecoderModel::build_ffn(float* y, const float* x, size_t n, const Matrix& gate, const Matrix& up,
                             const Matrix& down, Activation act) {
    build_matmul(gate_.data(), gate, x, n);
    build_matmul(up_.data(), up, x, n);
    auto activate = [&](size_t begin, size_t end) {  // token rows [begin, end)
        float* g = gate_.data() + begin * hp_.n_ff;
        const float* u = up_.data() + begin * hp_.n_ff;
        const size_t width = (end - begin) * hp_.n_ff;
        if (act == Activation::SILU) {
            swiglu(g, g, u, width);
        } else {
            geglu(g, g, u, width);
        }
    };
    if (n < kMinParallelRows) {
        activate(0, n);
    } else {
        pool_->parallel_for(n, activate);
    }
    build_matmul(y, down, gate_.data(), n);
}

void DecoderModel::add_residual(float* x, const float* y, size_t n_rows, size_t width) const {
    add_scaled(x, y, 1.0f, n_rows * width);
}

}  // namespace cactus
