// SigLIP encoder and the idefics3 projector over the backend (see vision_encoder.h).
#include "models/vision/vision_encoder.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/vision/gemma3_projector.h"
#include "models/vision/gemma4_vision.h"
#include "models/vision/lfm2_projector.h"
#include "models/weights.h"

namespace cactus {

struct VisionEncoder::Layer {
    Tensor ln1_w, ln1_b, ln2_w, ln2_b;  // [n_embd]
    Tensor q_w, k_w, v_w, o_w;          // [n_embd, n_embd]
    Tensor q_b, k_b, v_b, o_b;          // [n_embd]
    Tensor up_w, up_b, down_w, down_b;  // [n_ff, n_embd], [n_ff], [n_embd, n_ff], [n_embd]
};

namespace {

void read_f32x3(const GgufFile& f, const char* key, float out[3]) {
    const GgufValue& v = f.get_array(key);
    if (v.numbers.size() < 3) fail("load mmproj: %s has %zu values, expected 3", key, v.numbers.size());
    for (size_t i = 0; i < 3; ++i) out[i] = float(v.numbers[i]);
}

std::string vt(size_t il, const char* suffix) { return "v.blk." + std::to_string(il) + "." + suffix; }

}  // namespace

namespace {

// Gemma 4 (clip.cpp hard-codes the rest): 3 x 3 pooling, GeGLU with tanh GELU, RMS norms.
VisionHParams read_gemma4_hparams(VisionHParams hp) {
    hp.scale_factor = Gemma4Vision::kPool;
    hp.act = Activation::GELU_TANH;
    if (hp.patch_size == 0 || hp.n_head == 0 || hp.n_embd % hp.n_head != 0 || hp.n_ff == 0 || hp.proj_dim == 0)
        fail("load mmproj: gemma4v patch size %zu, %zu heads over %zu, FFN %zu, projection %zu", hp.patch_size,
             hp.n_head, hp.n_embd, hp.n_ff, hp.proj_dim);
    return hp;
}

}  // namespace

VisionHParams read_vision_hparams(const GgufFile& f) {
    VisionHParams hp;
    if (!f.get_bool("clip.has_vision_encoder", false))
        fail("load mmproj: %s has no vision encoder (clip.has_vision_encoder)", f.path().c_str());
    hp.projector = f.get_string("clip.vision.projector_type", f.get_string("clip.projector_type", ""));
    hp.image_size = f.get_uint("clip.vision.image_size");
    hp.patch_size = f.get_uint("clip.vision.patch_size");
    hp.n_embd = f.get_uint("clip.vision.embedding_length");
    hp.n_ff = f.get_uint("clip.vision.feed_forward_length");
    hp.n_layer = f.get_uint("clip.vision.block_count");
    hp.n_head = f.get_uint("clip.vision.attention.head_count");
    hp.proj_dim = f.get_uint("clip.vision.projection_dim");
    hp.eps = float(f.get_float("clip.vision.attention.layer_norm_epsilon", 1e-6));
    read_f32x3(f, "clip.vision.image_mean", hp.mean);
    read_f32x3(f, "clip.vision.image_std", hp.std);
    if (hp.projector == "gemma4v") return read_gemma4_hparams(hp);
    // llama.cpp: gemma3's pooling is 4 unless the key says otherwise (test models).
    hp.scale_factor = f.get_uint("clip.vision.projector.scale_factor", hp.projector == "gemma3" ? 4 : 1);
    hp.longest_edge = f.get_uint("clip.vision.preproc_image_size", 0);
    // llama.cpp: use_gelu -> GELU (tanh form), use_silu -> SiLU, neither -> quick GELU.
    if (!f.get_bool("clip.use_gelu", false) || f.get_bool("clip.use_silu", false))
        fail("load mmproj: only GELU vision FFNs (clip.use_gelu) are supported");
    hp.act = Activation::GELU_TANH;
    if (hp.projector != "idefics3" && hp.projector != "gemma3" && hp.projector != "lfm2")
        fail("load mmproj: projector type '%s' is not supported (idefics3, gemma3, lfm2, gemma4v)",
             hp.projector.c_str());
    if (hp.projector == "lfm2") {
        // llama.cpp: n_merge from the key (the converter writes downsample_factor, 2), image tokens
        // 64..256 (LFM2-VL's processor_config.json: min_image_tokens, max_image_tokens).
        hp.scale_factor = f.get_uint("clip.vision.projector.scale_factor", 2);
        hp.min_tokens = 64;
        hp.max_tokens = 256;
    }
    if (hp.patch_size == 0 || hp.image_size % hp.patch_size != 0 || hp.n_head == 0 || hp.n_embd % hp.n_head != 0)
        fail("load mmproj: image size %zu, patch size %zu, %zu heads over %zu", hp.image_size, hp.patch_size, hp.n_head,
             hp.n_embd);
    const size_t side = hp.image_size / hp.patch_size;
    if (hp.scale_factor == 0 || side % hp.scale_factor != 0)
        fail("load mmproj: scale factor %zu does not divide %zu patches per side", hp.scale_factor, side);
    return hp;
}

VisionEncoder::VisionEncoder(const GgufFile& mmproj, const BackendOptions& options)
    : file_(mmproj), hp_(read_vision_hparams(mmproj)), backend_(make_backend(options)), nn_(*backend_) {
    load_weights();
}

VisionEncoder::~VisionEncoder() = default;

void VisionEncoder::load_weights() {
    weights_ = std::make_unique<WeightLoader>(file_, *backend_);
    WeightLoader& w = *weights_;
    if (hp_.projector == "gemma4v") {
        gemma4_ = std::make_unique<Gemma4Vision>(file_, *backend_, w, hp_);
        return;
    }
    const size_t d = hp_.n_embd, p = hp_.patch_size;
    const GgufTensor* pt = file_.find_tensor("v.patch_embd.weight");
    if (!pt) fail("load mmproj: tensor v.patch_embd.weight is missing");
    const std::vector<uint64_t> want = {p, p, 3, d};
    if (pt->dims != want) fail("load mmproj: v.patch_embd.weight is not {%zu, %zu, 3, %zu}", p, p, d);
    patch_w_ = backend_->place_weight(pt->data, pt->type, 3 * p * p, d);
    patch_b_ = w.vector("v.patch_embd.bias", d);
    const size_t n_pos = (hp_.image_size / p) * (hp_.image_size / p);
    const GgufTensor* pe = file_.find_tensor("v.position_embd.weight");
    if (!pe || pe->type != DType::F32 || pe->dims != std::vector<uint64_t>{d, n_pos})
        fail("load mmproj: v.position_embd.weight must be F32 {%zu, %zu}", d, n_pos);
    pos_ = backend_->place_weight(pe->data, pe->type, d, n_pos);
    pos_host_ = reinterpret_cast<const float*>(pe->data);  // F32, checked above
    for (size_t il = 0; il < hp_.n_layer; ++il) {
        Layer L;
        L.ln1_w = w.vector(vt(il, "ln1.weight"), d);
        L.ln1_b = w.vector(vt(il, "ln1.bias"), d);
        L.ln2_w = w.vector(vt(il, "ln2.weight"), d);
        L.ln2_b = w.vector(vt(il, "ln2.bias"), d);
        L.q_w = w.matrix(vt(il, "attn_q.weight"), d, d);
        L.k_w = w.matrix(vt(il, "attn_k.weight"), d, d);
        L.v_w = w.matrix(vt(il, "attn_v.weight"), d, d);
        L.o_w = w.matrix(vt(il, "attn_out.weight"), d, d);
        L.q_b = w.vector(vt(il, "attn_q.bias"), d);
        L.k_b = w.vector(vt(il, "attn_k.bias"), d);
        L.v_b = w.vector(vt(il, "attn_v.bias"), d);
        L.o_b = w.vector(vt(il, "attn_out.bias"), d);
        L.up_w = w.matrix(vt(il, "ffn_up.weight"), d, hp_.n_ff);
        L.up_b = w.vector(vt(il, "ffn_up.bias"), hp_.n_ff);
        L.down_w = w.matrix(vt(il, "ffn_down.weight"), hp_.n_ff, d);
        L.down_b = w.vector(vt(il, "ffn_down.bias"), d);
        layers_.push_back(L);
    }
    post_w_ = w.vector("v.post_ln.weight", d);
    post_b_ = w.vector("v.post_ln.bias", d);
    const size_t s = hp_.scale_factor;
    if (hp_.projector == "gemma3")
        gemma3_ = std::make_unique<Gemma3Projector>(file_, *backend_, w, hp_);
    else if (hp_.projector == "lfm2")
        lfm2_ = std::make_unique<Lfm2Projector>(file_, *backend_, w, hp_);
    else
        fc_ = w.matrix("mm.model.fc.weight", d * s * s, hp_.proj_dim);
}

size_t VisionEncoder::tokens(const EncoderInput& in) const {
    const size_t s = hp_.scale_factor, p = hp_.patch_size;
    return (in.width / p / s) * (in.height / p / s);
}

// x [gh, gw, d] patches -> out [(gh/s) * (gw/s), d * s * s]: token (Y, X) is the concatenation over
// i, j < s of patch (Y * s + i, X * s + j), i outer (llama.cpp build_patch_merge_permute, the
// Idefics3 connector's pixel_shuffle).
void VisionEncoder::pixel_shuffle(const std::vector<float>& x, size_t gw, size_t gh, std::vector<float>* out) const {
    const size_t s = hp_.scale_factor, d = hp_.n_embd;
    const size_t ow = gw / s, oh = gh / s;
    out->resize(ow * oh * d * s * s);
    float* o = out->data();
    for (size_t Y = 0; Y < oh; ++Y)
        for (size_t X = 0; X < ow; ++X)
            for (size_t i = 0; i < s; ++i)
                for (size_t j = 0; j < s; ++j, o += d)
                    std::memcpy(o, &x[((Y * s + i) * gw + X * s + j) * d], d * sizeof(float));
}

void VisionEncoder::encode(const EncoderInput& in, std::vector<float>* out) {
    if (gemma4_) return gemma4_->encode(in, out);
    const size_t p = hp_.patch_size, d = hp_.n_embd, ff = hp_.n_ff;
    if (dynamic_size()) {
        const size_t unit = p * hp_.scale_factor;
        if (in.width == 0 || in.height == 0 || in.width % unit != 0 || in.height % unit != 0 ||
            (in.width / p) * (in.height / p) > kMaxDynamicPatches || in.planes.size() != 3 * in.width * in.height)
            fail(
                "VisionEncoder::encode: input %zux%zu with %zu values, the encoder takes RGB planes of whole %zu-px "
                "blocks, at most %zu patches",
                in.width, in.height, in.planes.size(), unit, kMaxDynamicPatches);
    } else if (in.width != hp_.image_size || in.height != hp_.image_size ||
               in.planes.size() != 3 * in.width * in.height) {
        fail("VisionEncoder::encode: input %zux%zu with %zu values, the encoder takes %zux%zu RGB planes", in.width,
             in.height, in.planes.size(), hp_.image_size, hp_.image_size);
    }
    const size_t gw = in.width / p, gh = in.height / p, n = gw * gh;
    Backend& be = *backend_;
    // Activations of this image: planes, residual x, cur, q, k, v, attn, ff (+ the resized positions).
    const size_t floats = 3 * in.width * in.height + 6 * n * d + n * ff + (dynamic_size() ? n * d : 0);
    std::unique_ptr<Buffer> buf = be.alloc(floats * sizeof(float));
    size_t off = 0;
    auto take = [&](size_t width, size_t rows) {
        const Tensor t = make_tensor(buf.get(), off, DType::F32, width, rows);
        off += width * rows * sizeof(float);
        return t;
    };
    const Tensor planes = take(in.width * in.height, 3);  // [3, H * W]
    const Tensor x = take(d, n), cur = take(d, n), q = take(d, n), k = take(d, n), v = take(d, n), attn = take(d, n),
                 hid = take(ff, n);
    be.upload(planes, in.planes.data(), in.planes.size() * sizeof(float));

    Conv2d conv;
    conv.kernel_h = conv.kernel_w = conv.stride = p;
    conv.height = in.height;
    conv.width = in.width;
    be.conv2d(x, planes, patch_w_, patch_b_, conv);  // [n, d] patch tokens, row-major over (y, x)
    const size_t side = hp_.image_size / p;
    if (dynamic_size() && (gw != side || gh != side)) {  // NaFlex: the grid resized to this image's patches
        std::vector<float> resized;
        resize_position_grid(pos_host_, side, d, gw, gh, &resized);
        const Tensor pos = take(d, n);
        be.upload(pos, resized.data(), resized.size() * sizeof(float));
        be.add(x, x, pos);
    } else {
        be.add(x, x, pos_);
    }

    DenseAttention shape;
    shape.n_head = shape.n_head_kv = hp_.n_head;
    shape.head_dim = shape.head_dim_v = d / hp_.n_head;
    shape.scale = 1.0f / std::sqrt(float(shape.head_dim));
    for (const Layer& L : layers_) {
        nn_.layer_norm(cur, x, L.ln1_w, L.ln1_b, hp_.eps);
        nn_.encoder_linear(q, L.q_w, cur, L.q_b);
        nn_.encoder_linear(k, L.k_w, cur, L.k_b);
        nn_.encoder_linear(v, L.v_w, cur, L.v_b);
        be.attention_dense(attn, q, k, v, Tensor(), shape);
        nn_.encoder_linear(cur, L.o_w, attn, L.o_b);
        nn_.residual(x, cur);
        nn_.layer_norm(cur, x, L.ln2_w, L.ln2_b, hp_.eps);
        nn_.encoder_linear(hid, L.up_w, cur, L.up_b);
        be.gelu(hid, hid, hp_.act);
        nn_.encoder_linear(cur, L.down_w, hid, L.down_b);
        nn_.residual(x, cur);
    }
    nn_.layer_norm(x, x, post_w_, post_b_, hp_.eps);

    // Projector: the shuffle / pool is a host pass over the downloaded rows (small next to the ViT).
    std::vector<float> host(n * d), shuffled;
    be.download(host.data(), x, host.size() * sizeof(float));
    if (gemma3_) return gemma3_->project(host, gw, gh, out);
    if (lfm2_) return lfm2_->project(host, gw, gh, out);
    pixel_shuffle(host, gw, gh, &shuffled);
    const size_t s = hp_.scale_factor, n_tok = (gw / s) * (gh / s);
    std::unique_ptr<Buffer> pbuf = be.alloc((shuffled.size() + n_tok * hp_.proj_dim) * sizeof(float));
    const Tensor merged = make_tensor(pbuf.get(), 0, DType::F32, d * s * s, n_tok);
    const Tensor proj = make_tensor(pbuf.get(), shuffled.size() * sizeof(float), DType::F32, hp_.proj_dim, n_tok);
    be.upload(merged, shuffled.data(), shuffled.size() * sizeof(float));
    be.matmul(proj, fc_, merged);
    out->resize(n_tok * hp_.proj_dim);
    be.download(out->data(), proj, out->size() * sizeof(float));
}

}  // namespace cactus
