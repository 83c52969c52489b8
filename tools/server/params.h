#pragma once
// Reading request fields: absent or null fields take their default, unknown fields are ignored,
// and a present field of the wrong type or range is an HttpError (400) naming it.
#include <cstdint>
#include <string>
#include <vector>

#include "server.h"

namespace cactus::server {

const json* field(const json& body, const char* key);  // nullptr when absent or null
double read_number(const json& body, const char* key, double lo, double hi, double fallback);
int64_t read_int(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback);
bool read_bool(const json& body, const char* key, bool fallback);
std::string read_string(const json& body, const char* key, const std::string& fallback);
// A string or an array of strings (at most `max_count`).
std::vector<std::string> read_stop(const json& body, const char* key, size_t max_count);

// messages / tools validated by the C API's parsers (same rules as cactus_complete). Messages holding
// images are a 400 with `image_refusal` as the message unless it is nullptr.
extern const char* const kNoImagesOllama;
extern const char* const kNoVisionProjector;
json read_messages(const json& body, const char* key, const char* image_refusal);
json read_tools(const json& body, const char* key);

// Prompt text → ids; 400 naming `param` when the prompt leaves no room in a slot's context.
std::vector<int32_t> tokenize_for_slot(Server& server, const std::string& text, const char* param);
// max_tokens default and cap: what a slot's context leaves after the prompt.
size_t room_after(Server& server, size_t prompt_tokens);

std::string random_id(const char* prefix);

}  // namespace cactus::server
