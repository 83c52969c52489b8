// BERT encoder over the backend (see bert.h): the layout llama.cpp's converter writes for
// architecture "bert" (scripts/convert_minilm.py writes the same). Post-norm blocks:
//   x = LN(tok_embd[id] + pos_embd[p] + type_embd[0])
//   x = LN(x + attn_output(attention(q(x), k(x), v(x))))     bidirectional, per sequence
//   x = LN(x + ffn_down(gelu_erf(ffn_up(x))))
// Sequences are packed row after row: the products run over all rows of a forward at once, the
// attention over each sequence's own rows. Checked against the numpy oracle scripts/minilm_oracle.py
// by tests/models/test_bert_minilm.cpp.
#include "models/bert.h"

#include <algorithm>
#include <cmath>

#include "backends/backend.h"
#include "core/error.h"
#include "models/pooling.h"
#include "gguf/gguf.h"
#include "models/blocks.h"
#include "models/model.h"
#include "models/weights.h"

namespace cactus {

namespace {

constexpr size_t kMaxLayers = 256;
constexpr size_t kMaxEmbd = 16384;
constexpr size_t kMaxPositions = 1 << 16;

struct BertLayer {
    Tensor wq, wk, wv, wo;            // [n_embd, n_embd]
    Tensor bq, bk, bv, bo;            // [n_embd]
    Tensor attn_norm_w, attn_norm_b;  // [n_embd] (attn_output_norm)
    Tensor up, up_b;                  // [n_ff, n_embd], [n_ff]
    Tensor down, down_b;              // [n_embd, n_ff], [n_embd]
    Tensor out_norm_w, out_norm_b;    // [n_embd] (layer_output_norm)
};

BertHparams read_hparams(const GgufFile& f) {
    const std::string arch = f.get_string("general.architecture", "");
    if (arch != "bert") fail("load bert: %s is a '%s' model, not bert", f.path().c_str(), arch.c_str());
    BertHparams hp;
    hp.n_embd = f.get_uint("bert.embedding_length");
    hp.n_head = f.get_uint("bert.attention.head_count");
    hp.n_layer = f.get_uint("bert.block_count");
    hp.n_ff = f.get_uint("bert.feed_forward_length");
    hp.n_positions = f.get_uint("bert.context_length");
    hp.ln_eps = static_cast<float>(f.get_float("bert.attention.layer_norm_epsilon", 1e-12));
    const GgufTensor* embd = f.find_tensor("token_embd.weight");
    if (!embd || embd->dims.size() != 2) fail("load bert: tensor token_embd.weight is missing or not 2-D");
    hp.n_vocab = embd->dims[1];
    const GgufTensor* types = f.find_tensor("token_types.weight");
    if (types && types->dims.size() == 2) hp.n_token_types = types->dims[1];
    if (hp.n_head == 0 || hp.n_embd == 0 || hp.n_embd % hp.n_head != 0 || hp.n_embd > kMaxEmbd || hp.n_layer == 0 ||
        hp.n_layer > kMaxLayers || hp.n_ff == 0 || hp.n_ff > 8 * kMaxEmbd || hp.n_positions == 0 ||
        hp.n_positions > kMaxPositions || !(hp.ln_eps > 0.0f && hp.ln_eps < 1.0f)) {
        fail(
            "load bert: implausible hyper-parameters (n_embd %zu, n_head %zu, n_layer %zu, n_ff %zu, n_positions %zu, "
            "eps %g)",
            hp.n_embd, hp.n_head, hp.n_layer, hp.n_ff, hp.n_positions, double(hp.ln_eps));
    }
    if (f.get_bool("bert.attention.causal", false))
        fail("load bert: bert.attention.causal is true; BERT is bidirectional");
    return hp;
}

Pooling read_pooling(const GgufFile& f) {
    const uint64_t type = f.get_uint("bert.pooling_type", 1);
    const std::optional<Pooling> pooling = pooling_from_type(type);
    if (!pooling)
        fail("load bert: bert.pooling_type %llu is not supported (0 none, 1 mean, 2 cls, 3 last)",
             static_cast<unsigned long long>(type));
    return *pooling;
}

class BertModelImpl final : public BertModel {
public:
    BertModelImpl(const GgufFile& file, const ModelOptions& options)
        : file_(file),
          hp_(read_hparams(file)),
          pooling_(read_pooling(file)),
          backend_(make_backend(backend_options(options))),
          blocks_(*backend_) {
        if (options.n_batch == 0) fail("load bert: n_batch is 0");
        n_batch_ = options.n_batch;
        load_weights();
        alloc_activations(std::max(n_batch_, hp_.n_positions));
    }

    const BertHparams& hparams() const override { return hp_; }
    Pooling pooling() const override { return pooling_; }

    void encode(const std::vector<std::vector<int32_t>>& seqs, std::vector<std::vector<float>>* out) override {
        if (out == nullptr) fail("bert encode: no output vector");
        for (size_t i = 0; i < seqs.size(); ++i) {
            const std::vector<int32_t>& s = seqs[i];
            if (s.empty()) fail("bert encode: sequence %zu is empty", i);
            if (s.size() > hp_.n_positions)
                fail("bert encode: sequence %zu has %zu tokens, the model takes at most %zu", i, s.size(),
                     hp_.n_positions);
            for (size_t t = 0; t < s.size(); ++t) {
                if (s[t] < 0 || static_cast<size_t>(s[t]) >= hp_.n_vocab)
                    fail("bert encode: sequence %zu token %zu is id %d, outside the vocabulary of %zu", i, t, s[t],
                         hp_.n_vocab);
            }
        }
        out->assign(seqs.size(), {});
        // Forwards of whole sequences, at most capacity_ rows each, but never fewer than one sequence.
        size_t first = 0;
        while (first < seqs.size()) {
            size_t last = first, rows = 0;
            while (last < seqs.size() && (last == first || rows + seqs[last].size() <= n_batch_)) {
                rows += seqs[last].size();
                ++last;
            }
            forward(seqs, first, last, rows, out);
            first = last;
        }
    }

private:
    static BackendOptions backend_options(const ModelOptions& o) {
        BackendOptions b;
        b.device = o.device;
        b.n_threads = o.n_threads;
        b.gpu_timeout_ms = o.gpu_timeout_ms;
        return b;
    }

    void load_weights() {
        weights_ = std::make_unique<WeightLoader>(file_, *backend_);
        WeightLoader& w = *weights_;
        const size_t d = hp_.n_embd, ff = hp_.n_ff;
        token_embd_ = w.table("token_embd.weight", d, hp_.n_vocab);
        pos_embd_ = w.f32_rows("position_embd.weight", d, hp_.n_positions);  // added per sequence
        if (hp_.n_token_types > 0) type_embd_ = w.f32_rows("token_types.weight", d, hp_.n_token_types);
        embd_norm_w_ = w.vector("token_embd_norm.weight", d);
        embd_norm_b_ = w.vector("token_embd_norm.bias", d);
        layers_.resize(hp_.n_layer);
        for (size_t il = 0; il < hp_.n_layer; ++il) {
            BertLayer& l = layers_[il];
            auto name = [&](const char* s) { return layer_tensor(il, s); };
            l.wq = w.matrix(name("attn_q.weight"), d, d);
            l.wk = w.matrix(name("attn_k.weight"), d, d);
            l.wv = w.matrix(name("attn_v.weight"), d, d);
            l.wo = w.matrix(name("attn_output.weight"), d, d);
            l.bq = w.vector(name("attn_q.bias"), d);
            l.bk = w.vector(name("attn_k.bias"), d);
            l.bv = w.vector(name("attn_v.bias"), d);
            l.bo = w.vector(name("attn_output.bias"), d);
            l.attn_norm_w = w.vector(name("attn_output_norm.weight"), d);
            l.attn_norm_b = w.vector(name("attn_output_norm.bias"), d);
            l.up = w.matrix(name("ffn_up.weight"), d, ff);
            l.up_b = w.vector(name("ffn_up.bias"), ff);
            l.down = w.matrix(name("ffn_down.weight"), ff, d);
            l.down_b = w.vector(name("ffn_down.bias"), d);
            l.out_norm_w = w.vector(name("layer_output_norm.weight"), d);
            l.out_norm_b = w.vector(name("layer_output_norm.bias"), d);
        }
    }

    Tensor alloc(size_t width, size_t rows, DType type = DType::F32) {
        buffers_.push_back(backend_->alloc(dtype_row_bytes(type, width) * rows));
        return make_tensor(buffers_.back().get(), 0, type, width, rows);
    }

    // Activations for `rows` packed rows: max(n_batch, n_positions), so one sequence of any
    // allowed length fits a forward.
    void alloc_activations(size_t rows) {
        capacity_ = rows;
        const size_t d = hp_.n_embd;
        ids_ = alloc(rows, 1, DType::I32);
        x_ = alloc(d, rows);  // [rows, d] the residual stream
        h_ = alloc(d, rows);
        q_ = alloc(d, rows);
        k_ = alloc(d, rows);
        v_ = alloc(d, rows);
        a_ = alloc(d, rows);
        f_ = alloc(hp_.n_ff, rows);  // [rows, n_ff]
    }

    // Sequences [first, last) of seqs, `rows` tokens in all, in one forward.
    void forward(const std::vector<std::vector<int32_t>>& seqs, size_t first, size_t last, size_t rows,
                 std::vector<std::vector<float>>* out) {
        CACTUS_ASSERT(rows > 0 && rows <= capacity_);
        Backend& be = *backend_;
        const size_t d = hp_.n_embd;
        std::vector<int32_t> ids;
        std::vector<size_t> start;  // first row of each sequence
        ids.reserve(rows);
        for (size_t i = first; i < last; ++i) {
            start.push_back(ids.size());
            ids.insert(ids.end(), seqs[i].begin(), seqs[i].end());
        }
        const Tensor id_rows = make_tensor(ids_.buffer, ids_.offset, DType::I32, rows, 1);
        be.upload(id_rows, ids.data(), rows * sizeof(int32_t));
        const Tensor x = x_.rows_view(0, rows), h = h_.rows_view(0, rows);
        const Tensor q = q_.rows_view(0, rows), k = k_.rows_view(0, rows), v = v_.rows_view(0, rows);
        const Tensor a = a_.rows_view(0, rows), f = f_.rows_view(0, rows);

        be.get_rows(x, token_embd_, id_rows, 1.0f);  // [rows, d]
        for (size_t s = 0; s < start.size(); ++s) {  // positions restart at 0 in each sequence
            const size_t n = seqs[first + s].size();
            const Tensor xs = x.rows_view(start[s], n);
            be.add(xs, xs, pos_embd_.rows_view(0, n));
        }
        if (!type_embd_.empty()) be.add(x, x, type_embd_.rows_view(0, 1));  // token type 0 everywhere
        blocks_.layer_norm(x, x, embd_norm_w_, embd_norm_b_, hp_.ln_eps);

        DenseAttention shape;
        shape.n_head = shape.n_head_kv = hp_.n_head;
        shape.head_dim = shape.head_dim_v = d / hp_.n_head;
        shape.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
        for (const BertLayer& l : layers_) {
            blocks_.encoder_linear(q, l.wq, x, l.bq);
            blocks_.encoder_linear(k, l.wk, x, l.bk);
            blocks_.encoder_linear(v, l.wv, x, l.bv);
            for (size_t s = 0; s < start.size(); ++s) {  // each sequence sees only itself
                const size_t r = start[s], n = seqs[first + s].size();
                be.attention_dense(a.rows_view(r, n), q.rows_view(r, n), k.rows_view(r, n), v.rows_view(r, n), Tensor(),
                                   shape);
            }
            blocks_.encoder_linear(h, l.wo, a, l.bo);
            blocks_.residual(x, h);
            blocks_.layer_norm(x, x, l.attn_norm_w, l.attn_norm_b, hp_.ln_eps);
            blocks_.encoder_linear(f, l.up, x, l.up_b);  // [rows, n_ff]
            be.gelu(f, f, Activation::GELU_ERF);
            blocks_.encoder_linear(h, l.down, f, l.down_b);
            blocks_.residual(x, h);
            blocks_.layer_norm(x, x, l.out_norm_w, l.out_norm_b, hp_.ln_eps);
        }
        for (size_t s = 0; s < start.size(); ++s) {
            const size_t n = seqs[first + s].size();
            std::vector<float>& o = (*out)[first + s];
            o.resize(n * d);
            be.download(o.data(), x.rows_view(start[s], n), n * d * sizeof(float));
        }
    }

    const GgufFile& file_;
    BertHparams hp_;
    Pooling pooling_;
    std::unique_ptr<Backend> backend_;
    Blocks blocks_;
    std::unique_ptr<WeightLoader> weights_;
    size_t n_batch_ = 0;
    size_t capacity_ = 0;

    Tensor token_embd_;                 // [n_vocab, d]
    Tensor pos_embd_;                   // [n_positions, d] F32
    Tensor type_embd_;                  // [n_token_types, d] F32 (empty: none)
    Tensor embd_norm_w_, embd_norm_b_;  // [d]
    std::vector<BertLayer> layers_;

    std::vector<std::unique_ptr<Buffer>> buffers_;
    Tensor ids_;                    // [capacity] I32
    Tensor x_, h_, q_, k_, v_, a_;  // [capacity, d]
    Tensor f_;                      // [capacity, n_ff]
};

}  // namespace

std::unique_ptr<BertModel> BertModel::load(const GgufFile& file, const ModelOptions& options) {
    return std::make_unique<BertModelImpl>(file, options);
}

}  // namespace cactus
