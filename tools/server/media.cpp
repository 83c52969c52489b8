#include "media.h"

#include <algorithm>

#include "backends/backend.h"
#include "core/error.h"
#include "core/format.h"
#include "core/sha256.h"
#include "engine/media/audio_prompt.h"
#include "media/audio_input.h"
#include "media/image.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace cactus::server {

namespace {

// The placeholders standing for images[k] / audio[k] in a message's "images" / "audio" (never a
// real path).
const char* const kPlaceholder = "\x01image:";
const char* const kAudioPlaceholder = "\x01audio:";

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

namespace {

// The longest clip the audio tower takes, as read limits.
AudioLimits clip_limits() {
    AudioLimits limits;
    limits.max_seconds = double(AudioEncoder::kMaxSamples) / double(AudioEncoder::kSampleRate);
    return limits;
}

// One input_audio part's clip: {"input_audio": {"data": base64 WAV, "format": "wav"}}.
AudioInput part_audio(const json& part, size_t index, const char* key) {
    const json& ref = part.contains("input_audio") ? part["input_audio"] : json();
    if (!ref.is_object() || !ref.contains("data") || !ref["data"].is_string())
        throw HttpError{
            400, cactus::format("messages[%zu]: an input_audio part needs input_audio.data (base64)", index), key};
    const std::string format = ref.value("format", std::string("wav"));
    if (format != "wav")
        throw HttpError{
            400,
            cactus::format("messages[%zu]: input_audio format '%.20s' is not supported (send a WAV: \"wav\")", index,
                           format.c_str()),
            key};
    const std::string& data = ref["data"].get_ref<const std::string&>();
    const AudioLimits limits = clip_limits();
    // A WAV of 30 s holds at most rate x channels x 8 bytes a sample; more base64 than that is refused undecoded.
    const double max_bytes = limits.max_seconds * limits.max_rate * limits.max_channels * 8.0 + 1024.0;
    if (double(data.size()) / 4.0 * 3.0 > std::min(max_bytes, 256.0 * 1024 * 1024))
        throw HttpError{400, cactus::format("messages[%zu]: input_audio is over the size limit", index), key};
    std::vector<uint8_t> bytes;
    if (!decode_base64(data, &bytes))
        throw HttpError{400, cactus::format("messages[%zu]: input_audio.data is not valid base64", index), key};
    AudioInput clip{cactus::format("messages[%zu] input_audio", index), {}};
    try {
        clip.samples = decode_wav(bytes.data(), bytes.size(), limits);
    } catch (const std::exception& e) {
        throw HttpError{400, cactus::format("messages[%zu]: input_audio: %s", index, e.what()), key};
    }
    if (clip.samples.empty())
        throw HttpError{400, cactus::format("messages[%zu]: input_audio holds no samples", index), key};
    return clip;
}

AudioInput file_audio(const std::string& path, size_t index, const char* key) {
    AudioInput clip{path, {}};
    try {
        clip.samples = read_wav_file(path, clip_limits());
    } catch (const std::exception& e) {
        throw HttpError{400, cactus::format("messages[%zu]: audio '%s': %s", index, path.c_str(), e.what()), key};
    }
    if (clip.samples.empty())
        throw HttpError{400, cactus::format("messages[%zu]: audio '%s' holds no samples", index, path.c_str()), key};
    return clip;
}

bool is_part(const json& part, const char* type) {
    return part.is_object() && part.contains("type") && part["type"] == type;
}

// Appends `placeholders` to m[field] (an array, created when missing).
void add_placeholders(json& m, const char* field, const json& placeholders) {
    if (placeholders.empty()) return;
    if (!m.contains(field) || !m[field].is_array()) m[field] = json::array();
    for (const json& p : placeholders) m[field].push_back(p);
}

}  // namespace

RequestMedia take_media(json* messages, const char* key, const MediaRefusals& refuse) {
    RequestMedia media;
    if (!messages->is_array()) return media;
    for (size_t index = 0; index < messages->size(); ++index) {
        json& m = (*messages)[index];
        if (!m.is_object()) continue;
        const bool own_images = m.contains("images") && m["images"].is_array() && !m["images"].empty();
        const bool own_audio = m.contains("audio") && m["audio"].is_array() && !m["audio"].empty();
        if (own_images && refuse.images) throw HttpError{400, refuse.images, key};
        if (own_audio && refuse.audio) throw HttpError{400, refuse.audio, key};
        if (own_images)
            for (const json& p : m["images"]) {
                if (!p.is_string()) continue;  // the messages parser names the error
                try {
                    media.images.push_back(ImageInput{p.get<std::string>(), read_image_file(p.get<std::string>())});
                } catch (const std::exception& e) {
                    throw HttpError{400, cactus::format("messages[%zu]: %s", index, e.what()), key};
                }
            }
        if (own_audio)
            for (const json& p : m["audio"])
                if (p.is_string()) media.audio.push_back(file_audio(p.get<std::string>(), index, key));
        if (!m.contains("content") || !m["content"].is_array()) continue;
        json kept = json::array();
        json image_placeholders = json::array(), audio_placeholders = json::array();
        for (const json& part : m["content"]) {
            if (is_part(part, "image_url")) {
                if (refuse.images) throw HttpError{400, refuse.images, key};
                image_placeholders.push_back(kPlaceholder + std::to_string(media.images.size()));
                media.images.push_back(part_image(part, index, key));
            } else if (is_part(part, "input_audio")) {
                if (refuse.audio) throw HttpError{400, refuse.audio, key};
                audio_placeholders.push_back(kAudioPlaceholder + std::to_string(media.audio.size()));
                media.audio.push_back(part_audio(part, index, key));
            } else {
                kept.push_back(part);
            }
        }
        if (image_placeholders.empty() && audio_placeholders.empty()) continue;
        m["content"] = kept;
        add_placeholders(m, "images", image_placeholders);
        add_placeholders(m, "audio", audio_placeholders);
    }
    return media;
}

ServerMedia::ServerMedia(const std::string& mmproj_path, const Engine& engine, int n_threads) {
    file_ = GgufFile::open(mmproj_path);
    const BackendOptions options = engine.encoder_options(n_threads);  // the served model's device
    const size_t n_embd = engine.model().info().n_embd;
    if (file_->get_bool("clip.has_vision_encoder", false)) {
        vision_ = std::make_unique<VisionEncoder>(*file_, options);
        const VisionHParams& hp = vision_->hparams();
        if (hp.projector != "idefics3" && hp.projector != "gemma3" && hp.projector != "gemma4v")
            fail("mmproj '%s': projector type '%s' is not supported yet (idefics3, gemma3 and gemma4v are)",
                 mmproj_path.c_str(), hp.projector.c_str());
        if (hp.proj_dim != n_embd)
            fail("mmproj '%s' gives %zu-wide image rows but the text model takes %zu: not a pair", mmproj_path.c_str(),
                 hp.proj_dim, n_embd);
    }
    if (mmproj_has_audio(*file_)) {
        audio_ = std::make_unique<AudioEncoder>(*file_, options);
        if (audio_->proj_dim() != n_embd)
            fail("mmproj '%s' gives %zu-wide audio rows but the text model takes %zu: not a pair", mmproj_path.c_str(),
                 audio_->proj_dim(), n_embd);
    }
    if (!vision_ && !audio_) fail("mmproj '%s' holds neither a vision nor an audio tower", mmproj_path.c_str());
}

namespace {

// Gives the causal rows of out->tokens [first, end) ids derived from the input's digest and the
// row, so equal inputs at equal places match in a slot's cache; never kAnonymousRow.
void key_rows(const std::string& digest, size_t first, MediaPrompt* out) {
    const uint64_t base = std::stoull(digest.substr(digest.size() - 16), nullptr, 16);
    size_t row = 0;
    for (size_t i = first; i < out->tokens.size(); ++i) {
        if (out->tokens[i] >= 0) continue;
        const uint64_t k = base ^ ((uint64_t(row++) + 1) * 0x9E3779B97F4A7C15ull);
        if (out->group[i] < 0) out->tokens[i] = -2 - int32_t(k % 0x7FFFFFF0u);
    }
}

std::string digest_of(const void* data, size_t size) {
    Sha256 sha;
    sha.update(data, size);
    return sha.hex_digest();
}

}  // namespace

void ServerMedia::append_image_input(const ImageInput& image, const MarkerVocab& vocab, MediaPrompt* out) {
    if (!vision_) fail("this request holds images but the server's mmproj has no vision tower");
    const size_t first = out->tokens.size();
    const Image img = decode_image(image.bytes.data(), image.bytes.size(), image.name);
    append_image(out, img, *vision_, vocab);
    key_rows(digest_of(image.bytes.data(), image.bytes.size()), first, out);
}

void ServerMedia::append_audio_input(const AudioInput& clip, const MarkerVocab& vocab, MediaPrompt* out) {
    if (!audio_) fail("this request holds audio but the server's mmproj has no audio tower");
    if (clip.samples.size() > AudioEncoder::kMaxSamples)
        fail("audio '%s' is longer than the audio tower's %zu samples", clip.name.c_str(), AudioEncoder::kMaxSamples);
    const size_t first = out->tokens.size();
    append_gemma4_audio(out, clip.samples.data(), clip.samples.size(), *audio_, vocab);
    key_rows(digest_of(clip.samples.data(), clip.samples.size() * sizeof(float)), first, out);
}

std::shared_ptr<const MediaPrompt> ServerMedia::prompt(const Engine& engine, const std::string& text,
                                                       const RequestMedia& media) {
    // The text split at the markers, tokenized apart (BOS on the first piece only), each input's
    // layout between the pieces (as Engine::media_prompt).
    const MediaSplit split = split_at_media_markers(text);
    const size_t n_images = size_t(std::count(split.markers.begin(), split.markers.end(), MediaSplit::Kind::image));
    if (n_images != media.images.size() || split.markers.size() - n_images != media.audio.size())
        fail("the prompt holds %zu image and %zu audio markers for %zu images and %zu clips", n_images,
             split.markers.size() - n_images, media.images.size(), media.audio.size());
    auto out = std::make_shared<MediaPrompt>();
    out->n_embd = engine.model().info().n_embd;
    const MarkerVocab vocab(engine.tokenizer());
    std::lock_guard<std::mutex> lock(mutex_);
    size_t next_image = 0, next_audio = 0;
    for (size_t i = 0; i < split.pieces.size(); ++i) {
        const std::vector<int32_t> ids =
            i == 0 ? engine.tokenize_prompt(split.pieces[i]) : engine.tokenizer().encode(split.pieces[i], false, true);
        for (int32_t id : ids) out->push_token(id);
        if (i == split.markers.size()) break;
        if (split.markers[i] == MediaSplit::Kind::image)
            append_image_input(media.images[next_image++], vocab, out.get());
        else
            append_audio_input(media.audio[next_audio++], vocab, out.get());
    }
    return out;
}

}  // namespace cactus::server
