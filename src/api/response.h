#pragma once
// The C API's JSON outputs and the copy into the caller's buffer.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "engine/engine.h"

namespace cactus::api {

// Every key of the spec's response, for a successful completion. kv_compactions: compactions of
// the KV cache during this call (the model's count after the call minus its count before).
nlohmann::ordered_json completion_response(const CompletionResult& result, const ParsedReply& reply, size_t kv_bytes,
                                           size_t kv_compactions);
// Speculative decoding's counters (draft_tokens, draft_accepted), added where it was on.
void add_speculative_metrics(const CompletionMetrics& metrics, nlohmann::ordered_json* response);
// The same keys with success:false and the message.
nlohmann::ordered_json error_response(const std::string& message);
// {success, error, prefill_tokens, prefill_tps, total_time_ms, ram_usage_mb}
nlohmann::ordered_json prefill_response(const CompletionMetrics& metrics);

// Copies text and a NUL into buffer. Returns the length, or -2 when it does not fit (then only
// an empty string is written, if there is room for one).
int write_text(const std::string& text, char* buffer, size_t buffer_size);

}  // namespace cactus::api
