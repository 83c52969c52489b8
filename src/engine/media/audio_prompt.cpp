#include "engine/media/audio_prompt.h"

#include <vector>

#include "core/error.h"
#include "models/audio/gemma4_audio.h"

namespace cactus {

void append_gemma4_audio(MediaPrompt* prompt, const float* samples, size_t n, AudioEncoder& enc,
                         const std::vector<int32_t>& begin, const std::vector<int32_t>& end) {
    if (prompt->n_embd != enc.proj_dim()) {
        fail("gemma4 audio: the encoder projects to %zu, the text model's rows are %zu wide", enc.proj_dim(),
             prompt->n_embd);
    }
    std::vector<float> rows;  // [tokens(n), n_embd]
    enc.encode(samples, n, &rows);
    for (int32_t id : begin) prompt->push_token(id);
    prompt->push_rows(rows.data(), rows.size() / prompt->n_embd);
    for (int32_t id : end) prompt->push_token(id);
}

void append_gemma4_audio(MediaPrompt* prompt, const float* samples, size_t n, AudioEncoder& enc,
                         const MarkerVocab& vocab) {
    // Marker ids first: a vocabulary without them fails before the encode's work.
    append_gemma4_audio(prompt, samples, n, enc, vocab.ids("<|audio>"), vocab.ids("<audio|>"));
}

}  // namespace cactus
