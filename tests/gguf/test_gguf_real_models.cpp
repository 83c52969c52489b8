// Reads the two real model files and checks facts known from their model cards / llama.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"

namespace {

std::string model_path(const char* file) {
    const char* dir = std::getenv("CACTUS_MODELS");
    std::string base = dir != nullptr ? dir : std::string(std::getenv("HOME")) + "/.cache/cactus/models";
    return base + "/" + file;
}

// Every tensor's bytes must be inside the file and its pointer inside the data section.
void expect_tensors_inside(const cactus::GgufFile& f) {
    for (const cactus::GgufTensor& t : f.tensors()) {
        EXPECT_GE(t.offset + f.data_offset() + t.n_bytes, t.n_bytes);
        EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, f.file_size()) << t.name;
        EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
        EXPECT_NE(t.data, nullptr) << t.name;
    }
}

}  // namespace

TEST(GgufRealModels, Smollm2) {
    auto f = cactus::GgufFile::open(model_path("smollm2-135m.gguf"));
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get_uint("llama.block_count"), 30u);
    EXPECT_EQ(f->get_uint("llama.embedding_length"), 576u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 49152u);
    const cactus::GgufTensor* emb = f->find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->dims, (std::vector<uint64_t>{576, 49152}));
    EXPECT_EQ(emb->n_elements, 576u * 49152u);
    ASSERT_NE(f->find_tensor("blk.29.attn_q.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.30.attn_q.weight"), nullptr);
    EXPECT_EQ(f->data_offset() % f->alignment(), 0u);
    expect_tensors_inside(*f);
    // Tensor data must be the file's bytes: compare the first tensor against a plain read.
    const cactus::GgufTensor& t0 = f->tensors()[0];
    FILE* fp = std::fopen(model_path("smollm2-135m.gguf").c_str(), "rb");
    ASSERT_NE(fp, nullptr);
    std::fseek(fp, static_cast<long>(f->data_offset() + t0.offset), SEEK_SET);
    std::vector<uint8_t> bytes(std::min<uint64_t>(t0.n_bytes, 4096));
    ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), fp), bytes.size());
    std::fclose(fp);
    EXPECT_EQ(0, std::memcmp(bytes.data(), t0.data, bytes.size()));
}

TEST(GgufRealModels, Gemma3) {
    auto f = cactus::GgufFile::open(model_path("gemma3-270m.gguf"));
    EXPECT_EQ(f->get_string("general.architecture"), "gemma3");
    EXPECT_EQ(f->get_uint("gemma3.block_count"), 18u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 262144u);
    EXPECT_NE(f->find_tensor("token_embd.weight"), nullptr);
    expect_tensors_inside(*f);
}

TEST(GgufRealModels, LockAndCopyKeepTheBytes) {
    auto f = cactus::GgufFile::open(model_path("smollm2-135m.gguf"));
    const cactus::GgufTensor* t = f->find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(t, nullptr);
    std::vector<uint8_t> before(t->data, t->data + t->n_bytes);
    const uint8_t* mapped = t->data;
    f->lock_in_memory();
    EXPECT_NE(std::string(f->residency()), "mapped");
    EXPECT_NE(t->data, mapped);  // locking copies the weights (huge pages), memory permitting
    EXPECT_EQ(0, std::memcmp(before.data(), t->data, before.size()));
    const uint8_t* copied = t->data;
    f->copy_into_anonymous_memory();  // already a copy: nothing moves
    EXPECT_EQ(t->data, copied);
    EXPECT_NE(std::string(f->residency()), "mapped");
    EXPECT_EQ(0, std::memcmp(before.data(), t->data, before.size()));
    auto g = cactus::GgufFile::open(model_path("smollm2-135m.gguf"));
    EXPECT_EQ(std::string(g->residency()), "mapped");
    g->copy_into_anonymous_memory();
    EXPECT_EQ(std::string(g->residency()), "anonymous");
    EXPECT_EQ(0, std::memcmp(before.data(), g->find_tensor("blk.0.attn_q.weight")->data, before.size()));
}

const cactus::GgufTensor* need_tensor(const cactus::GgufFile& f, const std::string& name) {
    const cactus::GgufTensor* t = f.find_tensor(name);
    if (t == nullptr) throw std::runtime_error("the file has no " + name);  // a test failure, not a crash
    return t;
}

// smollm2's token table (kept mapped in these tests) and another tensor, with their file bytes and
// where the mapping holds them.
struct TableAndNeighbour {
    std::unique_ptr<cactus::GgufFile> f = cactus::GgufFile::open(model_path("smollm2-135m.gguf"));
    const cactus::GgufTensor* t = need_tensor(*f, "token_embd.weight");
    const cactus::GgufTensor* other = need_tensor(*f, "blk.0.attn_q.weight");
    const uint8_t* mapped = t->data;
    const uint8_t* other_mapped = other->data;
    std::vector<uint8_t> before{t->data, t->data + t->n_bytes};
    std::vector<uint8_t> other_before{other->data, other->data + other->n_bytes};
};

TEST(GgufRealModels, KeptMappedTableLeavesTheLockedCopy) {
    TableAndNeighbour s;
    auto& [f, t, other, mapped, other_mapped, before, other_before] = s;
    f->lock_in_memory();
    ASSERT_NE(t->data, mapped);  // in the copy now
    const cactus::GgufTensor& kept = f->keep_mapped("token_embd.weight");
    EXPECT_EQ(kept.data, mapped);  // back in the file mapping, the copy's pages freed
    EXPECT_EQ(0, std::memcmp(before.data(), kept.data, before.size()));
    EXPECT_EQ(0, std::memcmp(other_before.data(), other->data, other_before.size()));  // the rest stays copied
    EXPECT_THROW(f->keep_mapped("no.such.tensor"), cactus::Error);
}

TEST(GgufRealModels, TableKeptMappedBeforeLockingIsNeverCopied) {
    TableAndNeighbour s;
    auto& [f, t, other, mapped, other_mapped, before, other_before] = s;
    f->keep_mapped("token_embd.weight");
    f->lock_in_memory();
    EXPECT_EQ(t->data, mapped);  // left out of the copy
    EXPECT_NE(other->data, other_mapped);
    EXPECT_EQ(0, std::memcmp(before.data(), t->data, before.size()));
    EXPECT_EQ(0, std::memcmp(other_before.data(), other->data, other_before.size()));
    // Every tensor, the neighbours of the hole included, holds the file's bytes.
    auto g = cactus::GgufFile::open(model_path("smollm2-135m.gguf"));
    for (const cactus::GgufTensor& any : f->tensors()) {
        const cactus::GgufTensor* fresh = g->find_tensor(any.name);
        ASSERT_NE(fresh, nullptr);
        EXPECT_EQ(0, std::memcmp(fresh->data, any.data, any.n_bytes)) << any.name;
    }
}

TEST(GgufRealModels, MissingFileIsAnError) {
    try {
        cactus::GgufFile::open("/nonexistent/model.gguf");
        FAIL() << "no error";
    } catch (const cactus::Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
}

// The real header cut at 120 places (inside tokenizer arrays, tensor infos, ...) and the data
// section cut short: always a clean error naming a field.
TEST(GgufRealModels, TruncatedRealHeaderIsAnError) {
    std::string path = model_path("smollm2-135m.gguf");
    auto full = cactus::GgufFile::open(path);
    size_t header = static_cast<size_t>(full->data_offset());
    std::vector<uint8_t> bytes(header + 4096);
    FILE* fp = std::fopen(path.c_str(), "rb");
    ASSERT_NE(fp, nullptr);
    ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), fp), bytes.size());
    std::fclose(fp);
    for (size_t k = 0; k <= 120; ++k) {
        size_t cut = header * k / 120 + (k % 7);
        cut = std::min(cut, bytes.size());
        try {
            cactus::GgufFile::from_memory(bytes.data(), cut);
            FAIL() << "accepted a file cut at " << cut;
        } catch (const cactus::Error& e) {
            std::string m = e.what();
            EXPECT_EQ(m.rfind("gguf: ", 0), 0u) << m;
            EXPECT_TRUE(m.find("metadata") != std::string::npos || m.find("tensor") != std::string::npos ||
                        m.find("magic") != std::string::npos || m.find("version") != std::string::npos)
                << m;
        }
    }
}
