#pragma once
// Images and audio in chat requests (cactus serve --mmproj): OpenAI image_url parts (a local path, a
// file:// URL or a data:image/...;base64 URL) become the message's images, input_audio parts
// ({data: base64 WAV, format: "wav"}) its audio clips, and a rendered prompt with one kImageMarker
// per image and one kAudioMarker per clip becomes token ids with rows (ids < 0) for the scheduler.
// Remote URLs are refused (the server fetches nothing). Causal rows get ids derived from their
// input's digest, so a later turn about the same image or clip reuses the slot's cached rows.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "models/audio/gemma4_audio.h"
#include "models/vision/vision_encoder.h"
#include "server.h"

namespace cactus::server {

// Strict base64 (RFC 4648, '=' padding optional, no whitespace) into bytes; false when malformed.
bool decode_base64(const std::string& text, std::vector<uint8_t>* out);

// What a request may hold: a refusal (the HTTP 400 message) where the server lacks the tower.
struct MediaRefusals {
    const char* images = nullptr;
    const char* audio = nullptr;
};

// The media of a request's messages, in the order message_images() / message_audio() list them.
struct RequestMedia {
    std::vector<ImageInput> images;
    std::vector<AudioInput> audio;
};

// Moves the image_url and input_audio parts of `messages` (the request's raw array) into each
// message's "images" / "audio" as placeholders and returns the inputs (a message's own paths
// first, then its parts). HttpError 400 naming `key` on a remote URL, bad base64, a data: URL that
// is not an image, an input_audio that is not a WAV of at most 30 s, input over the size limits, a
// file that cannot be read, or media the server has no tower for (`refuse`).
RequestMedia take_media(json* messages, const char* key, const MediaRefusals& refuse);

// The mmproj's towers next to the served model. Encoding is serialized (one encoder each).
class ServerMedia {
public:
    ServerMedia(const std::string& mmproj_path, const Engine& engine, int n_threads);
    bool has_vision() const { return vision_ != nullptr; }
    bool has_audio() const { return audio_ != nullptr; }
    // Prompt text holding one kImageMarker per image and one kAudioMarker per clip → ids ([n],
    // < 0: rows) and the rows.
    std::shared_ptr<const MediaPrompt> prompt(const Engine& engine, const std::string& text, const RequestMedia& media);

private:
    void append_image_input(const ImageInput& image, const MarkerVocab& vocab, MediaPrompt* out);
    void append_audio_input(const AudioInput& clip, const MarkerVocab& vocab, MediaPrompt* out);

    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<VisionEncoder> vision_;
    std::unique_ptr<AudioEncoder> audio_;
    std::mutex mutex_;
};

}  // namespace cactus::server
