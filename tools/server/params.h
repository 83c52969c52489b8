#pragma once
// Reading request fields: absent or null fields take their default, unknown fields are ignored,
// and a present field of the wrong type or range is an HttpError (400) naming it.
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "job.h"
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
extern const char* const kNoAudioTower;
json read_messages(const json& body, const char* key, const char* image_refusal);
json read_tools(const json& body, const char* key);

// Prompt text → ids; 400 naming `param` when the prompt leaves no room in a slot's context.
std::vector<int32_t> tokenize_for_slot(Server& server, const std::string& text, const char* param);
// max_tokens default and cap: what a slot's context leaves after the prompt.
size_t room_after(Server& server, size_t prompt_tokens);

// llama-server's timings object: prompt tokens computed (cache excluded) and generated, their
// milliseconds, per token and per second.
json llama_timings(const GenStats& s);

std::string random_id(const char* prefix);

// OpenAI's logit_bias {"token id": bias} or llama-server's [[id or "text", bias or false], ...]
// (a text: each token of its tokenization; false: never drawn). Biases in [-100, 100].
std::vector<std::pair<int32_t, float>> read_logit_bias(Server& server, const json& body, const char* key);
// llama-server's samplers: an array of names (top_k, top-k, topk, temp, ...) or a string of
// letters (kpmt...). Steps llama.cpp has and cactus does not (dry, typ_p, xtc, top_n_sigma,
// infill, adaptive_p) are skipped: they do nothing at their default settings, and setting them is
// a 400 (reject_unsupported_samplers). Unknown names are a 400.
std::vector<SamplerStep> sampler_order(const json& value, const char* key);
// 400 for llama.cpp sampling settings cactus does not implement, set to a value that acts.
void reject_unsupported_samplers(const json& body);

}  // namespace cactus::server
