#include "engine/shadow_draft.h"

#include <utility>

namespace cactus {

void ShadowDraft::start(std::vector<int32_t> tokens, size_t history_size) {
    tokens_ = std::move(tokens);
    at_ = history_size;
    matched_ = 0;
}

void ShadowDraft::clear() {
    tokens_.clear();
    matched_ = 0;
}

bool ShadowDraft::score(const std::vector<int32_t>& history, Run* run) {
    if (tokens_.empty()) return false;
    if (history.size() < at_) {
        clear();
        return false;
    }
    while (matched_ < tokens_.size() && at_ + matched_ < history.size()) {
        if (history[at_ + matched_] != tokens_[matched_]) {
            *run = Run{tokens_.size(), matched_, true};
            clear();
            return true;
        }
        ++matched_;
    }
    if (matched_ < tokens_.size()) return false;  // the reply has not produced the rest yet
    *run = Run{tokens_.size(), matched_, false};
    clear();
    return true;
}

}  // namespace cactus
