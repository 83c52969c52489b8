// Weights repacked at load (CpuBackend::pack_for_products; the x86 tables repack Q4_K and Q6_K,
// and ctest also runs this under CACTUS_CPU_ISA=avx2): gemma3-270m (Q4_K_M) gives the same logits, bit for
// bit, with and without repacking, from a file copied into anonymous memory, where the repacked
// tensors' bytes leave the copy (GgufFile::release_tensor_bytes): a model loaded afterwards from the
// same file, and one loaded before that still reads its tensors, see the same bytes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_dispatch.h"
#include "backends/cpu/cpu_kernels.h"
#include "common/test_models.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace cactus {
namespace {

std::unique_ptr<Model> load(const GgufFile& file, bool repack) {
    setenv("CACTUS_CPU_REPACK", repack ? "1" : "0", 1);
    ModelOptions o;
    o.n_ctx = 128;
    o.n_threads = 2;
    std::unique_ptr<Model> m = Model::load(file, o);
    unsetenv("CACTUS_CPU_REPACK");
    return m;
}

// The last token's logits of a 40-token prefill, then of 3 decode steps.
std::vector<float> logits(Model& m) {
    std::vector<int32_t> tokens(43);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(100 + 37 * i);
    std::vector<float> out, step;
    m.forward(tokens.data(), 40, &step);
    out = step;
    for (size_t i = 40; i < tokens.size(); ++i) {
        m.forward(&tokens[i], 1, &step);
        out.insert(out.end(), step.begin(), step.end());
    }
    return out;
}

TEST(ModelRepack, SameLogitsWithAndWithoutRepackingFromOneCopiedFile) {
    const CpuKernels& k = *cpu_kernel_set().matmul;
    // matrices of gemma3-270m's Q4_K_M mix, and whether this table repacks their type
    struct Matrix {
        const char* name;
        DType type;
        bool repacked;
    };
    const Matrix matrices[] = {
        {"blk.0.attn_output.weight", DType::Q4_K, k.repack[static_cast<size_t>(DType::Q4_K)] != nullptr},
        {"blk.0.ffn_down.weight", DType::Q6_K, k.repack[static_cast<size_t>(DType::Q6_K)] != nullptr},
    };
    std::unique_ptr<GgufFile> file = GgufFile::open(testing::test_model_path("gemma3-270m"));
    file->copy_into_anonymous_memory();
    std::vector<const uint8_t*> in_copy;
    for (const Matrix& m : matrices) {
        ASSERT_EQ(file->find_tensor(m.name)->type, m.type) << m.name;
        in_copy.push_back(file->find_tensor(m.name)->data);
    }
    auto before = load(*file, false);  // reads its weights in the copy
    auto packed = load(*file, true);   // repacks; the copy keeps what `before` reads
    for (size_t i = 0; i < in_copy.size(); ++i) EXPECT_EQ(file->find_tensor(matrices[i].name)->data, in_copy[i]);
    auto after = load(*file, false);
    const std::vector<float> want = logits(*before);
    EXPECT_EQ(logits(*packed), want);
    EXPECT_EQ(logits(*after), want);
    // and the same with nothing read in place first: the repacked tensors leave the copy, and a model
    // loaded afterwards reads them from the file mapping
    std::unique_ptr<GgufFile> file2 = GgufFile::open(testing::test_model_path("gemma3-270m"));
    file2->copy_into_anonymous_memory();
    std::vector<const uint8_t*> in_copy2;
    for (const Matrix& m : matrices) in_copy2.push_back(file2->find_tensor(m.name)->data);
    auto packed2 = load(*file2, true);
    for (size_t i = 0; i < in_copy2.size(); ++i) {
        EXPECT_EQ(file2->find_tensor(matrices[i].name)->data != in_copy2[i], matrices[i].repacked) << matrices[i].name;
    }
    auto after2 = load(*file2, false);
    EXPECT_EQ(logits(*packed2), want);
    EXPECT_EQ(logits(*after2), want);
    if (!matrices[0].repacked && !matrices[1].repacked) {
        GTEST_SKIP() << "the " << k.isa_name << " table repacks nothing (ctest runs this under avx2)";
    }
}

}  // namespace
}  // namespace cactus
