#pragma once
// The one way the engine parses JSON: apps' requests (messages, tools, options), tool-call
// arguments re-parsed from strings (in requests and in the model's output), contexts handed to the
// chat template. Every document, wherever it comes from and however it was nested inside another
// (a JSON string holding JSON), gets the same limits before any recursive walk (copy, dump,
// comparison, conversion) touches it: nlohmann's parser and destructor are iterative, the rest is
// not, and the engine may run on a 256 KiB stack.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace cactus {

constexpr int kMaxJsonDepth = 64;                   // arrays and objects inside one another
constexpr size_t kMaxJsonBytes = size_t(64) << 20;  // bytes of one document's text

// Parses [begin, end) as one JSON document. Throws cactus::Error naming `what` and the limit
// (kMaxJsonBytes, kMaxJsonDepth) or the syntax error.
nlohmann::ordered_json parse_json(const char* begin, const char* end, const char* what);
inline nlohmann::ordered_json parse_json(const std::string& text, const char* what) {
    return parse_json(text.data(), text.data() + text.size(), what);
}

// Lenient form for text that may or may not be JSON (tool-call arguments, model output): returns
// false when it is not valid JSON or breaks a limit; never throws for either.
bool try_parse_json(const char* begin, const char* end, nlohmann::ordered_json& out);
inline bool try_parse_json(const std::string& text, nlohmann::ordered_json& out) {
    return try_parse_json(text.data(), text.data() + text.size(), out);
}

// Depth of a document built in memory (by C++ callers), without recursion; throws naming `what`
// when it exceeds kMaxJsonDepth.
void check_json_depth(const nlohmann::ordered_json& j, const char* what);
void check_json_depth(const nlohmann::json& j, const char* what);

}  // namespace cactus
