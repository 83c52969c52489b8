// Gemma 3's projector: average pool, soft-embedding RMS norm, input projection (see the header).
#include "models/vision/gemma3_projector.h"

#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/vision/vision_encoder.h"
#include "models/weights.h"
#include "ops/quant.h"

namespace cactus {

void average_pool(const float* x, size_t gw, size_t gh, size_t d, size_t k, std::vector<float>* out) {
    if (k == 0 || gw % k != 0 || gh % k != 0)
        fail("average_pool: %zux%zu patches do not split into %zu-blocks", gw, gh, k);
    const size_t ow = gw / k, oh = gh / k;
    out->assign(ow * oh * d, 0.0f);
    const float inv = 1.0f / float(k * k);
    for (size_t Y = 0; Y < oh; ++Y)
        for (size_t X = 0; X < ow; ++X) {
            float* o = out->data() + (Y * ow + X) * d;
            for (size_t i = 0; i < k; ++i)
                for (size_t j = 0; j < k; ++j) {
                    const float* p = x + ((Y * k + i) * gw + X * k + j) * d;
                    for (size_t c = 0; c < d; ++c) o[c] += p[c];
                }
            for (size_t c = 0; c < d; ++c) o[c] *= inv;
        }
}

Gemma3Projector::Gemma3Projector(const GgufFile& file, Backend& backend, WeightLoader& w, const VisionHParams& hp)
    : be_(backend), n_embd_(hp.n_embd), proj_dim_(hp.proj_dim), k_(hp.scale_factor), eps_(hp.eps) {
    norm_ = w.vector("mm.soft_emb_norm.weight", n_embd_);
    const GgufTensor* t = file.find_tensor("mm.input_projection.weight");
    if (!t) fail("load mmproj: tensor mm.input_projection.weight is missing");
    if (t->dims != std::vector<uint64_t>{proj_dim_, n_embd_})
        fail("load mmproj: mm.input_projection.weight is not {%zu, %zu} (projection_dim, embedding_length)", proj_dim_,
             n_embd_);
    // File rows: one per vision channel c, holding the proj_dim outputs -> W [proj_dim, n_embd].
    std::vector<float> row(proj_dim_), wt(proj_dim_ * n_embd_);
    const size_t row_bytes = dtype_row_bytes(t->type, proj_dim_);
    for (size_t c = 0; c < n_embd_; ++c) {
        const auto* src = static_cast<const uint8_t*>(t->data) + c * row_bytes;
        if (t->type == DType::F32)
            std::memcpy(row.data(), src, proj_dim_ * sizeof(float));
        else
            dequantize_row_ref(t->type, row.data(), src, proj_dim_);
        for (size_t o = 0; o < proj_dim_; ++o) wt[o * n_embd_ + c] = row[o];
    }
    proj_buf_ = be_.alloc(wt.size() * sizeof(float));
    proj_ = make_tensor(proj_buf_.get(), 0, DType::F32, n_embd_, proj_dim_);
    be_.upload(proj_, wt.data(), wt.size() * sizeof(float));
}

Gemma3Projector::~Gemma3Projector() = default;

void Gemma3Projector::project(const std::vector<float>& patches, size_t gw, size_t gh, std::vector<float>* out) {
    std::vector<float> pooled;
    average_pool(patches.data(), gw, gh, n_embd_, k_, &pooled);  // [n_tok, n_embd]
    const size_t n_tok = pooled.size() / n_embd_;
    std::unique_ptr<Buffer> buf = be_.alloc((pooled.size() + n_tok * proj_dim_) * sizeof(float));
    const Tensor x = make_tensor(buf.get(), 0, DType::F32, n_embd_, n_tok);
    const Tensor y = make_tensor(buf.get(), pooled.size() * sizeof(float), DType::F32, proj_dim_, n_tok);
    be_.upload(x, pooled.data(), pooled.size() * sizeof(float));
    be_.rms_norm(x, x, norm_, eps_);
    be_.matmul(y, proj_, x);
    out->resize(n_tok * proj_dim_);
    be_.download(out->data(), y, out->size() * sizeof(float));
}

}  // namespace cactus
