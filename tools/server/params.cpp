#include "params.h"

#include <cmath>
#include <random>

#include "api/request.h"
#include "core/format.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace cactus::server {

namespace {

[[noreturn]] void bad(const char* key, const std::string& what) {
    throw HttpError{400, std::string("'") + key + "' " + what, key};
}

}  // namespace

const json* field(const json& body, const char* key) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

double read_number(const json& body, const char* key, double lo, double hi, double fallback) {
    const json* v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) bad(key, "must be a number");
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi)
        bad(key, cactus::format("must be between %g and %g (got %g)", lo, hi, d));
    return d;
}

int64_t read_int(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    const json* v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || (v->is_number_float() && std::floor(v->get<double>()) != v->get<double>()))
        bad(key, "must be a whole number");
    const double d = v->get<double>();
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
        bad(key, cactus::format("must be between %lld and %lld (got %.0f)", (long long)lo, (long long)hi, d));
    return v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
}

bool read_bool(const json& body, const char* key, bool fallback) {
    const json* v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) bad(key, "must be true or false");
    return v->get<bool>();
}

std::string read_string(const json& body, const char* key, const std::string& fallback) {
    const json* v = field(body, key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) bad(key, "must be a string");
    return v->get<std::string>();
}

std::vector<std::string> read_stop(const json& body, const char* key, size_t max_count) {
    const json* v = field(body, key);
    if (v == nullptr) return {};
    std::vector<std::string> out;
    if (v->is_string()) {
        out.push_back(v->get<std::string>());
    } else if (v->is_array()) {
        for (const json& s : *v) {
            if (!s.is_string()) bad(key, "must be a string or an array of strings");
            out.push_back(s.get<std::string>());
        }
    } else {
        bad(key, "must be a string or an array of strings");
    }
    if (out.size() > max_count) bad(key, cactus::format("has %zu entries; at most %zu", out.size(), max_count));
    for (const std::string& s : out)
        if (s.empty()) bad(key, "must not contain empty strings");
    return out;
}

const char* const kNoImagesOllama =
    "Ollama's base64 'images' are not taken: send the image as an OpenAI image_url part (a data:image/...;base64 "
    "URL or a local path) to /v1/chat/completions";
const char* const kNoVisionProjector =
    "this request holds images but the server has no vision projector: start 'cactus serve' with --mmproj "
    "MMPROJ.gguf (or a model folder holding it)";

json read_messages(const json& body, const char* key, const char* image_refusal) {
    const json* v = field(body, key);
    if (v == nullptr) bad(key, "is required");
    json messages;
    try {
        messages = api::parse_messages(v->dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    } catch (const std::exception& e) {
        throw HttpError{400, e.what(), key};
    }
    // Never an answer that silently leaves the images out.
    if (image_refusal != nullptr && !message_images(messages).empty()) throw HttpError{400, image_refusal, key};
    return messages;
}

json read_tools(const json& body, const char* key) {
    const json* v = field(body, key);
    if (v == nullptr) return json::array();
    try {
        return api::parse_tools(v->dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    } catch (const std::exception& e) {
        throw HttpError{400, e.what(), key};
    }
}

std::vector<int32_t> tokenize_for_slot(Server& server, const std::string& text, const char* param) {
    std::vector<int32_t> ids = server.backend().engine().tokenize_prompt(text);
    const size_t n_ctx = server.backend().n_ctx();
    if (ids.empty()) throw HttpError{400, "the prompt is empty", param};
    if (ids.size() + 1 >= n_ctx) {
        throw HttpError{400,
                        cactus::format("the prompt has %zu tokens but a slot's context holds %zu; shorten it or "
                                       "start the server with a larger --ctx-size",
                                       ids.size(), n_ctx),
                        param, "invalid_request_error", "context_length_exceeded"};
    }
    return ids;
}

size_t room_after(Server& server, size_t prompt_tokens) {
    const size_t n_ctx = server.backend().n_ctx();
    return prompt_tokens < n_ctx ? n_ctx - prompt_tokens : 1;
}

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return cactus::format("%s%016llx", prefix, (unsigned long long)rng());
}

}  // namespace cactus::server
