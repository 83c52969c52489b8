#include "engine/text_stream.h"

#include <algorithm>

namespace cactus {

TextStream::TextStream(std::vector<std::string> stop_sequences, bool include_stop) : include_stop_(include_stop) {
    for (std::string& s : stop_sequences) {
        if (!s.empty()) stops_.push_back(std::move(s));
    }
}

size_t TextStream::held_back_length() const {
    // Longest suffix of buffer_ that is a proper prefix of some stop sequence.
    size_t hold = 0;
    for (const std::string& stop : stops_) {
        size_t max_len = std::min(stop.size() - 1, buffer_.size());
        for (size_t len = max_len; len > hold; --len) {
            if (buffer_.compare(buffer_.size() - len, len, stop, 0, len) == 0) {
                hold = len;
                break;
            }
        }
    }
    return hold;
}

std::string TextStream::push(const std::string& piece) {
    if (stopped_) return std::string();
    buffer_ += piece;
    size_t first_match = std::string::npos;
    size_t match_len = 0;
    for (const std::string& stop : stops_) {
        size_t at = buffer_.find(stop);
        if (at != std::string::npos && at < first_match) {
            first_match = at;
            match_len = stop.size();
            matched_ = stop;
        }
    }
    std::string out;
    if (first_match != std::string::npos) {
        stopped_ = true;
        out = buffer_.substr(0, first_match + (include_stop_ ? match_len : 0));
        buffer_.clear();
    } else {
        size_t keep = held_back_length();
        out = buffer_.substr(0, buffer_.size() - keep);
        buffer_.erase(0, buffer_.size() - keep);
    }
    visible_ += out;
    return out;
}

std::string TextStream::finish() {
    std::string out;
    out.swap(buffer_);
    visible_ += out;
    return out;
}

}  // namespace cactus
