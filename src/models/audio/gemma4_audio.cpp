#include "models/audio/gemma4_audio.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/audio/gemma4_features.h"
#include "models/weights.h"

namespace cactus {

struct AudioEncoder::Ffn {
    Tensor pre, post;    // [n_embd]
    ClippedLinear up;    // [4 n_embd, n_embd]
    ClippedLinear down;  // [n_embd, 4 n_embd]
};

struct AudioEncoder::Layer {
    Ffn ff1, ff2;
    Tensor attn_pre, attn_post;  // [n_embd]
    ClippedLinear q, k, v, o;    // [n_embd, n_embd]
    Tensor rel;                  // [window, n_embd]: relative_k_proj of the sinusoid of distance 0..window-1
    Tensor q_scale;              // [head_dim]: softplus(per_dim_scale) * head_dim^-0.5 / ln 2
    Tensor conv_pre, conv_norm;  // [n_embd]
    ClippedLinear glu_a, glu_b;  // rows [0, n) and [n, 2n) of linear_start [2 n_embd, n_embd]
    Tensor dw;                   // [n_embd, kernel] causal depthwise taps
    ClippedLinear conv_out;      // [n_embd, n_embd]
    Tensor out_norm;             // [n_embd]
};

// Activations for up to `frames` mel frames (grown when a longer input comes).
struct AudioEncoder::Acts {
    size_t frames = 0;
    std::vector<std::unique_ptr<Buffer>> buffers;
    Tensor mel;         // [frames, n_mels]
    Tensor c0, c0t;     // [t1 * f1, c0], [c0, t1 * f1]
    Tensor c1;          // [t2 * f2, c1]
    Tensor x, h, tmp;   // [t2, n_embd]
    Tensor q, k, v, a;  // [t2, n_embd]
    Tensor ff;          // [t2, 4 n_embd]
    Tensor out;         // [t2, out_dim]
    Tensor proj;        // [t2, proj_dim]
};

namespace {

std::string blk(size_t il, const char* suffix) { return "a.blk." + std::to_string(il) + "." + suffix; }

size_t halve(size_t n) { return (n + 1) / 2; }  // a 3-wide stride-2 convolution with padding 1

const GgufTensor& conv_tensor(const GgufFile& f, const char* name, size_t n_in, size_t n_out) {
    const GgufTensor* t = f.find_tensor(name);
    const std::vector<uint64_t> want = {3, 3, n_in, n_out};
    if (!t || t->dims != want) fail("load mmproj: %s must be {3, 3, %zu, %zu}", name, n_in, n_out);
    return *t;
}

}  // namespace

bool mmproj_has_audio(const GgufFile& mmproj) { return mmproj.get_bool("clip.has_audio_encoder", false); }

AudioEncoder::AudioEncoder(const GgufFile& mmproj, const BackendOptions& options)
    : file_(mmproj), backend_(make_backend(options)), nn_(*backend_) {
    const std::string projector =
        file_.get_string("clip.audio.projector_type", file_.get_string("clip.projector_type", ""));
    if (projector != "gemma4a") fail("load mmproj: audio projector '%s' is not gemma4a", projector.c_str());
    hp_.n_embd = file_.get_uint("clip.audio.embedding_length");
    hp_.n_layer = file_.get_uint("clip.audio.block_count");
    hp_.n_head = file_.get_uint("clip.audio.attention.head_count");
    hp_.n_mels = file_.get_uint("clip.audio.num_mel_bins", 128);
    hp_.proj_dim = file_.get_uint("clip.audio.projection_dim");
    hp_.eps = static_cast<float>(file_.get_float("clip.audio.attention.layer_norm_epsilon", 1e-6));
    if (hp_.n_head == 0 || hp_.n_embd % hp_.n_head != 0 || hp_.n_embd > 8192 || hp_.n_layer > 64 ||
        hp_.n_mels != kGemma4MelBins || hp_.proj_dim == 0 || hp_.proj_dim > 65536) {
        fail(
            "load mmproj: implausible gemma4a audio hyper-parameters (n_embd %zu, heads %zu, layers %zu, mels %zu, "
            "projection %zu)",
            hp_.n_embd, hp_.n_head, hp_.n_layer, hp_.n_mels, hp_.proj_dim);
    }
    const GgufTensor* c0 = file_.find_tensor("a.conv1d.0.weight");
    const GgufTensor* c1 = file_.find_tensor("a.conv1d.1.weight");
    const GgufTensor* out = file_.find_tensor("a.pre_encode.out.weight");
    const GgufTensor* dw = file_.find_tensor("a.blk.0.conv_dw.weight");
    if (!c0 || !c1 || !out || !dw || c0->dims.size() != 4 || c1->dims.size() != 4 || out->dims.size() != 2 ||
        dw->dims.size() != 2) {
        fail("load mmproj: the gemma4a SSCP convolutions, a.pre_encode.out or a.blk.0.conv_dw are missing");
    }
    hp_.c0 = c0->dims[3];
    hp_.c1 = c1->dims[3];
    hp_.out_dim = out->dims[1];
    hp_.conv_kernel = dw->dims[0];
    if (hp_.c0 == 0 || hp_.c1 == 0 || hp_.conv_kernel == 0 || hp_.conv_kernel > 64 || hp_.out_dim > 65536) {
        fail("load mmproj: implausible gemma4a shapes (channels %zu, %zu; kernel %zu)", hp_.c0, hp_.c1,
             hp_.conv_kernel);
    }
    load_weights();
    acts_ = std::make_unique<Acts>();
}

AudioEncoder::~AudioEncoder() = default;

size_t AudioEncoder::tokens(size_t n_samples) const { return gemma4_audio_tokens(std::min(n_samples, kMaxSamples)); }

Tensor AudioEncoder::upload_vector(const std::vector<float>& host) {
    weight_buffers_.push_back(backend_->alloc(host.size() * sizeof(float)));
    const Tensor t = make_tensor(weight_buffers_.back().get(), 0, DType::F32, host.size(), 1);
    backend_->upload(t, host.data(), host.size() * sizeof(float));
    return t;
}

ClippedLinear AudioEncoder::clipped(const std::string& name, size_t n_in, size_t n_out) {
    return load_clipped_linear(*weights_, name, n_in, n_out);
}

// transformers' Gemma4AudioRelPositionalEncoding at distances 0..window-1 (sin half, then cos half,
// timescales 1..1e4), through relative_k_proj: [window, n_embd].
Tensor AudioEncoder::relative_keys(const Tensor& w_rel) {
    const size_t d = hp_.n_embd, half = d / 2, n = kAttentionWindow;
    const double step = std::log(1.0e4) / static_cast<double>(std::max<size_t>(half - 1, 1));
    std::vector<float> sinusoid(n * d, 0.0f);
    for (size_t dist = 0; dist < n; ++dist) {
        for (size_t i = 0; i < half; ++i) {
            const float inv = static_cast<float>(std::exp(-static_cast<double>(i) * step));  // float32 in torch
            const float angle = static_cast<float>(dist) * inv;
            sinusoid[dist * d + i] = std::sin(angle);
            sinusoid[dist * d + half + i] = std::cos(angle);
        }
    }
    const Tensor table = upload_vector(sinusoid).reshaped(d, n);
    weight_buffers_.push_back(backend_->alloc(n * d * sizeof(float)));
    const Tensor rel = make_tensor(weight_buffers_.back().get(), 0, DType::F32, d, n);
    backend_->matmul(rel, w_rel, table);
    return rel;
}

void AudioEncoder::load_weights() {
    weights_ = std::make_unique<WeightLoader>(file_, *backend_);
    WeightLoader& w = *weights_;
    const size_t d = hp_.n_embd, hd = hp_.head_dim();
    const GgufTensor& c0 = conv_tensor(file_, "a.conv1d.0.weight", 1, hp_.c0);
    const GgufTensor& c1 = conv_tensor(file_, "a.conv1d.1.weight", hp_.c0, hp_.c1);
    conv0_w_ = backend_->place_weight(c0.data, c0.type, 9, hp_.c0);
    conv1_w_ = backend_->place_weight(c1.data, c1.type, 9 * hp_.c0, hp_.c1);
    conv0_norm_ = w.vector("a.conv1d.0.norm.weight", hp_.c0);
    conv1_norm_ = w.vector("a.conv1d.1.norm.weight", hp_.c1);
    input_proj_ = w.matrix("a.input_projection.weight", hp_.c1 * (hp_.n_mels / 4), d);
    out_proj_ = w.matrix("a.pre_encode.out.weight", d, hp_.out_dim);
    out_proj_b_ = w.vector("a.pre_encode.out.bias", hp_.out_dim);
    embed_proj_ = w.matrix("mm.a.input_projection.weight", hp_.out_dim, hp_.proj_dim);
    const float q_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)) / std::log(2.0));
    layers_.resize(hp_.n_layer);
    for (size_t il = 0; il < hp_.n_layer; ++il) {
        Layer& L = layers_[il];
        auto ffn = [&](Ffn& f, const char* suffix) {
            const std::string s = suffix;
            f.pre = w.vector(blk(il, ("ffn_norm" + s + ".weight").c_str()), d);
            f.post = w.vector(blk(il, ("ffn_post_norm" + s + ".weight").c_str()), d);
            f.up = clipped(blk(il, ("ffn_up" + s).c_str()), d, 4 * d);
            f.down = clipped(blk(il, ("ffn_down" + s).c_str()), 4 * d, d);
        };
        ffn(L.ff1, "");
        ffn(L.ff2, "_1");
        L.attn_pre = w.vector(blk(il, "attn_pre_norm.weight"), d);
        L.attn_post = w.vector(blk(il, "attn_post_norm.weight"), d);
        L.q = clipped(blk(il, "attn_q"), d, d);
        L.k = clipped(blk(il, "attn_k"), d, d);
        L.v = clipped(blk(il, "attn_v"), d, d);
        L.o = clipped(blk(il, "attn_out"), d, d);
        L.rel = relative_keys(w.matrix(blk(il, "attn_k_rel.weight"), d, d));
        std::vector<float> scale = w.host_vector(blk(il, "per_dim_scale.weight"), hd);  // softplus applied
        for (float& s : scale) s *= q_scale;
        L.q_scale = upload_vector(scale);
        L.conv_pre = w.vector(blk(il, "conv_norm.weight"), d);
        L.conv_norm = w.vector(blk(il, "norm_conv.weight"), d);
        const ClippedLinear start = clipped(blk(il, "conv_pw1"), d, 2 * d);
        L.glu_a = start;
        L.glu_a.w = start.w.rows_view(0, d);
        L.glu_b = start;
        L.glu_b.w = start.w.rows_view(d, d);
        L.dw = w.f32_rows(blk(il, "conv_dw.weight"), hp_.conv_kernel, d);
        L.conv_out = clipped(blk(il, "conv_pw2"), d, d);
        L.out_norm = w.vector(blk(il, "ln2.weight"), d);
    }
    backend_->synchronize(std::chrono::milliseconds(60000));
}

void AudioEncoder::reserve(size_t n_frames) {
    Acts& A = *acts_;
    if (n_frames <= A.frames) return;
    A = Acts();
    const size_t t2 = halve(halve(n_frames));
    const size_t f1 = halve(hp_.n_mels), f2 = halve(f1);
    const size_t d = hp_.n_embd;
    auto alloc = [&](size_t width, size_t rows) {
        A.buffers.push_back(backend_->alloc(width * rows * sizeof(float)));
        return make_tensor(A.buffers.back().get(), 0, DType::F32, width, rows);
    };
    A.frames = n_frames;
    A.mel = alloc(hp_.n_mels, n_frames);
    // The SSCP runs kSscpChunk tokens at a time (plus one halo row per convolution): its feature maps
    // and the second convolution's im2col stay a few MB at any length instead of ~200 MB for 30 s.
    const size_t chunk_t1 = 2 * kSscpChunk + 2;
    A.c0 = alloc(hp_.c0, (chunk_t1 + 1) * f1);
    A.c0t = alloc(chunk_t1 * f1, hp_.c0);
    A.c1 = alloc(hp_.c1, (kSscpChunk + 1) * f2);
    for (Tensor* t : {&A.x, &A.h, &A.tmp, &A.q, &A.k, &A.v, &A.a}) *t = alloc(d, t2);
    A.ff = alloc(4 * d, t2);
    A.out = alloc(hp_.out_dim, t2);
    A.proj = alloc(hp_.proj_dim, t2);
}

void AudioEncoder::linear(const Tensor& y, const ClippedLinear& l, const Tensor& x) {
    const Tensor& tmp = acts_->tmp;
    // The FFN's down projection reads [n, 4 n_embd]: it clamps in place (the FFN's own buffer).
    const Tensor xc = x.width() == tmp.width() ? tmp.rows_view(0, x.rows()) : x;
    clipped_linear(*backend_, nn_, y, l, x, xc);
}

// Gemma4AudioFeedForward: x += 0.5 * post_norm(down(silu(up(pre_norm(x))))). The 1e10 gradient
// clamps of the reference are identities for finite activations and are left out.
void AudioEncoder::ffn(const Ffn& f, size_t n) {
    Backend& be = *backend_;
    const Acts& A = *acts_;
    const Tensor x = A.x.rows_view(0, n), h = A.h.rows_view(0, n), ff = A.ff.rows_view(0, n);
    nn_.rms_norm(h, x, f.pre, hp_.eps);
    linear(ff, f.up, h);
    be.gelu(ff, ff, Activation::SILU);
    linear(h, f.down, ff);
    nn_.rms_norm(h, h, f.post, hp_.eps);
    be.scale(h, h, 0.5f);
    nn_.residual(x, h);
}

// Gemma4AudioAttention over the pre-normed x: clipped q/k/v, the local attention, clipped post.
void AudioEncoder::attention(const Layer& L, size_t n) {
    Backend& be = *backend_;
    const Acts& A = *acts_;
    const Tensor x = A.x.rows_view(0, n), h = A.h.rows_view(0, n);
    const Tensor q = A.q.rows_view(0, n), k = A.k.rows_view(0, n), v = A.v.rows_view(0, n), a = A.a.rows_view(0, n);
    nn_.rms_norm(h, x, L.attn_pre, hp_.eps);
    linear(q, L.q, h);
    linear(k, L.k, h);
    linear(v, L.v, h);
    LocalAttention la;
    la.n_head = hp_.n_head;
    la.head_dim = hp_.head_dim();
    la.window = kAttentionWindow;
    la.k_scale = static_cast<float>(std::log1p(M_E) / std::log(2.0));
    la.softcap = kSoftcap;
    be.attention_local(a, q, k, v, L.rel, L.q_scale, la);
    linear(h, L.o, a);
    nn_.rms_norm(h, h, L.attn_post, hp_.eps);
    nn_.residual(x, h);
}

// Gemma4AudioLightConv1d: x += linear_end(silu(norm(causal_dwconv(glu(linear_start(pre_norm(x))))))).
void AudioEncoder::light_conv(const Layer& L, size_t n) {
    Backend& be = *backend_;
    const Acts& A = *acts_;
    const Tensor x = A.x.rows_view(0, n), h = A.h.rows_view(0, n);
    const Tensor ga = A.q.rows_view(0, n), gb = A.k.rows_view(0, n), c = A.v.rows_view(0, n);
    nn_.rms_norm(h, x, L.conv_pre, hp_.eps);
    linear(ga, L.glu_a, h);
    linear(gb, L.glu_b, h);
    be.glu(ga, gb, ga, Activation::SIGMOID);  // torch.nn.functional.glu: first half * sigmoid(second half)
    be.depthwise_conv(c, ga, L.dw);
    nn_.rms_norm(c, c, L.conv_norm, hp_.eps);
    be.gelu(c, c, Activation::SILU);
    linear(h, L.conv_out, c);
    nn_.residual(x, h);
}

namespace {

// One stride-2, 3x3, pad-1 convolution over output rows [a, b) of an image of `height` rows: the
// input rows it reads start at 2a - 1. For a > 0 the op is given rows [2a - 2, min(height, 2b)) and
// its first output row (which would read the op's zero padding instead of row 2a - 3) is dropped.
struct ConvRows {
    size_t first = 0;  // first input row given to the op
    size_t rows = 0;   // input rows given
    size_t drop = 0;   // output rows to drop (0 or 1)
};

ConvRows conv_rows(size_t a, size_t b, size_t height) {
    ConvRows r;
    r.first = a > 0 ? 2 * a - 2 : 0;
    r.rows = std::min(height, 2 * b) - r.first;
    r.drop = a > 0 ? 1 : 0;
    return r;
}

}  // namespace

// Gemma4AudioSubSampleConvProjection for tokens [a, b): mel [frames, n_mels] -> x rows [a, b).
void AudioEncoder::sscp_chunk(size_t n_frames, size_t a, size_t b) {
    Backend& be = *backend_;
    const Acts& A = *acts_;
    const size_t t1 = halve(n_frames), f1 = halve(hp_.n_mels), f2 = halve(f1);
    const ConvRows r1 = conv_rows(a, b, t1);                                // rows of the first map conv1 reads
    const ConvRows r0 = conv_rows(r1.first, r1.first + r1.rows, n_frames);  // mel rows conv0 reads
    const size_t out0 = halve(r0.rows);  // conv0 output rows (r0.drop of them dropped)
    const Tensor mel = A.mel.rows_view(r0.first, r0.rows).reshaped(r0.rows * hp_.n_mels, 1);  // one input plane
    const Tensor c0 = A.c0.rows_view(0, out0 * f1);
    be.conv2d(c0, mel, conv0_w_, Tensor(), Conv2d{3, 3, 2, 1, r0.rows, hp_.n_mels});  // (time, frequency) pixels
    const Tensor kept = c0.rows_view(r0.drop * f1, r1.rows * f1);                     // [r1.rows * f1, c0]
    nn_.layer_norm(kept, kept, conv0_norm_, Tensor(), hp_.eps);
    be.clamp(kept, kept, 0.0f, INFINITY);  // ReLU
    const Tensor planes = make_tensor(A.c0t.buffer, A.c0t.offset, DType::F32, r1.rows * f1, hp_.c0);
    be.transpose(planes, kept);  // [c0, r1.rows * f1]
    const size_t out1 = halve(r1.rows);
    const Tensor c1 = A.c1.rows_view(0, out1 * f2);
    be.conv2d(c1, planes, conv1_w_, Tensor(), Conv2d{3, 3, 2, 1, r1.rows, f1});  // [out1 * f2, c1]
    const Tensor tokens = c1.rows_view(r1.drop * f2, (b - a) * f2);
    nn_.layer_norm(tokens, tokens, conv1_norm_, Tensor(), hp_.eps);
    be.clamp(tokens, tokens, 0.0f, INFINITY);
    // (frequency, channel) of each time step, channel fastest: [b - a, f2 * c1].
    nn_.encoder_linear(A.x.rows_view(a, b - a), input_proj_, tokens.reshaped(f2 * hp_.c1, b - a));
}

void AudioEncoder::sscp(size_t n_frames) {
    const size_t n = halve(halve(n_frames));
    for (size_t a = 0; a < n; a += kSscpChunk) sscp_chunk(n_frames, a, std::min(n, a + kSscpChunk));
}

void AudioEncoder::encode_features(const float* mel, size_t n_frames, std::vector<float>* out,
                                   std::vector<float>* tower) {
    if (n_frames == 0 || n_frames > gemma4_mel_frames(kMaxSamples)) {
        fail("gemma4 audio: %zu feature frames (1..%zu)", n_frames, gemma4_mel_frames(kMaxSamples));
    }
    reserve(n_frames);
    Backend& be = *backend_;
    const Acts& A = *acts_;
    be.upload(A.mel.rows_view(0, n_frames), mel, n_frames * hp_.n_mels * sizeof(float));
    sscp(n_frames);
    const size_t n = halve(halve(n_frames));
    for (const Layer& L : layers_) {
        ffn(L.ff1, n);
        attention(L, n);
        light_conv(L, n);
        ffn(L.ff2, n);
        nn_.rms_norm(A.x.rows_view(0, n), A.x.rows_view(0, n), L.out_norm, hp_.eps);
    }
    const Tensor o = A.out.rows_view(0, n), p = A.proj.rows_view(0, n);
    nn_.encoder_linear(o, out_proj_, A.x.rows_view(0, n), out_proj_b_);
    if (tower) {
        be.synchronize(std::chrono::milliseconds(60000));
        *tower = download_f32(be, o);
    }
    nn_.rms_norm(o, o, Tensor(), hp_.eps);  // Gemma4MultimodalEmbedder: RMSNorm without scale, Linear
    nn_.encoder_linear(p, embed_proj_, o);
    be.synchronize(std::chrono::milliseconds(60000));
    *out = download_f32(be, p);
}

void AudioEncoder::encode(const float* samples, size_t n, std::vector<float>* out) {
    const Gemma4Features f = gemma4_features(samples, n);  // checks n and the values
    encode_features(f.data.data(), f.n_frames, out);
}

}  // namespace cactus
