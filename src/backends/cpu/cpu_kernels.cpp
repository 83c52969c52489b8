// The kernel tables and the quantized matrix multiplication that uses them.
#include "backends/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/generic/generic_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/quant.h"

#if defined(__x86_64__)
#include "backends/cpu/amx/amx_kernels.h"
#include "backends/cpu/avx2/avx2_kernels.h"
#include "backends/cpu/avx512/avx512_kernels.h"
#endif
#if defined(__aarch64__)
#include "backends/cpu/neon/neon_kernels.h"
#endif

namespace cactus {

namespace {

// Each table is the previous tier plus the entries its ISA accelerates.
struct KernelTables {
    CpuKernels tiers[4];
    size_t count = 0;
};

#if defined(__x86_64__)
void add_isa_tiers(KernelTables& t, const CpuFeatures& f) {
    if (!f.avx2) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_avx2_kernels(t.tiers[t.count++], f.decode_prefetch_l1);
    if (!f.avx512_vnni) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_avx512_kernels(t.tiers[t.count++], f.decode_prefetch_l1);
    if (!f.amx_int8) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_amx_kernels(t.tiers[t.count++]);
}
#elif defined(__aarch64__)
// ASIMD is part of every aarch64 CPU, so the plain NEON tier is always there; sdot is optional.
void add_isa_tiers(KernelTables& t, const CpuFeatures& f) {
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_neon_kernels(t.tiers[t.count++]);
    if (!f.neon_dotprod) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_neon_dotprod_kernels(t.tiers[t.count++]);
}
#else
void add_isa_tiers(KernelTables&, const CpuFeatures&) {}
#endif

const KernelTables& tables() {
    static const KernelTables built = [] {
        KernelTables t;
        register_generic_kernels(t.tiers[0]);
        t.count = 1;
        add_isa_tiers(t, cpu_features());
        return t;
    }();
    return built;
}

constexpr size_t kRowTile = 16;                  // weight rows kept hot in L1 while every token passes over them
constexpr size_t kTokenBlockBytes = 128 * 1024;  // activations of one token block of the GEMM tiles
// tile_on_f32_rows types are widened for 3+ tokens of rows up to 1024 elements: longer f32 rows
// (4 of them and 2 token rows) leave L1, and were measured slower than converting in the tile.
constexpr size_t kWidenMinTokens = 3;
constexpr size_t kWidenMaxIn = 1024;
// Up to this many tokens (decode steps of several sequences) go through panel_decode; more share
// unpacked panels (docs/PERFORMANCE.md, "Decode steps of several sequences").
constexpr size_t kDecodeMaxTokens = 2;
// Row ranges per thread of a matmul of more tokens than that: claimed as threads come free, so a
// slowed thread (a busy host, a smaller core) does not hold the others up. Zen 5 VM, qwen2.5-coder
// pp512 at 2 threads, AVX2 table: one range 96-100 tok/s, 8 ranges 104-106 (docs/PERFORMANCE.md).
constexpr size_t kPrefillChunksPerThread = 8;

struct MatmulArgs {
    float* y;          // [n_tokens, n_out]
    const uint8_t* w;  // [n_out] rows of w_row_bytes
    size_t w_row_bytes;
    const uint8_t* xq;  // [n_tokens] rows of xq_row_bytes, in vec_dot_type
    size_t xq_row_bytes;
    size_t n_tokens, n_in, n_out;
    VecDotFn dot;
    GemmTileFn tile;        // null: row-at-a-time vec_dot
    DequantizeRowFn widen;  // non-null: tiles of rows are widened to f32 and run through f32_tile
    GemmTileFn f32_tile;
    PackPanelFn pack_panel;  // null: no row panels for this type
    PanelGemmFn panel_gemm;
    const PanelActBlock* act;  // [n_tokens, n_in / 32] (panels and panel_decode only)
    PanelDecodeFn decode;      // one token, full panels of rows; null: vec_dot
};

// Row-at-a-time fallback: each tile of rows stays hot in L1 while every token passes over it.
void matmul_rows_dot(const MatmulArgs& a, size_t row_begin, size_t row_end) {
    CACTUS_ASSERT(a.dot != nullptr);  // a layout without rows (the _X8 ones) never gets here: whole panels
    for (size_t tile = row_begin; tile < row_end; tile += kRowTile) {
        const size_t tile_end = std::min(row_end, tile + kRowTile);
        for (size_t t = 0; t < a.n_tokens; ++t) {
            const uint8_t* x = a.xq + t * a.xq_row_bytes;
            float* y = a.y + t * a.n_out;
            for (size_t o = tile; o < tile_end; ++o) y[o] = a.dot(a.w + o * a.w_row_bytes, x, a.n_in);
        }
    }
}

// A few tokens (decode steps of several sequences): full panels of kPanelRows rows through
// panel_decode, token after token while the panel's rows sit in L1 (read from memory once per
// step); a ragged rest row by row. Bit for bit the panels' and vec_dot's results.
void matmul_rows_decode(const MatmulArgs& a, size_t row_begin, size_t row_end) {
    const size_t act_row_blocks = a.n_in / 32;
    size_t o = row_begin;
    for (; o + kPanelRows <= row_end; o += kPanelRows) {
        const uint8_t* rows = a.w + o * a.w_row_bytes;
        for (size_t t = 0; t < a.n_tokens; ++t) {
            const PanelActBlock* act = a.act == nullptr ? nullptr : a.act + t * act_row_blocks;  // null: none read
            a.decode(a.y + t * a.n_out + o, rows, a.w_row_bytes, a.xq + t * a.xq_row_bytes, act, a.n_in);
        }
    }
    if (o < row_end) matmul_rows_dot(a, o, row_end);
}

// Tokens t0 .. t_end of the kGemmTileRows rows at o, through register tiles. With `widened`
// ([kGemmTileRows, n_in] scratch) the rows are widened to f32 first and run through the F32 tile:
// each weight is then converted once per token block instead of once per tile of tokens.
void tile_tokens(const MatmulArgs& a, size_t o, size_t t0, size_t t_end, float* widened) {
    const uint8_t* w = a.w + o * a.w_row_bytes;
    size_t w_row_bytes = a.w_row_bytes;
    GemmTileFn tile = a.tile;
    if (widened != nullptr) {
        for (size_t r = 0; r < kGemmTileRows; ++r) a.widen(widened + r * a.n_in, w + r * w_row_bytes, a.n_in);
        w = reinterpret_cast<const uint8_t*>(widened);
        w_row_bytes = a.n_in * sizeof(float);
        tile = a.f32_tile;
    }
    for (size_t t = t0; t < t_end; t += kGemmTileTokens) {
        tile(a.y + t * a.n_out + o, a.n_out, w, w_row_bytes, a.xq + t * a.xq_row_bytes, a.xq_row_bytes, a.n_in,
             std::min(kGemmTileTokens, t_end - t));
    }
}

// Register tiles of kGemmTileRows rows x kGemmTileTokens tokens; leftover rows by vec_dot. One
// token (decode) goes row by row: measured 2.5x faster than 4-row tiles when the rows come from
// memory (tiles interleave 4 streams; software prefetch did not recover it).
void matmul_rows(const MatmulArgs& a, size_t row_begin, size_t row_end) {
    if (a.tile == nullptr || a.n_tokens == 1) {
        matmul_rows_dot(a, row_begin, row_end);
        return;
    }
    // Tokens in blocks of about kTokenBlockBytes of activations, so that a block stays in L2 while
    // every tile of rows passes over it (all tokens at once streamed them from memory per tile).
    const size_t block_tokens =
        std::max(kGemmTileTokens, kTokenBlockBytes / a.xq_row_bytes / kGemmTileTokens * kGemmTileTokens);
    const size_t full_end = row_begin + (row_end - row_begin) / kGemmTileRows * kGemmTileRows;
    thread_local std::vector<float> widened;  // [kGemmTileRows, n_in]
    for (size_t t0 = 0; t0 < a.n_tokens; t0 += block_tokens) {
        const size_t t_end = std::min(a.n_tokens, t0 + block_tokens);
        const bool widen = a.widen != nullptr && t_end - t0 >= kWidenMinTokens;
        if (widen && widened.size() < kGemmTileRows * a.n_in) widened.resize(kGemmTileRows * a.n_in);
        for (size_t o = row_begin; o < full_end; o += kGemmTileRows) {
            tile_tokens(a, o, t0, t_end, widen ? widened.data() : nullptr);
        }
    }
    if (full_end < row_end) matmul_rows_dot(a, full_end, row_end);
}

// Row panels: each full panel of kPanelRows rows is unpacked once into a thread-local scratch and
// multiplied with every token while it sits in L1/L2; a ragged last tile goes row by row.
void matmul_rows_panel(const MatmulArgs& a, size_t row_begin, size_t row_end) {
    const size_t n_blocks = a.n_in / 32;
    thread_local std::vector<uint8_t> panel;
    if (panel.size() < n_blocks * kPanelBlockBytes) panel.resize(n_blocks * kPanelBlockBytes);
    size_t o = row_begin;
    for (; o + kPanelRows <= row_end; o += kPanelRows) {
        a.pack_panel(panel.data(), a.w + o * a.w_row_bytes, a.w_row_bytes, a.n_in);
        a.panel_gemm(a.y + o, a.n_out, panel.data(), a.xq, a.xq_row_bytes, a.act, n_blocks, a.n_in, a.n_tokens);
    }
    if (o < row_end) matmul_rows_dot(a, o, row_end);
}

// The most tokens that go through panel_decode (rows read straight from the GGUF, once per step,
// each token's product from L1) rather than unpacked panels. $CACTUS_DECODE_MAX_TOKENS overrides it
// for measurements (docs/PERFORMANCE.md, "Decode steps of several sequences").
size_t decode_max_tokens(bool has_panels) {
    static const size_t from_env = [] {
        const char* v = std::getenv("CACTUS_DECODE_MAX_TOKENS");
        return v == nullptr ? size_t(0) : static_cast<size_t>(std::strtoul(v, nullptr, 10));
    }();
    if (from_env != 0) return from_env;
    return has_panels ? kDecodeMaxTokens : 1;  // without panels, 2+ tokens go through the gemm tiles
}

// Per (token, block) scale, offset bias and sum of the quantized activations, for the panels.
const PanelActBlock* panel_activations(PanelActFn fn, const uint8_t* xq, size_t xq_row_bytes, size_t n_tokens,
                                       size_t n_in) {
    const size_t n_blocks = n_in / 32;
    thread_local std::vector<PanelActBlock> act;
    if (act.size() < n_tokens * n_blocks) act.resize(n_tokens * n_blocks);
    for (size_t t = 0; t < n_tokens; ++t) fn(act.data() + t * n_blocks, xq + t * xq_row_bytes, n_in);
    return act.data();
}

// Quantizes the activation rows into `dot_type` (thread-local scratch reused between calls).
const uint8_t* quantize_activations(const CpuKernels& k, DType dot_type, const float* x, size_t n_tokens, size_t n_in,
                                    ThreadPool& pool) {
    if (dot_type == DType::F32) return reinterpret_cast<const uint8_t*>(x);
    QuantizeRowFn quantize = k.quantize_row[kernel_slot(dot_type, "matmul")];
    if (quantize == nullptr) fail("matmul: no %s quantizer in the %s table", dtype_name(dot_type), k.isa_name);
    const size_t row_bytes = dtype_row_bytes(dot_type, n_in);
    thread_local std::vector<uint8_t> scratch;
    if (scratch.size() < row_bytes * n_tokens) scratch.resize(row_bytes * n_tokens);
    uint8_t* out = scratch.data();
    if (n_tokens == 1) {
        quantize(out, x, n_in);
        return out;
    }
    pool.parallel_for(n_tokens, [&](size_t begin, size_t end) {
        for (size_t t = begin; t < end; ++t) quantize(out + t * row_bytes, x + t * n_in, n_in);
    });
    return out;
}

}  // namespace

size_t kernel_slot(DType type, const char* caller) {
    const uint32_t id = static_cast<uint32_t>(type);
    if ((dtype_traits(id) == nullptr && !dtype_is_internal(type)) || id >= kDTypeSlots)
        fail("%s: unknown tensor type id %u", caller, static_cast<unsigned>(id));
    return id;
}

void dequantize_row_cpu(DType type, float* dst, const void* src, size_t n) {
    const DequantizeRowFn fn = cpu_kernels().dequantize_row[kernel_slot(type, "dequantize_row")];
    if (fn != nullptr) {
        fn(dst, src, n);
    } else {
        dequantize_row_ref(type, dst, src, n);
    }
}

const CpuKernels& cpu_kernels_generic() { return tables().tiers[0]; }

std::vector<const CpuKernels*> cpu_kernel_tables() {
    std::vector<const CpuKernels*> out;
    for (size_t i = 0; i < tables().count; ++i) out.push_back(&tables().tiers[i]);
    return out;
}

void matmul(float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x, size_t n_tokens, size_t n_in,
            size_t n_out, ThreadPool& pool) {
    matmul_with(cpu_kernels(), y, w, w_type, w_row_bytes, x, n_tokens, n_in, n_out, pool);
}

void matmul_with(const CpuKernels& k, float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x,
                 size_t n_tokens, size_t n_in, size_t n_out, ThreadPool& pool) {
    const size_t slot = kernel_slot(w_type, "matmul");
    const DTypeTraits* traits = &dtype_traits(w_type);
    VecDotFn dot = k.vec_dot[slot];
    // A layout without row access (the _X8 ones) has panels and panel_decode instead
    const bool whole_panels = dot == nullptr && k.panel_decode[slot] != nullptr && k.pack_panel[slot] != nullptr;
    if (dot == nullptr && !whole_panels) fail("matmul: no %s dot product in the %s table", traits->name, k.isa_name);
    if (whole_panels && n_out % kPanelRows != 0) {
        fail("matmul: %zu rows of %s are not whole panels of %zu", n_out, traits->name, kPanelRows);
    }
    if (n_in % traits->block_size != 0) {
        fail("matmul: n_in %zu is not a multiple of the %s block size %u", n_in, traits->name,
             static_cast<unsigned>(traits->block_size));
    }
    if (w_row_bytes < dtype_row_bytes(w_type, n_in)) {
        fail("matmul: row stride %zu is below the %zu bytes of a %s row of %zu", w_row_bytes,
             dtype_row_bytes(w_type, n_in), traits->name, n_in);
    }
    if (n_tokens == 0 || n_out == 0) return;
    const DType dot_type = vec_dot_type(w_type);
    MatmulArgs a;
    a.y = y;
    a.w = static_cast<const uint8_t*>(w);
    a.w_row_bytes = w_row_bytes;
    a.xq = quantize_activations(k, dot_type, x, n_tokens, n_in, pool);
    a.xq_row_bytes = dtype_row_bytes(dot_type, n_in);
    a.n_tokens = n_tokens;
    a.n_in = n_in;
    a.n_out = n_out;
    a.dot = dot;
    a.tile = k.gemm_tile[slot];
    a.widen = nullptr;
    a.f32_tile = k.gemm_tile[static_cast<size_t>(DType::F32)];
    if (a.tile != nullptr && k.tile_on_f32_rows[slot] && a.f32_tile != nullptr && n_in <= kWidenMaxIn) {
        a.widen = k.dequantize_row[slot];
    }
    a.pack_panel = nullptr;
    a.panel_gemm = nullptr;
    a.act = nullptr;
    a.decode = nullptr;
    const PanelActFn panel_act = k.panel_act[slot];
    const PanelDecodeFn decode = k.panel_decode[slot];
    const PanelActFn decode_act = k.decode_act[slot];
    const bool few_tokens = n_tokens <= decode_max_tokens(k.pack_panel[slot] != nullptr);
    if (few_tokens && decode != nullptr) {
        CACTUS_ASSERT(traits->block_size % 32 == 0);  // act: [n_in / 32] per token
        a.decode = decode;
        if (decode_act != nullptr) a.act = panel_activations(decode_act, a.xq, a.xq_row_bytes, n_tokens, n_in);
    } else if (n_tokens >= 2 && panel_act != nullptr && k.pack_panel[slot] != nullptr &&
               k.panel_gemm[slot] != nullptr) {
        // Unpacking a panel pays once enough tokens share it.
        CACTUS_ASSERT(traits->block_size % 32 == 0);  // act: [n_in / 32] per token
        a.pack_panel = k.pack_panel[slot];
        a.panel_gemm = k.panel_gemm[slot];
        a.act = panel_activations(panel_act, a.xq, a.xq_row_bytes, n_tokens, n_in);
    }
    // Contiguous row ranges per thread, in whole tiles so no tile straddles two threads.
    static_assert(kRowTile % kPanelRows == 0, "a row tile holds whole panels");
    const size_t n_tiles = (n_out + kRowTile - 1) / kRowTile;
    pool.parallel_for(
        n_tiles,
        [&](size_t tile_begin, size_t tile_end) {
            const size_t begin = tile_begin * kRowTile, end = std::min(n_out, tile_end * kRowTile);
            if (a.decode != nullptr) {
                matmul_rows_decode(a, begin, end);
            } else if (a.panel_gemm != nullptr) {
                matmul_rows_panel(a, begin, end);
            } else {
                matmul_rows(a, begin, end);
            }
        },
        n_tokens > kDecodeMaxTokens ? kPrefillChunksPerThread : 1);
}

}  // namespace cactus
