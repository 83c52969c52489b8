#include "api/response.h"

#include <cstring>
#include <limits>

#include "core/memory.h"

namespace cactus::api {

using json = nlohmann::ordered_json;

namespace {

double ram_usage_mb() { return static_cast<double>(resident_memory_bytes()) / (1024.0 * 1024.0); }

json base_response() {
    return json{{"success", true},
                {"error", nullptr},
                {"cloud_handoff", false},
                {"cloud_handoff_reason", nullptr},
                {"response", ""},
                {"thinking", ""},
                {"function_calls", json::array()},
                {"segments", json::array()},
                {"confidence", 0.0},
                {"time_to_first_token_ms", 0.0},
                {"total_time_ms", 0.0},
                {"prefill_tps", 0.0},
                {"decode_tps", 0.0},
                {"ram_usage_mb", ram_usage_mb()},
                {"prefill_tokens", 0},
                {"decode_tokens", 0},
                {"total_tokens", 0}};
}

}  // namespace

json completion_response(const CompletionResult& result, const ParsedReply& reply, size_t kv_bytes,
                         size_t kv_compactions) {
    json r = base_response();
    const CompletionMetrics& m = result.metrics;
    r["response"] = reply.response;
    r["thinking"] = reply.thinking;
    r["function_calls"] = reply.function_calls;
    r["confidence"] = result.mean_token_probability;
    r["time_to_first_token_ms"] = m.time_to_first_token_ms;
    r["total_time_ms"] = m.total_time_ms;
    r["prefill_tps"] = m.prefill_tps;
    r["decode_tps"] = m.decode_tps;
    r["prefill_tokens"] = m.prefill_tokens;
    r["decode_tokens"] = m.decode_tokens;
    r["total_tokens"] = m.prompt_tokens + m.decode_tokens;
    r["finish_reason"] = result.finish_reason;
    r["prompt_tokens"] = m.prompt_tokens;
    r["kv_cache_bytes"] = kv_bytes;
    r["kv_compactions"] = kv_compactions;
    r["constraint_ms"] = m.constraint_ms;
    r["constraint_compile_ms"] = m.constraint_compile_ms;
    r["decode_steps"] = m.decode_steps;
    return r;
}

void add_speculative_metrics(const CompletionMetrics& metrics, json* response) {
    (*response)["draft_tokens"] = metrics.draft_tokens;
    (*response)["draft_accepted"] = metrics.draft_accepted;
}

json error_response(const std::string& message) {
    json r = base_response();
    r["success"] = false;
    r["error"] = message;
    return r;
}

json prefill_response(const CompletionMetrics& m) {
    return json{{"success", true},
                {"error", nullptr},
                {"prefill_tokens", m.prefill_tokens},
                {"prefill_tps", m.prefill_tps},
                {"total_time_ms", m.total_time_ms},
                {"ram_usage_mb", ram_usage_mb()}};
}

int write_text(const std::string& text, char* buffer, size_t buffer_size) {
    if (text.size() >= buffer_size || text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
        if (buffer != nullptr && buffer_size > 0) buffer[0] = '\0';
        return -2;
    }
    std::memcpy(buffer, text.data(), text.size());
    buffer[text.size()] = '\0';
    return static_cast<int>(text.size());
}

}  // namespace cactus::api
