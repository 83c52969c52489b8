#pragma once
// The building blocks of transformer forward passes, over a backend: what decoders (src/models/*.cpp)
// and encoders (vision, audio) compose so a forward pass reads like the paper. Blocks hold no state
// but the backend; tensors are the caller's (activations allocated once, weights placed at load).
// Every block is a few backend ops, so it runs on any backend.
#include <initializer_list>

#include "backends/backend.h"
#include "core/error.h"

namespace cactus {

class Blocks {
public:
    explicit Blocks(Backend& backend) : be_(backend) {}
    Backend& backend() const { return be_; }

    // y [n, w] = rms_norm(x) * weight.  y may be x.
    void rms_norm(const Tensor& y, const Tensor& x, const Tensor& weight, float eps) const {
        be_.rms_norm(y, x, weight, eps);
    }
    // Per-head RMSNorm (q/k norms): x [n, n_head * head_dim], weight [head_dim], in place.
    void head_norm(const Tensor& x, size_t n_head, const Tensor& weight, float eps) const {
        const Tensor heads = x.reshaped(x.width() / n_head, x.rows() * n_head);
        be_.rms_norm(heads, heads, weight, eps);
    }
    // y [n, w] = layer_norm(x) * weight + bias.
    void layer_norm(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) const {
        be_.layer_norm(y, x, weight, bias, eps);
    }
    // y [n, n_out] = x [n, n_in] W^T (+ bias [n_out]).
    void linear(const Tensor& y, const Tensor& w, const Tensor& x, const Tensor& bias = Tensor()) const {
        linears(x, {{y, w, bias}});
    }
    // One output of linears: y = x W^T (+ bias; empty: none).
    struct Linear {
        const Tensor& y;
        const Tensor& w;
        const Tensor& bias = kNoBias;
    };
    // linear of several weights that read the same x (q, k and v): one backend job for all of them.
    void linears(const Tensor& x, std::initializer_list<Linear> outs) const {
        SharedInputProduct products[kMaxLinears];
        CACTUS_ASSERT(outs.size() <= kMaxLinears);
        size_t n = 0;
        for (const Linear& o : outs) products[n++] = SharedInputProduct{&o.y, &o.w, o.bias.empty() ? nullptr : &o.bias};
        be_.matmuls(products, n, x);
    }
    // linear for encoders (hundreds of image patches or audio frames, computed once): the back end
    // may sum in its faster encoder order (Backend::matmul_encoder); no decode step recomputes these.
    void encoder_linear(const Tensor& y, const Tensor& w, const Tensor& x, const Tensor& bias = Tensor()) const {
        be_.matmul_encoder(y, w, x);
        if (!bias.empty()) be_.add(y, y, bias);
    }
    // Rotates x [n, n_head * head_dim] at positions pos [n].
    void rope(const Tensor& x, size_t n_head, const Tensor& pos, const RopeParams& params) const {
        be_.rope(x, n_head, pos, params);
    }
    // Causal (or sliding) self-attention over the KV cache: stores k, v of the batch in the views'
    // layer (kv_batch), then out [n, n_head * head_dim_v] = softmax(scale * q K^T) V over the
    // visible rows.
    void attention(const Tensor& out, const KvBatch& kv, const Tensor& q, const Tensor& k, const Tensor& v,
                   size_t n_head, float scale) const {
        be_.kv_store(kv, k, v);
        be_.attention_kv(out, kv, q, n_head, scale);
    }
    // The same attention over rows another layer stored in that layer earlier in the step (KV sharing).
    void attend(const Tensor& out, const KvBatch& kv, const Tensor& q, size_t n_head, float scale) const {
        be_.attention_kv(out, kv, q, n_head, scale);
    }
    // x [n, n_out] += in [n, n_in] W^T: linear then residual in one backend op; tmp [n, n_out] is
    // scratch (a backend without the fused kernel computes the linear into it).
    void linear_residual(const Tensor& x, const Tensor& w, const Tensor& in, const Tensor& tmp) const {
        be_.matmul_accumulate(x, w, in, tmp);
    }
    // Gated feed-forward: y [n, n_embd] = down(act(gate x) * up x); gate_buf, up_buf: [n, n_ff].
    void ffn(const Tensor& y, const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down, Activation act,
             const Tensor& gate_buf, const Tensor& up_buf) const {
        be_.gated_matmul(gate_buf, up_buf, gate, up, x, act);
        be_.matmul(y, down, gate_buf);
    }
    // residual += ffn(x) with the down projection added into the stream (linear_residual); tmp
    // [n, n_embd] is scratch.
    void ffn_residual(const Tensor& residual, const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down,
                      Activation act, const Tensor& gate_buf, const Tensor& up_buf, const Tensor& tmp) const {
        be_.gated_matmul(gate_buf, up_buf, gate, up, x, act);
        be_.matmul_accumulate(residual, down, gate_buf, tmp);
    }
    // x += y (the residual stream).
    void residual(const Tensor& x, const Tensor& y) const { be_.add(x, x, y); }

private:
    static constexpr size_t kMaxLinears = 4;
    static inline const Tensor kNoBias{};
    Backend& be_;
};

}  // namespace cactus
