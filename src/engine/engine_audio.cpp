// The engine's audio path: the audio tower of the mmproj (Gemma 4's conformer, AudioEncoder) and
// its clips in prompts (one kAudioMarker per clip; engine_media.cpp splices the layouts). A clip is
// identified by a digest of its samples, so a later turn about the same clip reuses its rows.
#include "core/error.h"
#include "core/sha256.h"
#include "engine/encoded_media.h"
#include "engine/engine.h"
#include "engine/media/audio_prompt.h"
#include "engine/media/media_prompt.h"
#include "gguf/gguf.h"
#include "media/audio_input.h"
#include "models/audio/gemma4_audio.h"
#include "models/model.h"

namespace cactus {

namespace {

double seconds(size_t n_samples) { return double(n_samples) / double(AudioEncoder::kSampleRate); }

}  // namespace

void Engine::load_audio(const std::string& mmproj_path, int n_threads) {
    audio_ = std::make_unique<AudioEncoder>(*mmproj_file_, encoder_options(n_threads));
    if (audio_->proj_dim() != model_->info().n_embd)
        fail("mmproj '%s' gives %zu-wide audio rows but the text model takes %zu: not a pair", mmproj_path.c_str(),
             audio_->proj_dim(), model_->info().n_embd);
}

void Engine::check_audio(const AudioInput& clip) const {
    if (!audio_)
        fail(
            "audio '%s': this model has no audio encoder: load it with an mmproj .gguf that holds an audio tower "
            "(a folder holding both, $CACTUS_MMPROJ, or --mmproj)",
            clip.name.c_str());
    if (clip.samples.empty()) fail("audio '%s' holds no samples", clip.name.c_str());
    if (clip.samples.size() > AudioEncoder::kMaxSamples)
        fail("audio '%s' is %.1f s long; the audio encoder takes at most %.0f s per clip (split it)", clip.name.c_str(),
             seconds(clip.samples.size()), seconds(AudioEncoder::kMaxSamples));
}

std::vector<AudioInput> Engine::read_audio(const std::vector<std::string>& paths) const {
    std::vector<AudioInput> clips;
    if (paths.empty()) return clips;
    if (!audio_)
        fail(
            "the messages hold %zu audio clip(s) but this model has no audio encoder: load it with an mmproj .gguf "
            "that holds an audio tower (a folder holding both, $CACTUS_MMPROJ, or --mmproj)",
            paths.size());
    AudioLimits limits;  // refused before decoding anything longer than the tower takes
    limits.max_seconds = seconds(AudioEncoder::kMaxSamples);
    for (const std::string& path : paths) {
        AudioInput clip{path, {}};
        try {
            clip.samples = read_wav_file(path, limits);
        } catch (const Error& e) {
            fail("audio '%s': %s", path.c_str(), e.what());
        }
        check_audio(clip);
        clips.push_back(std::move(clip));
    }
    return clips;
}

std::shared_ptr<const EncodedMedia> Engine::encode_audio(
    const AudioInput& input, const MarkerVocab& vocab, const std::vector<std::shared_ptr<const EncodedMedia>>& fresh) {
    check_audio(input);
    Sha256 sha;
    sha.update(reinterpret_cast<const uint8_t*>(input.samples.data()), input.samples.size() * sizeof(float));
    const std::string digest = "audio:" + sha.hex_digest();
    if (auto found = find_encoded(digest, fresh, encoded_)) return found;
    auto e = std::make_shared<EncodedMedia>();
    e->digest = digest;
    e->key = digest_key(digest);
    e->layout.n_embd = model_->info().n_embd;
    append_gemma4_audio(&e->layout, input.samples.data(), input.samples.size(), *audio_, vocab);
    return e;
}

}  // namespace cactus
