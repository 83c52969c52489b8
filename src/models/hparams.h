#pragma once
// Hyper-parameters of a decoder from its GGUF metadata (`<arch>.*` keys), checked for consistency.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cactus {

class GgufFile;

struct HParams {
    std::string arch;
    size_t n_vocab = 0;
    size_t n_embd = 0;
    size_t n_layer = 0;
    size_t n_head = 0;
    size_t n_head_kv = 0;                 // the KV heads of every attention layer (the most, per_layer_kv_heads)
    std::vector<size_t> layer_n_head_kv;  // [n_layer] per layer; 0 = a layer without attention (LFM2 conv)
    size_t head_dim_k = 0;                // attention.key_length
    size_t head_dim_v = 0;                // attention.value_length
    size_t n_ff = 0;                      // the widest layer's feed_forward_length
    std::vector<size_t> layer_n_ff;       // [n_layer] per layer (one number, or an array in the file)
    size_t n_ctx_train = 0;
    size_t n_rot = 0;  // rope.dimension_count
    float rms_eps = 1e-5f;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;      // 1 / rope.scaling.factor for linear scaling
    uint32_t sliding_window = 0;       // attention.sliding_window (0 = none)
    float final_logit_softcap = 0.0f;  // final_logit_softcapping (0 = none)
};

// What an architecture accepts beyond one number per hyper-parameter.
struct HParamsRules {
    bool layers_without_attention = false;  // 0 entries in attention.head_count_kv (LFM2's conv layers)
    bool per_layer_kv_heads = false;        // head_count_kv entries that differ (Gemma 4 31B: 16 / 4)
};

// Reads `<arch>.*` keys and checks them for consistency (non-zero, head counts divide, even rope
// dimensions, ...). n_vocab comes from token_embd.weight. Throws cactus::Error naming the key.
// attention.head_count_kv may be a per-layer array (as llama.cpp writes for hybrid models); its
// non-zero entries must agree unless `rules` accept otherwise, so no architecture misreads a file
// meant for another. feed_forward_length may be a per-layer array (Gemma 4's double-wide layers).
HParams read_hparams(const GgufFile& file, const std::string& arch, const HParamsRules& rules = {});

}  // namespace cactus
