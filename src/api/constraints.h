#pragma once
// Which grammar a request decodes under: response_format (JSON Schema / any JSON object),
// force_tools (only calls of the given tools, in the family's syntax), or by default a lazy tool
// grammar (free text until the family's call marker, then a valid call).
#include <optional>

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "sampling/grammar.h"

namespace cactus {
class ToolFormat;
}

namespace cactus::api {

// nullopt: free text. prompt_opened_thinking: the rendered prompt ends inside the family's
// thinking block (chat/stream_filter.h region_open_at_end), so the reply starts in it.
std::optional<ConstraintSpec> constraint_for(const ToolFormat& format, const nlohmann::ordered_json& tools,
                                             const ApiOptions& options, bool prompt_opened_thinking = false);

}  // namespace cactus::api
