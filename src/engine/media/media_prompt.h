#pragma once
// A prompt with images: token ids and, where the id is < 0, an embedding row (an image token),
// built from a family's layout (marker tokens looked up by their text, as llama.cpp's libmtmd does)
// and prefilled into a Model in chunks of at most `chunk` tokens without padding: an image may
// span chunks (its rows continue the sequence like text), except a bidirectional one (Gemma 3:
// its rows attend to each other both ways), which is always prefilled whole in one step.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "models/vision/preprocess.h"

namespace cactus {

class Model;
class Tokenizer;
class VisionEncoder;
struct VisionHParams;

struct MediaPrompt {
    size_t n_embd = 0;
    std::vector<int32_t> tokens;  // [n]; < 0: row i of embd
    std::vector<float> embd;      // [n, n_embd] (rows of text tokens unused)
    std::vector<int32_t> group;   // [n] rows of one bidirectional span share an id >= 0; -1: causal

    void push_token(int32_t id);
    // [n, n_embd]; bidirectional: the n rows form one span (they attend to each other both ways).
    void push_rows(const float* rows, size_t n, bool bidirectional = false);
    // [first, end) of the bidirectional span holding row i, or {i, i + 1} for a causal row.
    std::pair<size_t, size_t> span_of(size_t i) const;
};

// Marker text -> token ids: special tokens "<...>" and runs of "\n\n" / "\n", each one vocabulary
// entry whose rendered piece equals the text (throws naming the marker when the vocabulary lacks it).
class MarkerVocab {
public:
    explicit MarkerVocab(const Tokenizer& tok);
    std::vector<int32_t> ids(const std::string& text) const;

private:
    std::map<std::string, int32_t> by_piece_;
};

// Appends an image (idefics3: tiles + global image) to `prompt`: preprocesses, encodes each part
// with `enc` and splices the embeddings between the markers of idefics3_layout.
void append_idefics3_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab);
// Gemma 3: "<start_of_image>" + the image's rows (one bidirectional span) + "<end_of_image>".
void append_gemma3_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab);
// LFM2-VL: "<|image_start|>", tiles with "<|img_row_Y_col_X|>" markers and "<|img_thumbnail|>" +
// thumbnail when the image is large, else the one smart-resized image, then "<|image_end|>"
// (lfm2_tiles, lfm2_layout); causal rows.
void append_lfm2_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab);
// Gemma 4: "<|image>" + the image's rows (gemma4_image at max_soft_tokens, 280 by default as the
// processor) + "<image|>", as processing_gemma4.py lays it out; causal rows (E2B / E4B).
void append_gemma4_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab,
                         size_t max_soft_tokens = 280);
// The same with the marker ids given (boi, eoi: the ids of "<|image>" and "<image|>").
void append_gemma4_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const std::vector<int32_t>& boi,
                         const std::vector<int32_t>& eoi, size_t max_soft_tokens);
// The preprocessing parameters of an lfm2 encoder (patch, downsample, token limits).
Lfm2Config lfm2_config(const VisionHParams& hp);
// The projector's family of `enc` decides the layout (idefics3, gemma3, lfm2, gemma4v).
void append_image(MediaPrompt* prompt, const Image& img, VisionEncoder& enc, const MarkerVocab& vocab);

// Prefills rows [from, from + n) of `prompt` into sequence `seq` in chunks of at most `chunk` tokens
// (0: the model's n_batch); a chunk that would end inside a bidirectional span ends before it, or,
// when the span starts the chunk, takes the whole span (throws when a span exceeds the model's
// step; `from` must not be inside a span). *logits gets the last row's logits [n_vocab]. on_chunk(first, count),
// when given, runs after each chunk the model took (the cache may take fewer rows than asked).
using ChunkDone = std::function<void(size_t first, size_t count)>;
// Rows of the next step from row `at` (not inside a span) toward `end`: at most `chunk`, shortened
// to end before a bidirectional span it would cut, or the whole span when it starts at `at`;
// throws when that exceeds `cap` (the most rows one step takes).
size_t media_step(const MediaPrompt& prompt, size_t at, size_t end, size_t chunk, size_t cap);
void prefill_media(Model& model, const MediaPrompt& prompt, size_t from, size_t n, size_t chunk, int seq,
                   std::vector<float>* logits, const ChunkDone& on_chunk = {});

}  // namespace cactus
