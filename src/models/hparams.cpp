#include "models/hparams.h"

#include <algorithm>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model_budget.h"

namespace cactus {

namespace {

constexpr size_t kMaxDim = size_t(1) << 20;  // sanity bound on any hyper-parameter

size_t read_dim(const GgufFile& file, const std::string& key) {
    const uint64_t v = file.get_uint(key);
    if (v == 0 || v > kMaxDim) fail("read_hparams: %s = %llu is out of range", key.c_str(), (unsigned long long)v);
    return static_cast<size_t>(v);
}

size_t read_dim(const GgufFile& file, const std::string& key, size_t fallback) {
    return file.has(key) ? read_dim(file, key) : fallback;
}

std::string dims_string(const std::vector<uint64_t>& dims) {
    std::string s = "{";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "}";
}

// attention.head_count_kv: one number, or one per layer (0 = no attention in that layer).
void read_head_count_kv(const GgufFile& file, const std::string& key, const HParamsRules& rules, HParams& hp) {
    const GgufValue* v = file.find(key);
    if (!v || v->type != GgufType::ARRAY) {
        hp.n_head_kv = read_dim(file, key, hp.n_head);
        hp.layer_n_head_kv.assign(hp.n_layer, hp.n_head_kv);
        return;
    }
    if (v->ints.size() != hp.n_layer) {
        fail("read_hparams: %s has %zu entries for %zu layers", key.c_str(), v->ints.size(), hp.n_layer);
    }
    for (size_t il = 0; il < hp.n_layer; ++il) {
        const int64_t h = v->ints[il];
        if (h < 0 || h > static_cast<int64_t>(kMaxDim) || (h == 0 && !rules.layers_without_attention) ||
            (h != 0 && hp.n_head_kv != 0 && static_cast<size_t>(h) != hp.n_head_kv && !rules.per_layer_kv_heads)) {
            fail("read_hparams: %s[%zu] = %lld (layers with attention must agree; 0 only in hybrid models)",
                 key.c_str(), il, (long long)h);
        }
        if (h != 0 && hp.n_head % static_cast<size_t>(h) != 0) {
            fail("read_hparams: head_count %zu is not a multiple of %s[%zu] = %lld", hp.n_head, key.c_str(), il,
                 (long long)h);
        }
        hp.n_head_kv = std::max(hp.n_head_kv, static_cast<size_t>(h));
        hp.layer_n_head_kv.push_back(static_cast<size_t>(h));
    }
    if (hp.n_head_kv == 0) fail("read_hparams: %s has no layer with attention", key.c_str());
}

// feed_forward_length: one number, or one per layer.
void read_feed_forward_length(const GgufFile& file, const std::string& key, HParams& hp) {
    const GgufValue* v = file.find(key);
    if (!v || v->type != GgufType::ARRAY) {
        hp.n_ff = read_dim(file, key);
        hp.layer_n_ff.assign(hp.n_layer, hp.n_ff);
        return;
    }
    if (v->ints.size() != hp.n_layer) {
        fail("read_hparams: %s has %zu entries for %zu layers", key.c_str(), v->ints.size(), hp.n_layer);
    }
    for (size_t il = 0; il < hp.n_layer; ++il) {
        const int64_t f = v->ints[il];
        if (f <= 0 || f > static_cast<int64_t>(kMaxDim)) {
            fail("read_hparams: %s[%zu] = %lld is out of range", key.c_str(), il, (long long)f);
        }
        hp.layer_n_ff.push_back(static_cast<size_t>(f));
        hp.n_ff = std::max(hp.n_ff, static_cast<size_t>(f));
    }
}

}  // namespace

HParams read_hparams(const GgufFile& file, const std::string& arch, const HParamsRules& rules) {
    HParams hp;
    hp.arch = arch;
    const std::string p = arch + ".";
    hp.n_layer = read_dim(file, p + "block_count");
    check_layer_count(file, hp.n_layer);  // model_budget.h: no per-layer allocation past the file
    hp.n_embd = read_dim(file, p + "embedding_length");
    read_feed_forward_length(file, p + "feed_forward_length", hp);
    hp.n_head = read_dim(file, p + "attention.head_count");
    read_head_count_kv(file, p + "attention.head_count_kv", rules, hp);
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
    hp.sliding_window =
        static_cast<uint32_t>(std::min<uint64_t>(file.get_uint(p + "attention.sliding_window", 0), uint64_t(1) << 30));
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
             dims_string(embd->dims).c_str(), hp.n_embd);
    }
    hp.n_vocab = static_cast<size_t>(embd->dims[1]);
    return hp;
}

}  // namespace cactus
