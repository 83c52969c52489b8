// Writer -> reader round trips: every value type, several tensor types, versions 2 and 3, custom
// alignment; plus the typed getters' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"

using cactus::DType;
using cactus::GgufFile;
using cactus::GgufType;
using cactus::GgufWriter;

namespace {

void add_every_value_type(GgufWriter& w) {
    w.add_u8("v.u8", 200);
    w.add_i8("v.i8", -100);
    w.add_u16("v.u16", 65000);
    w.add_i16("v.i16", -32000);
    w.add_u32("v.u32", 4000000000u);
    w.add_i32("v.i32", -2000000000);
    w.add_u64("v.u64", std::numeric_limits<uint64_t>::max());
    w.add_i64("v.i64", std::numeric_limits<int64_t>::min());
    w.add_f32("v.f32", 0.1f);
    w.add_f64("v.f64", -1e300);
    w.add_bool("v.bool_true", true);
    w.add_bool("v.bool_false", false);
    w.add_string("v.string", std::string("with\0nul and ü", 15));
    w.add_string("v.empty_string", "");
    w.add_string_array("a.string", {"a", "", "ccc", std::string(1000, 'x')});
    w.add_string_array("a.empty", {});
    w.add_int_array("a.u8", GgufType::U8, {0, 255});
    w.add_int_array("a.i8", GgufType::I8, {-128, 127});
    w.add_int_array("a.u16", GgufType::U16, {0, 65535});
    w.add_int_array("a.i16", GgufType::I16, {-32768, 32767});
    w.add_int_array("a.u32", GgufType::U32, {0, 4294967295});
    w.add_int_array("a.i32", GgufType::I32, {-2147483648LL, 2147483647});
    w.add_int_array("a.u64", GgufType::U64, {0, 1LL << 62});
    w.add_int_array("a.i64", GgufType::I64, {std::numeric_limits<int64_t>::min(), 5});
    w.add_int_array("a.bool", GgufType::BOOL, {1, 0, 1});
    w.add_float_array("a.f32", GgufType::F32, {0.5, -2.25, 1e30});
    w.add_float_array("a.f64", GgufType::F64, {1e-300, 3.141592653589793});
}

void expect_every_value_type(const GgufFile& f) {
    EXPECT_EQ(f.get_uint("v.u8"), 200u);
    EXPECT_EQ(f.find("v.u8")->type, GgufType::U8);
    EXPECT_EQ(f.find("v.i8")->i, -100);
    EXPECT_EQ(f.find("v.i8")->type, GgufType::I8);
    EXPECT_EQ(f.get_uint("v.u16"), 65000u);
    EXPECT_EQ(f.find("v.i16")->i, -32000);
    EXPECT_EQ(f.get_uint("v.u32"), 4000000000u);
    EXPECT_EQ(f.find("v.i32")->i, -2000000000);
    EXPECT_EQ(f.get_uint("v.u64"), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(f.find("v.i64")->i, std::numeric_limits<int64_t>::min());
    EXPECT_EQ(f.find("v.f32")->type, GgufType::F32);
    EXPECT_EQ(f.get_float("v.f32"), static_cast<double>(0.1f));
    EXPECT_EQ(f.get_float("v.f64"), -1e300);
    EXPECT_TRUE(f.get_bool("v.bool_true", false));
    EXPECT_FALSE(f.get_bool("v.bool_false", true));
    EXPECT_EQ(f.get_string("v.string"), std::string("with\0nul and ü", 15));
    EXPECT_EQ(f.get_string("v.empty_string"), "");
    EXPECT_EQ(f.get_string_array("a.string"), (std::vector<std::string>{"a", "", "ccc", std::string(1000, 'x')}));
    EXPECT_EQ(f.get_array("a.empty").array_size(), 0u);
    EXPECT_EQ(f.get_array("a.empty").array_type, GgufType::STRING);
    EXPECT_EQ(f.get_array("a.u8").ints, (std::vector<int64_t>{0, 255}));
    EXPECT_EQ(f.get_array("a.i8").ints, (std::vector<int64_t>{-128, 127}));
    EXPECT_EQ(f.get_array("a.u16").ints, (std::vector<int64_t>{0, 65535}));
    EXPECT_EQ(f.get_array("a.i16").ints, (std::vector<int64_t>{-32768, 32767}));
    EXPECT_EQ(f.get_array("a.u32").ints, (std::vector<int64_t>{0, 4294967295}));
    EXPECT_EQ(f.get_array("a.i32").ints, (std::vector<int64_t>{-2147483648LL, 2147483647}));
    EXPECT_EQ(f.get_array("a.u64").ints, (std::vector<int64_t>{0, 1LL << 62}));
    EXPECT_EQ(f.get_array("a.i64").ints, (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 5}));
    EXPECT_EQ(f.get_array("a.bool").ints, (std::vector<int64_t>{1, 0, 1}));
    EXPECT_EQ(f.get_array("a.bool").array_type, GgufType::BOOL);
    EXPECT_EQ(f.get_array("a.f32").numbers, (std::vector<double>{0.5, -2.25, static_cast<double>(1e30f)}));
    EXPECT_TRUE(f.get_array("a.f32").ints.empty());
    EXPECT_EQ(f.get_array("a.f64").numbers, (std::vector<double>{1e-300, 3.141592653589793}));
    EXPECT_EQ(f.get_array("a.i32").numbers.size(), 2u);
    EXPECT_EQ(f.get_array("a.i32").numbers[0], -2147483648.0);
}

struct TensorSpec {
    const char* name;
    DType type;
    std::vector<uint64_t> dims;
};

const std::vector<TensorSpec> kTensors = {
    {"f32", DType::F32, {3}},
    {"f16", DType::F16, {5, 3}},
    {"bf16", DType::BF16, {7, 1, 2}},
    {"q4_0", DType::Q4_0, {64, 3}},
    {"q4_1", DType::Q4_1, {32, 2, 2}},
    {"q5_0", DType::Q5_0, {96}},
    {"q8_0", DType::Q8_0, {32, 5}},
    {"q4_k", DType::Q4_K, {256, 2}},
    {"q6_k", DType::Q6_K, {512}},
    {"i32", DType::I32, {4, 1, 1, 3}},
    {"blk.0.attn_q.weight", DType::Q5_K, {256, 1}},
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(n);
    for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
    return out;
}

uint64_t byte_size(const TensorSpec& s) {
    uint64_t n = 1;
    for (uint64_t d : s.dims) n *= d;
    const cactus::DTypeTraits& t = cactus::dtype_traits(s.type);
    return n / t.block_size * t.block_bytes;
}

void round_trip(uint32_t version, uint32_t alignment) {
    GgufWriter w(version);
    if (alignment != 32) w.set_alignment(alignment);
    add_every_value_type(w);
    std::vector<std::vector<uint8_t>> payloads;
    for (size_t k = 0; k < kTensors.size(); ++k) {
        payloads.push_back(random_bytes(byte_size(kTensors[k]), static_cast<uint32_t>(k)));
        w.add_tensor(kTensors[k].name, kTensors[k].type, kTensors[k].dims, payloads[k].data(), payloads[k].size());
    }
    std::vector<uint8_t> bytes = w.to_bytes();
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0u);
    expect_every_value_type(*f);
    ASSERT_EQ(f->tensors().size(), kTensors.size());
    for (size_t k = 0; k < kTensors.size(); ++k) {
        const cactus::GgufTensor& t = f->tensors()[k];
        EXPECT_EQ(t.name, kTensors[k].name);
        EXPECT_EQ(t.type, kTensors[k].type);
        EXPECT_EQ(t.dims, kTensors[k].dims);
        EXPECT_EQ(t.n_bytes, payloads[k].size());
        EXPECT_EQ(t.offset % alignment, 0u);
        EXPECT_EQ(0, std::memcmp(t.data, payloads[k].data(), payloads[k].size())) << t.name;
        EXPECT_EQ(f->find_tensor(t.name), &t);
    }
    // Re-writing what was read gives a file that reads back the same.
    GgufWriter again(version);
    for (const auto& [key, value] : f->metadata()) again.add_value(key, value);
    for (const cactus::GgufTensor& t : f->tensors()) again.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes);
    std::vector<uint8_t> bytes2 = again.to_bytes();
    auto f2 = GgufFile::from_memory(bytes2.data(), bytes2.size());
    expect_every_value_type(*f2);
    EXPECT_EQ(f2->alignment(), alignment);
    EXPECT_EQ(bytes2.size(), bytes.size());
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const cactus::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(GgufRoundTrip, Version3) { round_trip(3, 32); }
TEST(GgufRoundTrip, Version2) { round_trip(2, 32); }
TEST(GgufRoundTrip, Alignment64) { round_trip(3, 64); }
TEST(GgufRoundTrip, Alignment1) { round_trip(3, 1); }
TEST(GgufRoundTrip, Alignment4096) { round_trip(2, 4096); }

TEST(GgufRoundTrip, WriteFileThenOpen) {
    GgufWriter w;
    w.add_string("general.architecture", "llama");
    std::vector<uint8_t> data = random_bytes(4 * 6, 7);
    w.add_tensor("t", DType::F32, {6}, data.data(), data.size());
    std::string path = ::testing::TempDir() + "/gguf_roundtrip.gguf";
    w.write_file(path);
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->path(), path);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(0, std::memcmp(f->find_tensor("t")->data, data.data(), data.size()));
    f->lock_in_memory();
    EXPECT_STRNE(f->residency(), "mapped");
    EXPECT_EQ(0, std::memcmp(f->find_tensor("t")->data, data.data(), data.size()));
    auto g = GgufFile::open(path);
    g->copy_into_anonymous_memory();
    EXPECT_STREQ(g->residency(), "anonymous");
    EXPECT_EQ(0, std::memcmp(g->find_tensor("t")->data, data.data(), data.size()));
    std::remove(path.c_str());
}

TEST(GgufRoundTrip, GettersNameTheKey) {
    GgufWriter w;
    w.add_i32("neg", -3);
    w.add_string("s", "x");
    w.add_f32("f", 1.5f);
    w.add_int_array("ints", GgufType::I32, {1});
    std::vector<uint8_t> bytes = w.to_bytes();
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_NE(error_of([&] { f->get_uint("neg"); }).find("'neg' = -3 is negative"), std::string::npos);
    EXPECT_NE(error_of([&] { f->get_uint("s"); }).find("'s' has type string"), std::string::npos);
    EXPECT_NE(error_of([&] { f->get_uint("f"); }).find("'f' has type f32"), std::string::npos);
    EXPECT_NE(error_of([&] { f->get_string("missing"); }).find("'missing' is missing"), std::string::npos);
    EXPECT_NE(error_of([&] { f->get_string_array("ints"); }).find("'ints'"), std::string::npos);
    EXPECT_NE(error_of([&] { f->get_bool("s", false); }).find("'s'"), std::string::npos);
    EXPECT_NE(error_of([&] { f->get_array("s"); }).find("'s'"), std::string::npos);
    EXPECT_EQ(f->get_float("neg"), -3.0);
    EXPECT_EQ(f->get_float("f"), 1.5);
    EXPECT_EQ(f->get_uint("missing", 7), 7u);
    EXPECT_EQ(f->get_float("missing", 2.5), 2.5);
    EXPECT_EQ(f->get_string("missing", "fb"), "fb");
    EXPECT_TRUE(f->get_bool("missing", true));
    EXPECT_EQ(f->find_tensor("none"), nullptr);
}

TEST(GgufRoundTrip, WriterRefusesInvalidInput) {
    GgufWriter w;
    w.add_u8("k", 1);
    EXPECT_THROW(w.add_string("k", "again"), cactus::Error);
    EXPECT_THROW(w.set_alignment(3), cactus::Error);
    EXPECT_THROW(GgufWriter(1), cactus::Error);
    std::vector<uint8_t> data(18);
    EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {16}, data.data(), data.size()), cactus::Error);  // row < block
    EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {32}, data.data(), 17), cactus::Error);           // wrong size
    EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {32, 0}, data.data(), 0), cactus::Error);         // zero dim
    w.add_tensor("q", DType::Q4_0, {32}, data.data(), data.size());
    EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {32}, data.data(), data.size()), cactus::Error);  // duplicate
}
