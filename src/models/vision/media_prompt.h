#pragma once
// A prompt with images: token ids and, where the id is < 0, an embedding row (an image token),
// built from a family's layout (marker tokens looked up by their text, as llama.cpp's libmtmd does)
// and prefilled into a Model in chunks of at most `chunk` tokens without padding: an image may
// span chunks (its rows continue the sequence like text).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/vision/preprocess.h"

namespace cactus {

class Model;
class Tokenizer;
class VisionEncoder;

struct MediaPrompt {
    size_t n_embd = 0;
    std::vector<int32_t> tokens;  // [n]; < 0: row i of embd
    std::vector<float> embd;      // [n, n_embd] (rows of text tokens unused)

    void push_token(int32_t id);
    void push_rows(const float* rows, size_t n);  // [n, n_embd]
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

// Prefills rows [from, from + n) of `prompt` into sequence `seq` in chunks of at most `chunk` tokens
// (0: the model's n_batch); *logits gets the last row's logits [n_vocab]. on_chunk(first, count),
// when given, runs after each chunk the model took (the cache may take fewer rows than asked).
using ChunkDone = std::function<void(size_t first, size_t count)>;
void prefill_media(Model& model, const MediaPrompt& prompt, size_t from, size_t n, size_t chunk, int seq,
                   std::vector<float>* logits, const ChunkDone& on_chunk = {});

}  // namespace cactus
