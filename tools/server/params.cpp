#include "params.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
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
const char* const kNoAudioTower =
    "this request holds audio (input_audio parts or 'audio' paths) but the server has no audio tower: start "
    "'cactus serve' with --mmproj MMPROJ.gguf holding one (Gemma 4's)";

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
    if (ids.size() + 1 >= n_ctx) throw exceed_context_error(ids.size(), n_ctx, param);
    return ids;
}

size_t room_after(Server& server, size_t prompt_tokens) {
    const size_t n_ctx = server.backend().n_ctx();
    return prompt_tokens < n_ctx ? n_ctx - prompt_tokens : 1;
}

namespace {

float read_bias(const json& v, const char* key) {
    if (v.is_boolean() && !v.get<bool>()) return -INFINITY;
    if (!v.is_number()) bad(key, "biases must be numbers between -100 and 100, or false (never)");
    const double b = v.get<double>();
    if (!(b >= -100.0 && b <= 100.0)) bad(key, cactus::format("biases must be between -100 and 100 (got %g)", b));
    return static_cast<float>(b);
}

// A token id (a number, or a decimal string in OpenAI's map) or a text whose tokens all get the bias.
std::vector<int32_t> bias_tokens(Server& server, const json& t, bool map_key, const char* key) {
    const Tokenizer& tok = server.backend().engine().tokenizer();
    const size_t vocab = tok.vocab_size();
    auto checked = [&](long long id) {
        if (id < 0 || static_cast<size_t>(id) >= vocab)
            bad(key, cactus::format("token id %lld is outside the vocabulary [0, %zu)", id, vocab));
        return std::vector<int32_t>{static_cast<int32_t>(id)};
    };
    if (t.is_number_integer()) return checked(t.get<long long>());
    if (!t.is_string()) bad(key, "entries must be [token id or text, bias]");
    const std::string text = t.get<std::string>();
    const size_t digits_from = !text.empty() && text[0] == '-' ? 1 : 0;
    if (map_key && text.size() > digits_from && text.size() < 12 &&
        text.find_first_not_of("0123456789", digits_from) == std::string::npos)
        return checked(std::stoll(text));
    if (text.empty()) bad(key, "a text to bias must not be empty");
    return tok.encode(text, /*add_special=*/false, /*parse_special=*/false);
}

}  // namespace

std::vector<std::pair<int32_t, float>> read_logit_bias(Server& server, const json& body, const char* key) {
    const json* v = field(body, key);
    std::vector<std::pair<int32_t, float>> out;
    if (v == nullptr) return out;
    if (v->is_object()) {
        for (const auto& [k, b] : v->items()) {
            const float bias = read_bias(b, key);
            for (int32_t id : bias_tokens(server, json(k), /*map_key=*/true, key)) out.emplace_back(id, bias);
        }
    } else if (v->is_array()) {
        for (const json& e : *v) {
            if (!e.is_array() || e.size() != 2) bad(key, "entries must be [token id or text, bias]");
            const float bias = read_bias(e[1], key);
            for (int32_t id : bias_tokens(server, e[0], /*map_key=*/false, key)) out.emplace_back(id, bias);
        }
    } else {
        bad(key, "must be an object {\"token id\": bias} or an array [[token id or text, bias], ...]");
    }
    if (out.size() > 4096) bad(key, cactus::format("biases %zu tokens; at most 4096", out.size()));
    return out;
}

namespace {

// llama.cpp's sampler names (common/sampling.cpp) → cactus's step; nullopt: known, not implemented.
bool sampler_from_name(std::string name, std::optional<SamplerStep>* step) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string plain = name;
    std::replace(plain.begin(), plain.end(), '-', '_');
    static const std::map<std::string, std::optional<SamplerStep>> names = {{"penalties", SamplerStep::penalties},
                                                                            {"top_k", SamplerStep::top_k},
                                                                            {"topk", SamplerStep::top_k},
                                                                            {"top_p", SamplerStep::top_p},
                                                                            {"topp", SamplerStep::top_p},
                                                                            {"nucleus", SamplerStep::top_p},
                                                                            {"min_p", SamplerStep::min_p},
                                                                            {"minp", SamplerStep::min_p},
                                                                            {"temperature", SamplerStep::temperature},
                                                                            {"temp", SamplerStep::temperature},
                                                                            {"dry", std::nullopt},
                                                                            {"typ_p", std::nullopt},
                                                                            {"typp", std::nullopt},
                                                                            {"typ", std::nullopt},
                                                                            {"top_n_sigma", std::nullopt},
                                                                            {"topnsigma", std::nullopt},
                                                                            {"xtc", std::nullopt},
                                                                            {"infill", std::nullopt},
                                                                            {"adaptive_p", std::nullopt},
                                                                            {"adaptivep", std::nullopt}};
    auto it = names.find(plain);
    if (it == names.end()) return false;
    *step = it->second;
    return true;
}

}  // namespace

std::vector<SamplerStep> sampler_order(const json& value, const char* key) {
    std::vector<std::string> names;
    if (value.is_string()) {
        static const std::map<char, std::string> letters = {
            {'e', "penalties"},   {'d', "dry"},         {'k', "top_k"},     {'y', "typ_p"},
            {'p', "top_p"},       {'s', "top_n_sigma"}, {'m', "min_p"},     {'x', "xtc"},
            {'t', "temperature"}, {'i', "infill"},      {'a', "adaptive_p"}};
        for (char c : value.get<std::string>()) {
            auto it = letters.find(c);
            if (it == letters.end()) bad(key, cactus::format("has an unknown sampler letter '%c'", c));
            names.push_back(it->second);
        }
    } else if (value.is_array()) {
        for (const json& n : value) {
            if (!n.is_string()) bad(key, "must be an array of sampler names or a string of sampler letters");
            names.push_back(n.get<std::string>());
        }
    } else {
        bad(key, "must be an array of sampler names or a string of sampler letters");
    }
    std::vector<SamplerStep> order;
    for (const std::string& n : names) {
        std::optional<SamplerStep> step;
        if (!sampler_from_name(n, &step))
            bad(key, "has an unknown sampler '" + n +
                         "' (penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature)");
        if (step) order.push_back(*step);
    }
    return order;
}

void reject_unsupported_samplers(const json& body) {
    struct Setting {
        const char* key;
        double off;  // the value (or bound) at which the sampler does nothing
        bool acts_above;
    };
    static const Setting settings[] = {{"dry_multiplier", 0.0, true},  {"typical_p", 1.0, false},
                                       {"xtc_probability", 0.0, true}, {"top_n_sigma", 0.0, true},
                                       {"mirostat", 0.0, true},        {"dynatemp_range", 0.0, true}};
    for (const Setting& s : settings) {
        const json* v = field(body, s.key);
        if (v == nullptr || !v->is_number()) continue;
        const double d = v->get<double>();
        if (s.acts_above ? d > s.off : d < s.off)
            bad(s.key, "is not supported by cactus (leave it out or at its neutral value)");
    }
}

json llama_timings(const GenStats& s) {
    const size_t prompt_n = s.prompt_tokens - std::min(s.cached_tokens, s.prompt_tokens);
    const double prompt_ms = std::max(0.0, s.ttft_ms - s.queue_ms);
    const size_t predicted_n = s.completion_tokens;
    const double predicted_ms = std::max(0.0, s.total_ms - s.ttft_ms);
    auto per_token = [](double ms, size_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
    auto per_second = [](double ms, size_t n) { return ms > 0 ? 1e3 * static_cast<double>(n) / ms : 0.0; };
    json t{{"cache_n", s.cached_tokens},
           {"prompt_n", prompt_n},
           {"prompt_ms", prompt_ms},
           {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
           {"prompt_per_second", per_second(prompt_ms, prompt_n)},
           {"predicted_n", predicted_n},
           {"predicted_ms", predicted_ms},
           {"predicted_per_token_ms", per_token(predicted_ms, predicted_n)},
           {"predicted_per_second", per_second(predicted_ms, predicted_n)}};
    if (s.draft_n > 0) {  // llama-server's names, present when drafting ran
        t["draft_n"] = s.draft_n;
        t["draft_n_accepted"] = s.draft_accepted;
    }
    return t;
}

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return cactus::format("%s%016llx", prefix, (unsigned long long)rng());
}

}  // namespace cactus::server
