// Writes a seed corpus for fuzz_gguf: small valid GGUF files covering every value type, several
// tensor types, versions 2 and 3 and a few alignments.  Usage: fuzz_gguf_seeds <out_dir>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf_writer.h"

namespace {

using cactus::DType;
using cactus::GgufType;
using cactus::GgufWriter;

void add_metadata(GgufWriter& w, bool rich) {
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 2);
    if (!rich) return;
    w.add_u8("k.u8", 1);
    w.add_i8("k.i8", -1);
    w.add_u16("k.u16", 2);
    w.add_i16("k.i16", -2);
    w.add_i32("k.i32", -3);
    w.add_u64("k.u64", 4);
    w.add_i64("k.i64", -5);
    w.add_f32("k.f32", 0.5f);
    w.add_f64("k.f64", 0.25);
    w.add_bool("k.bool", true);
    w.add_string_array("tokenizer.ggml.tokens", {"<s>", "a", "b"});
    w.add_float_array("tokenizer.ggml.scores", GgufType::F32, {0, -1, -2});
    w.add_int_array("tokenizer.ggml.token_type", GgufType::I32, {3, 1, 1});
}

void add_tensor(GgufWriter& w, const char* name, DType type, std::vector<uint64_t> dims) {
    const cactus::DTypeTraits& t = cactus::dtype_traits(type);
    uint64_t n = 1;
    for (uint64_t d : dims) n *= d;
    std::vector<uint8_t> bytes(n / t.block_size * t.block_bytes);
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 31 + 7);
    w.add_tensor(name, type, dims, bytes.data(), bytes.size());
}

void save(const std::string& dir, const std::string& name, const GgufWriter& w) {
    w.write_file(dir + "/" + name + ".gguf");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: fuzz_gguf_seeds <out_dir>\n");
        return 2;
    }
    std::string dir = argv[1];
    try {
        for (uint32_t version : {2u, 3u}) {
            GgufWriter empty(version);
            save(dir, "empty_v" + std::to_string(version), empty);
            GgufWriter meta(version);
            add_metadata(meta, true);
            save(dir, "metadata_v" + std::to_string(version), meta);
        }
        for (uint32_t alignment : {1u, 32u, 64u}) {
            GgufWriter w;
            if (alignment != 32) w.set_alignment(alignment);
            add_metadata(w, alignment == 32);
            add_tensor(w, "token_embd.weight", DType::Q8_0, {32, 3});
            add_tensor(w, "output_norm.weight", DType::F32, {5});
            add_tensor(w, "blk.0.attn_q.weight", DType::Q4_K, {256, 1});
            add_tensor(w, "blk.0.ffn_up.weight", DType::F16, {3, 2, 2});
            save(dir, "tensors_align" + std::to_string(alignment), w);
        }
        GgufWriter quants;
        DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q6_K, DType::BF16};
        for (DType t : types) add_tensor(quants, cactus::dtype_name(t), t, {256});
        save(dir, "quants", quants);
    } catch (const cactus::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
