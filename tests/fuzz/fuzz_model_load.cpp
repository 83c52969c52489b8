// libFuzzer target for model loading: a small llama, gemma3, lfm2 or gemma4 GGUF written with GgufWriter whose
// hyper-parameters (metadata) and tensor shapes and types the input mutates: claims far larger
// than the tensors, missing or extra tensors, shapes off by one, types the loader must reject.
// Loading must succeed or throw cactus::Error, allocating within the memory budget (256 MiB);
// a model that loads runs a forward pass. Checked by ASan/UBSan and libFuzzer's -rss_limit_mb.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "models/model.h"

namespace {

using cactus::DType;

struct TrueDims {
    uint32_t n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer, n_vocab;
};

// The true value most of the time, else a mutated claim (any u32), else omitted (-1).
int64_t claim(FuzzedDataProvider& in, uint32_t truth) {
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
        case 0:
            return in.ConsumeIntegral<uint32_t>();
        case 1:
            return -1;
        case 2:
            return static_cast<int64_t>(truth) + in.ConsumeIntegralInRange<int>(-2, 2);
        default:
            return truth;
    }
}

void add_claim(cactus::GgufWriter& w, FuzzedDataProvider& in, const std::string& key, uint32_t truth) {
    const int64_t v = claim(in, truth);
    if (v >= 0) w.add_u32(key, static_cast<uint32_t>(v));
}

// Shape {cols, rows} (or {cols}), sometimes perturbed; type sometimes changed; sometimes dropped.
void add_weight(cactus::GgufWriter& w, FuzzedDataProvider& in, const std::string& name, uint64_t cols, uint64_t rows) {
    const int mutation = in.ConsumeIntegralInRange<int>(0, 15);
    if (mutation == 0) return;  // missing tensor
    std::vector<uint64_t> dims = rows ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{cols};
    if (mutation == 1) dims[0] = dims[0] + 1;
    if (mutation == 2 && dims.size() == 2) dims[1] = dims[1] * 2;
    if (mutation == 3) dims.push_back(in.ConsumeIntegralInRange<uint64_t>(1, 3));
    if (mutation == 4 && dims.size() == 2) std::swap(dims[0], dims[1]);
    DType type = DType::F32;
    const int t = in.ConsumeIntegralInRange<int>(0, 7);
    if (t == 1) type = DType::F16;
    if (t == 2 && dims[0] % 32 == 0) type = DType::Q8_0;
    if (t == 3 && dims[0] % 32 == 0) type = DType::Q4_0;
    if (t == 4 && dims[0] % 256 == 0) type = DType::Q4_K;
    uint64_t elements = 1;
    for (uint64_t d : dims) elements *= d;
    if (elements == 0 || elements > (1u << 20)) return;
    const cactus::DTypeTraits& traits = cactus::dtype_traits(type);
    const size_t bytes = static_cast<size_t>(elements / traits.block_size * traits.block_bytes);
    std::vector<uint8_t> data(bytes, 0);
    if (type == DType::F32) {  // small finite values
        float* f = reinterpret_cast<float*>(data.data());
        for (uint64_t i = 0; i < elements; ++i) f[i] = 0.01f * static_cast<float>((i * 7919) % 17) - 0.08f;
    }
    w.add_tensor(name, type, dims, data.data(), data.size());
}

// lfm2's per-layer attention.head_count_kv (0 = a conv layer): the true array most of the time,
// else one of length off by one, with another head count, or a scalar.
void add_head_count_kv(cactus::GgufWriter& w, FuzzedDataProvider& in, const std::vector<bool>& attn, uint32_t n_kv) {
    std::vector<int64_t> v;
    for (bool a : attn) v.push_back(a ? n_kv : 0);
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
        case 0:
            v.push_back(n_kv);
            break;
        case 1:
            if (!v.empty()) v.pop_back();
            break;
        case 2:
            v[in.ConsumeIntegralInRange<size_t>(0, v.size() - 1)] = in.ConsumeIntegral<uint32_t>();
            break;
        case 3:
            add_claim(w, in, "lfm2.attention.head_count_kv", n_kv);
            return;
        default:
            break;
    }
    w.add_int_array("lfm2.attention.head_count_kv", cactus::GgufType::U32, v);
}

void add_attention(cactus::GgufWriter& w, FuzzedDataProvider& in, const std::string& b, const TrueDims& d) {
    const uint32_t q = d.n_head * d.head_dim, kv = d.n_head_kv * d.head_dim;
    add_weight(w, in, b + "attn_q.weight", d.n_embd, q);
    add_weight(w, in, b + "attn_k.weight", d.n_embd, kv);
    add_weight(w, in, b + "attn_v.weight", d.n_embd, kv);
    add_weight(w, in, b + "attn_output.weight", q, d.n_embd);
}

void add_ffn(cactus::GgufWriter& w, FuzzedDataProvider& in, const std::string& b, const TrueDims& d) {
    add_weight(w, in, b + "ffn_norm.weight", d.n_embd, 0);
    add_weight(w, in, b + "ffn_gate.weight", d.n_embd, d.n_ff);
    add_weight(w, in, b + "ffn_up.weight", d.n_embd, d.n_ff);
    add_weight(w, in, b + "ffn_down.weight", d.n_ff, d.n_embd);
}

// lfm2: conv layers (shortconv in_proj / conv taps / out_proj) and attention layers with q/k norms.
void add_lfm2_layers(cactus::GgufWriter& w, FuzzedDataProvider& in, const TrueDims& d) {
    std::vector<bool> attn;
    for (uint32_t il = 0; il < d.n_layer; ++il) attn.push_back(in.ConsumeBool());
    add_head_count_kv(w, in, attn, d.n_head_kv);
    add_claim(w, in, "lfm2.shortconv.l_cache", 3);
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) w.add_bool("lfm2.attention.causal", false);
    for (uint32_t il = 0; il < d.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add_weight(w, in, b + "attn_norm.weight", d.n_embd, 0);
        if (attn[il]) {
            add_attention(w, in, b, d);
            add_weight(w, in, b + "attn_q_norm.weight", d.head_dim, 0);
            add_weight(w, in, b + "attn_k_norm.weight", d.head_dim, 0);
        } else {
            add_weight(w, in, b + "shortconv.in_proj.weight", d.n_embd, 3 * d.n_embd);
            add_weight(w, in, b + "shortconv.conv.weight", 3, d.n_embd);
            add_weight(w, in, b + "shortconv.out_proj.weight", d.n_embd, d.n_embd);
        }
        add_ffn(w, in, b, d);
    }
}

// gemma4: a sliding-window pattern (sometimes of the wrong length), sliding heads half as wide,
// the last layers KV-shared (no k/v of their own), K = V (attn_v left out) now and then, and the
// per-layer embeddings; claims and shapes mutated as for the others.
void add_gemma4_layers(cactus::GgufWriter& w, FuzzedDataProvider& in, const TrueDims& d) {
    const std::string a = "gemma4.";
    const uint32_t hd_swa = std::max(2u, d.head_dim / 2), ple = 8, shared = d.n_layer / 2;
    std::vector<int64_t> pattern;
    for (uint32_t il = 0; il < d.n_layer; ++il) pattern.push_back(il + 1 < d.n_layer && in.ConsumeBool() ? 1 : 0);
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) pattern.push_back(1);
    w.add_int_array(a + "attention.sliding_window_pattern", cactus::GgufType::BOOL, pattern);
    add_claim(w, in, a + "attention.key_length_swa", hd_swa);
    add_claim(w, in, a + "attention.value_length_swa", hd_swa);
    add_claim(w, in, a + "rope.dimension_count_swa", hd_swa);
    add_claim(w, in, a + "attention.shared_kv_layers", shared);
    add_claim(w, in, a + "embedding_length_per_layer_input", ple);
    add_weight(w, in, "per_layer_token_embd.weight", ple * d.n_layer, d.n_vocab);
    add_weight(w, in, "per_layer_model_proj.weight", d.n_embd, ple * d.n_layer);
    add_weight(w, in, "per_layer_proj_norm.weight", ple, 0);
    add_weight(w, in, "rope_freqs.weight", d.head_dim / 2, 0);
    for (uint32_t il = 0; il < d.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const uint32_t hd = pattern[il] ? hd_swa : d.head_dim;
        add_weight(w, in, b + "attn_norm.weight", d.n_embd, 0);
        add_weight(w, in, b + "attn_q.weight", d.n_embd, d.n_head * hd);
        add_weight(w, in, b + "attn_q_norm.weight", hd, 0);
        if (il + shared < d.n_layer) {
            add_weight(w, in, b + "attn_k.weight", d.n_embd, d.n_head_kv * hd);
            if (in.ConsumeIntegralInRange<int>(0, 7) != 0)
                add_weight(w, in, b + "attn_v.weight", d.n_embd, d.n_head_kv * hd);
            add_weight(w, in, b + "attn_k_norm.weight", hd, 0);
        }
        add_weight(w, in, b + "attn_output.weight", d.n_head * hd, d.n_embd);
        add_weight(w, in, b + "post_attention_norm.weight", d.n_embd, 0);
        add_ffn(w, in, b, d);
        add_weight(w, in, b + "post_ffw_norm.weight", d.n_embd, 0);
        add_weight(w, in, b + "inp_gate.weight", d.n_embd, ple);
        add_weight(w, in, b + "proj.weight", ple, d.n_embd);
        add_weight(w, in, b + "post_norm.weight", d.n_embd, 0);
        add_weight(w, in, b + "layer_output_scale.weight", 1, 0);
    }
}

std::vector<uint8_t> build_file(FuzzedDataProvider& in) {
    TrueDims d;
    d.n_head = 1u << in.ConsumeIntegralInRange<int>(0, 2);
    d.n_head_kv = d.n_head >> in.ConsumeIntegralInRange<int>(0, 2);
    if (d.n_head_kv == 0) d.n_head_kv = 1;
    d.head_dim = 8u << in.ConsumeIntegralInRange<int>(0, 2);
    d.n_embd = in.ConsumeBool() ? d.n_head * d.head_dim : 32u << in.ConsumeIntegralInRange<int>(0, 3);
    d.n_ff = 32u * in.ConsumeIntegralInRange<uint32_t>(1, 3);
    d.n_layer = in.ConsumeIntegralInRange<uint32_t>(1, 3);
    d.n_vocab = in.ConsumeIntegralInRange<uint32_t>(2, 64);
    const bool gemma = in.ConsumeBool();
    const bool lfm2 = !gemma && in.ConsumeIntegralInRange<int>(0, 2) == 0;
    const bool gemma4 = gemma && in.ConsumeBool();
    const std::string a = gemma4 ? "gemma4" : gemma ? "gemma3" : lfm2 ? "lfm2" : "llama";
    cactus::GgufWriter w;
    w.add_string("general.architecture", a);
    add_claim(w, in, a + ".block_count", d.n_layer);
    add_claim(w, in, a + ".embedding_length", d.n_embd);
    add_claim(w, in, a + ".feed_forward_length", d.n_ff);
    add_claim(w, in, a + ".attention.head_count", d.n_head);
    if (!lfm2) add_claim(w, in, a + ".attention.head_count_kv", d.n_head_kv);
    add_claim(w, in, a + ".attention.key_length", d.head_dim);
    add_claim(w, in, a + ".attention.value_length", d.head_dim);
    add_claim(w, in, a + ".rope.dimension_count", d.head_dim);
    add_claim(w, in, a + ".context_length", 64);
    add_claim(w, in, a + ".attention.sliding_window", 8);
    if (in.ConsumeBool()) w.add_f32(a + ".attention.layer_norm_rms_epsilon", in.ConsumeFloatingPoint<float>());
    if (in.ConsumeBool()) w.add_f32(a + ".rope.freq_base", in.ConsumeFloatingPoint<float>());
    if (in.ConsumeBool()) w.add_f32(a + ".final_logit_softcapping", in.ConsumeFloatingPoint<float>());
    add_weight(w, in, "token_embd.weight", d.n_embd, d.n_vocab);
    add_weight(w, in, lfm2 ? "token_embd_norm.weight" : "output_norm.weight", d.n_embd, 0);
    if (in.ConsumeBool()) add_weight(w, in, "output.weight", d.n_embd, d.n_vocab);
    if (lfm2) {
        add_lfm2_layers(w, in, d);
        return w.to_bytes();
    }
    if (gemma4) {
        add_gemma4_layers(w, in, d);
        return w.to_bytes();
    }
    for (uint32_t il = 0; il < d.n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        add_weight(w, in, b + "attn_norm.weight", d.n_embd, 0);
        add_attention(w, in, b, d);
        add_ffn(w, in, b, d);
        if (gemma) {
            add_weight(w, in, b + "attn_q_norm.weight", d.head_dim, 0);
            add_weight(w, in, b + "attn_k_norm.weight", d.head_dim, 0);
            add_weight(w, in, b + "post_attention_norm.weight", d.n_embd, 0);
            add_weight(w, in, b + "post_ffw_norm.weight", d.n_embd, 0);
        }
    }
    return w.to_bytes();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);
    std::vector<uint8_t> bytes;
    try {
        bytes = build_file(in);
    } catch (const cactus::Error&) {
        return 0;  // the writer refused (e.g. a duplicate name): not an input for the loader
    }
    cactus::ModelOptions options;
    options.n_threads = 1;
    options.memory_budget = size_t(256) << 20;
    options.n_ctx = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<size_t>(1, 256);
    options.n_batch = in.ConsumeIntegralInRange<size_t>(0, 64);
    if (in.ConsumeBool()) options.kv.type = in.ConsumeIntegralInRange<int>(0, 2);
    if (in.ConsumeBool()) options.kv.compress = in.ConsumeIntegralInRange<int>(0, 1);
    const int32_t token = in.ConsumeIntegral<int32_t>();
    try {
        auto file = cactus::GgufFile::from_memory(bytes.data(), bytes.size());
        auto model = cactus::Model::load(*file, options);
        const int32_t vocab = static_cast<int32_t>(model->info().n_vocab);
        const int32_t ids[3] = {0, vocab - 1, token};
        std::vector<float> logits;
        model->forward(ids, 2, &logits);
        if (logits.size() != model->info().n_vocab) std::abort();
        model->forward(ids + 2, 1, &logits);  // any id: out of the vocabulary is an error
    } catch (const cactus::Error&) {
        // rejected cleanly
    }
    return 0;
}
