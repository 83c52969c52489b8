// llama-server's own endpoints, in its shapes (its tools/server/README.md is the spec):
// /completion (and /completions, as llama-server routes it), /infill, /tokenize, /detokenize,
// /apply-template, /props, /slots, /models and /v1/models. Requests read the same sampling and
// constraint fields as the OpenAI endpoints (read_openai_sampling, compile_rule), so both kinds of
// request behave alike.
#include <cmath>
#include <ctime>
#include <mutex>
#include <optional>

#include <httplib.h>

#include "constraint.h"
#include "core/error.h"
#include "core/format.h"
#include "core/utf8.h"
#include "embed_service.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "openai_api.h"
#include "params.h"
#include "tokenizer/tokenizer.h"
#include "media.h"

namespace cactus::server {

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

// Length of the longest prefix of `s` made of whole UTF-8 characters (lenient: overlongs and
// surrogates pass, as utf8::decode_one reads them).
size_t valid_utf8_length(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        size_t next = i;
        const bool ascii = static_cast<unsigned char>(s[i]) < 0x80;
        utf8::decode_one(s, next);
        if (next == i + 1 && !ascii) return i;  // an invalid or cut-short sequence
        i = next;
    }
    return i;
}

json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
}

// The model's names: --alias may list several, comma-separated (llama-server's --alias); the first
// is the name responses carry.
std::vector<std::string> model_names(const ServerConfig& config) {
    std::vector<std::string> names = {config.alias};
    names.insert(names.end(), config.extra_aliases.begin(), config.extra_aliases.end());
    return names;
}

HttpError not_supported(const std::string& message) { return HttpError{501, message, "", "not_supported_error"}; }

// ---------------------------------------------------------------------------------------------
// Prompts

int32_t read_token_id(Server& server, const json& id, const char* param) {
    const size_t vocab = server.backend().engine().tokenizer().vocab_size();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= vocab)
        throw HttpError{400, cactus::format("'%s' token ids must be integers in [0, %zu)", param, vocab), param};
    return id.get<int32_t>();
}

// llama-server's tokenize_mixed: a string, or an array of strings and ids; the first string gets
// the model's special tokens (BOS) when add_special, later strings none.
std::vector<int32_t> tokenize_mixed(Server& server, const json& prompt, bool add_special, bool parse_special,
                                    const char* param) {
    const Tokenizer& tok = server.backend().engine().tokenizer();
    if (prompt.is_string()) return tok.encode(prompt.get<std::string>(), add_special, parse_special);
    if (!prompt.is_array()) throw HttpError{400, cactus::format("'%s' must be a string or an array", param), param};
    std::vector<int32_t> ids;
    bool first = true;
    for (const json& part : prompt) {
        if (part.is_string()) {
            const std::vector<int32_t> more = tok.encode(part.get<std::string>(), add_special && first, parse_special);
            ids.insert(ids.end(), more.begin(), more.end());
        } else {
            ids.push_back(read_token_id(server, part, param));
        }
        first = false;
    }
    return ids;
}

void check_fits(Server& server, const std::vector<int32_t>& ids, const char* param) {
    const size_t n_ctx = server.backend().n_ctx();
    if (ids.empty()) throw HttpError{400, "the prompt is empty", param};
    if (ids.size() + 1 >= n_ctx) throw exceed_context_error(ids.size(), n_ctx, param);
}

bool holds_number(const json& a) {
    for (const json& x : a)
        if (x.is_number()) return true;
    return false;
}

// One prompt: a string, ids, ids and strings mixed, or {"prompt_string": ...} (multimodal_data refused).
std::vector<int32_t> read_one_prompt(Server& server, const json& p) {
    if (p.is_object()) {
        if (p.contains("multimodal_data"))
            throw HttpError{400,
                            "'multimodal_data' in a /completion prompt is not supported; send images through "
                            "/v1/chat/completions",
                            "prompt"};
        if (!p.contains("prompt_string")) throw HttpError{400, "a prompt object needs 'prompt_string'", "prompt"};
        return read_one_prompt(server, p["prompt_string"]);
    }
    std::vector<int32_t> ids = p.is_string() ? server.backend().engine().tokenize_prompt(p.get<std::string>())
                                             : tokenize_mixed(server, p, true, true, "prompt");
    check_fits(server, ids, "prompt");
    return ids;
}

// llama-server's tokenize_input_prompts: an array holding no numbers is a list of prompts.
std::vector<std::vector<int32_t>> read_prompts(Server& server, const json& body) {
    const json* prompt = field(body, "prompt");
    if (prompt == nullptr) throw HttpError{400, "'prompt' is required", "prompt"};
    std::vector<std::vector<int32_t>> prompts;
    if (prompt->is_array() && !holds_number(*prompt)) {
        for (const json& p : *prompt) prompts.push_back(read_one_prompt(server, p));
    } else if (prompt->is_string() || prompt->is_array() || prompt->is_object()) {
        prompts.push_back(read_one_prompt(server, *prompt));
    } else {
        throw HttpError{400,
                        "'prompt' must be a string, a list of tokens, a list of mixed strings and tokens, or a "
                        "list of such prompts",
                        "prompt"};
    }
    if (prompts.empty()) throw HttpError{400, "'prompt' must not be empty", "prompt"};
    return prompts;
}

// ---------------------------------------------------------------------------------------------
// /completion responses

// What the native reply shows besides the generation (llama-server's task params).
struct NativeOptions {
    int n_probs = 0;
    bool post_sampling_probs = false;
    bool return_tokens = false;
    bool timings_per_token = false;
    bool stream = false;
    std::vector<std::string> response_fields;
    json generation_settings;
    std::string prompt_text;  // the prompt detokenized
    size_t prompt_tokens = 0;
};

// llama-server's generation_settings / default_generation_settings.params: the settings a request ran with.
json settings_json(const GenParams& p, bool stream, int n_probs, bool post_sampling_probs, bool timings_per_token,
                   const std::vector<std::string>& samplers) {
    const SamplingParams& s = p.gen.sampling;
    return json{{"seed", s.seed},
                {"temperature", s.temperature},
                {"top_k", s.top_k},
                {"top_p", s.top_p},
                {"min_p", s.min_p},
                {"repeat_penalty", s.repetition_penalty},
                {"max_tokens", p.gen.max_tokens},
                {"n_predict", p.gen.max_tokens},
                {"ignore_eos", p.gen.ignore_eos},
                {"stream", stream},
                {"n_probs", n_probs},
                {"stop", p.gen.stop_sequences},
                {"samplers", samplers},
                {"timings_per_token", timings_per_token},
                {"post_sampling_probs", post_sampling_probs},
                {"repeat_last_n", s.repetition_window},
                {"presence_penalty", s.presence_penalty},
                {"frequency_penalty", s.frequency_penalty},
                {"reasoning_format", "none"},
                {"grammar", ""},
                {"id_slot", p.id_slot},
                {"cache_prompt", p.cache_prompt}};
}

// llama.cpp's sampler settings that cactus does not implement, at the values that switch them off
// (dynatemp, typical, top-n-sigma, XTC, mirostat, DRY, adaptive-p), and its other settings with
// what they are here (no LoRA, no context shift: n_keep/n_discard 0), and the server's speculation.
// A client that reads llama-server's whole settings object finds every field, each one true;
// backend_sampling: the slots draw from candidates computed on the model's device.
void add_llama_only_settings(json& p, const SpecOptions& spec, bool backend_sampling) {
    p["backend_sampling"] = backend_sampling;
    p["speculative.types"] = llama_spec_types(spec.type);
    p["speculative.n_max"] = spec.type == SpecType::off ? 0 : spec.draft_max;
    p["speculative.n_min"] = spec.type == SpecType::off ? 0 : spec.draft_min;
    const json inactive = {{"dynatemp_range", 0.0},
                           {"dynatemp_exponent", 1.0},
                           {"top_n_sigma", -1.0},
                           {"xtc_probability", 0.0},
                           {"xtc_threshold", 0.1},
                           {"typical_p", 1.0},
                           {"dry_multiplier", 0.0},
                           {"dry_base", 1.75},
                           {"dry_allowed_length", 2},
                           {"dry_penalty_last_n", -1},
                           {"dry_sequence_breakers", json::array({"\n", ":", "\"", "*"})},
                           {"mirostat", 0},
                           {"mirostat_tau", 5.0},
                           {"mirostat_eta", 0.1},
                           {"adaptive_target", -1.0},
                           {"adaptive_decay", 0.9},
                           {"n_keep", 0},
                           {"n_discard", 0},
                           {"min_keep", 0},
                           {"chat_format", "Content-only"},
                           {"reasoning_in_content", false},
                           {"generation_prompt", ""},
                           {"lora", json::array()},
                           {"logit_bias", json::array()},
                           {"grammar_lazy", false},
                           {"grammar_triggers", json::array()},
                           {"preserved_tokens", json::array()}};
    for (const auto& [key, value] : inactive.items())
        if (!p.contains(key)) p[key] = value;
}

// llama-server's json_get_nested_values: the listed fields ("a/b" reaches into objects), keyed by path.
json pick_fields(const std::vector<std::string>& paths, const json& r) {
    json out = json::object();
    for (const std::string& path : paths) {
        const json* at = &r;
        size_t from = 0;
        bool found = true;
        while (found && from <= path.size()) {
            const size_t slash = path.find('/', from);
            const std::string key = path.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
            found = at->is_object() && at->contains(key);
            if (found) at = &(*at)[key];
            if (slash == std::string::npos) break;
            from = slash + 1;
        }
        if (found) out[path] = *at;
    }
    return out;
}

class NativeFormatter final : public Formatter {
public:
    NativeFormatter(Server& server, NativeOptions o, int index)
        : server_(server), o_(std::move(o)), index_(index), model_(model_names(server.config()).front()) {}

    std::string content_type(bool stream) const override { return stream ? "text/event-stream" : "application/json"; }

    void observe(const GenEvent& e) override {
        stats_ = e.stats;
        if (e.kind == GenEvent::Kind::Done) finish_reason_ = e.finish_reason;
    }

    std::string stream_progress(const GenEvent& e) override {
        json c = partial("", {});
        c["prompt_progress"] = json{{"total", e.stats.prompt_tokens},
                                    {"cache", e.stats.cached_tokens},
                                    {"processed", e.prefilled},
                                    {"time_ms", static_cast<int64_t>(e.stats.total_ms - e.stats.queue_ms)}};
        return sse(c);
    }

    std::string stream_piece(const std::string& text, const std::vector<TokenInfo>& tokens) override {
        if (text.empty() && tokens.empty()) return std::string();
        return sse(partial(text, tokens));
    }

    // llama-server ends a native stream with the final object and no [DONE].
    std::string stream_end(const Completion& c) override { return sse(final_json(c, true)); }

    std::string stream_error(int status, const std::string& message) override {
        return sse(json{{"error", {{"code", status}, {"message", message}, {"type", "server_error"}}}});
    }

    std::string whole(const Completion& c) override { return dump(final_json(c, false)); }

    json final_json(const Completion& c, bool stream) const {
        json tokens = json::array();
        if (!stream && o_.return_tokens)
            for (const TokenInfo& t : c.tokens) tokens.push_back(t.id);
        json r = {{"index", index_},
                  {"content", stream ? std::string() : c.text},
                  {"tokens", tokens},
                  {"id_slot", c.stats.slot},
                  {"stop", true},
                  {"model", model_},
                  {"tokens_predicted", c.stats.completion_tokens},
                  {"tokens_evaluated", c.stats.prompt_tokens},
                  {"generation_settings", o_.generation_settings},
                  {"prompt", o_.prompt_text},
                  {"has_new_line", c.stats.has_new_line},
                  {"truncated", false},  // a prompt that does not fit is a 400, never cut
                  {"stop_type", stop_type()},
                  {"stopping_word", c.stats.stop_word},
                  {"tokens_cached", c.stats.tokens_in_cache},
                  {"timings", llama_timings(c.stats)}};
        if (!stream && o_.n_probs > 0) r["completion_probabilities"] = probabilities(c.tokens);
        return o_.response_fields.empty() ? r : pick_fields(o_.response_fields, r);
    }

private:
    json partial(const std::string& text, const std::vector<TokenInfo>& tokens) const {
        json ids = json::array();
        for (const TokenInfo& t : tokens) ids.push_back(t.id);
        json c = {{"index", index_},
                  {"content", text},
                  {"tokens", ids},
                  {"stop", false},
                  {"id_slot", stats_.slot},
                  {"tokens_predicted", stats_.completion_tokens},
                  {"tokens_evaluated", o_.prompt_tokens}};
        if (o_.timings_per_token) c["timings"] = llama_timings(stats_);
        if (o_.n_probs > 0 && !tokens.empty()) c["completion_probabilities"] = probabilities(tokens);
        return c;
    }

    // eos: an end-of-generation token; word: a stop sequence; limit: n_predict, the context or a time limit.
    std::string stop_type() const {
        if (finish_reason_ == "stop") return stats_.stop_word.empty() ? "eos" : "word";
        if (finish_reason_ == "length" || finish_reason_ == "timeout") return "limit";
        return "none";
    }

    // llama-server's completion_probabilities: log-probabilities of the raw distribution, or with
    // post_sampling_probs probabilities (the chosen token's after the sampler's filters).
    json probabilities(const std::vector<TokenInfo>& tokens) const {
        const bool post = o_.post_sampling_probs;
        json out = json::array();
        for (const TokenInfo& t : tokens) {
            json top = json::array();
            for (const auto& [id, lp] : t.top) {
                json alt = entry(id);
                alt[post ? "prob" : "logprob"] = post ? std::exp(lp) : lp;
                top.push_back(alt);
            }
            json e = entry(t.id);
            e[post ? "prob" : "logprob"] = post ? t.probability : t.logprob;
            e[post ? "top_probs" : "top_logprobs"] = top;
            out.push_back(e);
        }
        return out;
    }

    json entry(int32_t id) const {
        const std::string piece = token_piece(server_, id);
        return json{{"id", id}, {"token", piece.substr(0, valid_utf8_length(piece))}, {"bytes", bytes_of(piece)}};
    }

    Server& server_;
    NativeOptions o_;
    int index_;
    std::string model_;
    GenStats stats_;
    std::string finish_reason_;
};

// The fields of a /completion request beyond the shared sampling ones.
struct NativeRequest {
    NativeOptions options;
    int id_slot = -1;
    bool cache_prompt = true;
    bool return_progress = false;
    double t_max_predict_ms = 0.0;
    std::vector<std::string> samplers;
    std::string grammar;  // the request's GBNF, shown in generation_settings
};

std::vector<std::string> read_string_list(const json& body, const char* key) {
    std::vector<std::string> out;
    const json* v = field(body, key);
    if (v == nullptr) return out;
    if (!v->is_array()) throw HttpError{400, cactus::format("'%s' must be an array of strings", key), key};
    for (const json& s : *v) {
        if (!s.is_string()) throw HttpError{400, cactus::format("'%s' must be an array of strings", key), key};
        out.push_back(s.get<std::string>());
    }
    return out;
}

NativeRequest read_native(Server& server, const json& body) {
    NativeRequest r;
    NativeOptions& o = r.options;
    // llama-server reads an integer `logprobs` as n_probs when n_probs is absent.
    const json* logprobs = field(body, "logprobs");
    const int64_t n_probs_alias = logprobs && logprobs->is_number_integer() ? read_int(body, "logprobs", 0, 100, 0) : 0;
    o.n_probs = static_cast<int>(read_int(body, "n_probs", 0, 100, n_probs_alias));
    o.post_sampling_probs = read_bool(body, "post_sampling_probs", false);
    o.return_tokens = read_bool(body, "return_tokens", false);
    o.timings_per_token = read_bool(body, "timings_per_token", false);
    o.stream = read_bool(body, "stream", false);
    o.response_fields = read_string_list(body, "response_fields");
    r.grammar = read_string(body, "grammar", "");
    const int64_t n_slots = static_cast<int64_t>(server.n_slots());
    const json* id_slot = field(body, "id_slot");
    if (id_slot != nullptr &&
        (!id_slot->is_number_integer() || id_slot->get<int64_t>() < -1 || id_slot->get<int64_t>() >= n_slots))
        throw HttpError{400,
                        cactus::format("'id_slot' must be -1 (any slot) or a slot id in [0, %lld)",
                                       static_cast<long long>(n_slots)),
                        "id_slot"};
    r.id_slot = id_slot ? id_slot->get<int>() : -1;
    r.cache_prompt = read_bool(body, "cache_prompt", server.config().defaults.cache_prompt);
    r.return_progress = read_bool(body, "return_progress", false);
    r.t_max_predict_ms = static_cast<double>(read_int(body, "t_max_predict_ms", -1, INT64_MAX / 2, 0));
    r.samplers = read_string_list(body, "samplers");
    if (r.samplers.empty()) r.samplers = server.config().defaults.samplers;
    return r;
}

GenParams native_params(Server& server, const json& body, const NativeRequest& r, std::vector<int32_t> prompt) {
    GenParams p;
    p.prompt = std::move(prompt);
    read_openai_sampling(server, body, p);
    p.top_logprobs = r.options.n_probs > 0 ? r.options.n_probs : -1;
    p.gen.constraint = compile_rule(server, OutputRule{openai_response_format(body), json::array()});
    p.id_slot = r.id_slot;
    p.cache_prompt = r.cache_prompt;
    p.report_progress = r.return_progress && r.options.stream;
    p.t_max_predict_ms = r.t_max_predict_ms;
    return p;
}

std::shared_ptr<NativeFormatter> native_formatter(Server& server, const NativeRequest& r, const GenParams& p,
                                                  int index) {
    NativeOptions o = r.options;
    o.generation_settings =
        settings_json(p, o.stream, o.n_probs, o.post_sampling_probs, o.timings_per_token, r.samplers);
    o.generation_settings["grammar"] = r.grammar;
    add_llama_only_settings(o.generation_settings, server.scheduler().speculative(),
                            server.backend().samples_on_device());
    o.prompt_text = server.backend().engine().tokenizer().decode(p.prompt, true);
    o.prompt_tokens = p.prompt.size();
    return std::make_shared<NativeFormatter>(server, std::move(o), index);
}

// Waits for a job's last event (bounded by its deadline) and gathers its answer.
Completion collect(std::shared_ptr<Job> job, std::vector<GenEvent> events, NativeFormatter& f) {
    Completion c;
    const Clock::time_point deadline = job->params().deadline;
    const Clock::time_point give_up =
        deadline == Clock::time_point::max() ? deadline : deadline + std::chrono::seconds(5);
    for (;;) {
        for (const GenEvent& e : events) {
            f.observe(e);
            if (e.kind == GenEvent::Kind::Token) {
                c.text += e.text;
                c.tokens.push_back(e.token);
            } else if (e.kind == GenEvent::Kind::Done) {
                c.text += e.text;
                c.stats = e.stats;
                return c;
            } else if (e.kind == GenEvent::Kind::Error) {
                throw HttpError{e.status, e.error, "", e.status < 500 ? "invalid_request_error" : "server_error"};
            }
        }
        events.clear();
        while (!job->take(&events, std::chrono::milliseconds(100))) {
            if (Clock::now() >= give_up) {
                job->cancel();
                throw HttpError{504, "the request timed out", "", "server_error", "timeout"};
            }
        }
    }
}

// Runs the prompts as one request each: one prompt answers an object (streamed or whole), several
// an array of objects (not streamed).
void run_native(Server& server, const json& body, const NativeRequest& r, std::vector<std::vector<int32_t>> prompts,
                httplib::Response& res) {
    if (prompts.size() > 1 && r.options.stream)
        throw HttpError{400, "several prompts in one request are answered whole: send them with stream false",
                        "stream"};
    if (prompts.size() == 1) {
        GenParams p = native_params(server, body, r, std::move(prompts[0]));
        auto f = native_formatter(server, r, p, 0);
        std::vector<GenEvent> first;
        std::shared_ptr<Job> job = start_job(server, std::move(p), &first);
        respond(res, server, job, std::move(first), f, r.options.stream, HandoffPlan{});
        return;
    }
    struct Running {
        std::shared_ptr<NativeFormatter> f;
        std::shared_ptr<Job> job;
        std::vector<GenEvent> first;
    };
    std::vector<Running> running;
    std::vector<std::shared_ptr<Job>> started;
    try {
        for (size_t i = 0; i < prompts.size(); ++i) {
            GenParams p = native_params(server, body, r, std::move(prompts[i]));
            Running run;
            run.f = native_formatter(server, r, p, static_cast<int>(i));
            run.job = start_job(server, std::move(p), &run.first);
            started.push_back(run.job);
            running.push_back(std::move(run));
        }
        json out = json::array();
        for (Running& run : running)
            out.push_back(run.f->final_json(collect(run.job, std::move(run.first), *run.f), false));
        send_json(res, 200, out);
    } catch (...) {
        for (auto& job : started) job->cancel();
        throw;
    }
}

void handle_completion(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const NativeRequest r = read_native(server, body);
    run_native(server, body, r, read_prompts(server, body), res);
}

// ---------------------------------------------------------------------------------------------
// /infill: fill-in-the-middle with the model's FIM tokens (Qwen2.5-Coder's <|fim_prefix|>, ...).

struct FimTokens {
    int32_t pre = -1, suf = -1, mid = -1, rep = -1, sep = -1;
};

FimTokens fim_tokens(const Tokenizer& tok) {
    FimTokens f;
    for (size_t i = 0; i < tok.vocab_size(); ++i) {
        const std::string& t = tok.token_text(static_cast<int32_t>(i));
        if (t.size() < 5 || t[0] != '<') continue;
        const int32_t id = static_cast<int32_t>(i);
        if (t == "<|fim_prefix|>" || t == "<fim_prefix>" || t == "<fim-prefix>") f.pre = id;
        if (t == "<|fim_suffix|>" || t == "<fim_suffix>" || t == "<fim-suffix>") f.suf = id;
        if (t == "<|fim_middle|>" || t == "<fim_middle>" || t == "<fim-middle>") f.mid = id;
        if (t == "<|repo_name|>" || t == "<reponame>") f.rep = id;
        if (t == "<|file_sep|>" || t == "<file_sep>") f.sep = id;
    }
    return f;
}

// llama-server's format_prompt_infill (repo-level pattern): [REP]myproject\n ([SEP]file\n text)...
// [SEP]filename\n [BOS] [PRE]prefix prompt [SUF]suffix [MID]. Prefix and suffix are not cut to a
// batch: a prompt that does not fit a slot is a 400.
std::vector<int32_t> infill_prompt(Server& server, const FimTokens& fim, const json& body) {
    const Tokenizer& tok = server.backend().engine().tokenizer();
    auto text_of = [&](const char* key) -> std::vector<int32_t> {
        const json* v = field(body, key);
        if (v == nullptr) throw HttpError{400, cactus::format("\"%s\" is required", key), key};
        return tokenize_mixed(server, *v, false, false, key);
    };
    std::vector<int32_t> prefix = text_of("input_prefix"), suffix = text_of("input_suffix");
    std::vector<int32_t> out;
    auto append = [&](const std::vector<int32_t>& ids) { out.insert(out.end(), ids.begin(), ids.end()); };
    if (fim.rep >= 0) {
        out.push_back(fim.rep);
        append(tok.encode("myproject\n", false, false));
    }
    if (const json* extra = field(body, "input_extra")) {
        const char* shape = "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}";
        if (!extra->is_array()) throw HttpError{400, shape, "input_extra"};
        for (const json& chunk : *extra) {
            if (!chunk.is_object() || !chunk.contains("text") || !chunk["text"].is_string() ||
                (chunk.contains("filename") && !chunk["filename"].is_string()))
                throw HttpError{400, shape, "input_extra"};
            if (fim.sep >= 0) {
                out.push_back(fim.sep);
                append(tok.encode(chunk.value("filename", std::string("tmp")) + "\n", false, false));
            } else {
                append(tok.encode("\n\n--- snippet ---\n\n", false, false));
            }
            append(tok.encode(chunk["text"].get<std::string>(), false, false));
        }
    }
    if (fim.sep >= 0) {
        out.push_back(fim.sep);
        append(tok.encode("filename\n", false, false));
    }
    if (tok.add_bos() && tok.bos_id() >= 0) out.push_back(tok.bos_id());
    out.push_back(fim.pre);
    append(prefix);
    const json* prompt = field(body, "prompt");
    if (prompt != nullptr && !prompt->is_string()) throw HttpError{400, "\"prompt\" must be a string", "prompt"};
    if (prompt != nullptr) append(tok.encode(prompt->get<std::string>(), false, true));
    out.push_back(fim.suf);
    append(suffix);
    out.push_back(fim.mid);
    check_fits(server, out, "input_prefix");
    return out;
}

void handle_infill(Server& server, const FimTokens& fim, const httplib::Request& req, httplib::Response& res) {
    std::string missing;
    if (fim.pre < 0) missing += "prefix token is missing. ";
    if (fim.suf < 0) missing += "suffix token is missing. ";
    if (fim.mid < 0) missing += "middle token is missing. ";
    if (!missing.empty()) throw not_supported("Infill is not supported by this model: " + missing);
    const json body = parse_body(req);
    const NativeRequest r = read_native(server, body);
    std::vector<std::vector<int32_t>> prompts;
    prompts.push_back(infill_prompt(server, fim, body));
    run_native(server, body, r, std::move(prompts), res);
}

// ---------------------------------------------------------------------------------------------
// /tokenize, /detokenize, /apply-template

void handle_tokenize(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const json* content = field(body, "content");
    json tokens = json::array();
    if (content != nullptr) {  // llama-server answers an empty list without it
        const bool add_special = read_bool(body, "add_special", false);
        const bool parse_special = read_bool(body, "parse_special", true);
        const bool with_pieces = read_bool(body, "with_pieces", false);
        for (int32_t id : tokenize_mixed(server, *content, add_special, parse_special, "content")) {
            if (!with_pieces) {
                tokens.push_back(id);
                continue;
            }
            // A piece that is not whole UTF-8 (part of a character) goes out as its bytes.
            const std::string piece = token_piece(server, id);
            tokens.push_back(
                json{{"id", id}, {"piece", valid_utf8_length(piece) == piece.size() ? json(piece) : bytes_of(piece)}});
        }
    }
    send_json(res, 200, json{{"tokens", tokens}});
}

void handle_detokenize(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const json* tokens = field(body, "tokens");
    std::vector<int32_t> ids;
    if (tokens != nullptr) {
        if (!tokens->is_array()) throw HttpError{400, "'tokens' must be an array of token ids", "tokens"};
        for (const json& id : *tokens) ids.push_back(read_token_id(server, id, "tokens"));
    }
    send_json(res, 200, json{{"content", server.backend().engine().tokenizer().decode(ids, true)}});
}

// The prompt /v1/chat/completions would run for these messages (the same reader renders it).
void handle_apply_template(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const ChatRequest chat = read_chat_request(server, body);
    send_json(res, 200, json{{"prompt", chat.prompt}});
}

// ---------------------------------------------------------------------------------------------
// /props, /slots, /models

json defaults_json(const RequestDefaults& d, const SpecOptions& spec, bool backend_sampling) {
    json p = json{{"seed", d.seed},
                  {"temperature", d.temperature},
                  {"top_k", d.top_k},
                  {"top_p", d.top_p},
                  {"min_p", d.min_p},
                  {"repeat_last_n", d.repeat_last_n},
                  {"repeat_penalty", d.repeat_penalty},
                  {"presence_penalty", d.presence_penalty},
                  {"frequency_penalty", d.frequency_penalty},
                  {"max_tokens", d.n_predict},
                  {"n_predict", d.n_predict},
                  {"stream", false},
                  {"n_probs", 0},
                  {"reasoning_format", d.reasoning_format},
                  {"samplers", d.samplers},
                  {"cache_prompt", d.cache_prompt},
                  {"timings_per_token", false},
                  {"post_sampling_probs", false},
                  {"ignore_eos", false}};
    add_llama_only_settings(p, spec, backend_sampling);
    return p;
}

// llama.cpp's name of a GGUF's general.file_type (llama_ftype_name), "unknown" past its table.
std::string ftype_name(uint64_t ftype) {
    static const std::pair<uint64_t, const char*> kNames[] = {{0, "all F32"},
                                                              {1, "F16"},
                                                              {2, "Q4_0"},
                                                              {3, "Q4_1"},
                                                              {7, "Q8_0"},
                                                              {8, "Q5_0"},
                                                              {9, "Q5_1"},
                                                              {10, "Q2_K - Medium"},
                                                              {11, "Q3_K - Small"},
                                                              {12, "Q3_K - Medium"},
                                                              {13, "Q3_K - Large"},
                                                              {14, "Q4_K - Small"},
                                                              {15, "Q4_K - Medium"},
                                                              {16, "Q5_K - Small"},
                                                              {17, "Q5_K - Medium"},
                                                              {18, "Q6_K"},
                                                              {21, "Q2_K - Small"},
                                                              {25, "IQ4_NL - 4.5 bpw"},
                                                              {30, "IQ4_XS - 4.25 bpw"},
                                                              {32, "BF16"}};
    for (const auto& [id, name] : kNames)
        if (id == ftype) return name;
    return "unknown";
}

// llama.cpp's llama_vocab_type numbering of the GGUF's tokenizer.ggml.model.
int vocab_type(const GgufFile& file) {
    const std::string model = file.get_string("tokenizer.ggml.model", "");
    if (model == "llama") return 1;  // SPM
    if (model == "gpt2") return 2;   // BPE
    if (model == "bert") return 3;   // WPM
    if (model == "t5") return 4;     // UGM
    return 0;                        // none
}

uint64_t parameter_count(const GgufFile& file) {
    uint64_t n = 0;
    for (const GgufTensor& t : file.tensors()) n += t.n_elements;
    return n;
}

// llama-server's chat_template_caps, read from the template's text: what it refers to (llama.cpp
// probes by rendering sample conversations; a template that names a feature uses it in practice).
json template_caps(const std::string& source) {
    auto has = [&](const char* word) { return source.find(word) != std::string::npos; };
    const bool tools = has("tools");
    const bool calls = has("tool_calls");
    return json{{"supports_tools", tools},
                {"supports_tool_calls", calls},
                {"supports_parallel_tool_calls", calls},
                {"supports_system_role", has("system")},
                {"supports_string_content", true},
                {"supports_typed_content", has("content[") || has("'type'") || has("\"type\"")},
                {"supports_object_arguments", calls && has("arguments")},
                {"supports_preserve_reasoning", has("reasoning_content")},
                {"supports_reasoning_effort", has("reasoning_effort")}};
}

std::string token_text_or_empty(const Tokenizer& tok, int32_t id) { return id >= 0 ? tok.token_text(id) : ""; }

void handle_props(Server& server, httplib::Response& res) {
    const Engine& e = server.backend().engine();
    const ServerConfig& config = server.config();
    json slots = json::array();
    for (const SlotView& v : server.scheduler().slots())
        slots.push_back(json{{"id", v.id},
                             {"is_processing", v.busy},
                             {"n_cached", v.cached_tokens},
                             {"n_prompt", v.prompt_tokens},
                             {"n_decoded", v.generated}});
    json r = {{"default_generation_settings",
               {{"params", defaults_json(config.defaults, server.scheduler().speculative(),
                                         server.backend().samples_on_device())},
                {"n_ctx", server.backend().n_ctx()}}},
              {"total_slots", server.scheduler().n_slots()},
              {"model_alias", model_names(config).front()},
              {"model_path", config.model_path},
              {"modalities",
               {{"vision", server.media() != nullptr && server.media()->has_vision()},
                {"video", false},
                {"audio", server.media() != nullptr && server.media()->has_audio()}}},
              {"media_marker", kImageMarker},
              {"endpoint_slots", config.slots_endpoint},
              {"endpoint_props", config.props_writable},
              {"endpoint_metrics", config.metrics},
              {"chat_template", e.chat_template_source()},
              {"bos_token", token_text_or_empty(e.tokenizer(), e.tokenizer().bos_id())},
              {"eos_token", token_text_or_empty(e.tokenizer(), e.tokenizer().eos_id())},
              {"build_info", "cactus " CACTUS_SERVER_VERSION},
              {"is_sleeping", false},
              {"model_ftype", ftype_name(e.file().get_uint("general.file_type", 1024))},
              {"chat_template_caps", template_caps(e.chat_template_source())},
              {"ui", false},
              {"ui_settings", json::object()},
              {"cors_proxy_enabled", false},
              // cactus's own
              {"max_queue", server.scheduler().options().max_queue},
              {"handoff", server.handoff() != nullptr},
              {"embedding_model", server.embeddings().model_path()},
              {"slots", slots}};
    send_json(res, 200, r);
}

// llama-server's POST /props: with --props it answers success and changes nothing (its handler
// has no settable property); without, a 501.
void handle_post_props(Server& server, const httplib::Request& req, httplib::Response& res) {
    if (!server.config().props_writable)
        throw not_supported("This server does not support changing global properties. Start it with `--props`");
    parse_body(req);
    send_json(res, 200, json{{"success", true}});
}

json slot_json(Server& server, const SlotView& v) {
    json s = {{"id", v.id},
              {"n_ctx", server.backend().n_ctx()},
              {"speculative", server.scheduler().speculative().type != SpecType::off},
              {"is_processing", v.busy}};
    if (v.id_task == 0) return s;
    const SamplingParams& sp = v.gen.sampling;
    s["id_task"] = v.id_task;
    s["n_prompt_tokens"] = v.prompt_tokens;
    s["n_prompt_tokens_processed"] = v.prompt_tokens - std::min(v.prompt_cached, v.prompt_tokens);
    s["n_prompt_tokens_cache"] = v.prompt_cached;
    s["params"] = json{{"seed", sp.seed},
                       {"temperature", sp.temperature},
                       {"top_k", sp.top_k},
                       {"top_p", sp.top_p},
                       {"min_p", sp.min_p},
                       {"repeat_penalty", sp.repetition_penalty},
                       {"max_tokens", v.gen.max_tokens},
                       {"n_predict", v.gen.max_tokens},
                       {"ignore_eos", v.gen.ignore_eos},
                       {"n_probs", std::max(v.n_probs, 0)},
                       {"stop", v.gen.stop_sequences}};
    s["next_token"] = json::array({json{{"has_next_token", v.busy},
                                        {"has_new_line", v.has_new_line},
                                        {"n_remain", v.busy ? static_cast<int64_t>(v.gen.max_tokens - v.generated) : 0},
                                        {"n_decoded", v.generated}}});
    return s;
}

void handle_slots(Server& server, const httplib::Request& req, httplib::Response& res) {
    if (!server.config().slots_endpoint)
        throw not_supported("This server does not support slots endpoint. Start it with `--slots`");
    json out = json::array();
    size_t idle = 0;
    for (const SlotView& v : server.scheduler().slots()) {
        out.push_back(slot_json(server, v));
        idle += v.busy ? 0 : 1;
    }
    if (req.has_param("fail_on_no_slot") && !req.get_param_value("fail_on_no_slot").empty() && idle == 0)
        throw HttpError{503, "no slot available", "", "unavailable_error"};
    send_json(res, 200, out);
}

// POST /slots/{id}?action=erase drops a slot's cache (after its running request, if any);
// save and restore need a --slot-save-path, which this server does not have.
void handle_slot_action(Server& server, const httplib::Request& req, httplib::Response& res) {
    int id = -1;
    try {
        id = std::stoi(std::string(req.matches[1]));
    } catch (const std::exception&) {
        throw HttpError{400, "Invalid slot ID", "id_slot"};
    }
    if (id < 0 || static_cast<size_t>(id) >= server.n_slots()) throw HttpError{400, "Invalid slot ID", "id_slot"};
    const std::string action = req.get_param_value("action");
    if (action == "save" || action == "restore")
        throw not_supported(
            "This server does not support slots action. Start it with `--slot-save-path` "
            "(cactus serve has no slot files; only action=erase is served)");
    if (action != "erase") throw HttpError{400, "Invalid action", "action"};
    std::shared_ptr<EraseRequest> erase = server.scheduler().erase(id);
    const Clock::time_point deadline = server.deadline_from(json::object());
    std::unique_lock<std::mutex> lock(erase->mutex);
    if (!erase->done_cv.wait_until(lock, deadline, [&] { return erase->done; }))
        throw HttpError{503, "the slot stayed busy until the request timed out", "", "unavailable_error"};
    send_json(res, 200, json{{"id_slot", id}, {"n_erased", erase->n_erased}});
}

json model_info(Server& server) {
    const Engine& e = server.backend().engine();
    const ModelInfo& info = e.model().info();
    const std::vector<std::string> names = model_names(server.config());
    return json{{"id", names.front()},
                {"aliases", names},
                {"tags", json::array()},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "cactus"},
                {"meta",
                 {{"architecture", info.architecture},
                  {"n_vocab", info.n_vocab},
                  {"n_ctx", server.backend().n_ctx()},
                  {"n_ctx_train", info.n_ctx_train},
                  {"n_ctx_slot", server.backend().n_ctx()},
                  {"n_embd", info.n_embd},
                  {"n_params", parameter_count(e.file())},
                  {"size", e.file().file_size()},
                  {"vocab_type", vocab_type(e.file())},
                  {"ftype", ftype_name(e.file().get_uint("general.file_type", 1024))}}}};
}

// The --embedding-model, listed beside the served model.
json embedding_model_info(Server& server) {
    return json{{"id", server.config().embedding_alias},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "cactus"},
                {"meta", {{"path", server.config().embedding_model_path}, {"endpoints", "embeddings, rerank"}}}};
}

// llama-server's /models and /v1/models: the OpenAI list in "data", and an Ollama-like "models" list.
json models_json(Server& server) {
    const std::string name = model_names(server.config()).front();
    json data = json::array({model_info(server)});
    if (!server.config().embedding_model_path.empty()) data.push_back(embedding_model_info(server));
    json capabilities = server.media() ? json::array({"completion", "multimodal"}) : json::array({"completion"});
    json models = json::array({json{{"name", name},
                                    {"model", name},
                                    {"modified_at", ""},
                                    {"size", ""},
                                    {"digest", ""},
                                    {"type", "model"},
                                    {"description", ""},
                                    {"tags", json::array({""})},
                                    {"capabilities", capabilities},
                                    {"parameters", ""},
                                    {"details",
                                     {{"parent_model", ""},
                                      {"format", "gguf"},
                                      {"family", ""},
                                      {"families", json::array({""})},
                                      {"parameter_size", ""},
                                      {"quantization_level", ""}}}}});
    return json{{"models", models}, {"object", "list"}, {"data", data}};
}

void handle_model(Server& server, const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!server.config().embedding_model_path.empty() && id == server.config().embedding_alias)
        return send_json(res, 200, embedding_model_info(server));
    for (const std::string& name : model_names(server.config()))
        if (id == name) return send_json(res, 200, model_info(server));
    throw HttpError{404, "The model '" + id + "' does not exist", "model", "invalid_request_error", "model_not_found"};
}

}  // namespace

void install_llama(Server& server, httplib::Server& http, const Wrap& wrap) {
    Server* s = &server;
    auto post = [&](const char* path, void (*h)(Server&, const httplib::Request&, httplib::Response&)) {
        http.Post(path, wrap([s, h](const httplib::Request& q, httplib::Response& r) { h(*s, q, r); }));
    };
    post("/completion", handle_completion);
    post("/completions", handle_completion);  // llama-server's native route too (OpenAI's is /v1/completions)
    post("/tokenize", handle_tokenize);
    post("/detokenize", handle_detokenize);
    post("/apply-template", handle_apply_template);
    post("/props", handle_post_props);
    post(R"(/slots/([^/]+))", handle_slot_action);
    // The FIM tokens are looked up on the first /infill: routes are installed before the model loads.
    auto fim = std::make_shared<std::optional<FimTokens>>();
    auto fim_once = std::make_shared<std::once_flag>();
    http.Post("/infill", wrap([s, fim, fim_once](const httplib::Request& q, httplib::Response& r) {
                  std::call_once(*fim_once, [&] { *fim = fim_tokens(s->backend().engine().tokenizer()); });
                  handle_infill(*s, **fim, q, r);
              }));
    http.Get("/props", wrap([s](const httplib::Request&, httplib::Response& r) { handle_props(*s, r); }));
    http.Get("/slots", wrap([s](const httplib::Request& q, httplib::Response& r) { handle_slots(*s, q, r); }));
    for (const char* path : {"/models", "/v1/models"})
        http.Get(path,
                 wrap([s](const httplib::Request&, httplib::Response& r) { send_json(r, 200, models_json(*s)); }));
    http.Get(R"(/v1/models/(.+))",
             wrap([s](const httplib::Request& q, httplib::Response& r) { handle_model(*s, q, r); }));
}

}  // namespace cactus::server
