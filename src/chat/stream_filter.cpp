#include "chat/stream_filter.h"

#include <cctype>

namespace cactus {

namespace {

// Length of the longest suffix of text that is a proper prefix of marker.
size_t partial_suffix(const std::string& text, const std::string& marker) {
    if (marker.empty()) return 0;
    size_t longest = std::min(text.size(), marker.size() - 1);
    for (size_t n = longest; n > 0; --n)
        if (text.compare(text.size() - n, n, marker, 0, n) == 0) return n;
    return 0;
}

}  // namespace

std::string StreamFilter::push(const std::string& piece) {
    pending_ += piece;
    std::string out;
    for (;;) {
        if (inside_ >= 0) {
            const std::string& close = regions_[static_cast<size_t>(inside_)].close;
            size_t at = pending_.find(close);
            if (at == std::string::npos) {  // drop hidden text, keep a possible partial close
                pending_.erase(0, pending_.size() - partial_suffix(pending_, close));
                return out;
            }
            pending_.erase(0, at + close.size());
            inside_ = -1;
            continue;
        }
        size_t first = std::string::npos;
        int which = -1;
        for (size_t r = 0; r < regions_.size(); ++r) {
            size_t at = pending_.find(regions_[r].open);
            if (at < first) {
                first = at;
                which = static_cast<int>(r);
            }
        }
        if (which >= 0) {
            out += pending_.substr(0, first);
            pending_.erase(0, first + regions_[static_cast<size_t>(which)].open.size());
            inside_ = which;
            continue;
        }
        size_t hold = 0;
        for (const HiddenRegion& r : regions_) hold = std::max(hold, partial_suffix(pending_, r.open));
        out += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return out;
    }
}

int region_open_at_end(const std::vector<HiddenRegion>& regions, const std::string& prompt) {
    constexpr size_t kMaxLabel = 16;
    for (size_t r = 0; r < regions.size(); ++r) {
        const HiddenRegion& region = regions[r];
        if (region.close.empty() || region.open.empty()) continue;
        const size_t from =
            prompt.size() > kMaxLabel + region.open.size() ? prompt.size() - kMaxLabel - region.open.size() : 0;
        const size_t at = prompt.rfind(region.open);
        if (at == std::string::npos || at < from) continue;
        bool label = true;
        for (size_t i = at + region.open.size(); i < prompt.size(); ++i)
            label = label && (std::isalpha(static_cast<unsigned char>(prompt[i])) ||
                              std::isspace(static_cast<unsigned char>(prompt[i])));
        if (label) return static_cast<int>(r);
    }
    return -1;
}

std::string StreamFilter::finish() {
    std::string rest = inside_ >= 0 ? std::string() : pending_;
    pending_.clear();
    inside_ = -1;
    return rest;
}

}  // namespace cactus
