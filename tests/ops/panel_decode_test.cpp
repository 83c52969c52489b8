// One-token panel products (panel_decode, AVX2 and AVX-512 VNNI tables): equal to the table's vec_dot row by
// row, bit for bit, for block counts with every step tail (1..3 blocks left over), exact and padded
// row strides (the last row and the activations end at an inaccessible page: nothing may be read
// past them), ragged row counts through matmul; and close to the scalar reference. The same for the
// several-token products (panel_decode_tokens: every pass size and several passes), on the file's
// rows and on the load-time repacked layouts.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/thread_pool.h"
#include "ops/q4_k_x8.h"
#include "ops/q6_k_x8.h"
#include "ops/quant.h"
#include "quant_test_util.h"

namespace cactus {
namespace {

const DType kDecodeTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                              DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Block counts with every step tail of the 32-element kernels; K-quants: super-block counts.
std::vector<size_t> block_counts(DType type) {
    if (dtype_traits(type).block_size == 32) return {1, 2, 3, 4, 5, 7, 18, 20};
    return {1, 2, 3, 5};
}

// Bytes that end exactly where an inaccessible page begins: any read past them faults.
class GuardedBytes {
public:
    explicit GuardedBytes(const std::vector<uint8_t>& bytes) {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        map_bytes_ = (bytes.size() + page - 1) / page * page + page;
        void* m = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
        map_ = static_cast<uint8_t*>(m);
        mprotect(map_ + map_bytes_ - page, page, PROT_NONE);
        data_ = map_ + map_bytes_ - page - bytes.size();
        std::memcpy(data_, bytes.data(), bytes.size());
    }
    ~GuardedBytes() { munmap(map_, map_bytes_); }
    GuardedBytes(const GuardedBytes&) = delete;
    GuardedBytes& operator=(const GuardedBytes&) = delete;
    const uint8_t* data() const { return data_; }

private:
    uint8_t* map_ = nullptr;
    uint8_t* data_ = nullptr;
    size_t map_bytes_ = 0;
};

TEST(CpuPanelDecode, EqualsVecDotForEveryTail) {
    std::mt19937 rng(41);
    size_t tables_with_decode = 0;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kDecodeTypes) {
            const size_t ti = static_cast<size_t>(type);
            if (k->panel_decode[ti] == nullptr) continue;
            ++tables_with_decode;
            for (size_t n_blocks : block_counts(type)) {
                const size_t n_in = dtype_traits(type).block_size * n_blocks;
                for (size_t pad : {0, 6}) {
                    const size_t stride = dtype_row_bytes(type, n_in) + pad;
                    std::vector<uint8_t> rows = test::quantized_rows(type, n_in, kPanelRows, stride, rng);
                    rows.resize(stride * (kPanelRows - 1) + dtype_row_bytes(type, n_in));
                    const GuardedBytes w(rows);  // nothing readable after the last row
                    std::vector<float> x = test::random_floats(n_in, rng);
                    const GuardedBytes xq(test::quantized_activations(vec_dot_type(type), x));
                    std::vector<PanelActBlock> act(n_in / 32);  // read only where decode_act is set
                    if (k->decode_act[ti] != nullptr) k->decode_act[ti](act.data(), xq.data(), n_in);
                    const PanelActBlock* act_in = k->decode_act[ti] != nullptr ? act.data() : nullptr;
                    std::vector<float> y(kPanelRows, NAN);
                    k->panel_decode[ti](y.data(), w.data(), stride, xq.data(), act_in, n_in);
                    for (size_t r = 0; r < kPanelRows; ++r) {
                        const float want = k->vec_dot[ti](w.data() + r * stride, xq.data(), n_in);
                        const float ref = cpu_kernels_generic().vec_dot[ti](w.data() + r * stride, xq.data(), n_in);
                        ASSERT_EQ(y[r], want) << k->isa_name << " " << dtype_name(type) << " blocks=" << n_blocks
                                              << " pad=" << pad << " r=" << r;
                        ASSERT_NEAR(y[r], ref, 1e-4f * (1.0f + std::fabs(ref))) << dtype_name(type);
                    }
                }
            }
        }
    }
    const std::string isa = cpu_kernels().isa_name;
    if (isa == "avx512_vnni" || isa == "avx2") {
        EXPECT_GE(tables_with_decode, 4u);
    }
    for (const CpuKernels* k : cpu_kernel_tables()) {  // the AVX2 table decodes every panel type
        if (k->isa_name != std::string("avx2")) continue;
        for (DType type : kDecodeTypes) EXPECT_NE(k->panel_decode[static_cast<size_t>(type)], nullptr);
    }
}

// Decode through matmul (panels + ragged rows, 1 and 2 threads) equals vec_dot, and equals the
// prefill path's result for the same token bit for bit.
TEST(CpuPanelDecode, MatmulOneTokenEqualsVecDotAndPrefill) {
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
    std::mt19937 rng(43);
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kDecodeTypes) {
            const size_t ti = static_cast<size_t>(type);
            const size_t n_in = dtype_traits(type).block_size * 18, n_out = 4 * kPanelRows + 7;
            const size_t stride = dtype_row_bytes(type, n_in);
            std::vector<uint8_t> w = test::quantized_rows(type, n_in, n_out, stride, rng);
            std::vector<float> x = test::random_floats(3 * n_in, rng);
            std::vector<uint8_t> xq = test::quantized_activations(vec_dot_type(type), {x.begin(), x.begin() + n_in});
            for (ThreadPool& pool : pools) {
                std::vector<float> y1(n_out, NAN), y3(3 * n_out, NAN);
                matmul_with(*k, y1.data(), w.data(), type, stride, x.data(), 1, n_in, n_out, pool);
                matmul_with(*k, y3.data(), w.data(), type, stride, x.data(), 3, n_in, n_out, pool);
                for (size_t o = 0; o < n_out; ++o) {
                    const float want = k->vec_dot[ti](w.data() + o * stride, xq.data(), n_in);
                    ASSERT_EQ(y1[o], want) << k->isa_name << " " << dtype_name(type) << " o=" << o;
                    ASSERT_EQ(y3[o], y1[o]) << k->isa_name << " " << dtype_name(type) << " o=" << o;
                }
            }
        }
    }
}

// matmul of n_tokens activation rows x ([n_tokens, n_in]) with n_out rows of w: every token's
// products equal vec_dot of its own quantized activation row bit for bit.
::testing::AssertionResult matmul_equals_vec_dot_per_token(const CpuKernels& k, DType type,
                                                           const std::vector<uint8_t>& w, size_t stride,
                                                           const std::vector<float>& x, size_t n_tokens, size_t n_in,
                                                           size_t n_out, ThreadPool& pool) {
    std::vector<float> y(n_tokens * n_out, NAN);
    matmul_with(k, y.data(), w.data(), type, stride, x.data(), n_tokens, n_in, n_out, pool);
    for (size_t t = 0; t < n_tokens; ++t) {
        std::vector<uint8_t> xq = test::quantized_activations(
            vec_dot_type(type), {x.begin() + std::ptrdiff_t(t * n_in), x.begin() + std::ptrdiff_t((t + 1) * n_in)});
        for (size_t o = 0; o < n_out; ++o) {
            const float want = k.vec_dot[static_cast<size_t>(type)](w.data() + o * stride, xq.data(), n_in);
            if (y[t * n_out + o] != want) {
                return ::testing::AssertionFailure()
                       << k.isa_name << " " << dtype_name(type) << " tokens=" << n_tokens << " t=" << t << " o=" << o
                       << ": " << y[t * n_out + o] << " != vec_dot " << want;
            }
        }
    }
    return ::testing::AssertionSuccess();
}

// Decode steps of several sequences (2 tokens: panel_decode token by token; 3: unpacked panels):
// every token's products equal vec_dot of its own activation row bit for bit, so a sequence decodes
// the same tokens alone or batched with others.
TEST(CpuPanelDecode, MatmulFewTokensEqualVecDotPerToken) {
    ThreadPool pool(2);
    std::mt19937 rng(47);
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kDecodeTypes) {
            const size_t n_in = dtype_traits(type).block_size * 13, n_out = 3 * kPanelRows + 5;
            const size_t stride = dtype_row_bytes(type, n_in);
            std::vector<uint8_t> w = test::quantized_rows(type, n_in, n_out, stride, rng);
            for (size_t n_tokens : {size_t(2), size_t(3)}) {
                std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
                ASSERT_TRUE(matmul_equals_vec_dot_per_token(*k, type, w, stride, x, n_tokens, n_in, n_out, pool));
            }
        }
    }
}

// The rows a several-token product reads: the file's, or the table's repacked layout of them
// (whole groups, so the guarded copy holds exactly the panel).
struct DecodeRows {
    DType type;  // what panel_decode_tokens is indexed by
    std::vector<uint8_t> bytes;
    size_t stride;
};

DecodeRows rows_for(const CpuKernels& k, DType file_type, const std::vector<uint8_t>& rows, size_t stride, size_t n_in,
                    bool repacked) {
    if (!repacked) return {file_type, rows, stride};
    const size_t s = static_cast<size_t>(file_type);
    const DType packed_type = k.repack_type[s];
    const size_t packed_stride = dtype_row_bytes(packed_type, n_in);
    std::vector<uint8_t> packed(packed_stride * kPanelRows);
    k.repack[s](packed.data(), rows.data(), stride, kPanelRows, n_in);
    return {packed_type, packed, packed_stride};
}

TEST(CpuPanelDecodeTokens, EqualsVecDotPerTokenForEveryPassSize) {
    std::mt19937 rng(53);
    size_t tested = 0;
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : kDecodeTypes) {
            const size_t ti = static_cast<size_t>(type);
            for (bool repacked : {false, true}) {
                if (repacked && k->repack[ti] == nullptr) continue;
                const DType decode_type = repacked ? k->repack_type[ti] : type;
                const PanelDecodeTokensFn decode = k->panel_decode_tokens[static_cast<size_t>(decode_type)];
                if (decode == nullptr) continue;
                ++tested;
                for (size_t n_blocks : block_counts(type)) {
                    const size_t n_in = dtype_traits(type).block_size * n_blocks;
                    const size_t stride = dtype_row_bytes(type, n_in) + (repacked ? 0 : 6);
                    std::vector<uint8_t> file_rows = test::quantized_rows(type, n_in, kPanelRows, stride, rng);
                    const DecodeRows d = rows_for(*k, type, file_rows, stride, n_in, repacked);
                    std::vector<uint8_t> last_row_ends = d.bytes;  // nothing readable after row 15's n elements
                    if (!repacked) last_row_ends.resize(stride * (kPanelRows - 1) + dtype_row_bytes(type, n_in));
                    const GuardedBytes w(last_row_ends);
                    for (size_t n_tokens : {1, 2, 3, 4, 5, 6, 7, 9, 17}) {
                        const size_t x_row_bytes = dtype_row_bytes(vec_dot_type(type), n_in);
                        std::vector<uint8_t> xq_rows;
                        for (size_t t = 0; t < n_tokens; ++t) {
                            const std::vector<uint8_t> xq =
                                test::quantized_activations(vec_dot_type(type), test::random_floats(n_in, rng));
                            xq_rows.insert(xq_rows.end(), xq.begin(), xq.end());
                        }
                        const GuardedBytes x(xq_rows);
                        const size_t y_stride = kPanelRows + 3;
                        std::vector<float> y(n_tokens * y_stride, NAN);
                        decode(y.data(), y_stride, w.data(), d.stride, x.data(), x_row_bytes, n_tokens, n_in);
                        for (size_t t = 0; t < n_tokens; ++t) {
                            for (size_t r = 0; r < kPanelRows; ++r) {
                                const float want =
                                    k->vec_dot[ti](file_rows.data() + r * stride, x.data() + t * x_row_bytes, n_in);
                                ASSERT_EQ(y[t * y_stride + r], want)
                                    << k->isa_name << " " << dtype_name(decode_type) << " blocks=" << n_blocks
                                    << " tokens=" << n_tokens << " t=" << t << " r=" << r;
                            }
                            for (size_t r = kPanelRows; r < y_stride; ++r) ASSERT_TRUE(std::isnan(y[t * y_stride + r]));
                        }
                    }
                }
            }
        }
    }
    for (const CpuKernels* k : cpu_kernel_tables()) {  // the AVX2 table has them for the K-quants and their layouts
        if (k->isa_name != std::string("avx2")) continue;
        for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_K_X8, DType::Q6_K_X8}) {
            EXPECT_NE(k->panel_decode_tokens[static_cast<size_t>(type)], nullptr) << dtype_name(type);
        }
    }
    if (tested == 0) GTEST_SKIP() << "no kernel table on this CPU has several-token decode products";
}

// Verification steps through matmul (several-token products, ragged rows, 1 and 2 threads): every
// token's products equal vec_dot of its own activation row bit for bit, up to the most tokens that
// take that path and past it.
TEST(CpuPanelDecodeTokens, MatmulEqualsVecDotPerToken) {
    ThreadPool pools[] = {ThreadPool(1), ThreadPool(2)};
    std::mt19937 rng(59);
    for (const CpuKernels* k : cpu_kernel_tables()) {
        for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
            const size_t n_in = 256 * 3, n_out = 2 * kPanelRows + 5;
            const size_t stride = dtype_row_bytes(type, n_in);
            std::vector<uint8_t> w = test::quantized_rows(type, n_in, n_out, stride, rng);
            for (size_t n_tokens : {4, 5, 8, 17, 18}) {
                std::vector<float> x = test::random_floats(n_tokens * n_in, rng);
                for (ThreadPool& pool : pools) {
                    ASSERT_TRUE(matmul_equals_vec_dot_per_token(*k, type, w, stride, x, n_tokens, n_in, n_out, pool));
                }
            }
        }
    }
}

}  // namespace
}  // namespace cactus
