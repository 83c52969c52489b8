// audio_probe: what the Whisper oracle tests read from our side.
//   audio_probe mel MODEL.gguf IN.wav OUT.f32   log-mel [n_frames, n_mels] (f32, raw); prints "n_frames n_mels"
//   audio_probe wav IN.wav OUT.f32              the 16 kHz mono samples (f32, raw); prints the count
//   audio_probe vad VAD.gguf IN.wav             chunk probabilities, then speech spans (samples), as JSON
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "backends/backend.h"
#include "media/audio_input.h"
#include "models/audio/log_mel.h"
#include "models/audio/silero_vad.h"
#include "models/audio/whisper_model.h"

namespace {

void write_floats(const char* path, const float* data, size_t n) {
    FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(data, sizeof(float), n, f) != n)
        throw std::runtime_error(std::string("cannot write ") + path);
    std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 5 && std::strcmp(argv[1], "mel") == 0) {
            std::unique_ptr<cactus::Backend> be = cactus::make_backend(cactus::BackendOptions());
            cactus::WhisperModel model(argv[2], *be);
            const std::vector<float> audio = cactus::read_wav_file(argv[3]);
            const cactus::LogMel mel =
                cactus::log_mel(audio.data(), audio.size(), model.mel_filters(), model.hparams().n_mels);
            write_floats(argv[4], mel.data.data(), mel.data.size());
            std::printf("%zu %zu\n", mel.n_frames, mel.n_mels);
            return 0;
        }
        if (argc == 4 && std::strcmp(argv[1], "wav") == 0) {
            const std::vector<float> audio = cactus::read_wav_file(argv[2]);
            write_floats(argv[3], audio.data(), audio.size());
            std::printf("%zu\n", audio.size());
            return 0;
        }
        if (argc == 4 && std::strcmp(argv[1], "vad") == 0) {
            cactus::SileroVad vad(argv[2]);
            const std::vector<float> audio = cactus::read_wav_file(argv[3]);
            const std::vector<float> probs = vad.probabilities(audio.data(), audio.size());
            std::printf("{\"probs\": [");
            for (size_t i = 0; i < probs.size(); ++i) std::printf("%s%.6f", i ? ", " : "", probs[i]);
            std::printf("], \"spans\": [");
            const auto spans = cactus::speech_spans_from_probabilities(probs, audio.size(), cactus::VadOptions());
            for (size_t i = 0; i < spans.size(); ++i)
                std::printf("%s[%zu, %zu]", i ? ", " : "", spans[i].start, spans[i].end);
            std::printf("]}\n");
            return 0;
        }
        std::fprintf(stderr, "usage: audio_probe mel MODEL.gguf IN.wav OUT.f32 | audio_probe wav IN.wav OUT.f32\n");
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "audio_probe: %s\n", e.what());
        return 1;
    }
}
