#pragma once
// Whisper (encoder-decoder speech recognition) over the Backend: a GGUF written by
// scripts/convert_whisper.py (architecture "whisper"). Encoder: two convolutions with GELU
// (the second of stride 2), sinusoid positions, pre-norm transformer blocks, a final LayerNorm.
// Decoder: token + learned position embeddings, blocks of causal self-attention (over K/V rows of
// this object's own cache), cross-attention over the encoder states (K/V computed once per 30 s
// window) and a GELU MLP; logits through the tied token embedding.
// Beam search: the self-attention cache has `slots`, one per sequence (beam); decode_slots() runs one
// token of each of several sequences in one forward (the matrices read once for all of them; the
// cross-attention K/V shared), and copy_slot() forks a sequence's rows into another slot.
// Per-token values reach the kernels as data, never as arguments (positions and cache rows as id
// lists: get_rows, set_rows). On a backend that replays repeated steps as graphs
// (Backend::replays_steps) self-attention also reads a slot's whole window under a mask hiding the
// rows past each query, so every greedy step has the same arguments and replays as one graph;
// elsewhere it reads only the rows written so far.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "models/blocks.h"

namespace cactus {

class GgufFile;
class WeightLoader;

struct WhisperHparams {
    size_t n_mels = 80;
    size_t n_embd = 0;
    size_t n_head = 0;
    size_t n_audio_ctx = 1500;  // encoder positions (30 s)
    size_t n_text_ctx = 448;    // decoder positions
    size_t n_enc_layer = 0;
    size_t n_dec_layer = 0;
    size_t n_vocab = 0;
    size_t n_frames() const { return 2 * n_audio_ctx; }  // mel frames per window (3000)
};

// Special token ids and the decoding lists from the model file.
struct WhisperVocab {
    int32_t eot = 0, sot = 0, transcribe = 0, translate = 0, sot_prev = 0, sot_lm = 0;
    int32_t no_timestamps = 0, no_speech = 0, timestamp_begin = 0;
    bool multilingual = false;
    std::vector<int32_t> lang_ids;        // <|en|>, <|zh|>, ... (multilingual models)
    std::vector<std::string> lang_codes;  // "en", "zh", ... (same order)
    std::vector<int32_t> suppress;        // never sampled
    std::vector<int32_t> suppress_begin;  // not sampled first (" " and <|endoftext|>)
    std::vector<std::string> tokens;      // byte-level BPE strings
    // The bytes of a text token ("" for special and timestamp tokens).
    std::string token_bytes(int32_t id) const;
    std::string decode(const std::vector<int32_t>& ids) const;
    int32_t language_token(const std::string& code) const;  // -1 when unknown
};

class WhisperModel {
public:
    WhisperModel(const std::string& path, Backend& backend);
    ~WhisperModel();

    const WhisperHparams& hparams() const { return hp_; }
    const WhisperVocab& vocab() const { return vocab_; }
    const std::vector<float>& mel_filters() const { return mel_filters_; }

    // mel: [n_frames(), n_mels] of one window → encoder states and the cross-attention K/V of every
    // decoder layer (kept until the next call).
    void encode(const float* mel);
    // The first `rows` (<= n_audio_ctx) encoder states of the last encode(): [rows, n_embd] into *out.
    void encoder_states(size_t rows, std::vector<float>* out);
    // Runs tokens [n] at decoder positions [n_past, n_past + n) over the self-attention cache
    // (rows from n_past on are overwritten); returns the logits of the last token [n_vocab].
    const std::vector<float>& decode(const int32_t* tokens, size_t n, size_t n_past);
    // The logits of row `row` of the last decode() call (row < n of that call): the no-speech
    // probability is read at <|startoftranscript|>.
    std::vector<float> logits_of_row(size_t row);

    // Self-attention cache slots (sequences) available: at least 1; decode() uses slot 0.
    size_t n_slots() const { return n_slots_; }
    // Makes room for n slots (n <= kMaxSlots). Growing reallocates the caches: their rows are lost,
    // so call it before decoding a window's prompt.
    void reserve_slots(size_t n);
    // Copies the self-attention rows [0, n_rows) of slot src into slot dst, every layer.
    void copy_slot(size_t dst, size_t src, size_t n_rows);
    // One token of each of n sequences: tokens[i] at position n_past of slot slots[i] (distinct
    // slots, each holding n_past rows); returns their logits [n, n_vocab], row i for tokens[i].
    const std::vector<float>& decode_slots(const int32_t* tokens, const size_t* slots, size_t n, size_t n_past);

    static constexpr size_t kMaxSlots = 16;

private:
    struct EncLayer;
    struct DecLayer;
    void load(WeightLoader& w, const GgufFile& f);
    void alloc_activations();
    Tensor alloc(size_t width, size_t rows, DType type = DType::F32);
    DenseAttention attention_shape() const;  // the heads of every attention, not causal
    void encoder_block(const EncLayer& l, const Tensor& x, size_t n);
    void alloc_caches(size_t n_slots);
    // slots == nullptr: n tokens of slot 0 at [n_past, n_past + n); else one token per slot.
    void decoder_block(const DecLayer& l, size_t il, const Tensor& x, size_t n, size_t n_past, const size_t* slots);
    // Uploads the step's positions, cache rows and (full_window_) mask rows.
    void stage_step(size_t n, size_t n_past, const size_t* slots);
    // a [1 or n, d] = self-attention of q over rows [0, n_past + n) of one slot's cache (its
    // whole window under mask rows [first, first + n) with full_window_).
    void self_attention(const Tensor& a, const Tensor& q, size_t il, size_t slot, size_t n_past, size_t first);
    void run_decoder(const int32_t* tokens, size_t n, size_t n_past, const size_t* slots);
    Tensor slot_rows(const Tensor& cache, size_t slot) const;  // [n_text_ctx, n_embd] of one slot

    Backend& be_;
    Blocks blocks_;
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<WeightLoader> weights_;  // owns the F32 copies of norm and bias vectors
    WhisperHparams hp_;
    WhisperVocab vocab_;
    std::vector<float> mel_filters_;
    std::vector<std::unique_ptr<Buffer>> buffers_;

    // weights
    Tensor conv1_w_, conv1_b_, conv2_w_, conv2_b_;  // [n_embd, n_mels * 3], [n_embd, n_embd * 3]
    Tensor enc_pos_, dec_pos_;                      // [n_audio_ctx, n_embd], [n_text_ctx, n_embd]
    Tensor enc_norm_w_, enc_norm_b_, dec_norm_w_, dec_norm_b_;
    Tensor token_embd_;  // [n_vocab, n_embd]
    std::vector<EncLayer> enc_;
    std::vector<DecLayer> dec_;

    // activations
    Tensor mel_;                             // [n_frames, n_mels]
    Tensor conv_;                            // [n_frames, n_embd]
    Tensor ex_, eh_, eq_, ek_, ev_, ea_;     // [n_audio_ctx, n_embd]
    Tensor ef_;                              // [n_audio_ctx, 4 n_embd]
    Tensor dx_, dh_, dq_, da_, dk_, dv_;     // [n_text_ctx, n_embd]
    Tensor df_;                              // [n_text_ctx, 4 n_embd]
    Tensor ids_;                             // [n_text_ctx] I32
    Tensor pos_ids_;                         // [n_text_ctx] I32: the step's decoder positions
    Tensor kv_rows_;                         // [n_text_ctx] I32: cache rows of the step's keys/values
    Tensor mask_;                            // [n_text_ctx, n_text_ctx]: 0 / -inf (full_window_ only)
    bool full_window_ = false;               // self-attention over whole windows (see the top)
    Tensor logits_;                          // [n_slots, n_vocab]
    std::vector<Tensor> self_k_, self_v_;    // per layer [n_slots * n_text_ctx, n_embd], slot by slot
    std::vector<Tensor> cross_k_, cross_v_;  // per layer [n_audio_ctx, n_embd]
    std::vector<float> host_logits_;
    size_t n_slots_ = 0;
    // of logits_, self_k_, self_v_: reallocated when the slots grow
    std::vector<std::unique_ptr<Buffer>> cache_buffers_;
    size_t last_n_ = 0;
};

}  // namespace cactus
