#pragma once
// Audio in: WAV files and buffers (PCM 8/16/24/32-bit, float, double; any rate and channel count;
// read with libsndfile), down-mixed to mono and resampled to 16 kHz with libsamplerate; raw
// 16-bit PCM from the C API. Hostile input (truncated data, absurd headers, zero length, hours of
// audio) ends in a cactus::Error naming the problem, or is read in bounded memory: the decoded
// length is checked against AudioLimits before anything of that size is allocated.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cactus {

constexpr int kWhisperSampleRate = 16000;

struct AudioLimits {
    double max_seconds = 4.0 * 3600.0;  // longest input accepted (16 kHz mono f32: 230 MB per hour)
    int max_channels = 64;
    int max_rate = 768000;
};

// A WAV file → 16 kHz mono samples in [-1, 1].
std::vector<float> read_wav_file(const std::string& path, const AudioLimits& limits = AudioLimits());
// A WAV file's bytes (already in memory) → 16 kHz mono samples.
std::vector<float> decode_wav(const uint8_t* data, size_t size, const AudioLimits& limits = AudioLimits());
// Little-endian 16-bit mono PCM at 16 kHz (the C API's pcm_buffer) → samples; an odd byte count is
// an error.
std::vector<float> pcm16_to_float(const uint8_t* data, size_t size, const AudioLimits& limits = AudioLimits());

// Resamples mono audio from `rate` Hz to 16 kHz (libsamplerate, best sinc). Identity at 16 kHz.
std::vector<float> resample_to_16k(const std::vector<float>& mono, int rate);

}  // namespace cactus
