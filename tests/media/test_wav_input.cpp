// WAV in: well-formed files of every sample format decode to 16 kHz mono; malformed and hostile
// files (truncated, absurd headers, zero length, too long) end in a cactus::Error naming the
// problem, never a crash or an allocation sized by the header.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "media/audio_input.h"

namespace cactus {
namespace {

struct WavSpec {
    uint16_t format = 1;  // 1 PCM, 3 float
    uint16_t channels = 1;
    uint32_t rate = 16000;
    uint16_t bits = 16;
    uint16_t block_align = 0;  // 0: computed
    uint32_t fmt_size = 16;
    int64_t data_size = -1;  // -1: the payload's size
    int64_t riff_size = -1;  // -1: computed
    std::string riff = "RIFF";
    std::string wave = "WAVE";
    bool with_fmt = true;
};

void put16(std::vector<uint8_t>& b, uint16_t v) {
    b.push_back(v & 0xff);
    b.push_back(v >> 8);
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back((v >> (8 * i)) & 0xff);
}
void put_tag(std::vector<uint8_t>& b, const std::string& t) { b.insert(b.end(), t.begin(), t.end()); }

// A 32-bit float WAV (format 3) at the given rate.
WavSpec float32_spec(uint32_t rate = 16000) {
    WavSpec f;
    f.format = 3;
    f.bits = 32;
    f.rate = rate;
    return f;
}

std::vector<uint8_t> make_wav(const WavSpec& s, const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> b;
    put_tag(b, s.riff);
    put32(b, 0);
    put_tag(b, s.wave);
    if (s.with_fmt) {
        put_tag(b, "fmt ");
        put32(b, s.fmt_size);
        std::vector<uint8_t> fmt;
        put16(fmt, s.format);
        put16(fmt, s.channels);
        put32(fmt, s.rate);
        const uint16_t align = s.block_align ? s.block_align : static_cast<uint16_t>(s.channels * (s.bits / 8));
        put32(fmt, s.rate * align);
        put16(fmt, align);
        put16(fmt, s.bits);
        fmt.resize(std::min<size_t>(fmt.size(), s.fmt_size), 0);
        b.insert(b.end(), fmt.begin(), fmt.end());
        for (size_t i = fmt.size(); i < s.fmt_size && i < 64; ++i) b.push_back(0);
    }
    put_tag(b, "data");
    put32(b, s.data_size >= 0 ? static_cast<uint32_t>(s.data_size) : static_cast<uint32_t>(payload.size()));
    b.insert(b.end(), payload.begin(), payload.end());
    const uint32_t riff = s.riff_size >= 0 ? static_cast<uint32_t>(s.riff_size) : static_cast<uint32_t>(b.size() - 8);
    for (int i = 0; i < 4; ++i) b[4 + i] = (riff >> (8 * i)) & 0xff;
    return b;
}

// n frames of a sine at `hz`, 16-bit, every channel the same.
std::vector<uint8_t> pcm16_sine(size_t n, int channels, double hz, double rate) {
    std::vector<uint8_t> p;
    for (size_t i = 0; i < n; ++i) {
        const int16_t v = static_cast<int16_t>(10000 * std::sin(2 * M_PI * hz * i / rate));
        for (int c = 0; c < channels; ++c) put16(p, static_cast<uint16_t>(v));
    }
    return p;
}

std::string error_of(const std::vector<uint8_t>& bytes, const AudioLimits& limits = AudioLimits()) {
    try {
        decode_wav(bytes.data(), bytes.size(), limits);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// `bytes` written to a file in the test's temp folder; the file is removed when this goes out of scope.
struct TempWav {
    std::string path;
    TempWav(const std::vector<uint8_t>& bytes, const std::string& name) : path(::testing::TempDir() + name) {
        FILE* f = std::fopen(path.c_str(), "wb");
        if (f == nullptr) throw std::runtime_error("cannot write " + path);
        std::fwrite(bytes.data(), 1, bytes.size(), f);
        std::fclose(f);
    }
    ~TempWav() { std::remove(path.c_str()); }
};

// error_of for read_wav_file: the bytes as a file; "" when it reads without error.
std::string file_error_of(const std::vector<uint8_t>& bytes) {
    const TempWav file(bytes, "cactus_wav_input_error_test.wav");
    try {
        read_wav_file(file.path);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// Either a clean error or at most `max_samples` finite samples (libsndfile accepts some odd but
// legal layouts, e.g. 13-bit samples in 16-bit containers).
void expect_rejected_or_bounded(const std::vector<uint8_t>& bytes, size_t max_samples) {
    try {
        const std::vector<float> x = decode_wav(bytes.data(), bytes.size());
        EXPECT_LE(x.size(), max_samples);
        for (float v : x) ASSERT_TRUE(std::isfinite(v));
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()), "");
    }
}

size_t zero_crossings(const std::vector<float>& x) {
    size_t n = 0;
    for (size_t i = 1; i < x.size(); ++i) n += (x[i - 1] < 0) != (x[i] < 0);
    return n;
}

TEST(WavInput, Pcm16MonoAt16kIsExact) {
    const std::vector<uint8_t> p = pcm16_sine(1600, 1, 440, 16000);
    const std::vector<float> x = decode_wav(make_wav({}, p).data(), make_wav({}, p).size());
    ASSERT_EQ(x.size(), 1600u);
    for (size_t i = 0; i < x.size(); ++i) {
        const int16_t v = static_cast<int16_t>(p[2 * i] | (p[2 * i + 1] << 8));
        ASSERT_EQ(x[i], v / 32768.0f) << i;
    }
}

TEST(WavInput, StereoAt48kIsDownmixedAndResampled) {
    WavSpec s;
    s.channels = 2;
    s.rate = 48000;
    const std::vector<uint8_t> w = make_wav(s, pcm16_sine(48000, 2, 1000, 48000));  // 1 s of 1 kHz
    const std::vector<float> x = decode_wav(w.data(), w.size());
    EXPECT_NEAR(static_cast<double>(x.size()), 16000.0, 4.0);
    EXPECT_NEAR(static_cast<double>(zero_crossings(x)), 2000.0, 4.0);  // still 1 kHz
}

TEST(WavInput, FloatAnd24BitAnd8kDecode) {
    WavSpec f = float32_spec(8000);
    std::vector<uint8_t> p;
    for (int i = 0; i < 800; ++i) {
        float v = 0.5f * std::sin(2 * M_PI * 200 * i / 8000.0);
        uint32_t u;
        std::memcpy(&u, &v, 4);
        put32(p, u);
    }
    std::vector<float> x = decode_wav(make_wav(f, p).data(), make_wav(f, p).size());
    EXPECT_NEAR(static_cast<double>(x.size()), 1600.0, 4.0);
    EXPECT_NEAR(static_cast<double>(zero_crossings(x)), 40.0, 2.0);
    WavSpec s24;
    s24.bits = 24;
    std::vector<uint8_t> q;
    for (int i = 0; i < 160; ++i) {
        q.push_back(0);
        q.push_back(0);
        q.push_back(i % 2 ? 0x40 : 0xc0);
    }
    x = decode_wav(make_wav(s24, q).data(), make_wav(s24, q).size());
    ASSERT_EQ(x.size(), 160u);
    EXPECT_FLOAT_EQ(x[1], 0.5f);
    EXPECT_FLOAT_EQ(x[0], -0.5f);
}

TEST(WavInput, NanSamplesBecomeSilence) {
    const WavSpec f = float32_spec();
    std::vector<uint8_t> p;
    for (int i = 0; i < 64; ++i) put32(p, i % 2 ? 0x7fc00000u : 0x7f800000u);  // NaN, +Inf
    const std::vector<float> x = decode_wav(make_wav(f, p).data(), make_wav(f, p).size());
    for (float v : x) ASSERT_TRUE(std::isfinite(v));
}

// Finite floats far outside [-1, 1] are clipped: 3e38 at 22050 Hz overflowed the resampler's
// filter to infinity (found by fuzz_wav).
TEST(WavInput, HugeFloatSamplesAreClippedBeforeResampling) {
    const WavSpec f = float32_spec(22050);
    std::vector<uint8_t> p;
    for (int i = 0; i < 2048; ++i) put32(p, i % 2 ? 0x7f61b1e6u : 0xff61b1e6u);  // +-3e38
    const std::vector<uint8_t> w = make_wav(f, p);
    const std::vector<float> x = decode_wav(w.data(), w.size());
    ASSERT_FALSE(x.empty());
    for (float v : x) ASSERT_TRUE(std::isfinite(v) && std::fabs(v) < 4.0f) << v;
}

// A handful of samples at another rate resampled to nothing and came back as an empty "success"
// (found by fuzz_wav: 1 frame at 22,050 Hz; 4 frames at 231,458 Hz).
TEST(WavInput, TooShortToResampleIsAnError) {
    for (auto [rate, frames] : {std::pair<uint32_t, int>{22050, 1}, {231458, 4}}) {
        const WavSpec f = float32_spec(rate);
        std::vector<uint8_t> p;
        for (int i = 0; i < frames; ++i) put32(p, 0x3e800000u);  // 0.25
        const std::vector<uint8_t> w = make_wav(f, p);
        try {
            const std::vector<float> x = decode_wav(w.data(), w.size());
            EXPECT_FALSE(x.empty()) << rate;
        } catch (const cactus::Error& e) {
            EXPECT_NE(std::string(e.what()).find("too short"), std::string::npos) << e.what();
        }
    }
}

TEST(WavInput, EmptyAndTinyBuffersAreErrors) {
    EXPECT_NE(error_of({}), "");
    EXPECT_NE(error_of({'R'}), "");
    EXPECT_NE(error_of({'R', 'I', 'F', 'F'}), "");
    EXPECT_NE(error_of({'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'A', 'V', 'E'}), "");
}

TEST(WavInput, WrongMagicIsAnError) {
    WavSpec s;
    s.riff = "JUNK";
    EXPECT_NE(error_of(make_wav(s, pcm16_sine(100, 1, 100, 16000))), "");
    WavSpec t;
    t.wave = "AVI ";
    EXPECT_NE(error_of(make_wav(t, pcm16_sine(100, 1, 100, 16000))), "");
}

TEST(WavInput, MissingOrEmptyFmtIsAnError) {
    WavSpec s;
    s.with_fmt = false;
    EXPECT_NE(error_of(make_wav(s, pcm16_sine(100, 1, 100, 16000))), "");
    WavSpec z;
    z.fmt_size = 0;
    EXPECT_NE(error_of(make_wav(z, pcm16_sine(100, 1, 100, 16000))), "");
    WavSpec shortfmt;
    shortfmt.fmt_size = 6;
    EXPECT_NE(error_of(make_wav(shortfmt, pcm16_sine(100, 1, 100, 16000))), "");
}

TEST(WavInput, AbsurdChannelCountsAreErrors) {
    WavSpec zero;
    zero.channels = 0;
    EXPECT_NE(error_of(make_wav(zero, pcm16_sine(100, 1, 100, 16000))), "");
    WavSpec many;
    many.channels = 65535;
    many.block_align = 2;
    EXPECT_NE(error_of(make_wav(many, pcm16_sine(100, 1, 100, 16000))), "");
    WavSpec over_limit;
    over_limit.channels = 100;
    EXPECT_NE(error_of(make_wav(over_limit, pcm16_sine(100, 100, 100, 16000))), "");
}

TEST(WavInput, AbsurdSampleRatesAreErrors) {
    for (uint32_t rate : {0u, 1u, 999u, 4000000000u, 2000000u}) {
        WavSpec s;
        s.rate = rate;
        EXPECT_NE(error_of(make_wav(s, pcm16_sine(100, 1, 100, 16000))), "") << rate;
    }
}

TEST(WavInput, BadSampleFormatsAreErrors) {
    for (uint16_t bits : {0, 64 + 1, 200}) {
        WavSpec s;
        s.bits = bits;
        s.block_align = 2;
        EXPECT_NE(error_of(make_wav(s, pcm16_sine(100, 1, 100, 16000))), "") << bits;
    }
    for (uint16_t bits : {1, 13}) {
        WavSpec s;
        s.bits = bits;
        s.block_align = 2;
        expect_rejected_or_bounded(make_wav(s, pcm16_sine(100, 1, 100, 16000)), 1600);  // bits of data
    }
    WavSpec tag;
    tag.format = 0x1234;
    EXPECT_NE(error_of(make_wav(tag, pcm16_sine(100, 1, 100, 16000))), "");
    WavSpec align;
    align.block_align = 0xffff;
    expect_rejected_or_bounded(make_wav(align, pcm16_sine(100, 1, 100, 16000)), 100);
}

TEST(WavInput, ZeroLengthDataIsAnError) {
    const std::string e = error_of(make_wav({}, {}));
    EXPECT_NE(e, "");
}

TEST(WavInput, TruncatedDataDecodesOnlyWhatExists) {
    WavSpec s;
    s.data_size = 0x7ffffff0;  // claims ~18 hours at 16 kHz
    const std::vector<uint8_t> w = make_wav(s, pcm16_sine(1000, 1, 100, 16000));
    try {
        const std::vector<float> x = decode_wav(w.data(), w.size());
        EXPECT_LE(x.size(), 1000u);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()), "");
    }
    std::vector<uint8_t> cut = make_wav({}, pcm16_sine(1000, 1, 100, 16000));
    cut.resize(cut.size() - 1001);  // mid-sample
    try {
        const std::vector<float> x = decode_wav(cut.data(), cut.size());
        EXPECT_LE(x.size(), 500u);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()), "");
    }
}

TEST(WavInput, TruncatedHeaderIsAnError) {
    const std::vector<uint8_t> w = make_wav({}, pcm16_sine(100, 1, 100, 16000));
    for (size_t n : {8, 12, 16, 20, 24, 30, 36, 40}) {
        std::vector<uint8_t> cut(w.begin(), w.begin() + static_cast<long>(n));
        EXPECT_NE(error_of(cut), "") << n;
    }
}

TEST(WavInput, LongerThanTheLimitIsRefusedBeforeDecoding) {
    AudioLimits limits;
    limits.max_seconds = 0.5;
    const std::string e = error_of(make_wav({}, pcm16_sine(16000, 1, 100, 16000)), limits);
    EXPECT_NE(e.find("limit"), std::string::npos) << e;
}

TEST(WavInput, NotAWavFileIsAnError) {
    const std::string text = "this is a text file, not audio at all, but it is long enough to read";
    EXPECT_NE(error_of(std::vector<uint8_t>(text.begin(), text.end())), "");
    std::vector<uint8_t> aiff = {'F', 'O', 'R', 'M', 0, 0, 0, 4, 'A', 'I', 'F', 'F'};
    EXPECT_NE(error_of(aiff), "");
}

TEST(WavInput, MissingFileAndFolderAreErrors) {
    EXPECT_THROW(read_wav_file("/nonexistent/audio.wav"), Error);
    EXPECT_THROW(read_wav_file("/tmp"), Error);
}

TEST(WavInput, FileAndBufferAgree) {
    const std::vector<uint8_t> w = make_wav({}, pcm16_sine(3200, 1, 300, 16000));
    const TempWav file(w, "cactus_wav_input_test.wav");
    EXPECT_EQ(read_wav_file(file.path), decode_wav(w.data(), w.size()));
}

// A LIST chunk claiming far more bytes than follow it (0x61746164: the fuzzer's "data" read as a
// size): libsndfile walked it for minutes (fuzz_wav timeout); now a clear error, buffer and file.
TEST(WavInput, ChunkLongerThanTheFileIsAnError) {
    std::vector<uint8_t> w = make_wav({}, pcm16_sine(100, 1, 100, 16000));
    const uint8_t list[] = {'L', 'I', 'S', 'T', 0x64, 0x61, 0x74, 0x61, 'a', 'b', 'c', 'd'};
    const auto data = std::search(w.begin(), w.end(), std::begin("data"), std::end("data") - 1);
    ASSERT_NE(data, w.end());
    w.insert(data, std::begin(list), std::end(list));
    for (const std::string& e : {error_of(w), file_error_of(w)}) {
        EXPECT_NE(e.find("chunk 'LIST'"), std::string::npos) << e;
    }
    // a data chunk cut short is still read as far as it goes
    std::vector<uint8_t> cut = make_wav({}, pcm16_sine(3200, 1, 300, 16000));
    cut.resize(cut.size() - 1000);
    EXPECT_EQ(error_of(cut), "");
}

// The RIFF WAV `riff` (from make_wav) as RF64: ds64 first (64-bit RIFF and data sizes; the data size
// is `ds64_data_size` when given), then the same chunks with the data chunk's size set to 0xFFFFFFFF.
std::vector<uint8_t> as_rf64(const std::vector<uint8_t>& riff, int64_t ds64_data_size = -1) {
    const auto data = std::search(riff.begin(), riff.end(), std::begin("data"), std::end("data") - 1);
    const uint64_t payload = static_cast<uint64_t>(riff.end() - data) - 8;
    std::vector<uint8_t> b;
    put_tag(b, "RF64");
    put32(b, 0xFFFFFFFFu);
    put_tag(b, "WAVE");
    put_tag(b, "ds64");
    put32(b, 28);
    const uint64_t sizes[] = {riff.size() + 36 - 8, ds64_data_size >= 0 ? uint64_t(ds64_data_size) : payload, 0};
    for (uint64_t v : sizes) {
        put32(b, static_cast<uint32_t>(v));
        put32(b, static_cast<uint32_t>(v >> 32));
    }
    put32(b, 0);  // no table
    b.insert(b.end(), riff.begin() + 12, data + 4);
    put32(b, 0xFFFFFFFFu);
    b.insert(b.end(), data + 8, riff.end());
    return b;
}

TEST(WavInput, Rf64DecodesLikeRiff) {
    WavSpec stereo_48k;
    stereo_48k.channels = 2;
    stereo_48k.rate = 48000;
    for (const std::vector<uint8_t>& w :
         {make_wav({}, pcm16_sine(3200, 1, 300, 16000)), make_wav(stereo_48k, pcm16_sine(4801, 2, 440, 48000))}) {
        const std::vector<uint8_t> rf64 = as_rf64(w);
        EXPECT_EQ(decode_wav(rf64.data(), rf64.size()), decode_wav(w.data(), w.size()));
    }
}

// libsndfile never returned from this 120-byte RF64 buffer (fuzz_wav timeout): no ds64 chunk, and a
// data chunk claiming 3.6 GB before a LIST chunk claiming 4.2 GB. Now a clear error, as are RF64
// data cut short (allowed in RIFF) and a ds64 chunk too small to hold its sizes.
TEST(WavInput, Rf64WithoutDs64OrWithChunksPastTheEndIsAnError) {
    const std::vector<uint8_t> fuzzed = {
        0x52, 0x46, 0x36, 0x34, 0x88, 0x0b, 0x00, 0x00, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20, 0x28, 0x00,
        0x00, 0x00, 0xfe, 0xff, 0x02, 0x00, 0x80, 0x3e, 0x00, 0x00, 0x00, 0x77, 0x01, 0x00, 0x06, 0x00, 0x18, 0x00,
        0x16, 0x00, 0x18, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00,
        0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71, 0x66, 0x61, 0x63, 0x74, 0x04, 0x00, 0x00, 0x00, 0xe0, 0x01, 0x00, 0x00,
        0x64, 0x61, 0x74, 0x61, 0x40, 0x58, 0x23, 0xd7, 0x4c, 0x49, 0x53, 0x54, 0x55, 0xd4, 0xdb, 0xfe, 0xff, 0x46,
        0xd6, 0x14, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xd6, 0xec, 0xd6, 0xe0, 0xec, 0xd6, 0xe0,
        0x67, 0xd6, 0xea, 0x67, 0xd6, 0xea, 0x49, 0x92, 0xf5, 0x49, 0x92, 0xf5};
    for (const std::string& e : {error_of(fuzzed), file_error_of(fuzzed)}) {
        EXPECT_NE(e.find("without a ds64 chunk"), std::string::npos) << e;
    }

    const std::vector<uint8_t> w = make_wav({}, pcm16_sine(3200, 1, 300, 16000));
    std::string e = error_of(as_rf64(w, 6401));  // one byte more than the 6400 that follow
    EXPECT_NE(e.find("chunk 'data'"), std::string::npos) << e;
    std::vector<uint8_t> cut = as_rf64(w);
    cut.resize(cut.size() - 1000);
    e = error_of(cut);
    EXPECT_NE(e.find("chunk 'data'"), std::string::npos) << e;
    std::vector<uint8_t> small_ds64 = as_rf64(w);
    small_ds64[16] = 20;  // ds64 size below its 28 bytes of sizes
    e = error_of(small_ds64);
    EXPECT_NE(e.find("ds64 chunk of 20 bytes"), std::string::npos) << e;
}

TEST(PcmInput, Pcm16BuffersAreCheckedAndScaled) {
    const uint8_t two[4] = {0x00, 0x80, 0xff, 0x7f};  // -32768, 32767
    const std::vector<float> x = pcm16_to_float(two, 4);
    ASSERT_EQ(x.size(), 2u);
    EXPECT_EQ(x[0], -1.0f);
    EXPECT_NEAR(x[1], 1.0f, 1e-4f);
    EXPECT_THROW(pcm16_to_float(two, 3), Error);
    EXPECT_THROW(pcm16_to_float(two, 0), Error);
    EXPECT_THROW(pcm16_to_float(nullptr, 4), Error);
    AudioLimits tiny;
    tiny.max_seconds = 0.00001;
    EXPECT_THROW(pcm16_to_float(two, 4, tiny), Error);
}

}  // namespace
}  // namespace cactus
