#include "kv/conv_state.h"

#include <algorithm>

#include "core/error.h"

namespace cactus {

ConvState::ConvState(size_t d_conv, size_t ring, size_t base) : d_conv_(d_conv), ring_(ring), base_(base) {
    if (d_conv == 0 || ring < d_conv) fail("ConvState: ring of %zu rows cannot hold %zu rows of state", ring, d_conv);
}

bool ConvState::can_truncate(size_t n) const {
    if (n == 0) return true;
    if (n > n_tokens_) return false;
    return n - std::min(n, d_conv_) >= oldest_;
}

void ConvState::truncate(size_t n) {
    if (!can_truncate(n))
        fail("ConvState::truncate: token %zu is not restorable (ring holds %zu..%zu)", n, oldest_, n_tokens_);
    n_tokens_ = n;
    if (n == 0) oldest_ = 0;
}

void ConvState::append(size_t n) {
    n_tokens_ += n;
    if (n_tokens_ > ring_) oldest_ = std::max(oldest_, n_tokens_ - ring_);
}

}  // namespace cactus
