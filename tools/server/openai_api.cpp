#include "openai_api.h"

#include <algorithm>
#include <ctime>
#include <functional>
#include <random>

#include <httplib.h>

#include "chat/output_parser.h"
#include "models/model.h"
#include "gguf/gguf.h"
#include "constraint.h"
#include "embed_service.h"
#include "params.h"
#include "tokenizer/tokenizer.h"
#include "core/format.h"
#include "reply.h"
#include "media.h"

namespace cactus::server {

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
}

json usage_of(const Completion& c) {
    if (c.cloud && c.cloud_answer.contains("usage")) return c.cloud_answer["usage"];
    return json{{"prompt_tokens", c.stats.prompt_tokens},
                {"completion_tokens", c.stats.completion_tokens},
                {"total_tokens", c.stats.prompt_tokens + c.stats.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", c.stats.cached_tokens}}}};
}

// llama-server's timings, with the queue wait, time to first token, total and slot beside them.
json timings_of(const Completion& c) {
    json t = llama_timings(c.stats);
    t["queue_ms"] = c.stats.queue_ms;
    t["ttft_ms"] = c.stats.ttft_ms;
    t["total_ms"] = c.stats.total_ms;
    t["slot"] = c.stats.slot;
    return t;
}

// The hand-off fields every response carries.
void add_handoff_fields(json& r, const Completion& c) {
    r["cloud_handoff"] = c.cloud;
    if (c.cloud) {
        r["cloud_handoff_reason"] = c.cloud_reason;
        r["cloud_handoff_model"] = c.cloud_answer.value("model", "");
    }
    if (!c.handoff_error.empty()) r["cloud_handoff_error"] = c.handoff_error;
    if (c.confidence > 0.0) r["confidence"] = c.confidence;
}

class ChatFormatter final : public Formatter {
public:
    ChatFormatter(Server& server, std::string model, bool tools_offered, int top_logprobs, bool include_usage,
                  const std::string& prompt, bool raw_reasoning = false, std::string id = "")
        : server_(server),
          raw_reasoning_(raw_reasoning),
          reader_(server.backend().engine().tool_format(), prompt),
          model_(std::move(model)),
          tools_(tools_offered),
          top_logprobs_(top_logprobs),
          include_usage_(include_usage),
          id_(id.empty() ? random_id("chatcmpl-") : std::move(id)),
          created_(std::time(nullptr)) {}

    std::string content_type(bool stream) const override { return stream ? "text/event-stream" : "application/json"; }

    std::string stream_start() override { return sse(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr)); }

    std::string stream_piece(const std::string& piece, const std::vector<TokenInfo>& tokens) override {
        if (tools_) return std::string();  // tool calls are parsed from the whole reply at the end
        // Thinking stays out of the content, unless reasoning_format none asks for the raw text.
        const std::string text = raw_reasoning_ ? piece : reader_.stream(piece);
        if (text.empty() && (top_logprobs_ < 0 || tokens.empty())) return std::string();
        json c = chunk(json{{"content", text}}, nullptr);
        if (top_logprobs_ >= 0) c["choices"][0]["logprobs"] = json{{"content", logprobs(tokens)}};
        return sse(c);
    }

    std::string stream_end(const Completion& c) override {
        std::string out;
        json message = message_of(c);
        const std::string finish = finish_of(c, message);
        if (!tools_ && !c.cloud && !raw_reasoning_) {  // a partial marker held back at the end
            const std::string rest = reader_.stream_end();
            if (!rest.empty()) out += sse(chunk(json{{"content", rest}}, nullptr));
        }
        if (tools_ || c.cloud || message.contains("reasoning_content")) {  // held back, or from the hand-off
            json delta = json::object();
            if (message.contains("reasoning_content")) delta["reasoning_content"] = message["reasoning_content"];
            // Text was streamed piece by piece unless tools held it back.
            if (tools_ && message.contains("content") && !message["content"].is_null())
                delta["content"] = message["content"];
            if (message.contains("tool_calls")) {
                json calls = message["tool_calls"];
                for (size_t i = 0; i < calls.size(); ++i) calls[i]["index"] = i;
                delta["tool_calls"] = calls;
            }
            if (!delta.empty()) out += sse(chunk(delta, nullptr));
        }
        json last = chunk(json::object(), finish);
        add_handoff_fields(last, c);
        if (!c.cloud) last["timings"] = timings_of(c);
        out += sse(last);
        return closes_stream ? out + stream_close(c) : out;
    }

    std::string stream_close(const Completion& c) override {
        std::string out;
        if (include_usage_) {
            json u = base("chat.completion.chunk");
            u["choices"] = json::array();
            u["usage"] = usage_of(c);
            if (!c.cloud) u["timings"] = timings_of(c);  // llama-server's last chunk carries them too
            out += sse(u);
        }
        return out + "data: [DONE]\n\n";
    }

    std::string stream_error(int status, const std::string& message) override {
        return sse(json{{"error", {{"message", message}, {"type", "server_error"}, {"code", status}}}}) +
               "data: [DONE]\n\n";
    }

    std::string whole(const Completion& c) override {
        json r = base("chat.completion");
        json message = message_of(c);
        json choice = {{"index", this->choice},
                       {"message", message},
                       {"logprobs", nullptr},
                       {"finish_reason", finish_of(c, message)}};
        if (top_logprobs_ >= 0 && !c.cloud) choice["logprobs"] = json{{"content", logprobs(c.tokens)}};
        r["choices"] = json::array({choice});
        r["usage"] = usage_of(c);
        add_handoff_fields(r, c);
        if (!c.cloud) r["timings"] = timings_of(c);
        return dump(r);
    }

private:
    json base(const char* object) const {
        return json{{"id", id_},
                    {"object", object},
                    {"created", created_},
                    {"model", model_},
                    {"system_fingerprint", "cactus-" CACTUS_SERVER_VERSION}};
    }

    json chunk(const json& delta, const json& finish) const {
        json c = base("chat.completion.chunk");
        c["choices"] = json::array(
            {json{{"index", this->choice}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}});
        return c;
    }

    json logprobs(const std::vector<TokenInfo>& tokens) const {
        json out = json::array();
        for (const TokenInfo& t : tokens) {
            const std::string piece = token_piece(server_, t.id);
            json top = json::array();
            for (const auto& [id, lp] : t.top) {
                const std::string p = token_piece(server_, id);
                top.push_back(json{{"token", p}, {"logprob", lp}, {"bytes", bytes_of(p)}});
            }
            out.push_back(
                json{{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
        }
        return out;
    }

    json message_of(const Completion& c) const {
        if (c.cloud) {
            json m = c.cloud_answer["choices"][0].value("message", json::object());
            if (!m.contains("role")) m["role"] = "assistant";
            return m;
        }
        if (raw_reasoning_ && !tools_) return json{{"role", "assistant"}, {"content", c.text}};
        // The family's format: thinking to reasoning_content (as llama-server), calls to tool_calls.
        ParsedReply reply = reader_.parse(c.text, tools_);
        json m = {{"role", "assistant"}, {"content", reply.response}};
        if (!reply.thinking.empty()) m["reasoning_content"] = reply.thinking;
        if (!tools_ || reply.function_calls.empty()) return m;
        json calls = json::array();
        for (const json& call : reply.function_calls) {
            calls.push_back(json{
                {"id", random_id("call_")},
                {"type", "function"},
                {"function",
                 {{"name", call.value("name", "")}, {"arguments", dump(call.value("arguments", json::object()))}}}});
        }
        m["content"] = reply.response.empty() ? json(nullptr) : json(reply.response);
        m["tool_calls"] = calls;
        return m;
    }

    static std::string finish_of(const Completion& c, const json& message) {
        if (c.cloud) return c.cloud_answer["choices"][0].value("finish_reason", std::string("stop"));
        // A reply cut at max_tokens stays "length" even with calls (its last call may be the cut one).
        return message.contains("tool_calls") && c.finish_reason != "length" ? "tool_calls" : c.finish_reason;
    }

    Server& server_;
    bool raw_reasoning_;
    ReplyReader reader_;
    std::string model_;
    bool tools_;
    int top_logprobs_;
    bool include_usage_;
    std::string id_;
    long long created_;
};

class TextFormatter final : public Formatter {
public:
    TextFormatter(Server& server, std::string model, int logprobs, bool include_usage, std::string id = "")
        : server_(server),
          model_(std::move(model)),
          logprobs_(logprobs),
          include_usage_(include_usage),
          id_(id.empty() ? random_id("cmpl-") : std::move(id)),
          created_(std::time(nullptr)) {}

    std::string content_type(bool stream) const override { return stream ? "text/event-stream" : "application/json"; }

    std::string stream_piece(const std::string& text, const std::vector<TokenInfo>& tokens) override {
        if (text.empty() && (logprobs_ < 0 || tokens.empty())) return std::string();
        return sse(chunk(text, tokens, nullptr));
    }

    std::string stream_end(const Completion& c) override {
        json last = chunk("", {}, finish_of(c));
        add_handoff_fields(last, c);
        if (!c.cloud) last["timings"] = timings_of(c);
        const std::string out = sse(last);
        return closes_stream ? out + stream_close(c) : out;
    }

    std::string stream_close(const Completion& c) override {
        std::string out;
        if (include_usage_) {
            json u = base();
            u["choices"] = json::array();
            u["usage"] = usage_of(c);
            out += sse(u);
        }
        return out + "data: [DONE]\n\n";
    }

    std::string stream_error(int status, const std::string& message) override {
        return sse(json{{"error", {{"message", message}, {"type", "server_error"}, {"code", status}}}}) +
               "data: [DONE]\n\n";
    }

    std::string whole(const Completion& c) override {
        std::string text = c.text;
        if (c.cloud) text = c.cloud_answer["choices"][0].value("text", std::string());
        json r = chunk(text, c.cloud ? std::vector<TokenInfo>{} : c.tokens, finish_of(c));
        r["usage"] = usage_of(c);
        add_handoff_fields(r, c);
        if (!c.cloud) r["timings"] = timings_of(c);
        return dump(r);
    }

private:
    json base() const {
        return json{{"id", id_},
                    {"object", "text_completion"},
                    {"created", created_},
                    {"model", model_},
                    {"system_fingerprint", "cactus-" CACTUS_SERVER_VERSION}};
    }

    json chunk(const std::string& text, const std::vector<TokenInfo>& tokens, const json& finish) const {
        json c = base();
        json choice = {{"index", this->choice}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}};
        if (logprobs_ >= 0) choice["logprobs"] = legacy_logprobs(tokens);
        c["choices"] = json::array({choice});
        return c;
    }

    json legacy_logprobs(const std::vector<TokenInfo>& tokens) const {
        json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
        size_t offset = 0;
        for (const TokenInfo& t : tokens) {
            const std::string piece = token_piece(server_, t.id);
            toks.push_back(piece);
            lps.push_back(t.logprob);
            json top = json::object();
            for (const auto& [id, lp] : t.top) top[token_piece(server_, id)] = lp;
            tops.push_back(top);
            offsets.push_back(offset);
            offset += piece.size();
        }
        return json{{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
    }

    static std::string finish_of(const Completion& c) {
        if (c.cloud) return c.cloud_answer["choices"][0].value("finish_reason", std::string("stop"));
        return c.finish_reason;
    }

    Server& server_;
    std::string model_;
    int logprobs_;
    bool include_usage_;
    std::string id_;
    long long created_;
};

// The endpoint's answer → Completion (cloud fields).
bool fill_from_cloud(const json& answer, Completion* c) {
    c->cloud = true;
    c->cloud_answer = answer;
    const json& choice = answer["choices"][0];
    if (choice.contains("message") && choice["message"].is_object()) {
        const json& content = choice["message"].value("content", json(nullptr));
        c->text = content.is_string() ? content.get<std::string>() : std::string();
    } else {
        c->text = choice.value("text", std::string());
    }
    c->finish_reason = choice.value("finish_reason", std::string("stop"));
    return true;
}

// Runs a request whose hand-off was asked for outright: the endpoint first, the local model if it fails.
bool try_forced_handoff(Server& server, const HandoffPlan& plan, httplib::Response& res, std::shared_ptr<Formatter> f,
                        bool stream, std::string* error) {
    Completion c;
    c.cloud_reason = "requested";
    if (!plan.call(&c, error)) return false;
    respond_done(res, c, f, stream);
    return true;
}

std::string model_name(Server& server, const json& body) { return read_string(body, "model", server.config().alias); }

}  // namespace

std::string token_piece(Server& server, int32_t id) {
    return server.backend().engine().tokenizer().token_to_piece(id, true);
}

namespace {

// llama-server's seed: -1 draws a random one; any other value is reproducible (0 too: the sampler's
// own 0 means "from the clock", so it is moved to another fixed value).
uint64_t resolve_seed(int64_t seed) {
    if (seed == -1) {
        static thread_local std::mt19937_64 rng{std::random_device{}()};
        uint64_t r = 0;
        while (r == 0) r = rng();
        return r;
    }
    return seed == 0 ? 0x9e3779b97f4a7c15ull : static_cast<uint64_t>(seed);
}

// The --samplers order: names (llama-server's ';'-separated list, split), or one string of
// letters (--sampling-seq).
std::vector<SamplerStep> default_sampler_order(const std::vector<std::string>& samplers) {
    try {
        return sampler_order(json(samplers), "samplers");
    } catch (const HttpError&) {
        if (samplers.size() != 1) throw;
        return sampler_order(json(samplers.front()), "samplers");
    }
}

}  // namespace

void read_openai_sampling(Server& server, const json& body, GenParams& p, bool choices_handled) {
    const RequestDefaults& d = server.config().defaults;
    GenerationOptions& g = p.gen;
    SamplingParams& s = g.sampling;
    const size_t room = room_after(server, p.prompt.size());
    const int64_t default_max = d.n_predict < 0 ? static_cast<int64_t>(room) : std::max<int64_t>(d.n_predict, 1);
    int64_t max_tokens = read_int(body, "max_tokens", 1, 1 << 20, default_max);
    max_tokens = read_int(body, "max_completion_tokens", 1, 1 << 20, max_tokens);
    max_tokens = read_int(body, "n_predict", -1, 1 << 20, max_tokens);  // llama-server's name; -1 = to the end
    g.max_tokens = max_tokens < 0 ? room : std::min(static_cast<size_t>(max_tokens), room);
    // Fields left out take the server's defaults (llama-server's flags: --temp, --top-k, ...).
    s.temperature = static_cast<float>(read_number(body, "temperature", 0.0, 2.0, std::max(d.temperature, 0.0)));
    s.top_p = static_cast<float>(read_number(body, "top_p", 0.0, 1.0, std::clamp(d.top_p, 0.0, 1.0)));
    if (s.top_p == 0.0f) s.top_p = 1.0f;
    s.top_k = static_cast<int>(read_int(body, "top_k", 0, 1 << 20, std::max(d.top_k, 0)));
    s.min_p = static_cast<float>(read_number(body, "min_p", 0.0, 0.9999, std::clamp(d.min_p, 0.0, 0.9999)));
    s.repetition_penalty = static_cast<float>(
        read_number(body, "repeat_penalty", 0.01, 100.0, d.repeat_penalty > 0.0 ? d.repeat_penalty : 1.0));
    const int64_t last_n = read_int(body, "repeat_last_n", -1, 1 << 20, d.repeat_last_n);
    s.repetition_window = last_n < 0 ? static_cast<int>(server.backend().n_ctx()) : static_cast<int>(last_n);
    s.presence_penalty = static_cast<float>(read_number(body, "presence_penalty", -2.0, 2.0, d.presence_penalty));
    s.frequency_penalty = static_cast<float>(read_number(body, "frequency_penalty", -2.0, 2.0, d.frequency_penalty));
    s.seed = resolve_seed(read_int(body, "seed", INT64_MIN, INT64_MAX, d.seed));
    s.logit_bias = read_logit_bias(server, body, "logit_bias");
    if (const json* order = field(body, "samplers"))
        s.order = sampler_order(*order, "samplers");
    else if (!d.samplers.empty())
        s.order = default_sampler_order(d.samplers);
    reject_unsupported_samplers(body);
    g.stop_sequences = read_stop(body, "stop", 16);
    g.ignore_eos = read_bool(body, "ignore_eos", false);  // llama-server's; for benchmarks
    if (read_choices(body) != 1 && !choices_handled) throw HttpError{400, "'n' must be 1 on this endpoint", "n"};
    p.deadline = server.deadline_from(body);
}

HandoffPlan handoff_plan(Server& server, const json& body, const char* endpoint, bool* forced) {
    HandoffPlan plan;
    *forced = read_bool(body, "cloud_handoff", false);
    HandoffClient* client = server.handoff();
    const double threshold =
        read_number(body, "confidence_threshold", 0.0, 1.0, client ? client->config().confidence_threshold : 0.0);
    const bool auto_on = read_bool(body, "auto_handoff", client ? client->config().auto_handoff : false);
    if (client == nullptr) {
        if (*forced)
            throw HttpError{400,
                            "'cloud_handoff' needs a hand-off endpoint: start the server with "
                            "--handoff-url or CACTUS_HANDOFF_URL",
                            "cloud_handoff"};
        return plan;
    }
    plan.check_confidence = auto_on;
    plan.threshold = threshold;
    plan.tokens = client->config().confidence_tokens;
    std::string path = endpoint;
    json request = body;
    Metrics* metrics = &server.metrics();
    plan.call = [client, path, request, metrics](Completion* c, std::string* error) {
        json answer;
        const bool ok = client->post(path, request, &answer, error);
        metrics->observe_handoff(ok);
        return ok && fill_from_cloud(answer, c);
    };
    return plan;
}

// The prompt's ids with the images' rows (ids < 0) in p->media; 400 on an image the decoder or the
// projector refuses, or a prompt longer than a slot.
void media_prompt(Server& server, const std::string& prompt, const RequestMedia& media, GenParams* p) {
    try {
        p->media = server.media()->prompt(server.backend().engine(), prompt, media);
    } catch (const std::exception& e) {
        throw HttpError{400, e.what(), "messages"};
    }
    p->prompt = p->media->tokens;
    const size_t n_ctx = server.backend().n_ctx();
    if (p->prompt.size() + 1 >= n_ctx) throw exceed_context_error(p->prompt.size(), n_ctx, "messages");
}

namespace {

// chat_template_kwargs (the server's --chat-template-kwargs, then the request's on top) and
// llama-server's continuation of a final assistant message: continue_final_message, or
// automatically when the last message is the assistant's (assistant prefill).
Engine::ChatRender read_chat_render(Server& server, const json& body, const json& messages) {
    Engine::ChatRender how;
    how.template_kwargs = server.config().defaults.chat_template_kwargs;
    if (!how.template_kwargs.is_object()) how.template_kwargs = json::object();
    if (const json* kwargs = field(body, "chat_template_kwargs")) {
        if (!kwargs->is_object())
            throw HttpError{400, "'chat_template_kwargs' must be an object", "chat_template_kwargs"};
        for (const auto& [key, value] : kwargs->items()) how.template_kwargs[key] = value;
    }
    if (const json* thinking = field(how.template_kwargs, "enable_thinking")) {
        if (!thinking->is_boolean())
            throw HttpError{400, "'chat_template_kwargs.enable_thinking' must be true or false",
                            "chat_template_kwargs"};
        how.enable_thinking = thinking->get<bool>();
    }
    const bool last_is_assistant = !messages.empty() && messages.back().value("role", "") == "assistant";
    bool continuing = last_is_assistant;
    if (const json* c = field(body, "continue_final_message")) {
        if (!c->is_boolean() && !(c->is_string() && (*c == "content" || *c == "reasoning_content")))
            throw HttpError{400, "'continue_final_message' must be true, false or \"content\"",
                            "continue_final_message"};
        continuing = !(c->is_boolean() && !c->get<bool>());
        if (continuing && !last_is_assistant)
            throw HttpError{400, "'continue_final_message' needs an assistant message last", "continue_final_message"};
        if (c->is_string() && *c == "reasoning_content")
            throw HttpError{400, "continuing 'reasoning_content' is not supported", "continue_final_message"};
    }
    if (continuing && messages.size() >= 2 && messages[messages.size() - 2].value("role", "") == "assistant")
        throw HttpError{400, "cannot have 2 or more assistant messages at the end of the list", "messages"};
    if (continuing && messages.back().contains("tool_calls") && !messages.back()["tool_calls"].empty())
        throw HttpError{400, "cannot continue an assistant message that contains tool calls", "messages"};
    how.add_generation_prompt = read_bool(body, "add_generation_prompt", true);
    if (continuing && field(body, "add_generation_prompt") != nullptr && how.add_generation_prompt &&
        field(body, "continue_final_message") != nullptr)
        throw HttpError{400, "'add_generation_prompt' and 'continue_final_message' cannot both be true",
                        "continue_final_message"};
    how.continue_final_message = continuing;
    return how;
}

// llama-server's reasoning_format: none leaves the thinking in the content as the model wrote it;
// auto, deepseek and deepseek-legacy move it to reasoning_content.
std::string read_reasoning_format(Server& server, const json& body) {
    const std::string f = read_string(body, "reasoning_format", server.config().defaults.reasoning_format);
    if (f != "none" && f != "auto" && f != "deepseek" && f != "deepseek-legacy")
        throw HttpError{400, "'reasoning_format' must be none, auto, deepseek or deepseek-legacy (got '" + f + "')",
                        "reasoning_format"};
    return f;
}

}  // namespace

size_t read_choices(const json& body) {
    return static_cast<size_t>(read_int(body, "n_cmpl", 1, kMaxChoices, read_int(body, "n", 1, kMaxChoices, 1)));
}

ChatRequest read_chat_request(Server& server, const json& body) {
    ChatRequest r;
    RequestMedia& media = r.media;  // the messages' images and clips, in order
    json messages;
    if (field(body, "messages") != nullptr) {
        json raw = body;
        ServerMedia* towers = server.media();
        MediaRefusals refuse;
        if (towers == nullptr || !towers->has_vision()) refuse.images = kNoVisionProjector;
        if (towers == nullptr || !towers->has_audio()) refuse.audio = kNoAudioTower;
        media = take_media(&raw["messages"], "messages", refuse);
        messages = read_messages(raw, "messages", refuse.images);
    } else {
        messages = read_messages(body, "messages", kNoVisionProjector);
    }
    json tools = read_tools(body, "tools");
    bool force_tools = false;  // tool_choice required or a named function: the reply is a call
    if (const json* choice = field(body, "tool_choice")) {
        if (choice->is_string()) {
            const std::string c = choice->get<std::string>();
            force_tools = c == "required";
            if (c == "none")
                tools = json::array();
            else if (c != "auto" && c != "required")
                throw HttpError{400, "'tool_choice' must be none, auto, required or a function", "tool_choice"};
        } else if (choice->is_object() && choice->contains("function") && (*choice)["function"].is_object()) {
            const std::string name = (*choice)["function"].value("name", "");
            json kept = json::array();
            for (const json& t : tools)
                if (t["function"].value("name", "") == name) kept.push_back(t);
            if (kept.empty())
                throw HttpError{400, "'tool_choice' names a function not in 'tools': " + name, "tool_choice"};
            tools = kept;
            force_tools = true;
        } else {
            throw HttpError{400, "'tool_choice' must be a string or {type, function: {name}}", "tool_choice"};
        }
    }
    const json response_format = openai_response_format(body);
    r.stream = read_bool(body, "stream", false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw HttpError{400, "'stream_options' must be an object", "stream_options"};
        r.include_usage = read_bool(*so, "include_usage", false);
    }
    const bool want_logprobs = read_bool(body, "logprobs", false);
    const int top = static_cast<int>(read_int(body, "top_logprobs", 0, 20, 0));
    if (field(body, "top_logprobs") && !want_logprobs)
        throw HttpError{400, "'top_logprobs' needs 'logprobs': true", "top_logprobs"};

    GenParams& p = r.params;
    const Engine::ChatRender how = read_chat_render(server, body, messages);
    r.reasoning_format = read_reasoning_format(server, body);
    try {
        r.prompt = server.backend().engine().render_chat(messages, tools, how);
    } catch (const std::exception& e) {
        throw HttpError{400, std::string("cannot render the chat template: ") + e.what(), "messages"};
    }
    if (media.images.empty() && media.audio.empty())
        p.prompt = tokenize_for_slot(server, r.prompt, "messages");
    else
        media_prompt(server, r.prompt, media, &p);
    read_openai_sampling(server, body, p, /*choices_handled=*/true);
    r.n_choices = read_choices(body);
    p.top_logprobs = want_logprobs ? top : -1;
    if (field(body, "grammar") != nullptr && !tools.empty())
        throw HttpError{400, "'grammar' cannot be combined with 'tools' (set tool_choice to none)", "grammar"};
    p.gen.constraint = compile_rule(
        server, OutputRule{response_format, tools, force_tools, force_tools ? "tool_choice" : "response_format",
                           read_bool(body, "parallel_tool_calls", false)});
    r.tools = std::move(tools);
    return r;
}

namespace {

// n > 1: the choices run as separate jobs with seeds seed, seed + 1, ... (no hand-off).
void respond_with_choices(Server& server, httplib::Response& res, const json& body, const GenParams& p, size_t n,
                          const std::function<std::shared_ptr<Formatter>()>& make_formatter, bool stream) {
    if (read_bool(body, "cloud_handoff", false) || read_bool(body, "auto_handoff", false))
        throw HttpError{400, "the cloud hand-off answers one choice: 'n' must be 1 with it", "n"};
    std::vector<GenParams> params(n, p);
    for (size_t i = 0; i < n; ++i) params[i].gen.sampling.seed = p.gen.sampling.seed + i;
    std::vector<std::vector<GenEvent>> firsts;
    std::vector<std::shared_ptr<Job>> jobs = start_jobs(server, std::move(params), &firsts);
    std::vector<std::shared_ptr<Formatter>> fs;
    for (size_t i = 0; i < n; ++i) fs.push_back(make_formatter());
    respond_choices(res, std::move(jobs), std::move(firsts), std::move(fs), stream);
}

}  // namespace

void handle_chat_completions(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    ChatRequest r = read_chat_request(server, body);
    GenParams p = std::move(r.params);
    const bool stream = r.stream;
    const std::string model = model_name(server, body);
    const bool raw_reasoning = r.reasoning_format == "none";
    const std::string id = random_id("chatcmpl-");  // one id for all the choices
    auto make_formatter = [&]() {
        return std::make_shared<ChatFormatter>(server, model, !r.tools.empty(), p.top_logprobs, r.include_usage,
                                               r.prompt, raw_reasoning, id);
    };
    if (r.n_choices > 1) return respond_with_choices(server, res, body, p, r.n_choices, make_formatter, stream);
    auto f = make_formatter();
    bool forced = false;
    HandoffPlan plan = handoff_plan(server, body, "chat/completions", &forced);
    std::string handoff_error;
    if (forced && try_forced_handoff(server, plan, res, f, stream, &handoff_error)) return;
    if (forced) plan.check_confidence = false;
    std::vector<GenEvent> first;
    std::shared_ptr<Job> job = start_job(server, std::move(p), &first);
    if (!handoff_error.empty()) {
        plan.call = [handoff_error](Completion*, std::string* error) {
            *error = handoff_error;
            return false;
        };
        plan.check_confidence = true;
        plan.threshold = 2.0;  // always "below": reports the failed hand-off on the local answer
        plan.tokens = 1;
    }
    respond(res, server, job, std::move(first), f, stream, std::move(plan));
}

void handle_completions(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const json* prompt = field(body, "prompt");
    GenParams p;
    if (prompt == nullptr) throw HttpError{400, "'prompt' is required", "prompt"};
    if (prompt->is_string()) {
        p.prompt = tokenize_for_slot(server, prompt->get<std::string>(), "prompt");
    } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
        p.prompt = tokenize_for_slot(server, (*prompt)[0].get<std::string>(), "prompt");
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
        const size_t vocab = server.backend().engine().tokenizer().vocab_size();
        for (const json& id : *prompt) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<uint64_t>() >= vocab)
                throw HttpError{400, "'prompt' token ids must be integers in [0, vocab size)", "prompt"};
            p.prompt.push_back(id.get<int32_t>());
        }
        if (p.prompt.size() + 1 >= server.backend().n_ctx())
            throw exceed_context_error(p.prompt.size(), server.backend().n_ctx(), "prompt");
    } else {
        throw HttpError{400, "'prompt' must be a string, one string in an array, or an array of token ids", "prompt"};
    }
    if (read_bool(body, "echo", false)) throw HttpError{400, "'echo' is not supported", "echo"};
    const bool stream = read_bool(body, "stream", false);
    bool include_usage = false;
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw HttpError{400, "'stream_options' must be an object", "stream_options"};
        include_usage = read_bool(*so, "include_usage", false);
    }
    const json* lp = field(body, "logprobs");
    int logprobs = -1;
    if (lp != nullptr && !(lp->is_boolean() && !lp->get<bool>()))
        logprobs = static_cast<int>(read_int(body, "logprobs", 0, 20, 0));
    read_openai_sampling(server, body, p, /*choices_handled=*/true);
    p.top_logprobs = logprobs;
    p.gen.constraint = compile_rule(server, OutputRule{openai_response_format(body), json::array()});

    const std::string model = model_name(server, body);
    const std::string id = random_id("cmpl-");  // one id for all the choices
    auto make_formatter = [&]() { return std::make_shared<TextFormatter>(server, model, logprobs, include_usage, id); };
    if (const size_t n = read_choices(body); n > 1)
        return respond_with_choices(server, res, body, p, n, make_formatter, stream);
    auto f = make_formatter();
    bool forced = false;
    HandoffPlan plan = handoff_plan(server, body, "completions", &forced);
    std::string handoff_error;
    if (forced && try_forced_handoff(server, plan, res, f, stream, &handoff_error)) return;
    if (forced) plan.check_confidence = false;
    std::vector<GenEvent> first;
    std::shared_ptr<Job> job = start_job(server, std::move(p), &first);
    if (!handoff_error.empty()) {
        plan.call = [handoff_error](Completion*, std::string* error) {
            *error = handoff_error;
            return false;
        };
        plan.check_confidence = true;
        plan.threshold = 2.0;
        plan.tokens = 1;
    }
    respond(res, server, job, std::move(first), f, stream, std::move(plan));
}

void install_openai(Server& server, httplib::Server& http, const Wrap& wrap) {
    Server* s = &server;
    http.Post("/v1/chat/completions",
              wrap([s](const httplib::Request& q, httplib::Response& r) { handle_chat_completions(*s, q, r); }));
    http.Post("/chat/completions",
              wrap([s](const httplib::Request& q, httplib::Response& r) { handle_chat_completions(*s, q, r); }));
    http.Post("/v1/completions",
              wrap([s](const httplib::Request& q, httplib::Response& r) { handle_completions(*s, q, r); }));
}

}  // namespace cactus::server
