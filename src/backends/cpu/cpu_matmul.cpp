// The quantized matrix products over the kernel tables: one weight, or a group of weights that
// read the same activations (q, k and v; gate and up), computed as one job of the thread pool.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/quant.h"

namespace cactus {

namespace {

constexpr size_t kRowTile = 16;                  // weight rows kept hot in L1 while every token passes over them
constexpr size_t kTokenBlockBytes = 128 * 1024;  // activations of one token block of the GEMM tiles
// tile_on_f32_rows types are widened for 3+ tokens of rows up to 1024 elements: longer f32 rows
// (4 of them and 2 token rows) leave L1, and were measured slower than converting in the tile.
constexpr size_t kWidenMinTokens = 3;
constexpr size_t kWidenMaxIn = 1024;
// Up to this many tokens (decode steps of several sequences, verification steps of speculative
// decoding) go through panel_decode token by token (types without panel_decode_tokens); more share
// unpacked panels, whose unpacking costs about as much at 3 tokens as at 6 (docs/PERFORMANCE.md,
// "Decode steps of several sequences"; at 3 tokens, 2 threads of the AVX-512 Xeon,
// tests/tools/spec_cost_probe.cpp: smollm2 1.9x a one-token step against 3.0x through panels,
// qwen2.5-coder-0.5b 2.5x against 3.0x, -1.5b 1.8x against 2.7x).
constexpr size_t kDecodeMaxTokens = 3;
// Types with panel_decode_tokens (each weight block unpacked once for all the tokens) stay on that
// path up to this many tokens: a verification step of speculative decoding (up to 16 drafts and the
// last token) reads the weights once.
constexpr size_t kDecodeTokensMaxTokens = 17;
// Row ranges per thread of a matmul of more tokens than that: claimed as threads come free, so a
// slowed thread (a busy host, a smaller core) does not hold the others up. Zen 5 VM, qwen2.5-coder
// pp512 at 2 threads, AVX2 table: one range 96-100 tok/s, 8 ranges 104-106 (docs/PERFORMANCE.md).
constexpr size_t kPrefillChunksPerThread = 8;
// Decode: each thread streams one range of the first 90% of the weight bytes, and the last 10% go
// in pieces of at least kDecodeTailPieceBytes (at most kDecodeMaxTailPieces) to whichever thread is
// free. With one range per thread, the thread that got less bandwidth from a shared memory system
// held the other up at the end of every job (qwen2.5-coder AVX2, 2 threads: 9-10% of thread time
// spinning in the pool, 4-6% with the tail; bench/compare_llama.py).
constexpr uint64_t kDecodeTailPercent = 10;
constexpr uint64_t kDecodeTailPieceBytes = 32 * 1024;
constexpr uint64_t kDecodeMaxTailPieces = 16;

struct MatmulArgs {
    DType dot_type;    // of the quantized activations xq
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
    PanelActFn act_fn;                  // what computed act (null: none)
    const PanelActBlock* act;           // [n_tokens, n_in / 32] (panels and panel_decode only)
    PanelDecodeFn decode;               // one token, full panels of rows; null: vec_dot
    PanelDecodeTokensFn decode_tokens;  // 2+ tokens at once, full panels of rows; null: decode per token
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
        if (a.decode_tokens != nullptr && a.n_tokens >= 2) {
            a.decode_tokens(a.y + o, a.n_out, rows, a.w_row_bytes, a.xq, a.xq_row_bytes, a.n_tokens, a.n_in);
            continue;
        }
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
size_t decode_max_tokens(bool has_panels, bool has_decode_tokens) {
    static const size_t from_env = [] {
        const char* v = std::getenv("CACTUS_DECODE_MAX_TOKENS");
        return v == nullptr ? size_t(0) : static_cast<size_t>(std::strtoul(v, nullptr, 10));
    }();
    if (from_env != 0) return from_env;
    if (has_decode_tokens) return kDecodeTokensMaxTokens;
    return has_panels ? kDecodeMaxTokens : 1;  // without panels, 2+ tokens go through the gemm tiles
}

// Activation scratch of one group of products, one slot per product; a product whose kernels read
// the same activations as an earlier one's reuses them (q, k and v quantize x once).
struct GroupScratch {
    std::vector<uint8_t> xq[kMaxSharedProducts];
    std::vector<PanelActBlock> act[kMaxSharedProducts];
};

// Per (token, block) scale, offset bias and sum of the quantized activations, for the panels.
const PanelActBlock* panel_activations(PanelActFn fn, const uint8_t* xq, size_t xq_row_bytes, size_t n_tokens,
                                       size_t n_in, std::vector<PanelActBlock>& act) {
    const size_t n_blocks = n_in / 32;
    if (act.size() < n_tokens * n_blocks) act.resize(n_tokens * n_blocks);
    for (size_t t = 0; t < n_tokens; ++t) fn(act.data() + t * n_blocks, xq + t * xq_row_bytes, n_in);
    return act.data();
}

// Quantizes the activation rows into `dot_type` (into scratch, reused between calls).
const uint8_t* quantize_activations(const CpuKernels& k, DType dot_type, const float* x, size_t n_tokens, size_t n_in,
                                    ThreadPool& pool, std::vector<uint8_t>& scratch) {
    if (dot_type == DType::F32) return reinterpret_cast<const uint8_t*>(x);
    QuantizeRowFn quantize = k.quantize_row[kernel_slot(dot_type, "matmul")];
    if (quantize == nullptr) fail("matmul: no %s quantizer in the %s table", dtype_name(dot_type), k.isa_name);
    const size_t row_bytes = dtype_row_bytes(dot_type, n_in);
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

// Fails unless the table can multiply p's weights with n_in-element rows.
void check_product(const CpuKernels& k, const MatmulProduct& p, size_t n_in) {
    const size_t slot = kernel_slot(p.w_type, "matmul");
    const DTypeTraits& traits = dtype_traits(p.w_type);
    // A layout without row access (the _X8 ones) has panels and panel_decode instead
    const bool whole_panels =
        k.vec_dot[slot] == nullptr && k.panel_decode[slot] != nullptr && k.pack_panel[slot] != nullptr;
    if (k.vec_dot[slot] == nullptr && !whole_panels) {
        fail("matmul: no %s dot product in the %s table", traits.name, k.isa_name);
    }
    if (whole_panels && p.n_out % kPanelRows != 0) {
        fail("matmul: %zu rows of %s are not whole panels of %zu", p.n_out, traits.name, kPanelRows);
    }
    if (n_in % traits.block_size != 0) {
        fail("matmul: n_in %zu is not a multiple of the %s block size %u", n_in, traits.name,
             static_cast<unsigned>(traits.block_size));
    }
    if (p.w_row_bytes < dtype_row_bytes(p.w_type, n_in)) {
        fail("matmul: row stride %zu is below the %zu bytes of a %s row of %zu", p.w_row_bytes,
             dtype_row_bytes(p.w_type, n_in), traits.name, n_in);
    }
}

// The activations product i reads: those of an earlier product of the group when it reads the same,
// else its own in slot i of the scratch.
void prepare_activations(const CpuKernels& k, MatmulArgs* args, size_t i, const float* x, ThreadPool& pool,
                         GroupScratch& scratch) {
    MatmulArgs& a = args[i];
    a.xq = nullptr;
    for (size_t j = 0; j < i && a.xq == nullptr; ++j) {
        if (args[j].dot_type == a.dot_type) a.xq = args[j].xq;
    }
    if (a.xq == nullptr) a.xq = quantize_activations(k, a.dot_type, x, a.n_tokens, a.n_in, pool, scratch.xq[i]);
    a.act = nullptr;
    if (a.act_fn == nullptr) return;
    for (size_t j = 0; j < i && a.act == nullptr; ++j) {
        if (args[j].act_fn == a.act_fn && args[j].xq == a.xq) a.act = args[j].act;
    }
    if (a.act == nullptr) a.act = panel_activations(a.act_fn, a.xq, a.xq_row_bytes, a.n_tokens, a.n_in, scratch.act[i]);
}

// How product p is computed: the kernels of its path (decode, panels, tiles or rows).
MatmulArgs plan_product(const CpuKernels& k, const MatmulProduct& p, size_t n_tokens, size_t n_in) {
    const size_t slot = kernel_slot(p.w_type, "matmul");
    MatmulArgs a;
    a.dot_type = vec_dot_type(p.w_type);
    a.y = p.y;
    a.w = static_cast<const uint8_t*>(p.w);
    a.w_row_bytes = p.w_row_bytes;
    a.xq = nullptr;
    a.xq_row_bytes = dtype_row_bytes(a.dot_type, n_in);
    a.n_tokens = n_tokens;
    a.n_in = n_in;
    a.n_out = p.n_out;
    a.dot = k.vec_dot[slot];
    a.tile = k.gemm_tile[slot];
    a.widen = nullptr;
    a.f32_tile = k.gemm_tile[static_cast<size_t>(DType::F32)];
    if (a.tile != nullptr && k.tile_on_f32_rows[slot] && a.f32_tile != nullptr && n_in <= kWidenMaxIn) {
        a.widen = k.dequantize_row[slot];
    }
    a.pack_panel = nullptr;
    a.panel_gemm = nullptr;
    a.act_fn = nullptr;
    a.act = nullptr;
    a.decode = nullptr;
    a.decode_tokens = nullptr;
    const bool few_tokens =
        n_tokens <= decode_max_tokens(k.pack_panel[slot] != nullptr, k.panel_decode_tokens[slot] != nullptr);
    if (few_tokens && k.panel_decode[slot] != nullptr) {
        CACTUS_ASSERT(dtype_traits(p.w_type).block_size % 32 == 0);  // act: [n_in / 32] per token
        a.decode = k.panel_decode[slot];
        a.decode_tokens = k.panel_decode_tokens[slot];
        a.act_fn = k.decode_act[slot];
    } else if (n_tokens >= 2 && k.panel_act[slot] != nullptr && k.pack_panel[slot] != nullptr &&
               k.panel_gemm[slot] != nullptr) {
        // Unpacking a panel pays once enough tokens share it.
        CACTUS_ASSERT(dtype_traits(p.w_type).block_size % 32 == 0);  // act: [n_in / 32] per token
        a.pack_panel = k.pack_panel[slot];
        a.panel_gemm = k.panel_gemm[slot];
        a.act_fn = k.panel_act[slot];
    }
    return a;
}

// Rows begin .. end of one product, on the path its plan chose.
void run_rows(const MatmulArgs& a, size_t begin, size_t end) {
    if (a.decode != nullptr) {
        matmul_rows_decode(a, begin, end);
    } else if (a.panel_gemm != nullptr) {
        matmul_rows_panel(a, begin, end);
    } else {
        matmul_rows(a, begin, end);
    }
}

size_t tiles_of(const MatmulArgs& a) { return (a.n_out + kRowTile - 1) / kRowTile; }

// The group's row tiles, product after product, cut into ranges by weight bytes (a Q6_K v beside
// Q4_K q and k weighs more per row): n_main ranges of equal bytes over the first main_bytes, then
// n_chunks - n_main equal pieces of the rest. Chunk c starts at the first tile whose preceding
// bytes reach its byte target.
struct TileChunks {
    const MatmulArgs* args;
    size_t n_products;
    size_t n_chunks;
    size_t n_main;         // <= n_chunks; == n_chunks: no tail
    uint64_t main_bytes;   // <= total_bytes; == total_bytes when there is no tail
    uint64_t total_bytes;  // < 2^40, so the products below stay under 2^64 (chunks < 2^20)

    uint64_t byte_target(size_t chunk) const {
        if (chunk <= n_main) return main_bytes * chunk / n_main;
        return main_bytes + (total_bytes - main_bytes) * (chunk - n_main) / (n_chunks - n_main);
    }

    size_t first_tile(size_t chunk) const {
        const uint64_t target = byte_target(chunk);
        size_t tiles_before = 0;
        uint64_t bytes_before = 0;
        for (size_t i = 0; i < n_products; ++i) {
            const uint64_t tile_bytes = uint64_t(args[i].w_row_bytes) * kRowTile;
            const size_t n = tiles_of(args[i]);
            if (target <= bytes_before + tile_bytes * n) {
                return tiles_before + static_cast<size_t>((target - bytes_before + tile_bytes - 1) / tile_bytes);
            }
            tiles_before += n;
            bytes_before += tile_bytes * n;
        }
        return tiles_before;
    }

    // Runs the group's tiles tile_begin .. tile_end, each product's share through its path.
    void run(size_t tile_begin, size_t tile_end) const {
        size_t first = 0;  // the product's first tile in the group
        for (size_t i = 0; i < n_products && first < tile_end; ++i) {
            const size_t n = tiles_of(args[i]);
            const size_t b = std::max(tile_begin, first), e = std::min(tile_end, first + n);
            if (b < e) run_rows(args[i], (b - first) * kRowTile, std::min(args[i].n_out, (e - first) * kRowTile));
            first += n;
        }
    }
};

// n_chunks ranges of equal bytes (at most one per tile).
TileChunks even_chunks(const MatmulArgs* args, size_t n_products, size_t n_tiles, uint64_t total_bytes,
                       size_t n_chunks) {
    n_chunks = std::min(n_tiles, n_chunks);
    return TileChunks{args, n_products, n_chunks, n_chunks, total_bytes, total_bytes};
}

// One range per thread over the first bytes and a tail of pieces (kDecodeTailPercent); a group too
// small for two tail pieces gets one range per thread.
TileChunks decode_chunks(const MatmulArgs* args, size_t n_products, size_t n_tiles, uint64_t total_bytes,
                         size_t n_threads) {
    uint64_t piece_bytes = kDecodeTailPieceBytes;  // and at least one tile of every product, so no piece is empty
    for (size_t i = 0; i < n_products; ++i) {
        piece_bytes = std::max(piece_bytes, uint64_t(args[i].w_row_bytes) * kRowTile);
    }
    const uint64_t tail_bytes = total_bytes * kDecodeTailPercent / 100;
    const size_t n_pieces = static_cast<size_t>(std::min(kDecodeMaxTailPieces, tail_bytes / piece_bytes));
    if (n_threads < 2 || n_pieces < 2 || n_tiles < 2 * (n_threads + n_pieces)) {
        return even_chunks(args, n_products, n_tiles, total_bytes, n_threads);
    }
    return TileChunks{args, n_products, n_threads + n_pieces, n_threads, total_bytes - tail_bytes, total_bytes};
}

}  // namespace

void matmul(float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x, size_t n_tokens, size_t n_in,
            size_t n_out, ThreadPool& pool) {
    matmul_with(cpu_kernels(), y, w, w_type, w_row_bytes, x, n_tokens, n_in, n_out, pool);
}

void matmul_with(const CpuKernels& k, float* y, const void* w, DType w_type, size_t w_row_bytes, const float* x,
                 size_t n_tokens, size_t n_in, size_t n_out, ThreadPool& pool) {
    const MatmulProduct product{y, w, w_type, w_row_bytes, n_out};
    matmuls_with(k, &product, 1, x, n_tokens, n_in, pool);
}

void matmuls(const MatmulProduct* products, size_t n_products, const float* x, size_t n_tokens, size_t n_in,
             ThreadPool& pool) {
    matmuls_with(cpu_kernels(), products, n_products, x, n_tokens, n_in, pool);
}

void matmuls_with(const CpuKernels& k, const MatmulProduct* products, size_t n_products, const float* x,
                  size_t n_tokens, size_t n_in, ThreadPool& pool) {
    if (n_products > kMaxSharedProducts) {
        fail("matmul: %zu products share one input; at most %zu do", n_products, kMaxSharedProducts);
    }
    for (size_t i = 0; i < n_products; ++i) check_product(k, products[i], n_in);
    if (n_tokens == 0) return;
    thread_local GroupScratch scratch;
    MatmulArgs args[kMaxSharedProducts];
    size_t n_tiles = 0;
    uint64_t total_bytes = 0;
    for (size_t i = 0; i < n_products; ++i) {
        args[i] = plan_product(k, products[i], n_tokens, n_in);
        prepare_activations(k, args, i, x, pool, scratch);
        n_tiles += tiles_of(args[i]);
        total_bytes += uint64_t(args[i].w_row_bytes) * kRowTile * tiles_of(args[i]);
    }
    if (n_tiles == 0) return;
    // Contiguous tile ranges, claimed by whichever thread is free; whole tiles, so no tile (nor
    // panel: a tile holds whole panels) straddles two threads.
    static_assert(kRowTile % kPanelRows == 0, "a row tile holds whole panels");
    bool all_decode = true;  // every product reads its rows once per step (decode paths)
    for (size_t i = 0; i < n_products; ++i) all_decode = all_decode && args[i].decode != nullptr;
    const TileChunks chunks =
        n_tokens > kDecodeMaxTokens && !all_decode
            ? even_chunks(args, n_products, n_tiles, total_bytes, pool.size() * kPrefillChunksPerThread)
            : decode_chunks(args, n_products, n_tiles, total_bytes, pool.size());
    const size_t n_chunks = chunks.n_chunks;
    pool.run_chunks(n_chunks, [&](size_t c) {
        const size_t begin = chunks.first_tile(c), end = chunks.first_tile(c + 1);
        if (begin < end) chunks.run(begin, end);
    });
}

}  // namespace cactus
