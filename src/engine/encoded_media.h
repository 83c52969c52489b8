#pragma once
// The engine's encoded images and audio clips (engine_media.cpp, engine_audio.cpp): a layout of
// marker tokens and rows, identified by a digest of the input for prefix reuse.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/media/media_prompt.h"

namespace cactus {

// One image's or clip's part of a prompt: marker token ids and rows (ids < 0) with their embeddings.
struct EncodedMedia {
    std::string digest;  // "image:" or "audio:" + SHA-256 of the input (encoded bytes, samples), hex
    uint64_t key = 0;    // the digest's last 64 bits
    MediaPrompt layout;  // tokens [n]; embd [n, n_embd]
};

// The 64-bit row key base of a digest (its last 16 hex digits).
uint64_t digest_key(const std::string& digest);
// The input of that digest encoded already in this call (`fresh`) or the previous one, else null.
std::shared_ptr<const EncodedMedia> find_encoded(const std::string& digest,
                                                 const std::vector<std::shared_ptr<const EncodedMedia>>& fresh,
                                                 const std::vector<std::shared_ptr<const EncodedMedia>>& previous);
// Appends the layout to `rows`, each row's key (the input's key mixed with the row) to `keys`.
void append_encoded(const EncodedMedia& e, MediaPrompt* rows, std::vector<uint64_t>* keys);

}  // namespace cactus
