// Hostile-input tests: a corpus of malformed files, each must throw cactus::Error whose message
// names the bad field; plus truncation at every byte and byte mutations of a valid file.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "gguf_raw.h"

using gguf_raw::Bytes;
using gguf_raw::File;
using gguf_raw::Tensor;

namespace {

// Parses `bytes`; returns the error message, or "" when the file was accepted.
std::string parse_error(const Bytes& bytes) {
    try {
        cactus::GgufFile::from_memory(bytes.data(), bytes.size());
    } catch (const cactus::Error& e) {
        return e.what();
    }
    return "";
}

Bytes u32_bytes(uint32_t v) {
    Bytes b;
    gguf_raw::put<uint32_t>(b, v);
    return b;
}
Bytes u64_bytes(uint64_t v) {
    Bytes b;
    gguf_raw::put<uint64_t>(b, v);
    return b;
}

struct Case {
    const char* name;
    std::function<void(File&)> corrupt;      // applied to gguf_raw::valid_file()
    std::vector<const char*> message_parts;  // each must appear in the error message
};

std::vector<Case> corpus() {
    const uint64_t huge = ~0ull;
    return {
        {"bad magic", [](File& f) { std::memcpy(f.magic, "GGUX", 4); }, {"bad magic"}},
        {"version 1", [](File& f) { f.version = 1; }, {"version 1"}},
        {"version 4", [](File& f) { f.version = 4; }, {"version 4"}},
        {"big-endian version", [](File& f) { f.version = 0x03000000; }, {"version 50331648", "big-endian"}},
        {"tensor count 2^64-1", [=](File& f) { f.n_tensors = huge; }, {"tensor count"}},
        {"tensor count 2^63", [](File& f) { f.n_tensors = 1ull << 63; }, {"tensor count"}},
        {"metadata count 2^64-1", [=](File& f) { f.n_kv = huge; }, {"metadata count"}},
        {"metadata count one too many",
         [](File& f) {
             f.n_kv = 2;
             f.tensors.clear();
             f.pad_to = 1;
             f.data_bytes = 0;
         },
         {"metadata #1 key length"}},
        {"tensor count one too many",
         [](File& f) {
             f.n_tensors = 2;
             f.pad_to = 1;
             f.data_bytes = 0;
         },
         {"tensor #1 name length"}},
        {"key length past end",
         [=](File& f) {
             Bytes k;
             gguf_raw::put<uint64_t>(k, huge);
             f.kvs.push_back(k);
             f.n_kv = 2;
         },
         {"metadata #1 key", "past end"}},
        {"string value length past end",
         [](File& f) { f.kvs.push_back(gguf_raw::kv("general.name", 8, u64_bytes(1ull << 40))); },
         {"metadata 'general.name' value", "past end"}},
        {"nested array",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_array("nest", 9, 1, u32_bytes(4))); },
         {"metadata 'nest'", "nested arrays"}},
        {"unknown value type 13",
         [](File& f) { f.kvs.push_back(gguf_raw::kv("odd", 13, u32_bytes(0))); },
         {"metadata 'odd' type", "unknown value type 13"}},
        {"unknown value type 2^32-1",
         [](File& f) { f.kvs.push_back(gguf_raw::kv("odd", 0xffffffffu, {})); },
         {"metadata 'odd' type", "unknown value type 4294967295"}},
        {"unknown array element type",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_array("arr", 77, 1, u32_bytes(0))); },
         {"metadata 'arr' array element type", "unknown value type 77"}},
        {"array length 2^64-1",
         [=](File& f) { f.kvs.push_back(gguf_raw::kv_array("arr", 4, huge, {})); },
         {"metadata 'arr' array length"}},
        {"array length 2^61 of u64",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_array("arr", 10, 1ull << 61, u64_bytes(1))); },
         {"metadata 'arr' array length"}},
        {"string array element past end",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_array("toks", 8, 1, u64_bytes(1000))); },
         {"metadata 'toks' string element", "past end"}},
        {"duplicate key",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_string("general.architecture", "x")); },
         {"duplicate metadata key 'general.architecture'"}},
        {"alignment 0",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_u32("general.alignment", 0)); },
         {"general.alignment", "= 0"}},
        {"alignment 3",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_u32("general.alignment", 3)); },
         {"general.alignment", "= 3"}},
        {"alignment 2^31",
         [](File& f) { f.kvs.push_back(gguf_raw::kv_u32("general.alignment", 1u << 31)); },
         {"general.alignment", "= 2147483648"}},
        {"alignment of type u64",
         [](File& f) { f.kvs.push_back(gguf_raw::kv("general.alignment", 10, u64_bytes(32))); },
         {"general.alignment", "type u64"}},
        {"unknown tensor type 4", [](File& f) { f.tensors[0].type = 4; }, {"tensor 'w'", "unknown tensor type 4"}},
        {"unknown tensor type 1000",
         [](File& f) { f.tensors[0].type = 1000; },
         {"tensor 'w'", "unknown tensor type 1000"}},
        {"n_dims 0",
         [](File& f) {
             f.tensors[0].n_dims = 0;
             f.tensors[0].dims.clear();
         },
         {"tensor 'w'", "n_dims 0"}},
        {"n_dims 5",
         [](File& f) {
             f.tensors[0].dims = {8, 2, 1, 1, 1};
         },
         {"tensor 'w'", "n_dims 5"}},
        {"n_dims 2^32-1", [](File& f) { f.tensors[0].n_dims = 0xffffffffu; }, {"tensor 'w'", "n_dims 4294967295"}},
        {"zero dim",
         [](File& f) {
             f.tensors[0].dims = {8, 0};
         },
         {"tensor 'w'", "dims[1] = 0"}},
        {"negative dim",
         [](File& f) {
             f.tensors[0].dims = {8, ~0ull};
         },
         {"tensor 'w'", "dims[1] = 18446744073709551615 exceeds INT64_MAX"}},
        {"dims product overflows",
         [](File& f) {
             f.tensors[0].dims = {1ull << 32, 1ull << 32};
         },
         {"tensor 'w'", "product of dims overflows"}},
        {"dims product overflows in 4 dims",
         [](File& f) {
             f.tensors[0].dims = {1ull << 20, 1ull << 20, 1ull << 20, 1ull << 20};
         },
         {"tensor 'w'", "product of dims overflows at dims[3]"}},
        {"byte size overflows",
         [](File& f) {
             f.tensors[0].dims = {1ull << 31, 1ull << 31};
             f.tensors[0].type = 28;
         },
         {"tensor 'w'", "byte size"}},
        {"row not a multiple of the block",
         [](File& f) {
             f.tensors[0].dims = {16, 2};
             f.tensors[0].type = 2;
         },
         {"tensor 'w'", "dims[0] = 16", "Q4_0 block size 32"}},
        {"K-quant row not a multiple of 256",
         [](File& f) {
             f.tensors[0].dims = {128, 2};
             f.tensors[0].type = 12;
         },
         {"tensor 'w'", "Q4_K block size 256"}},
        {"offset past end of file",
         [](File& f) { f.tensors[0].offset = 4096; },
         {"tensor 'w'", "offset 4096 past end"}},
        {"offset near 2^64", [](File& f) { f.tensors[0].offset = ~0ull - 31; }, {"tensor 'w'", "offset"}},
        {"offset + size past end",
         [](File& f) { f.tensors[0].offset = 32; },
         {"tensor 'w'", "offset 32 + size 64 past end"}},
        {"misaligned offset",
         [](File& f) {
             f.tensors[0].offset = 4;
             f.data_bytes = 128;
         },
         {"tensor 'w'", "offset 4", "alignment 32"}},
        {"overlapping tensors",
         [](File& f) {
             f.tensors.push_back(Tensor{"v", {8}, 0, 32, std::nullopt, std::nullopt});
             f.data_bytes = 128;
         },
         {"tensor 'v'", "overlaps tensor 'w'"}},
        {"duplicate tensor name",
         [](File& f) {
             f.tensors.push_back(Tensor{"w", {8}, 0, 64, std::nullopt, std::nullopt});
             f.data_bytes = 128;
         },
         {"duplicate tensor name 'w'"}},
        {"tensor name too long",
         [](File& f) { f.tensors[0].name = std::string(64, 'n'); },
         {"tensor #0 name", "64 bytes"}},
        {"tensor name length past end",
         [](File& f) { f.tensors[0].name_length = 1ull << 50; },
         {"tensor #0 name", "string length 1125899906842624 past end"}},
        {"data section missing", [](File& f) { f.data_bytes = 0; }, {"tensor 'w'"}},
        {"data section short", [](File& f) { f.data_bytes = 63; }, {"tensor 'w'", "past end"}},
        {"no padding before data", [](File& f) { f.pad_to = 1; }, {"tensor 'w'"}},
    };
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(GgufMalformed, BaselineIsValid) {
    File f = gguf_raw::valid_file();
    Bytes b = f.build();
    auto file = cactus::GgufFile::from_memory(b.data(), b.size());
    ASSERT_EQ(file->tensors().size(), 1u);
    EXPECT_EQ(file->tensors()[0].n_bytes, 64u);
    EXPECT_EQ(file->get_string("general.architecture"), "test");
}

TEST(GgufMalformed, CorpusEachNamesTheField) {
    std::vector<Case> cases = corpus();
    EXPECT_GE(cases.size(), 30u);
    for (const Case& c : cases) {
        File f = gguf_raw::valid_file();
        c.corrupt(f);
        std::string message = parse_error(f.build());
        ASSERT_FALSE(message.empty()) << c.name << ": accepted";
        EXPECT_EQ(message.rfind("gguf: ", 0), 0u) << c.name << ": " << message;
        for (const char* part : c.message_parts) {
            EXPECT_TRUE(contains(message, part)) << c.name << ": '" << message << "' lacks '" << part << "'";
        }
    }
}

TEST(GgufMalformed, TinyAndEmptyInputs) {
    EXPECT_TRUE(contains(parse_error({}), "magic"));
    EXPECT_TRUE(contains(parse_error({'G', 'G', 'U'}), "magic"));
    EXPECT_TRUE(contains(parse_error({'G', 'G', 'U', 'F'}), "version"));
    EXPECT_THROW(cactus::GgufFile::from_memory(nullptr, 100), cactus::Error);
}

TEST(GgufMalformed, NoTensorsNeedsNoDataSection) {
    File f = gguf_raw::valid_file();
    f.tensors.clear();
    f.pad_to = 1;
    f.data_bytes = 0;
    Bytes b = f.build();
    EXPECT_EQ(parse_error(b), "");
}

// A valid file with several sections, built by the writer, whose last tensor ends the file.
Bytes sweep_file() {
    cactus::GgufWriter w;
    w.add_string("general.architecture", "sweep");
    w.add_u32("sweep.block_count", 2);
    w.add_f32("sweep.eps", 1e-5f);
    w.add_string_array("tokenizer.ggml.tokens", {"a", "bc", ""});
    w.add_float_array("tokenizer.ggml.scores", cactus::GgufType::F32, {0.5, -1.0, 2.0});
    w.add_int_array("tokenizer.ggml.token_type", cactus::GgufType::I32, {1, 2, 3});
    std::vector<uint8_t> data(34 * 2, 0x11);
    w.add_tensor("q8", cactus::DType::Q8_0, {32, 2}, data.data(), data.size());
    std::vector<uint8_t> f32(4 * 8, 0x22);
    w.add_tensor("f", cactus::DType::F32, {8}, f32.data(), f32.size());
    return w.to_bytes();
}

TEST(GgufMalformed, TruncationAtEveryByte) {
    Bytes full = sweep_file();
    auto parsed = cactus::GgufFile::from_memory(full.data(), full.size());
    uint64_t needed = 0;
    for (const cactus::GgufTensor& t : parsed->tensors()) {
        needed = std::max<uint64_t>(needed, parsed->data_offset() + t.offset + t.n_bytes);
    }
    ASSERT_EQ(needed, full.size());
    size_t errors = 0;
    for (size_t n = 0; n < full.size(); ++n) {
        Bytes cut(full.begin(), full.begin() + static_cast<long>(n));
        std::string message = parse_error(cut);
        ASSERT_FALSE(message.empty()) << "truncated at " << n << " accepted";
        EXPECT_EQ(message.rfind("gguf: ", 0), 0u) << message;
        EXPECT_TRUE(contains(message, "past end") || contains(message, "remain") || contains(message, "cannot fit"))
            << "truncated at " << n << ": " << message;
        ++errors;
    }
    EXPECT_EQ(errors, full.size());
}

// Every byte of the header set to several values: accepted or a clean cactus::Error, never a crash
// (the sanitizer build turns any out-of-bounds read into a failure).
TEST(GgufMalformed, ByteMutationsNeverCrash) {
    Bytes full = sweep_file();
    auto parsed = cactus::GgufFile::from_memory(full.data(), full.size());
    size_t header = static_cast<size_t>(parsed->data_offset());
    size_t rejected = 0;
    for (size_t pos = 0; pos < header; ++pos) {
        for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, uint8_t(full[pos] + 1)}) {
            Bytes m = full;
            m[pos] = v;
            try {
                auto f = cactus::GgufFile::from_memory(m.data(), m.size());
                for (const cactus::GgufTensor& t : f->tensors()) {
                    ASSERT_GE(t.data, m.data());
                    ASSERT_LE(t.data + t.n_bytes, m.data() + m.size());
                }
            } catch (const cactus::Error& e) {
                ++rejected;
                EXPECT_EQ(std::string(e.what()).rfind("gguf: ", 0), 0u) << e.what();
            }
        }
    }
    EXPECT_GT(rejected, header);  // most header mutations must be caught
}
