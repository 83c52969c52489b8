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
    // inside: the index of the region the text starts in (the prompt opened it), or -1.
    explicit StreamFilter(std::vector<HiddenRegion> regions, int inside = -1)
        : regions_(std::move(regions)), inside_(inside) {}
    std::string push(const std::string& piece);  // visible text that is final now
    std::string finish();                        // the rest at the end (held-back partial markers)

private:
    std::vector<HiddenRegion> regions_;
    std::string pending_;
    int inside_ = -1;  // index of the open region, or -1
};

// The region a prompt leaves open for the reply to continue in, or -1: the prompt ends with the
// region's open marker and at most a short label ("<think>\n", Gemma 4's "<|channel>thought\n").
int region_open_at_end(const std::vector<HiddenRegion>& regions, const std::string& prompt);

}  // namespace cactus
