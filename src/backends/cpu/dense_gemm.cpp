#include "backends/cpu/dense_gemm.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/quant.h"

namespace cactus {

namespace {

void panel_rows_generic(float* c, size_t ldc, const float* a, size_t lda, const float* panel, size_t k, size_t rows,
                        bool accumulate) {
    for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < kDensePanel; ++j) {
            float acc = accumulate ? c[r * ldc + j] : 0.0f;
            for (size_t kk = 0; kk < k; ++kk) acc = std::fma(a[r * lda + kk], panel[kk * kDensePanel + j], acc);
            c[r * ldc + j] = acc;
        }
    }
}

// B element (j, kk) as a float.
float b_at(const DenseB& b, size_t j, size_t kk) {
    const size_t i = b.k_major ? kk * b.stride + j : j * b.stride + kk;
    return b.half != nullptr ? fp16_to_fp32(b.half[i]) : b.b[i];
}

// Half B rows (weight rows, not k_major), kPackBlock values of k at a time: the panel's rows widened
// (the table's F16C row conversion) into a block that stays in L1, then written out in the panel's
// [k][16] order in one sequential pass. Scattering each widened row straight into the panel touches
// every cache line of it 16 times, and a whole-row scratch doubles the memory traffic: the packing is a
// pass over every weight per product (tests/models/audio/gemma4_audio_bench.py).
void pack_half_rows(float* out, const DenseB& b, size_t j0, size_t width, size_t k_begin, size_t k) {
    constexpr size_t kPackBlock = 256;
    float block[kDensePanel * kPackBlock];  // [width][kl]
    for (size_t k0 = 0; k0 < k; k0 += kPackBlock) {
        const size_t kl = std::min(kPackBlock, k - k0);
        for (size_t j = 0; j < width; ++j) {
            dequantize_row_cpu(DType::F16, block + j * kl, b.half + (j0 + j) * b.stride + k_begin + k0, kl);
        }
        for (size_t kk = 0; kk < kl; ++kk) {
            float* dst = out + (k0 + kk) * kDensePanel;
            if (width == kDensePanel) {  // a whole panel: a fixed trip count the compiler unrolls
                for (size_t j = 0; j < kDensePanel; ++j) dst[j] = block[j * kl + kk];
            } else {
                for (size_t j = 0; j < width; ++j) dst[j] = block[j * kl + kk];
            }
        }
    }
}

// Values k0 .. k0 + kl - 1 of panel p into out [kl][16]: columns 16p .. 16p + 15 of C, zero past n.
void pack_panel_slice(float* out, const DenseB& b, size_t n, size_t p, size_t k0, size_t kl) {
    const size_t j0 = p * kDensePanel;
    const size_t width = std::min(kDensePanel, n - j0);
    if (b.half != nullptr && !b.k_major) {
        pack_half_rows(out, b, j0, width, k0, kl);
    } else {
        for (size_t kk = 0; kk < kl; ++kk) {
            float* dst = out + kk * kDensePanel;
            if (b.k_major && b.half == nullptr) {
                std::copy_n(b.b + (k0 + kk) * b.stride + j0, width, dst);
            } else {
                for (size_t j = 0; j < width; ++j) dst[j] = b_at(b, j0 + j, k0 + kk);
            }
        }
    }
    for (size_t kk = 0; kk < kl; ++kk) std::fill(out + kk * kDensePanel + width, out + (kk + 1) * kDensePanel, 0.0f);
}

// packed [n_panels][k][16]: panel p holds columns 16p .. 16p + 15 of C, zero past n.
void pack_panels(float* packed, const DenseB& b, size_t n, size_t k, size_t p) {
    pack_panel_slice(packed + p * k * kDensePanel, b, n, p, 0, k);
}

// The product's operands and how its loops are cut.
struct DenseJob {
    float* c;
    size_t ldc;
    const float* a;
    size_t lda;
    const float* packed;  // [n_panels][k][16]
    size_t m, n, k;
    const DenseGemmKernels* kernels;
};

// Rows [i0, i0 + rows) of C against panels [p0, p1), k in [k0, k0 + kl); the last panel goes
// through a 16-wide tile when n is not a multiple of 16.
// `panels` points at panel p0's values from k0 on, `stride` floats between consecutive panels.
void row_block(const DenseJob& g, const float* panels, size_t stride, size_t i0, size_t rows, size_t p0, size_t p1,
               size_t k0, size_t kl) {
    float edge[kDenseMaxRows * kDensePanel];
    const bool accumulate = k0 > 0;
    const float* a = g.a + i0 * g.lda + k0;
    for (size_t p = p0; p < p1; ++p) {
        const float* panel = panels + (p - p0) * stride;
        const size_t j0 = p * kDensePanel;
        float* c = g.c + i0 * g.ldc + j0;
        if (g.kernels->panel_rows2 && p + 1 < p1 && j0 + 2 * kDensePanel <= g.n) {
            g.kernels->panel_rows2(c, g.ldc, a, g.lda, panel, panel + stride, kl, rows, accumulate);
            ++p;
            continue;
        }
        if (j0 + kDensePanel <= g.n) {
            g.kernels->panel_rows(c, g.ldc, a, g.lda, panel, kl, rows, accumulate);
            continue;
        }
        const size_t width = g.n - j0;
        for (size_t r = 0; r < rows; ++r) {
            std::fill(edge + r * kDensePanel, edge + (r + 1) * kDensePanel, 0.0f);
            if (accumulate) std::copy_n(c + r * g.ldc, width, edge + r * kDensePanel);
        }
        g.kernels->panel_rows(edge, kDensePanel, a, g.lda, panel, kl, rows, accumulate);
        for (size_t r = 0; r < rows; ++r) std::copy_n(edge + r * kDensePanel, width, c + r * g.ldc);
    }
}

// Packed bytes of B that one sweep over a chunk's rows keeps in the L2 cache: every block of rows
// of A then meets panels already in cache (a sweep over all panels of a 1536-wide B per block of 6
// rows would stream 2.4 MB from memory each time).
constexpr size_t kPanelGroupBytes = 192 * 1024;
// Row blocks per chunk of work (at most): chunks are claimed dynamically (a busy core takes fewer),
// and a chunk's 96 rows x kDenseKBlock of A (96 KiB) sit in L2 next to a panel group. Fewer rows
// are cut into smaller chunks, at least 4 per thread.
constexpr size_t kBlocksPerChunk = 16;

// Row blocks [b0, b1): k blocks outermost (each resumes the chains the previous one left in C),
// then groups of panels, then the row blocks against each panel of the group.
void row_chunk(const DenseJob& g, size_t b0, size_t b1) {
    const size_t n_panels = (g.n + kDensePanel - 1) / kDensePanel;
    size_t k0 = 0;
    do {
        const size_t kl = std::min(kDenseKBlock, g.k - k0);
        const size_t group = std::max<size_t>(1, kPanelGroupBytes / (std::max<size_t>(kl, 1) * kDensePanel * 4));
        for (size_t p0 = 0; p0 < n_panels; p0 += group) {
            const size_t p1 = std::min(n_panels, p0 + group);
            for (size_t blk = b0; blk < b1; ++blk) {
                const size_t i0 = blk * kDenseMaxRows;
                row_block(g, g.packed + (p0 * g.k + k0) * kDensePanel, g.k * kDensePanel, i0,
                          std::min(kDenseMaxRows, g.m - i0), p0, p1, k0, kl);
            }
        }
        k0 += kl;
    } while (k0 < g.k);
}

// Panels [p0, p1) against every row of A, k blocks outermost as in row_chunk (same chains, same bits),
// each block of the panels packed into `scratch` [p1 - p0][kDenseKBlock][16] just before its use: B
// is read once per product and the packed floats stay in L2, where row chunks would each stream the
// whole packed B from memory (a [4096, 1024] F16 weight packs to 16 MB).
void column_chunk(const DenseJob& g, const DenseB& b, float* scratch, size_t p0, size_t p1) {
    const size_t n_blocks = (g.m + kDenseMaxRows - 1) / kDenseMaxRows;
    size_t k0 = 0;
    do {
        const size_t kl = std::min(kDenseKBlock, g.k - k0);
        for (size_t p = p0; p < p1; ++p) pack_panel_slice(scratch + (p - p0) * kl * kDensePanel, b, g.n, p, k0, kl);
        for (size_t blk = 0; blk < n_blocks; ++blk) {
            const size_t i0 = blk * kDenseMaxRows;
            row_block(g, scratch, kl * kDensePanel, i0, std::min(kDenseMaxRows, g.m - i0), p0, p1, k0, kl);
        }
        k0 += kl;
    } while (k0 < g.k);
}

// Column chunks pay when A's k block (m rows x kDenseKBlock floats) stays in L2 while a chunk's
// panels pass by, and B is the larger operand: A is then read once per chunk, B once in all.
constexpr size_t kColumnMaxRows = 1024;

bool column_split(size_t m, size_t n) { return m <= kColumnMaxRows && n >= m; }

void dense_gemm_columns(const DenseJob& g, const DenseB& b, std::vector<float>& packed, ThreadPool& pool) {
    const size_t n_panels = (g.n + kDensePanel - 1) / kDensePanel;
    const size_t group = kPanelGroupBytes / (kDenseKBlock * kDensePanel * 4);  // panels per chunk (at most)
    const size_t threads = static_cast<size_t>(std::max(pool.size(), 1));
    size_t n_chunks = (n_panels + group - 1) / group;
    n_chunks = std::min(n_panels, (n_chunks + threads - 1) / threads * threads);
    const size_t chunk_floats = ((n_panels + n_chunks - 1) / n_chunks) * kDenseKBlock * kDensePanel;
    packed.resize(n_chunks * chunk_floats);
    pool.run_chunks(n_chunks, [&](size_t chunk) {
        column_chunk(g, b, packed.data() + chunk * chunk_floats, chunk * n_panels / n_chunks,
                     (chunk + 1) * n_panels / n_chunks);
    });
}

}  // namespace

void dense_dot_rows_generic(float* s, const float* q, const float* rows, size_t stride, size_t n_rows, size_t d) {
    for (size_t j = 0; j < n_rows; ++j) {
        const float* r = rows + j * stride;
        float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // eight partial sums: the compiler vectorises them
        size_t c = 0;
        for (; c + 8 <= d; c += 8)
            for (size_t l = 0; l < 8; ++l) lane[l] += q[c + l] * r[c + l];
        float dot = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
        for (; c < d; ++c) dot += q[c] * r[c];
        s[j] = dot;
    }
}

void dense_axpy_rows_generic(float* out, const float* p, const float* rows, size_t stride, size_t n_rows, size_t d) {
    for (size_t j = 0; j < n_rows; ++j) {
        const float* r = rows + j * stride;
        const float w = p[j];
        for (size_t c = 0; c < d; ++c) out[c] += w * r[c];
    }
}

const DenseGemmKernels& dense_gemm_kernels_generic() {
    static const DenseGemmKernels table = {"generic", panel_rows_generic, dense_dot_rows_generic,
                                           dense_axpy_rows_generic};
    return table;
}

void dense_gemm(float* c, size_t ldc, const float* a, size_t lda, const DenseB& b, size_t m, size_t n, size_t k,
                std::vector<float>& packed, ThreadPool& pool, const DenseGemmKernels& kernels) {
    if (m == 0 || n == 0) return;
    if (ldc < n || (lda < k && m > 1) || (b.stride < (b.k_major ? n : k) && k > 0)) {
        fail("dense_gemm: strides lda %zu ldc %zu b %zu too small for [%zu, %zu] x [%zu, %zu]^T", lda, ldc, b.stride, m,
             k, n, k);
    }
    if (column_split(m, n)) {
        dense_gemm_columns(DenseJob{c, ldc, a, lda, nullptr, m, n, k, &kernels}, b, packed, pool);
        return;
    }
    const size_t n_panels = (n + kDensePanel - 1) / kDensePanel;
    packed.resize(n_panels * std::max<size_t>(k, 1) * kDensePanel);
    pool.parallel_for(n_panels, [&](size_t begin, size_t end) {
        for (size_t p = begin; p < end; ++p) pack_panels(packed.data(), b, n, k, p);
    });
    const DenseJob job = {c, ldc, a, lda, packed.data(), m, n, k, &kernels};
    // About 4 chunks a thread, a multiple of the thread count, of sizes that differ by at most one block:
    // with whole chunks of a fixed size, 42 blocks (250 audio tokens) made 7 chunks, and one of 2 threads
    // waited a seventh of every product (tests/models/audio/gemma4_audio_bench.py, 2 threads).
    const size_t n_blocks = (m + kDenseMaxRows - 1) / kDenseMaxRows;
    const size_t threads = static_cast<size_t>(std::max(pool.size(), 1));
    size_t n_chunks = std::max(4 * threads, (n_blocks + kBlocksPerChunk - 1) / kBlocksPerChunk);
    n_chunks = std::min(n_blocks, (n_chunks + threads - 1) / threads * threads);
    pool.run_chunks(n_chunks, [&](size_t chunk) {
        row_chunk(job, chunk * n_blocks / n_chunks, (chunk + 1) * n_blocks / n_chunks);
    });
}

void dense_pack_panel(float* packed, const DenseB& b, size_t n, size_t k, size_t p) { pack_panels(packed, b, n, k, p); }

void dense_gemm_rows(float* c, size_t ldc, const float* a, size_t lda, const float* packed, size_t m, size_t n,
                     size_t k, const DenseGemmKernels& kernels) {
    if (m == 0 || n == 0) return;
    const DenseJob job = {c, ldc, a, lda, packed, m, n, k, &kernels};
    row_chunk(job, 0, (m + kDenseMaxRows - 1) / kDenseMaxRows);
}

bool dense_matmul(float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x, size_t n_tokens,
                  size_t n_in, size_t n_out, std::vector<float>& packed, ThreadPool& pool) {
    DenseB b{nullptr, 0, false};
    if (w_type == DType::F32) {
        b.b = static_cast<const float*>(w);
        b.stride = w_row_bytes / sizeof(float);
    } else if (w_type == DType::F16) {
        b.half = static_cast<const uint16_t*>(w);
        b.stride = w_row_bytes / sizeof(uint16_t);
    } else {
        return false;
    }
    dense_gemm(y, n_out, x, n_in, b, n_tokens, n_out, n_in, packed, pool);
    return true;
}

}  // namespace cactus
