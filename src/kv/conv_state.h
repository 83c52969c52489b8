#pragma once
// The conv state of one sequence in a hybrid model (LFM2's short convolutions), kept beside its KV
// cache. A short convolution of L taps needs, to continue a sequence at token n, the conv input rows
// (Bx = B * x, n_embd floats) of tokens n - (L - 1) .. n - 1. This class does the bookkeeping (like
// KvCache for keys and values); the rows live in one table per conv layer in backend memory, where
// a sequence owns `ring + n_slots * (L - 1)` rows from `base`:
//  - a ring of the last `ring` tokens' rows: token t in row base + t % ring;
//  - checkpoints: the L - 1 rows before every multiple c of kCheckpointEvery, in slot
//    (c / kCheckpointEvery) % n_slots (rows base + ring + slot * (L - 1) + k).
// Rewinds (truncate, the engine's prefix reuse) to token n are exact while the ring still holds
// tokens n - (L - 1) .. n - 1 (up to ring - (L - 1) tokens back); further back the state is
// restored at the last checkpoint c <= n (its rows are copied into the ring) and the caller
// recomputes tokens c .. n - 1; with no checkpoint, everything is dropped. n_slots checkpoints
// cover n_ctx tokens, the most a global KV layer can take back (older rewinds fail there too).
// Memory: (ring + n_slots * (L - 1)) * n_embd * 4 bytes per conv layer and sequence (docs/LONG_CONTEXT.md).
#include <cstddef>
#include <utility>
#include <vector>

namespace cactus {

class ConvState {
public:
    // Ring rows per sequence and conv layer: rewinds of up to kRingTokens - (L - 1) tokens (the
    // last prompt token, a re-rendered end of turn) restore exactly, without recomputing.
    static constexpr size_t kRingTokens = 64;
    // Tokens between checkpoints: a longer rewind recomputes at most this many tokens - 1 extra.
    static constexpr size_t kCheckpointEvery = 64;

    // Checkpoint slots that cover n_ctx tokens.
    static size_t slots_for(size_t n_ctx) { return n_ctx / kCheckpointEvery + 1; }

    // d_conv = L - 1 rows a token needs before it; ring >= d_conv rows; n_slots checkpoints (0 = none).
    ConvState(size_t d_conv, size_t ring, size_t n_slots, size_t base);
    // Table rows a sequence owns.
    static size_t rows(size_t d_conv, size_t ring, size_t n_slots) { return ring + n_slots * d_conv; }

    size_t n_past() const { return n_tokens_; }
    size_t ring() const { return ring_; }
    // Whether token t's row is still in the ring (t < n_past()).
    bool holds(size_t t) const { return t >= oldest_ && t < n_tokens_; }
    // Ring row of token t (held, or among the tokens of the step being appended).
    size_t row_of(size_t t) const { return base_ + t % ring_; }
    // The checkpoint row that also keeps token t's row (claiming its slot), or -1 when t is not
    // among the L - 1 tokens before a multiple of kCheckpointEvery. For tokens being appended.
    long checkpoint_row(size_t t);
    // The most tokens <= n this state can be restored to: n, a checkpoint, or 0.
    size_t restorable(size_t n) const;
    // Drops tokens >= n, n == restorable(n). Restoring a checkpoint appends to `copies` the
    // (checkpoint row, ring row) pairs the caller must copy in every conv layer's table.
    void truncate(size_t n, std::vector<std::pair<size_t, size_t>>* copies);
    // Claims tokens [n_past, n_past + n); the caller stores the rows of the last min(n, ring) of them
    // in the ring, and every row checkpoint_row() names.
    void append(size_t n);

private:
    bool checkpoint_valid(size_t j) const;

    size_t d_conv_;
    size_t ring_;
    size_t n_slots_;
    size_t base_;
    size_t n_tokens_ = 0;
    size_t oldest_ = 0;            // tokens [oldest_, n_tokens_) are in the ring
    std::vector<size_t> slot_of_;  // [n_slots] checkpoint index j held (token j * every), 0 = none
};

}  // namespace cactus
