// Gemma 4's vision tower over the backend (see gemma4_vision.h).
#include "models/vision/gemma4_vision.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/vision/gemma3_projector.h"
#include "models/vision/vision_encoder.h"
#include "models/weights.h"

namespace cactus {

namespace {

std::string vt(size_t il, const char* suffix) { return "v.blk." + std::to_string(il) + "." + suffix; }

}  // namespace

// One image's activations: n patches of the grid, one buffer.
struct Gemma4Vision::Activations {
    size_t n = 0, gw = 0, gh = 0;
    std::unique_ptr<Buffer> buf, ids_buf;
    Tensor planes;                 // [3, H * W]
    Tensor x, cur, q, k, v, attn;  // [n, n_embd]
    Tensor xc_embd, xc_ff;         // [n, n_embd], [n, n_ff]: clamped inputs (one memory)
    Tensor gate, up;               // [n, n_ff]
    Tensor ids_x, ids_y;           // [n] I32: rows of the x table, of the y table
    Tensor rope_pos;               // [n * n_head * 2] I32: x then y of each head's halves
};

Gemma4Vision::Gemma4Vision(const GgufFile& mmproj, Backend& backend, WeightLoader& weights, const VisionHParams& hp)
    : file_(mmproj),
      be_(backend),
      w_(weights),
      nn_(backend),
      n_embd_(hp.n_embd),
      n_head_(hp.n_head),
      head_dim_(hp.n_head ? hp.n_embd / hp.n_head : 0),
      n_ff_(hp.n_ff),
      patch_(hp.patch_size),
      proj_dim_(hp.proj_dim),
      eps_(hp.eps) {
    const size_t d = n_embd_, p = patch_;
    if (n_head_ == 0 || d % n_head_ != 0 || head_dim_ % 4 != 0)
        fail("load mmproj: gemma4v heads of %zu (%zu heads over %zu): 2-D RoPE needs a multiple of 4", head_dim_,
             n_head_, d);
    const GgufTensor* pt = file_.find_tensor("v.patch_embd.weight");
    if (!pt || pt->dims != std::vector<uint64_t>{p, p, 3, d})
        fail("load mmproj: v.patch_embd.weight must be {%zu, %zu, 3, %zu}", p, p, d);
    patch_w_ = be_.place_weight(pt->data, pt->type, 3 * p * p, d);
    const GgufTensor* pe = file_.find_tensor("v.position_embd.weight");
    if (!pe || pe->type != DType::F32 || pe->dims.size() != 3 || pe->dims[0] != d || pe->dims[2] != 2)
        fail("load mmproj: v.position_embd.weight must be F32 {%zu, positions, 2}", d);
    n_pos_ = pe->dims[1];
    pos_ = be_.place_weight(pe->data, pe->type, d, 2 * n_pos_);
    for (size_t il = 0; il < hp.n_layer; ++il) {
        Layer L;
        L.ln1 = w_.vector(vt(il, "ln1.weight"), d);
        L.attn_post_norm = w_.vector(vt(il, "attn_post_norm.weight"), d);
        L.ln2 = w_.vector(vt(il, "ln2.weight"), d);
        L.ffn_post_norm = w_.vector(vt(il, "ffn_post_norm.weight"), d);
        L.q_norm = w_.vector(vt(il, "attn_q_norm.weight"), head_dim_);
        L.k_norm = w_.vector(vt(il, "attn_k_norm.weight"), head_dim_);
        L.q = load_clipped_linear(w_, vt(il, "attn_q"), d, d);
        L.k = load_clipped_linear(w_, vt(il, "attn_k"), d, d);
        L.v = load_clipped_linear(w_, vt(il, "attn_v"), d, d);
        L.o = load_clipped_linear(w_, vt(il, "attn_out"), d, d);
        L.gate = load_clipped_linear(w_, vt(il, "ffn_gate"), d, n_ff_);
        L.up = load_clipped_linear(w_, vt(il, "ffn_up"), d, n_ff_);
        L.down = load_clipped_linear(w_, vt(il, "ffn_down"), n_ff_, d);
        layers_.push_back(L);
    }
    if (w_.has("v.std_bias") || w_.has("v.std_scale"))
        fail("load mmproj: gemma4v standardisation (v.std_bias, v.std_scale: the large models) is not supported");
    proj_ = w_.matrix("mm.input_projection.weight", d, proj_dim_);
}

Gemma4Vision::~Gemma4Vision() = default;

void Gemma4Vision::check_input(const EncoderInput& in) const {
    const size_t unit = patch_ * kPool;
    if (in.width == 0 || in.height == 0 || in.width % unit != 0 || in.height % unit != 0 ||
        in.planes.size() != 3 * in.width * in.height)
        fail("Gemma4Vision::encode: input %zux%zu with %zu values, the encoder takes RGB planes of whole %zu-px blocks",
             in.width, in.height, in.planes.size(), unit);
    const size_t gw = in.width / patch_, gh = in.height / patch_;
    if (gw * gh > kMaxPatches || gw > n_pos_ || gh > n_pos_)
        fail("Gemma4Vision::encode: a %zux%zu patch grid is past the limits (%zu patches, %zu per side)", gw, gh,
             kMaxPatches, n_pos_);
}

void Gemma4Vision::clipped_linear(const Tensor& y, const ClippedLinear& l, const Tensor& x, const Tensor& xc) {
    cactus::clipped_linear(be_, nn_, y, l, x, xc);
}

void Gemma4Vision::embed_patches(const EncoderInput& in, const Activations& a) {
    // Gemma4VisionPatchEmbedder: 2 (p - 0.5), as the reference computes it.
    std::vector<float> scaled(in.planes.size());
    for (size_t i = 0; i < scaled.size(); ++i) scaled[i] = 2.0f * (in.planes[i] - 0.5f);
    be_.upload(a.planes, scaled.data(), scaled.size() * sizeof(float));
    Conv2d conv;
    conv.kernel_h = conv.kernel_w = conv.stride = patch_;
    conv.height = in.height;
    conv.width = in.width;
    be_.conv2d(a.x, a.planes, patch_w_, Tensor(), conv);  // [n, d], row-major over (y, x)

    std::vector<int32_t> ids(2 * a.n), rope(2 * n_head_ * a.n);
    for (size_t i = 0; i < a.n; ++i) {
        const int32_t px = int32_t(i % a.gw), py = int32_t(i / a.gw);
        ids[i] = px;
        ids[a.n + i] = int32_t(n_pos_) + py;  // the y table follows the x table
        for (size_t h = 0; h < n_head_; ++h) {
            rope[(i * n_head_ + h) * 2] = px;
            rope[(i * n_head_ + h) * 2 + 1] = py;
        }
    }
    be_.upload(a.ids_x, ids.data(), a.n * sizeof(int32_t));
    be_.upload(a.ids_y, ids.data() + a.n, a.n * sizeof(int32_t));
    be_.upload(a.rope_pos, rope.data(), rope.size() * sizeof(int32_t));
    be_.get_rows(a.cur, pos_, a.ids_x, 1.0f);
    be_.get_rows(a.q, pos_, a.ids_y, 1.0f);
    be_.add(a.cur, a.cur, a.q);
    nn_.residual(a.x, a.cur);
}

void Gemma4Vision::attention(const Layer& L, const Activations& a) {
    nn_.rms_norm(a.cur, a.x, L.ln1, eps_);
    clipped_linear(a.q, L.q, a.cur, a.xc_embd);
    clipped_linear(a.k, L.k, a.cur, a.xc_embd);
    clipped_linear(a.v, L.v, a.cur, a.xc_embd);
    nn_.head_norm(a.q, n_head_, L.q_norm, eps_);
    nn_.head_norm(a.k, n_head_, L.k_norm, eps_);
    nn_.head_norm(a.v, n_head_, Tensor(), eps_);
    // 2-D RoPE: each head as two half-heads (x, then y), each rotated NeoX-style over all its dims.
    RopeParams rope;
    rope.style = RopeStyle::NEOX;
    rope.n_rot = head_dim_ / 2;
    rope.freq_base = kRopeTheta;
    const size_t halves = a.n * n_head_ * 2;
    nn_.rope(a.q.reshaped(head_dim_ / 2, halves), 1, a.rope_pos, rope);
    nn_.rope(a.k.reshaped(head_dim_ / 2, halves), 1, a.rope_pos, rope);
    DenseAttention shape;
    shape.n_head = shape.n_head_kv = n_head_;
    shape.head_dim = shape.head_dim_v = head_dim_;
    shape.scale = 1.0f;
    be_.attention_dense(a.attn, a.q, a.k, a.v, Tensor(), shape);
    clipped_linear(a.cur, L.o, a.attn, a.xc_embd);
    nn_.rms_norm(a.cur, a.cur, L.attn_post_norm, eps_);
    nn_.residual(a.x, a.cur);
}

void Gemma4Vision::feed_forward(const Layer& L, const Activations& a) {
    nn_.rms_norm(a.cur, a.x, L.ln2, eps_);
    clipped_linear(a.gate, L.gate, a.cur, a.xc_embd);
    clipped_linear(a.up, L.up, a.cur, a.xc_embd);
    be_.glu(a.gate, a.gate, a.up, Activation::GELU_TANH);
    clipped_linear(a.cur, L.down, a.gate, a.xc_ff);
    nn_.rms_norm(a.cur, a.cur, L.ffn_post_norm, eps_);
    nn_.residual(a.x, a.cur);
}

// Gemma4VisionPooler + Gemma4MultimodalEmbedder: the pool is a host pass (small next to the tower).
void Gemma4Vision::project(const Tensor& x, size_t gw, size_t gh, std::vector<float>* out) {
    const size_t d = n_embd_, n = gw * gh;
    std::vector<float> host(n * d), pooled;
    be_.download(host.data(), x, host.size() * sizeof(float));
    average_pool(host.data(), gw, gh, d, kPool, &pooled);  // [(gh/3) * (gw/3), d], blocks row-major
    const float root = std::sqrt(float(d));
    for (float& f : pooled) f *= root;
    const size_t n_tok = pooled.size() / d;
    std::unique_ptr<Buffer> buf = be_.alloc((n_tok * d + n_tok * proj_dim_) * sizeof(float));
    const Tensor t = make_tensor(buf.get(), 0, DType::F32, d, n_tok);
    const Tensor y = make_tensor(buf.get(), n_tok * d * sizeof(float), DType::F32, proj_dim_, n_tok);
    be_.upload(t, pooled.data(), pooled.size() * sizeof(float));
    nn_.rms_norm(t, t, Tensor(), eps_);
    be_.matmul(y, proj_, t);
    out->resize(n_tok * proj_dim_);
    be_.download(out->data(), y, out->size() * sizeof(float));
}

void Gemma4Vision::encode(const EncoderInput& in, std::vector<float>* out) {
    check_input(in);
    Activations a;
    a.gw = in.width / patch_;
    a.gh = in.height / patch_;
    a.n = a.gw * a.gh;
    const size_t d = n_embd_, n = a.n, ff = n_ff_;
    const size_t floats = 3 * in.width * in.height + 6 * n * d + n * std::max(d, ff) + 2 * n * ff;
    a.buf = be_.alloc(floats * sizeof(float));
    size_t off = 0;
    auto take = [&](size_t width, size_t rows) {
        const Tensor t = make_tensor(a.buf.get(), off, DType::F32, width, rows);
        off += width * rows * sizeof(float);
        return t;
    };
    a.planes = take(in.width * in.height, 3);
    a.x = take(d, n), a.cur = take(d, n), a.q = take(d, n), a.k = take(d, n), a.v = take(d, n), a.attn = take(d, n);
    a.xc_embd = make_tensor(a.buf.get(), off, DType::F32, d, n);
    a.xc_ff = take(ff, n);
    if (d > ff) off += (d - ff) * n * sizeof(float);
    a.gate = take(ff, n), a.up = take(ff, n);
    a.ids_buf = be_.alloc((2 * n + 2 * n_head_ * n) * sizeof(int32_t));
    a.ids_x = make_tensor(a.ids_buf.get(), 0, DType::I32, n, 1);
    a.ids_y = make_tensor(a.ids_buf.get(), n * sizeof(int32_t), DType::I32, n, 1);
    a.rope_pos = make_tensor(a.ids_buf.get(), 2 * n * sizeof(int32_t), DType::I32, 2 * n_head_ * n, 1);

    embed_patches(in, a);
    for (const Layer& L : layers_) {
        attention(L, a);
        feed_forward(L, a);
    }
    project(a.x, a.gw, a.gh, out);
}

}  // namespace cactus
