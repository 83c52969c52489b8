#include "media/audio_input.h"

#include <samplerate.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "core/error.h"

namespace cactus {

namespace {

// libsndfile's virtual IO over a byte range (decode_wav).
struct MemoryFile {
    const uint8_t* data;
    sf_count_t size;
    sf_count_t pos;
};

sf_count_t mem_length(void* user) { return static_cast<MemoryFile*>(user)->size; }

sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
    MemoryFile* f = static_cast<MemoryFile*>(user);
    sf_count_t base = whence == SEEK_CUR ? f->pos : whence == SEEK_END ? f->size : 0;
    sf_count_t next = base + offset;
    if (next < 0 || next > f->size) return -1;
    f->pos = next;
    return next;
}

sf_count_t mem_read(void* dst, sf_count_t count, void* user) {
    MemoryFile* f = static_cast<MemoryFile*>(user);
    sf_count_t n = std::max<sf_count_t>(0, std::min(count, f->size - f->pos));
    if (n > 0) std::memcpy(dst, f->data + f->pos, static_cast<size_t>(n));
    f->pos += n;
    return n;
}

sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct SndfileCloser {
    void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, SndfileCloser>;

// read_at(offset, dst, n): n bytes at offset into dst; false where fewer are there.
using ReadAt = std::function<bool(uint64_t, uint8_t*, size_t)>;

constexpr int kMaxRiffChunks = 4096;  // real WAV files hold a handful

uint64_t little_endian(const uint8_t* p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::string printable_id(const uint8_t* id) {
    std::string s(4, '?');
    for (int i = 0; i < 4; ++i) {
        if (id[i] >= 32 && id[i] < 127) s[i] = static_cast<char>(id[i]);
    }
    return s;
}

// How the chunks after the container's header are checked (walk_chunks).
struct ChunkRules {
    bool truncated_data_ok;   // a 'data' chunk may claim more than follows (read as far as it goes)
    bool has_ds64;            // RF64: a 'data' size of 0xFFFFFFFF means ds64_data_size
    uint64_t ds64_data_size;  // RF64's 64-bit data size
};

// Walks the chunk headers from byte `at`: every chunk must fit in the bytes that follow it (except
// as `rules` allow for 'data'), and there are at most kMaxRiffChunks.
void walk_chunks(uint64_t total, uint64_t at, const ReadAt& read_at, const ChunkRules& rules, const std::string& what) {
    for (int n = 0; at + 8 <= total; ++n) {
        if (n == kMaxRiffChunks) fail("read audio: %s holds more than %d RIFF chunks", what.c_str(), kMaxRiffChunks);
        uint8_t chunk[8];
        if (!read_at(at, chunk, sizeof chunk)) return;
        uint64_t size = little_endian(chunk + 4, 4);
        const uint64_t left = total - at - 8;
        const bool data = std::memcmp(chunk, "data", 4) == 0;
        if (data && rules.has_ds64 && size == 0xFFFFFFFFu) size = rules.ds64_data_size;
        if (size > left) {
            if (data && rules.truncated_data_ok) return;  // truncated samples: nothing follows them
            fail("read audio: %s: chunk '%s' at byte %llu claims %llu bytes, only %llu follow", what.c_str(),
                 printable_id(chunk).c_str(), static_cast<unsigned long long>(at),
                 static_cast<unsigned long long>(size), static_cast<unsigned long long>(left));
        }
        at += 8 + size + (size & 1);  // chunks are padded to even sizes
    }
}

// The chunk headers of a RIFF/WAVE or RF64/WAVE file, checked before libsndfile parses them.
// - RIFF: every chunk must fit in the bytes that follow it, except a 'data' chunk that is cut short
//   (a truncated recording, read as far as it goes). libsndfile 1.2 spent minutes walking a LIST
//   chunk that claimed 1.6 GB of a 360-byte buffer (found by fuzz_wav).
// - RF64 (WAV beyond 4 GiB): a ds64 chunk must come first (its 64-bit data size stands in for a
//   'data' size of 0xFFFFFFFF), and every chunk must fit, the data too: libsndfile 1.2 never
//   returned from a 120-byte RF64 buffer without ds64 whose data chunk claimed 3.6 GB (fuzz_wav).
// Other containers (not RIFF at all) are left to libsndfile, which refuses them.
void check_riff_chunks(uint64_t total, const ReadAt& read_at, const std::string& what) {
    uint8_t head[12];
    if (total < sizeof head || !read_at(0, head, sizeof head) || std::memcmp(head + 8, "WAVE", 4) != 0) return;
    if (std::memcmp(head, "RIFF", 4) == 0) {
        walk_chunks(total, sizeof head, read_at, ChunkRules{true, false, 0}, what);
        return;
    }
    if (std::memcmp(head, "RF64", 4) != 0) return;
    constexpr uint64_t kDs64MinBytes = 28;  // RIFF size, data size, sample count (8 bytes each), table length
    uint8_t ds64[8 + kDs64MinBytes];
    if (total < sizeof head + sizeof ds64 || !read_at(sizeof head, ds64, sizeof ds64) ||
        std::memcmp(ds64, "ds64", 4) != 0) {
        fail("read audio: %s is RF64 without a ds64 chunk first", what.c_str());
    }
    const uint64_t ds64_size = little_endian(ds64 + 4, 4);
    if (ds64_size < kDs64MinBytes || ds64_size > total - sizeof head - 8) {
        fail("read audio: %s: RF64 ds64 chunk of %llu bytes (%llu..%llu)", what.c_str(),
             static_cast<unsigned long long>(ds64_size), static_cast<unsigned long long>(kDs64MinBytes),
             static_cast<unsigned long long>(total - sizeof head - 8));
    }
    const ChunkRules rules{false, true, little_endian(ds64 + 8 + 8, 8)};
    walk_chunks(total, sizeof head + 8 + ds64_size + (ds64_size & 1), read_at, rules, what);
}

// check_riff_chunks over a file on disk (its chunk headers only).
void check_riff_file(const std::string& path) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f || fseeko(f.get(), 0, SEEK_END) != 0) return;  // sf_open reports what is wrong with it
    const off_t total = ftello(f.get());
    if (total <= 0) return;
    check_riff_chunks(
        static_cast<uint64_t>(total),
        [&](uint64_t offset, uint8_t* dst, size_t n) {
            return fseeko(f.get(), static_cast<off_t>(offset), SEEK_SET) == 0 && std::fread(dst, 1, n, f.get()) == n;
        },
        "'" + path + "'");
}

void check_header(const SF_INFO& info, const AudioLimits& limits, const std::string& what) {
    const int major = info.format & SF_FORMAT_TYPEMASK;
    if (major != SF_FORMAT_WAV && major != SF_FORMAT_WAVEX && major != SF_FORMAT_RF64) {
        fail("read audio: %s is not a WAV file (format 0x%x)", what.c_str(), info.format);
    }
    if (info.channels < 1 || info.channels > limits.max_channels) {
        fail("read audio: %s has %d channels (1..%d supported)", what.c_str(), info.channels, limits.max_channels);
    }
    if (info.samplerate < 1000 || info.samplerate > limits.max_rate) {
        fail("read audio: %s has a sample rate of %d Hz (1000..%d supported)", what.c_str(), info.samplerate,
             limits.max_rate);
    }
    const double seconds = static_cast<double>(info.frames) / info.samplerate;
    if (info.frames < 0 || seconds > limits.max_seconds) {
        fail("read audio: %s is %.0f s long, more than the limit of %.0f s", what.c_str(), seconds, limits.max_seconds);
    }
}

// Reads every frame, down-mixing to mono as it goes (blocks of 4096 frames: memory stays at the
// output's size). The header's frame count is only an upper bound (truncated files end early).
std::vector<float> read_mono(SNDFILE* file, const SF_INFO& info, const std::string& what) {
    const size_t channels = static_cast<size_t>(info.channels);
    const size_t block = 4096;
    std::vector<float> interleaved(block * channels);
    std::vector<float> mono;
    mono.reserve(static_cast<size_t>(info.frames));
    for (;;) {
        const sf_count_t got = sf_readf_float(file, interleaved.data(), static_cast<sf_count_t>(block));
        if (got <= 0) break;
        for (sf_count_t i = 0; i < got; ++i) {
            float sum = 0.0f;
            for (size_t c = 0; c < channels; ++c) sum += interleaved[static_cast<size_t>(i) * channels + c];
            mono.push_back(sum / static_cast<float>(channels));
        }
        if (mono.size() > static_cast<size_t>(info.frames)) break;  // never past the header's count
    }
    if (sf_error(file) != SF_ERR_NO_ERROR) fail("read audio: %s: %s", what.c_str(), sf_strerror(file));
    if (mono.empty()) fail("read audio: %s holds no samples", what.c_str());
    for (float& s : mono) {
        // Float WAVs may hold NaN/Inf (silenced) or values far outside [-1, 1] (clipped, as integer
        // PCM is): 3e38 would overflow the resampler's filter to infinity (found by fuzz_wav).
        s = std::isfinite(s) ? std::clamp(s, -1.0f, 1.0f) : 0.0f;
    }
    return resample_to_16k(mono, info.samplerate);
}

}  // namespace

std::vector<float> resample_to_16k(const std::vector<float>& mono, int rate) {
    if (rate == kWhisperSampleRate || mono.empty()) return mono;
    const double ratio = static_cast<double>(kWhisperSampleRate) / rate;
    std::vector<float> out(static_cast<size_t>(mono.size() * ratio) + 16);
    SRC_DATA d;
    std::memset(&d, 0, sizeof d);
    d.data_in = mono.data();
    d.input_frames = static_cast<long>(mono.size());
    d.data_out = out.data();
    d.output_frames = static_cast<long>(out.size());
    d.src_ratio = ratio;
    d.end_of_input = 1;
    const int rc = src_simple(&d, SRC_SINC_BEST_QUALITY, 1);
    if (rc != 0) fail("resample: %d Hz -> 16 kHz failed: %s", rate, src_strerror(rc));
    out.resize(static_cast<size_t>(d.output_frames_gen));
    // The sinc filter's delay swallows inputs of a few dozen samples whole (found by fuzz_wav).
    if (out.empty()) fail("resample: %zu samples at %d Hz are too short to resample to 16 kHz", mono.size(), rate);
    return out;
}

std::vector<float> read_wav_file(const std::string& path, const AudioLimits& limits) {
    check_riff_file(path);
    SF_INFO info;
    std::memset(&info, 0, sizeof info);
    SndfilePtr file(sf_open(path.c_str(), SFM_READ, &info));
    if (!file) fail("read audio: cannot open '%s': %s", path.c_str(), sf_strerror(nullptr));
    check_header(info, limits, "'" + path + "'");
    return read_mono(file.get(), info, "'" + path + "'");
}

std::vector<float> decode_wav(const uint8_t* data, size_t size, const AudioLimits& limits) {
    if (data == nullptr || size == 0) fail("read audio: empty WAV buffer");
    check_riff_chunks(
        size,
        [&](uint64_t offset, uint8_t* dst, size_t n) {
            if (offset > size || n > size - offset) return false;
            std::memcpy(dst, data + offset, n);
            return true;
        },
        "the WAV buffer");
    MemoryFile mem{data, static_cast<sf_count_t>(size), 0};
    SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info;
    std::memset(&info, 0, sizeof info);
    SndfilePtr file(sf_open_virtual(&io, SFM_READ, &info, &mem));
    if (!file) fail("read audio: not a readable WAV buffer (%zu bytes): %s", size, sf_strerror(nullptr));
    check_header(info, limits, "the WAV buffer");
    return read_mono(file.get(), info, "the WAV buffer");
}

std::vector<float> pcm16_to_float(const uint8_t* data, size_t size, const AudioLimits& limits) {
    if (data == nullptr || size == 0) fail("pcm audio: empty buffer");
    if (size % 2 != 0) fail("pcm audio: %zu bytes is not a whole number of 16-bit samples", size);
    const size_t n = size / 2;
    if (static_cast<double>(n) / kWhisperSampleRate > limits.max_seconds) {
        fail("pcm audio: %zu samples is more than the limit of %.0f s", n, limits.max_seconds);
    }
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
        const int16_t s = static_cast<int16_t>(data[2 * i] | (data[2 * i + 1] << 8));
        out[i] = static_cast<float>(s) / 32768.0f;
    }
    return out;
}

}  // namespace cactus
