#pragma once
// BERT-family text encoders (architecture "bert" as llama.cpp's converter and
// scripts/convert_minilm.py write it): token + position + token-type embeddings and a LayerNorm,
// then post-norm blocks of bidirectional self-attention and a GELU (erf) MLP. The output is the
// hidden state of every token; pooling and normalisation are the embedder's (engine/embedding.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/pooling.h"

namespace cactus {

class GgufFile;
struct ModelOptions;

struct BertHparams {
    size_t n_vocab = 0;
    size_t n_embd = 0;
    size_t n_head = 0;
    size_t n_layer = 0;
    size_t n_ff = 0;
    size_t n_positions = 0;    // bert.context_length
    size_t n_token_types = 0;  // rows of token_types (2 for BERT; 0 when absent)
    float ln_eps = 1e-12f;     // bert.attention.layer_norm_epsilon
};

class BertModel {
public:
    virtual ~BertModel() = default;
    // Loads general.architecture "bert"; throws cactus::Error on a missing tensor or a wrong shape.
    // `file` must outlive the model. options: n_threads, device, n_batch (rows per forward).
    static std::unique_ptr<BertModel> load(const GgufFile& file, const ModelOptions& options);

    virtual const BertHparams& hparams() const = 0;
    // The file's <arch>.pooling_type (llama.cpp's numbering: 1 mean, 2 cls, 3 last); MEAN when absent.
    virtual Pooling pooling() const = 0;
    // Hidden states of several sequences in one forward (token type 0, positions from 0):
    // (*out)[i] = [seqs[i].size(), n_embd]. Each sequence: 1..n_positions ids < n_vocab. Sequences
    // attend only to themselves; the products run over all their rows at once.
    virtual void encode(const std::vector<std::vector<int32_t>>& seqs, std::vector<std::vector<float>>* out) = 0;
};

}  // namespace cactus
