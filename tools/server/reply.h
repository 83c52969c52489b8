#pragma once
// A server answer in the model family's reply format (chat/tool_format.h): the hidden regions
// (thinking, tool calls, with their markers) kept out of streamed text, and the whole reply parsed
// into content, thinking and tool calls, as the C API does (src/api/cactus_api.cpp).
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "chat/stream_filter.h"
#include "chat/tool_format.h"

namespace cactus::server {

class ReplyReader {
public:
    // prompt: the rendered prompt; when it ends inside a region (Gemma 4 with thinking on, after
    // tool results: "<|channel>thought\n") the reply starts inside it.
    ReplyReader(const ToolFormat& format, const std::string& prompt)
        : format_(format),
          regions_(format.hidden_regions()),
          opened_(region_open_at_end(regions_, prompt)),
          filter_(regions_, opened_) {}

    std::string stream(const std::string& piece) { return filter_.push(piece); }
    std::string stream_end() { return filter_.finish(); }
    ParsedReply parse(const std::string& text, bool tools_offered) const {
        const std::string whole = opened_ >= 0 ? regions_[static_cast<size_t>(opened_)].open + text : text;
        return parse_reply(format_, whole, tools_offered);
    }

private:
    const ToolFormat& format_;
    std::vector<HiddenRegion> regions_;
    int opened_ = -1;
    StreamFilter filter_;
};

}  // namespace cactus::server
