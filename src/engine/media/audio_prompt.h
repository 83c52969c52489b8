#pragma once
// Audio in a media prompt. Gemma 4 (processing_gemma4.py replace_audio_token): "<|audio>", one
// causal row per soft token (tokens(n) of them, 25 per second), "<audio|>".
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/media/media_prompt.h"

namespace cactus {

class AudioEncoder;

// samples: 16 kHz mono, 1 <= n <= AudioEncoder::kMaxSamples, finite (else a cactus::Error). The
// encoder's proj_dim must equal the prompt's n_embd.
void append_gemma4_audio(MediaPrompt* prompt, const float* samples, size_t n, AudioEncoder& enc,
                         const MarkerVocab& vocab);
// The same with the marker ids given (test vocabularies lack "<|audio>" and "<audio|>").
void append_gemma4_audio(MediaPrompt* prompt, const float* samples, size_t n, AudioEncoder& enc,
                         const std::vector<int32_t>& begin, const std::vector<int32_t>& end);

}  // namespace cactus
