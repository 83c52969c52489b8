#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace cactus {

std::string StreamingDetokenizer::push(int32_t id) {
    return push_bytes(tokenizer_.token_to_piece(id, render_special_));
}

std::string StreamingDetokenizer::push_bytes(const std::string& bytes) {
    pending_ += bytes;
    std::string ready;
    size_t offset = 0;
    while (offset < pending_.size()) {
        const int len = utf8::strict_sequence_length(pending_, offset);
        if (len == 0) break;  // an incomplete character at the end: wait for the rest
        if (len < 0) {
            utf8::append(ready, utf8::kReplacementChar);
            offset += static_cast<size_t>(-len);
            continue;
        }
        ready.append(pending_, offset, static_cast<size_t>(len));
        offset += static_cast<size_t>(len);
    }
    pending_.erase(0, offset);
    return ready;
}

std::string StreamingDetokenizer::flush() {
    std::string rest = utf8::sanitize(pending_);
    pending_.clear();
    return rest;
}

}  // namespace cactus
