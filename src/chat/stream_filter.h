#pragma once
// Streaming side of the output parser: text pieces in, text safe to show out. Tool-call and
// thinking regions (with their markers) are never emitted; a piece that ends with a possible
// beginning of a marker is held back until the next piece decides it.
#include <string>
#include <vector>

#include "chat/tool_format.h"

namespace cactus {

class StreamFilter {
public:
    explicit StreamFilter(std::vector<HiddenRegion> regions) : regions_(std::move(regions)) {}
    std::string push(const std::string& piece);  // visible text that is final now
    std::string finish();                        // the rest at the end (held-back partial markers)

private:
    std::vector<HiddenRegion> regions_;
    std::string pending_;
    int inside_ = -1;  // index of the open region, or -1
};

}  // namespace cactus
