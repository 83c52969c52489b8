// The engine's media path: the mmproj GGUF next to the text model (a vision and/or an audio tower),
// prompts whose text holds one kImageMarker per image and one kAudioMarker per clip, and their rows
// in the session's cache (identified by the image's bytes or the clip's samples, so a later turn
// with the same input reuses them like text). The audio tower itself: engine_audio.cpp.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/sha256.h"
#include "engine/embedding.h"
#include "engine/engine.h"
#include "engine/encoded_media.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "media/image.h"
#include "models/model.h"
#include "models/vision/vision_encoder.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

namespace {

// The key of row `row` of an image or clip: never 0 (the key of text tokens).
uint64_t row_key(uint64_t media_key, size_t row) {
    const uint64_t k = media_key ^ ((uint64_t(row) + 1) * 0x9E3779B97F4A7C15ull);
    return k == 0 ? 1 : k;
}

}  // namespace

uint64_t digest_key(const std::string& digest) { return std::stoull(digest.substr(digest.size() - 16), nullptr, 16); }

std::shared_ptr<const EncodedMedia> find_encoded(const std::string& digest,
                                                 const std::vector<std::shared_ptr<const EncodedMedia>>& fresh,
                                                 const std::vector<std::shared_ptr<const EncodedMedia>>& previous) {
    for (const auto* list : {&fresh, &previous})
        for (const auto& e : *list)
            if (e->digest == digest) return e;
    return nullptr;
}

void append_encoded(const EncodedMedia& e, MediaPrompt* rows, std::vector<uint64_t>* keys) {
    const size_t n_embd = rows->n_embd;
    size_t row = 0;
    for (size_t t = 0; t < e.layout.tokens.size();) {
        const int32_t id = e.layout.tokens[t];
        if (id >= 0) {
            rows->push_token(id);
            keys->push_back(0);
            ++t;
            continue;
        }
        const auto span = e.layout.span_of(t);  // a run of rows copied as one (bidirectional spans stay whole)
        const size_t count = span.second - span.first;
        rows->push_rows(e.layout.embd.data() + t * n_embd, count, e.layout.group[t] >= 0);
        for (size_t r = 0; r < count; ++r) keys->push_back(row_key(e.key, row++));
        t += count;
    }
}

std::vector<std::string> split_at_markers(const std::string& text) {
    std::vector<std::string> pieces;
    const size_t len = std::strlen(kImageMarker);
    size_t from = 0;
    for (size_t at = text.find(kImageMarker); at != std::string::npos; at = text.find(kImageMarker, from)) {
        pieces.push_back(text.substr(from, at - from));
        from = at + len;
    }
    pieces.push_back(text.substr(from));
    return pieces;
}

MediaSplit split_at_media_markers(const std::string& text) {
    MediaSplit split;
    const size_t image_len = std::strlen(kImageMarker), audio_len = std::strlen(kAudioMarker);
    size_t from = 0;
    for (;;) {
        const size_t image_at = text.find(kImageMarker, from), audio_at = text.find(kAudioMarker, from);
        const size_t at = std::min(image_at, audio_at);
        if (at == std::string::npos) break;
        split.pieces.push_back(text.substr(from, at - from));
        const bool image = at == image_at;
        split.markers.push_back(image ? MediaSplit::Kind::image : MediaSplit::Kind::audio);
        from = at + (image ? image_len : audio_len);
    }
    split.pieces.push_back(text.substr(from));
    return split;
}

namespace {

std::vector<std::string> message_paths(const nlohmann::ordered_json& messages, const char* key) {
    std::vector<std::string> paths;
    for (const auto& m : messages) {
        if (!m.is_object() || !m.contains(key)) continue;
        if (!m[key].is_array()) fail("'%s' must be an array of paths", key);
        for (const auto& p : m[key]) {
            if (!p.is_string()) fail("'%s' must be an array of paths", key);
            paths.push_back(p.get<std::string>());
        }
    }
    return paths;
}

}  // namespace

std::vector<std::string> message_images(const nlohmann::ordered_json& messages) {
    return message_paths(messages, "images");
}

std::vector<std::string> message_audio(const nlohmann::ordered_json& messages) {
    return message_paths(messages, "audio");
}

std::vector<ImageInput> Engine::read_images(const std::vector<std::string>& paths) const {
    std::vector<ImageInput> images;
    if (paths.empty()) return images;
    if (!vision_)
        fail(
            "the messages hold %zu image(s) but this model has no vision projector: load it with its mmproj "
            ".gguf (a folder holding both, $CACTUS_MMPROJ, or --mmproj)",
            paths.size());
    for (const std::string& path : paths) images.push_back(ImageInput{path, read_image_file(path)});
    return images;
}

void Engine::load_mmproj(const std::string& mmproj_path, int n_threads) {
    mmproj_file_ = GgufFile::open(mmproj_path);
    // An mmproj holds a vision tower, an audio tower or both (clip.has_*_encoder, as the converter writes).
    const bool vision = mmproj_file_->get_bool("clip.has_vision_encoder", false);
    const bool audio = mmproj_file_->get_bool("clip.has_audio_encoder", false);
    if (vision) load_vision(mmproj_path, n_threads);
    if (audio) load_audio(mmproj_path, n_threads);
    if (!vision && !audio) fail("mmproj '%s' holds neither a vision nor an audio tower", mmproj_path.c_str());
}

BackendOptions Engine::encoder_options(int n_threads) const {
    BackendOptions options;
    options.device = model_options_.device;
    options.n_threads = n_threads;
    options.gpu_timeout_ms = model_options_.gpu_timeout_ms;
    return options;
}

void Engine::load_vision(const std::string& mmproj_path, int n_threads) {
    vision_ = std::make_unique<VisionEncoder>(*mmproj_file_, encoder_options(n_threads));
    const VisionHParams& hp = vision_->hparams();
    if (hp.projector != "idefics3" && hp.projector != "gemma3" && hp.projector != "lfm2" && hp.projector != "gemma4v")
        fail("mmproj '%s': projector type '%s' is not supported yet (idefics3, gemma3, lfm2 and gemma4v are)",
             mmproj_path.c_str(), hp.projector.c_str());
    if (hp.proj_dim != model_->info().n_embd)
        fail("mmproj '%s' gives %zu-wide image rows but the text model takes %zu: not a pair", mmproj_path.c_str(),
             hp.proj_dim, model_->info().n_embd);
}

std::vector<float> Engine::image_embedding(const ImageInput& image) {
    if (!vision_) fail("this model has no vision projector (mmproj): it gives no image embeddings");
    MediaPrompt layout;
    layout.n_embd = model_->info().n_embd;
    append_image(&layout, decode_image(image.bytes.data(), image.bytes.size(), image.name), *vision_,
                 MarkerVocab(*tokenizer_));
    std::vector<float> rows;  // [image rows, n_embd]
    for (size_t i = 0; i < layout.tokens.size(); ++i)
        if (layout.tokens[i] < 0)
            rows.insert(rows.end(), layout.embd.begin() + static_cast<std::ptrdiff_t>(i * layout.n_embd),
                        layout.embd.begin() + static_cast<std::ptrdiff_t>((i + 1) * layout.n_embd));
    if (rows.empty()) fail("image embedding: the image gave no rows");
    std::vector<float> v = pool_hidden(rows.data(), rows.size() / layout.n_embd, layout.n_embd, Pooling::MEAN);
    l2_normalize(&v);
    return v;
}

size_t Engine::media_span_rows() const {
    if (!vision_ || vision_->hparams().projector != "gemma3") return 0;
    EncoderInput square;
    square.width = square.height = vision_->hparams().image_size;
    return vision_->tokens(square);
}

std::shared_ptr<const EncodedMedia> Engine::encode_image(
    const ImageInput& input, const MarkerVocab& vocab, const std::vector<std::shared_ptr<const EncodedMedia>>& fresh) {
    if (!vision_) fail("this model has no vision projector (mmproj): it takes no images");
    Sha256 sha;
    sha.update(input.bytes.data(), input.bytes.size());
    const std::string digest = "image:" + sha.hex_digest();
    if (auto found = find_encoded(digest, fresh, encoded_)) return found;
    auto e = std::make_shared<EncodedMedia>();
    e->digest = digest;
    e->key = digest_key(digest);
    e->layout.n_embd = model_->info().n_embd;
    append_image(&e->layout, decode_image(input.bytes.data(), input.bytes.size(), input.name), *vision_, vocab);
    return e;
}

Engine::Prompt Engine::media_prompt(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                    const std::vector<AudioInput>& audio) {
    const MediaSplit split = split_at_media_markers(prompt_text);
    const size_t n_images = size_t(std::count(split.markers.begin(), split.markers.end(), MediaSplit::Kind::image));
    const size_t n_audio = split.markers.size() - n_images;
    if (n_images != images.size())
        fail("the prompt holds %zu image markers (%s) for %zu images", n_images, kImageMarker, images.size());
    if (n_audio != audio.size())
        fail("the prompt holds %zu audio markers (%s) for %zu audio clips", n_audio, kAudioMarker, audio.size());
    Prompt p;
    if (split.markers.empty()) {
        p.ids = tokenize_prompt(prompt_text);
        return p;
    }
    // Encode each input once per call; those of the previous call are kept encoded.
    std::vector<std::shared_ptr<const EncodedMedia>> encoded;
    const MarkerVocab vocab(*tokenizer_);
    size_t next_image = 0, next_audio = 0;
    for (MediaSplit::Kind kind : split.markers)
        encoded.push_back(kind == MediaSplit::Kind::image ? encode_image(images[next_image++], vocab, encoded)
                                                          : encode_audio(audio[next_audio++], vocab, encoded));
    encoded_ = encoded;
    // Text pieces tokenized apart (BOS rules on the first only), media layouts between them.
    auto rows = std::make_shared<MediaPrompt>();
    rows->n_embd = model_->info().n_embd;
    for (size_t i = 0; i < split.pieces.size(); ++i) {
        const std::vector<int32_t> ids =
            i == 0 ? tokenize_prompt(split.pieces[i])
                   : tokenizer_->encode(split.pieces[i], /*add_special=*/false, /*parse_special=*/true);
        for (int32_t id : ids) {
            rows->push_token(id);
            p.keys.push_back(0);
        }
        if (i == encoded.size()) break;
        append_encoded(*encoded[i], rows.get(), &p.keys);
    }
    p.ids = rows->tokens;
    p.rows = rows;
    return p;
}

void Engine::forward_rows(const MediaPrompt& rows, const uint64_t* keys, size_t from, size_t n,
                          std::vector<float>* logits) {
    prefill_media(*model_, rows, from, n, 0, 0, logits, [&](size_t first, size_t count) {
        const auto ids = rows.tokens.begin() + std::ptrdiff_t(first);
        cached_ids_.insert(cached_ids_.end(), ids, ids + std::ptrdiff_t(count));
        cached_keys_.insert(cached_keys_.end(), keys + first, keys + first + count);
    });
}

namespace {

// Counts the time spent decoding and encoding images and audio into the call's time to first token.
void add_image_time(CompletionMetrics* m, std::chrono::steady_clock::time_point start,
                    std::chrono::steady_clock::time_point encoded) {
    const double ms = std::chrono::duration<double, std::milli>(encoded - start).count();
    m->time_to_first_token_ms += ms;
    m->total_time_ms += ms;
    const double ttft_s = m->time_to_first_token_ms / 1000.0;
    m->prefill_tps = m->prefill_tokens > 0 && ttft_s > 0.0 ? m->prefill_tokens / ttft_s : 0.0;
}

}  // namespace

CompletionResult Engine::complete_with_images(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                              const GenerationOptions& options, const TokenCallback& on_token) {
    return complete_with_media(prompt_text, images, {}, options, on_token);
}

CompletionMetrics Engine::prefill_with_images(const std::string& prompt_text, const std::vector<ImageInput>& images) {
    return prefill_with_media(prompt_text, images, {});
}

CompletionResult Engine::complete_with_media(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                             const std::vector<AudioInput>& audio, const GenerationOptions& options,
                                             const TokenCallback& on_token) {
    const auto start = std::chrono::steady_clock::now();
    const Prompt prompt = media_prompt(prompt_text, images, audio);
    const auto encoded = std::chrono::steady_clock::now();
    CompletionResult result = complete_prompt(prompt, options, on_token);
    add_image_time(&result.metrics, start, encoded);
    return result;
}

CompletionMetrics Engine::prefill_with_media(const std::string& prompt_text, const std::vector<ImageInput>& images,
                                             const std::vector<AudioInput>& audio) {
    const auto start = std::chrono::steady_clock::now();
    const Prompt prompt = media_prompt(prompt_text, images, audio);
    const auto encoded = std::chrono::steady_clock::now();
    CompletionMetrics m = prefill_prompt(prompt);
    add_image_time(&m, start, encoded);
    return m;
}

}  // namespace cactus
