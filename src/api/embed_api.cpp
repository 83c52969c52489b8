// The C API's embedding calls (include/cactus/cactus.h): text through the handle's embedder (an
// encoder, or the chat model's hidden states), images through the vision projector, audio through
// the Whisper encoder. All write a vector into the caller's float buffer.
#include <cstring>

#include "api/guard.h"
#include "api/handle.h"
#include "core/error.h"
#include "media/audio_input.h"

namespace {

using namespace cactus;
using api::guarded;
using api::Lease;
using api::Use;

// Writes v into buffer: its length, or -2 when buffer_bytes cannot hold it (*dim still set).
int write_vector(const std::vector<float>& v, float* buffer, size_t buffer_bytes, size_t* dim, const char* function) {
    *dim = v.size();
    if (buffer == nullptr || buffer_bytes < v.size() * sizeof(float)) {
        api::set_error(std::string(function) + ": the embedding needs " + std::to_string(v.size() * sizeof(float)) +
                       " bytes but buffer_bytes is " + std::to_string(buffer_bytes));
        return CACTUS_BUFFER_TOO_SMALL;
    }
    std::memcpy(buffer, v.data(), v.size() * sizeof(float));
    return static_cast<int>(v.size());
}

}  // namespace

extern "C" {

int cactus_embed(cactus_model_t model, const char* text, float* buffer, size_t buffer_bytes, size_t* embedding_dim,
                 bool normalize) {
    return guarded("cactus_embed", [&]() -> int {
        if (text == nullptr) fail("text is NULL");
        if (embedding_dim == nullptr) fail("embedding_dim is NULL");
        if (text[0] == '\0') fail("text is empty");
        Lease lease(model, Use::EMBED);
        EmbedOptions options;
        options.normalize = normalize;
        const std::vector<Embedding> e = lease.embedder().embed({text}, options);
        return write_vector(e.at(0).values, buffer, buffer_bytes, embedding_dim, "cactus_embed");
    });
}

int cactus_image_embed(cactus_model_t model, const char* image_path, float* buffer, size_t buffer_bytes,
                       size_t* embedding_dim) {
    return guarded("cactus_image_embed", [&]() -> int {
        if (image_path == nullptr) fail("image_path is NULL");
        if (embedding_dim == nullptr) fail("embedding_dim is NULL");
        Lease lease(model, Use::EMBED);
        if (!lease.handle()->engine || !lease.engine().has_vision())
            fail("this model has no vision encoder (load a vision model with its mmproj)");
        const std::vector<ImageInput> images = lease.engine().read_images({image_path});
        return write_vector(lease.engine().image_embedding(images.at(0)), buffer, buffer_bytes, embedding_dim,
                            "cactus_image_embed");
    });
}

int cactus_audio_embed(cactus_model_t model, const char* audio_path, float* buffer, size_t buffer_bytes,
                       size_t* embedding_dim) {
    return guarded("cactus_audio_embed", [&]() -> int {
        if (audio_path == nullptr) fail("audio_path is NULL");
        if (embedding_dim == nullptr) fail("embedding_dim is NULL");
        Lease lease(model, Use::SPEECH);
        const std::vector<float> samples = read_wav_file(audio_path);
        return write_vector(api::audio_embedding(lease.speech(), samples), buffer, buffer_bytes, embedding_dim,
                            "cactus_audio_embed");
    });
}

}  // extern "C"
