#include "kv/conv_state.h"

#include <algorithm>

#include "core/error.h"

namespace cactus {

ConvState::ConvState(size_t d_conv, size_t ring, size_t n_slots, size_t base)
    : d_conv_(d_conv), ring_(ring), n_slots_(n_slots), base_(base), slot_of_(n_slots, 0) {
    if (d_conv == 0 || ring < d_conv || d_conv > kCheckpointEvery) {
        fail("ConvState: a ring of %zu rows (checkpoints every %zu) cannot hold %zu rows of state", ring,
             kCheckpointEvery, d_conv);
    }
}

long ConvState::checkpoint_row(size_t t) {
    if (n_slots_ == 0 || t % kCheckpointEvery < kCheckpointEvery - d_conv_) return -1;
    const size_t j = t / kCheckpointEvery + 1;  // the checkpoint at token j * every
    const size_t slot = j % n_slots_;
    slot_of_[slot] = j;
    const size_t k = t % kCheckpointEvery - (kCheckpointEvery - d_conv_);  // 0 .. d_conv - 1
    return static_cast<long>(base_ + ring_ + slot * d_conv_ + k);
}

bool ConvState::checkpoint_valid(size_t j) const {
    // Every row of checkpoint j belongs to a token < j * every <= n_past: written in this history.
    return j > 0 && n_slots_ > 0 && slot_of_[j % n_slots_] == j && j * kCheckpointEvery <= n_tokens_;
}

size_t ConvState::restorable(size_t n) const {
    if (n == 0 || n > n_tokens_) return 0;
    if (n - std::min(n, d_conv_) >= oldest_) return n;
    for (size_t j = n / kCheckpointEvery; j > 0; --j)
        if (checkpoint_valid(j)) return j * kCheckpointEvery;
    return 0;
}

void ConvState::truncate(size_t n, std::vector<std::pair<size_t, size_t>>* copies) {
    if (n == 0) {
        n_tokens_ = oldest_ = 0;
        std::fill(slot_of_.begin(), slot_of_.end(), 0);
        return;
    }
    if (restorable(n) != n)
        fail("ConvState::truncate: token %zu is not restorable (ring holds %zu..%zu)", n, oldest_, n_tokens_);
    if (n - std::min(n, d_conv_) < oldest_) {  // from checkpoint n / every: its rows go back into the ring
        const size_t slot = (n / kCheckpointEvery) % n_slots_;
        for (size_t k = 0; k < d_conv_; ++k)
            copies->emplace_back(base_ + ring_ + slot * d_conv_ + k, row_of(n - d_conv_ + k));
        oldest_ = n - d_conv_;
    }
    n_tokens_ = n;
}

void ConvState::append(size_t n) {
    n_tokens_ += n;
    if (n_tokens_ > ring_) oldest_ = std::max(oldest_, n_tokens_ - ring_);
}

}  // namespace cactus
