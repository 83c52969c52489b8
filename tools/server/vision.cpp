#include "vision.h"

#include "backends/backend.h"
#include "core/error.h"
#include "core/format.h"
#include "media/image.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace cactus::server {

namespace {

// The placeholder standing for images[k] in a message's "images" (never a real path).
const char* const kPlaceholder = "\x01image:";

int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

// One image_url part's image: a data: URL decoded, else a local path or file:// URL read.
ImageInput part_image(const json& part, size_t index, const char* key) {
    const json& ref = part.contains("image_url") ? part["image_url"] : json();
    const json& url = ref.is_object() && ref.contains("url") ? ref["url"] : ref;
    if (!url.is_string())
        throw HttpError{400, cactus::format("messages[%zu]: an image_url part needs image_url.url (a string)", index),
                        key};
    std::string u = url.get<std::string>();
    const ImageLimits limits;
    ImageInput image;
    if (u.rfind("data:", 0) == 0) {
        const size_t comma = u.find(',');
        const std::string header = u.substr(0, comma == std::string::npos ? 0 : comma);
        if (comma == std::string::npos || header.rfind("data:image/", 0) != 0 || header.size() < 7 ||
            header.compare(header.size() - 7, 7, ";base64") != 0)
            throw HttpError{400,
                            cactus::format("messages[%zu]: a data: URL must be data:image/...;base64,... (got '%.40s')",
                                           index, u.c_str()),
                            key};
        if ((u.size() - comma - 1) / 4 * 3 > limits.max_file_bytes)
            throw HttpError{400,
                            cactus::format("messages[%zu]: the data: URL's image is over the %zu-byte limit", index,
                                           limits.max_file_bytes),
                            key};
        image.name = cactus::format("messages[%zu] data: URL", index);
        if (!decode_base64(u.substr(comma + 1), &image.bytes))
            throw HttpError{400, cactus::format("messages[%zu]: the data: URL is not valid base64", index), key};
        return image;
    }
    if (u.rfind("file://", 0) == 0) u = u.substr(7);
    if (u.find("://") != std::string::npos)
        throw HttpError{400,
                        cactus::format("messages[%zu]: remote image URLs are not fetched (got '%.40s'); send a "
                                       "data:image/...;base64 URL or a local path",
                                       index, u.c_str()),
                        key};
    image.name = u;
    try {
        image.bytes = read_image_file(u);
    } catch (const std::exception& e) {
        throw HttpError{400, cactus::format("messages[%zu]: %s", index, e.what()), key};
    }
    return image;
}

}  // namespace

bool decode_base64(const std::string& text, std::vector<uint8_t>* out) {
    out->clear();
    size_t n = text.size();
    while (n > 0 && text[n - 1] == '=') --n;
    if (text.size() - n > 2 || n % 4 == 1) return false;
    out->reserve(n / 4 * 3 + 2);
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; ++i) {
        const int v = base64_value(text[i]);
        if (v < 0) return false;
        acc = (acc << 6) | uint32_t(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out->push_back(uint8_t(acc >> bits));
            acc &= (1u << bits) - 1;
        }
    }
    return true;
}

std::vector<ImageInput> take_images(json* messages, const char* key) {
    std::vector<ImageInput> images;
    if (!messages->is_array()) return images;
    for (size_t index = 0; index < messages->size(); ++index) {
        json& m = (*messages)[index];
        if (!m.is_object()) continue;
        if (m.contains("images") && m["images"].is_array())
            for (const json& p : m["images"]) {
                if (!p.is_string()) continue;  // the messages parser names the error
                try {
                    images.push_back(ImageInput{p.get<std::string>(), read_image_file(p.get<std::string>())});
                } catch (const std::exception& e) {
                    throw HttpError{400, cactus::format("messages[%zu]: %s", index, e.what()), key};
                }
            }
        if (!m.contains("content") || !m["content"].is_array()) continue;
        json kept = json::array();
        json placeholders = json::array();
        for (const json& part : m["content"]) {
            if (!part.is_object() || !part.contains("type") || part["type"] != "image_url") {
                kept.push_back(part);
                continue;
            }
            placeholders.push_back(kPlaceholder + std::to_string(images.size()));
            images.push_back(part_image(part, index, key));
        }
        if (placeholders.empty()) continue;
        m["content"] = kept;
        if (!m.contains("images") || !m["images"].is_array()) m["images"] = json::array();
        for (const json& p : placeholders) m["images"].push_back(p);
    }
    return images;
}

ServerVision::ServerVision(const std::string& mmproj_path, const Engine& engine, int n_threads) {
    file_ = GgufFile::open(mmproj_path);
    BackendOptions options;
    options.n_threads = n_threads;
    encoder_ = std::make_unique<VisionEncoder>(*file_, options);
    const VisionHParams& hp = encoder_->hparams();
    if (hp.projector != "idefics3" && hp.projector != "gemma3")
        fail("mmproj '%s': projector type '%s' is not supported yet (idefics3 and gemma3 are)", mmproj_path.c_str(),
             hp.projector.c_str());
    if (hp.proj_dim != engine.model().info().n_embd)
        fail("mmproj '%s' gives %zu-wide image rows but the text model takes %zu: not a pair", mmproj_path.c_str(),
             hp.proj_dim, engine.model().info().n_embd);
}

std::shared_ptr<const MediaPrompt> ServerVision::prompt(const Engine& engine, const std::string& text,
                                                        const std::vector<ImageInput>& images) {
    // The text split at the markers: images.size() + 1 pieces, tokenized apart (BOS on the first
    // only), each image's layout between them (as Engine::media_prompt).
    const std::vector<std::string> pieces = split_at_markers(text);
    if (pieces.size() != images.size() + 1)
        fail("the prompt holds %zu image markers (%s) for %zu images", pieces.size() - 1, kImageMarker, images.size());
    auto out = std::make_shared<MediaPrompt>();
    out->n_embd = engine.model().info().n_embd;
    const MarkerVocab vocab(engine.tokenizer());
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < pieces.size(); ++i) {
        const std::vector<int32_t> ids =
            i == 0 ? engine.tokenize_prompt(pieces[i]) : engine.tokenizer().encode(pieces[i], false, true);
        for (int32_t id : ids) out->push_token(id);
        if (i == images.size()) break;
        const Image img = decode_image(images[i].bytes.data(), images[i].bytes.size(), images[i].name);
        append_image(out.get(), img, *encoder_, vocab);
    }
    return out;
}

}  // namespace cactus::server
