#pragma once
// The conv state of one sequence in a hybrid model (LFM2's short convolutions), kept beside its KV
// cache. A short convolution of L taps needs, to continue a sequence at token n, the conv input rows
// (Bx = B * x, n_embd floats) of tokens n - (L - 1) .. n - 1. Each conv layer keeps them in a ring of
// `ring` rows per sequence: token t lives in row base + t % ring of that layer's table (the tables
// are the backend's; this class only does the bookkeeping, like KvCache for keys and values).
//
// Rewinds (truncate, the engine's prefix reuse): going back to token n is exact while tokens
// max(0, n - (L - 1)) .. n - 1 are still in the ring, i.e. up to ring - (L - 1) tokens back; further
// back the state cannot be restored and truncate keeps nothing (the caller recomputes the prefix).
// Memory: ring * n_embd * 4 bytes per conv layer and sequence (docs/LONG_CONTEXT.md, "LFM2").
#include <cstddef>

namespace cactus {

class ConvState {
public:
    // Rows per sequence and conv layer: the last kRingTokens tokens, so rewinds of up to
    // kRingTokens - (L - 1) tokens (a regenerated reply's tail, a re-rendered turn end) stay exact.
    static constexpr size_t kRingTokens = 64;

    // d_conv = L - 1 rows a token needs before it; ring >= d_conv rows starting at table row base.
    ConvState(size_t d_conv, size_t ring, size_t base);

    size_t n_past() const { return n_tokens_; }
    size_t ring() const { return ring_; }
    // Whether token t's row is still stored (t < n_past()).
    bool holds(size_t t) const { return t >= oldest_ && t < n_tokens_; }
    // Table row of token t (holds(t), or t among the tokens of the step being appended).
    size_t row_of(size_t t) const { return base_ + t % ring_; }
    // Whether truncate(n) restores the state after token n exactly.
    bool can_truncate(size_t n) const;
    // Drops tokens >= n; n must satisfy can_truncate(n) (0 always does).
    void truncate(size_t n);
    // Claims tokens [n_past, n_past + n); the caller stores the rows of the last min(n, ring) of them.
    void append(size_t n);

private:
    size_t d_conv_;
    size_t ring_;
    size_t base_;
    size_t n_tokens_ = 0;
    size_t oldest_ = 0;  // tokens [oldest_, n_tokens_) are in the ring
};

}  // namespace cactus
