#pragma once
// Images in chat requests (cactus serve --mmproj): OpenAI image_url parts (a local path, a file://
// URL or a data:image/...;base64 URL) become the message's images, and a rendered prompt with one
// kImageMarker per image becomes token ids with image rows (ids < 0) for the scheduler. Remote URLs
// are refused (the server fetches nothing).
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "models/vision/vision_encoder.h"
#include "server.h"

namespace cactus::server {

// Strict base64 (RFC 4648, '=' padding optional, no whitespace) into bytes; false when malformed.
bool decode_base64(const std::string& text, std::vector<uint8_t>* out);

// Moves the image_url parts of `messages` (the request's raw array) into each message's "images"
// as placeholders and returns the images in the order message_images() will list them (a
// message's own "images" paths first, then its parts). HttpError 400 naming `key` on a remote URL,
// bad base64, a data: URL that is not an image or too large (the decoder's file limit), or a file
// that cannot be read.
std::vector<ImageInput> take_images(json* messages, const char* key);

// The vision projector next to the served model. Encoding is serialized (one encoder).
class ServerVision {
public:
    ServerVision(const std::string& mmproj_path, const Engine& engine, int n_threads);
    // Prompt text holding one kImageMarker per image → ids ([n], < 0: image rows) and the rows.
    std::shared_ptr<const MediaPrompt> prompt(const Engine& engine, const std::string& text,
                                              const std::vector<ImageInput>& images);

private:
    std::unique_ptr<GgufFile> file_;
    std::unique_ptr<VisionEncoder> encoder_;
    std::mutex mutex_;
};

}  // namespace cactus::server
