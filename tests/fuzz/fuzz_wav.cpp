// libFuzzer target for the WAV reader (libsndfile + down-mix + resampling): any input must decode
// to finite 16 kHz samples within the limits or throw cactus::Error; never crash or over-allocate.
// The same bytes as the C API's pcm_buffer (16-bit PCM, 30 s limit as for the audio tower) too.
//   build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCACTUS_FUZZ=ON && ninja -C build-fuzz fuzz_wav
//   run:   build-fuzz/bin/fuzz_wav corpus/ -dict=tests/fuzz/wav.dict   (seeds: tests/fuzz/seeds/fuzz_wav)
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "media/audio_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    cactus::AudioLimits limits;
    limits.max_seconds = 60.0;  // bounded memory per input
    try {
        const std::vector<float> samples = cactus::decode_wav(data, size, limits);
        if (samples.empty() || samples.size() > 61 * 16000) std::abort();
        for (float s : samples) {
            if (!std::isfinite(s)) std::abort();
        }
    } catch (const cactus::Error&) {
        // rejected cleanly
    }
    cactus::AudioLimits clip;
    clip.max_seconds = 30.0;
    try {
        const std::vector<float> samples = cactus::pcm16_to_float(data, size, clip);
        if (samples.size() * 2 != size || samples.size() > 30 * 16000) std::abort();
    } catch (const cactus::Error&) {
        // odd byte count or over the limit
    }
    return 0;
}
