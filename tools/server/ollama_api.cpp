// Ollama's native API: /api/chat and /api/generate (NDJSON streaming, on by default as in
// Ollama), /api/tags, /api/show, /api/pull (the model store's pull, progress streamed), /api/version.
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "chat/output_parser.h"
#include "completion.h"
#include "engine/model_store.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "openai_api.h"
#include "constraint.h"
#include "params.h"
#include "reply.h"
#include "server.h"

namespace cactus::server {

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string line(const json& j) { return dump(j) + "\n"; }

std::string now_rfc3339() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int64_t ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

class OllamaFormatter final : public Formatter {
public:
    // reader: the model family's reply format (chat only; /api/generate returns the raw text).
    OllamaFormatter(std::string model, bool chat, bool tools, std::unique_ptr<ReplyReader> reader = nullptr)
        : model_(std::move(model)), chat_(chat), tools_(tools), reader_(std::move(reader)) {}

    std::string content_type(bool stream) const override {
        return stream ? "application/x-ndjson" : "application/json";
    }

    std::string stream_piece(const std::string& piece, const std::vector<TokenInfo>&) override {
        if (tools_) return std::string();  // calls are parsed from the whole reply at the end
        const std::string text = reader_ ? reader_->stream(piece) : piece;  // thinking stays out
        if (text.empty()) return std::string();
        json r = base();
        put_text(r, text);
        r["done"] = false;
        return line(r);
    }

    std::string stream_end(const Completion& c) override {
        std::string out;
        const std::string rest = reader_ && !tools_ ? reader_->stream_end() : std::string();
        if (!rest.empty()) {  // a partial marker held back at the end
            json r = base();
            put_text(r, rest);
            r["done"] = false;
            out += line(r);
        }
        return out + line(final_object(c, false));
    }

    std::string stream_error(int, const std::string& message) override { return line(json{{"error", message}}); }

    std::string whole(const Completion& c) override { return dump(final_object(c, true)); }

private:
    json base() const { return json{{"model", model_}, {"created_at", now_rfc3339()}}; }

    void put_text(json& r, const std::string& text) const {
        if (chat_)
            r["message"] = json{{"role", "assistant"}, {"content", text}};
        else
            r["response"] = text;
    }

    // The last object; its text is the whole reply (whole, or streamed with tools held back) or
    // empty (streamed: the text went out piece by piece).
    json final_object(const Completion& c, bool whole) const {
        json r = base();
        const bool with_text = whole || tools_;
        if (!chat_ || !reader_ || c.cloud) {
            put_text(r, with_text ? c.text : std::string());
        } else {
            ParsedReply reply = reader_->parse(c.text, tools_);  // thinking to message.thinking, as Ollama
            put_text(r, with_text ? reply.response : std::string());
            if (!reply.thinking.empty()) r["message"]["thinking"] = reply.thinking;
            if (tools_ && !reply.function_calls.empty()) {
                json calls = json::array();
                for (const json& call : reply.function_calls)
                    calls.push_back(json{
                        {"function",
                         {{"name", call.value("name", "")}, {"arguments", call.value("arguments", json::object())}}}});
                r["message"]["tool_calls"] = calls;
            }
        }
        r["done"] = true;
        r["done_reason"] = c.finish_reason;
        r["total_duration"] = ns(c.stats.total_ms);
        r["load_duration"] = 0;
        r["prompt_eval_count"] = c.stats.prompt_tokens;
        r["prompt_eval_duration"] = ns(c.stats.ttft_ms - c.stats.queue_ms);
        r["eval_count"] = c.stats.completion_tokens;
        r["eval_duration"] = ns(c.stats.total_ms - c.stats.ttft_ms);
        return r;
    }

    std::string model_;
    bool chat_;
    bool tools_;
    std::unique_ptr<ReplyReader> reader_;
};

// Ollama's "options" object → sampling; Ollama's defaults where a field is absent.
void read_ollama_options(Server& server, const json& body, GenParams& p) {
    json options = json::object();
    if (const json* o = field(body, "options")) {
        if (!o->is_object()) throw HttpError{400, "'options' must be an object", "options"};
        options = *o;
    }
    GenerationOptions& g = p.gen;
    const size_t room = room_after(server, p.prompt.size());
    const int64_t n = read_int(options, "num_predict", -2, 1 << 20, -1);
    g.max_tokens = n < 0 ? room : std::min(static_cast<size_t>(std::max<int64_t>(n, 1)), room);
    g.sampling.temperature = static_cast<float>(read_number(options, "temperature", 0.0, 100.0, 0.8));
    g.sampling.top_p = static_cast<float>(read_number(options, "top_p", 0.0, 1.0, 0.9));
    if (g.sampling.top_p == 0.0f) g.sampling.top_p = 1.0f;
    g.sampling.top_k = static_cast<int>(read_int(options, "top_k", 0, 1 << 20, 40));
    g.sampling.min_p = static_cast<float>(read_number(options, "min_p", 0.0, 0.9999, 0.0));
    g.sampling.repetition_penalty = static_cast<float>(read_number(options, "repeat_penalty", 0.01, 100.0, 1.1));
    g.sampling.seed = static_cast<uint64_t>(read_int(options, "seed", INT64_MIN, INT64_MAX, 0));
    g.stop_sequences = read_stop(options, "stop", 16);
    p.gen.constraint = compile_rule(server, OutputRule{ollama_format(body), json::array(), false, "format"});
    p.deadline = server.deadline_from(body);
}

std::string model_of(Server& server, const json& body) {
    std::string m = read_string(body, "model", server.config().alias);
    return m.empty() ? server.config().alias : m;
}

void run_generation(Server& server, GenParams p, std::shared_ptr<Formatter> f, bool stream, httplib::Response& res) {
    std::vector<GenEvent> first;
    std::shared_ptr<Job> job = start_job(server, std::move(p), &first);
    respond(res, server, job, std::move(first), f, stream, HandoffPlan{});
}

void handle_chat(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    json messages = read_messages(body, "messages", kNoImagesOllama);
    json tools = read_tools(body, "tools");
    GenParams p;
    std::string prompt;
    try {
        prompt = server.backend().engine().render_chat(messages, tools, true);
    } catch (const std::exception& e) {
        throw HttpError{400, std::string("cannot render the chat template: ") + e.what(), "messages"};
    }
    p.prompt = tokenize_for_slot(server, prompt, "messages");
    read_ollama_options(server, body, p);
    const bool stream = read_bool(body, "stream", true);
    run_generation(server, std::move(p),
                   std::make_shared<OllamaFormatter>(
                       model_of(server, body), true, !tools.empty(),
                       std::make_unique<ReplyReader>(server.backend().engine().tool_format(), prompt)),
                   stream, res);
}

void handle_generate(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const std::string prompt = read_string(body, "prompt", "");
    const std::string system = read_string(body, "system", "");
    const bool raw = read_bool(body, "raw", false);
    const bool stream = read_bool(body, "stream", true);
    if (prompt.empty()) {  // Ollama: an empty prompt loads the model and returns at once
        json r = {{"model", model_of(server, body)},
                  {"created_at", now_rfc3339()},
                  {"response", ""},
                  {"done", true},
                  {"done_reason", "load"}};
        send_json(res, 200, r);
        return;
    }
    std::string text = prompt;
    if (!raw) {
        json messages = json::array();
        if (!system.empty()) messages.push_back(json{{"role", "system"}, {"content", system}});
        messages.push_back(json{{"role", "user"}, {"content", prompt}});
        text = server.backend().engine().render_chat(messages, json::array(), true);
    }
    GenParams p;
    p.prompt = tokenize_for_slot(server, text, "prompt");
    read_ollama_options(server, body, p);
    run_generation(server, std::move(p), std::make_shared<OllamaFormatter>(model_of(server, body), false, false),
                   stream, res);
}

json model_details(Server& server) {
    const ModelInfo& info = server.backend().engine().model().info();
    return json{{"parent_model", ""},          {"format", "gguf"},
                {"family", info.architecture}, {"families", json::array({info.architecture})},
                {"parameter_size", ""},        {"quantization_level", ""}};
}

void handle_tags(Server& server, httplib::Response& res) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(server.config().model_path, ec);
    json model = {{"name", server.config().alias},
                  {"model", server.config().alias},
                  {"modified_at", now_rfc3339()},
                  {"size", ec ? 0 : size},
                  {"digest", ""},
                  {"details", model_details(server)}};
    send_json(res, 200, json{{"models", json::array({model})}});
}

void handle_show(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const ModelInfo& info = server.backend().engine().model().info();
    const std::string tmpl = server.backend().engine().file().get_string("tokenizer.chat_template", "");
    json r = {{"modelfile", "FROM " + server.config().model_path + "\n"},
              {"parameters", ""},
              {"template", tmpl},
              {"details", model_details(server)},
              {"model_info",
               {{"general.architecture", info.architecture},
                {"general.name", info.name},
                {info.architecture + ".context_length", info.n_ctx_train},
                {info.architecture + ".embedding_length", info.n_embd},
                {info.architecture + ".block_count", info.n_layer}}},
              {"capabilities", json::array({"completion"})}};
    (void)model_of(server, body);
    send_json(res, 200, r);
}

// Progress of one pull, shared by the puller thread and the response.
struct PullState {
    std::mutex mutex;
    std::deque<json> lines;
    bool done = false;
};

void handle_pull(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    std::string name = read_string(body, "model", read_string(body, "name", ""));
    if (name.empty()) throw HttpError{400, "'model' is required", "model"};
    const size_t colon = name.find(':');
    if (colon != std::string::npos && name.substr(colon) == ":latest") name = name.substr(0, colon);
    const KnownModel* model = find_known_model(name);
    if (model == nullptr)
        throw HttpError{404, "pull: unknown model '" + name + "' (see 'cactus list')", "model", "not_found_error"};
    const bool stream = read_bool(body, "stream", true);
    auto state = std::make_shared<PullState>();
    const std::string digest = "sha256:" + model->sha256;
    std::thread([state, model, digest] {
        auto push = [&](json j) {
            std::lock_guard<std::mutex> lock(state->mutex);
            state->lines.push_back(std::move(j));
        };
        push(json{{"status", "pulling manifest"}});
        try {
            pull_model(*model, [&](uint64_t done, uint64_t total) {
                push(json{
                    {"status", "pulling " + model->name}, {"digest", digest}, {"total", total}, {"completed", done}});
            });
            push(json{{"status", "verifying sha256 digest"}});
            push(json{{"status", "success"}});
        } catch (const std::exception& e) {
            push(json{{"error", e.what()}});
        }
        std::lock_guard<std::mutex> lock(state->mutex);
        state->done = true;
    }).detach();
    res.set_chunked_content_provider("application/x-ndjson", [state, stream](size_t, httplib::DataSink& sink) {
        json last;
        for (;;) {
            std::deque<json> lines;
            bool done;
            {
                std::lock_guard<std::mutex> lock(state->mutex);
                lines.swap(state->lines);
                done = state->done;
            }
            for (json& l : lines) {
                last = l;
                if (!stream) continue;
                const std::string s = line(l);
                if (!sink.write(s.data(), s.size())) return false;
            }
            if (done) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (!sink.is_writable()) return false;
        }
        if (!stream) {
            const std::string s = dump(last);
            if (!sink.write(s.data(), s.size())) return false;
        }
        sink.done();
        return true;
    });
}

}  // namespace

void install_ollama(Server& server, httplib::Server& http, const Wrap& wrap) {
    Server* s = &server;
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_content("Ollama is running", "text/plain");
    });
    http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, json{{"version", "0.6.0"}, {"cactus", CACTUS_SERVER_VERSION}});
    });
    http.Get("/api/tags", wrap([s](const httplib::Request&, httplib::Response& res) { handle_tags(*s, res); }));
    http.Post("/api/show", wrap([s](const httplib::Request& q, httplib::Response& r) { handle_show(*s, q, r); }));
    http.Post("/api/chat", wrap([s](const httplib::Request& q, httplib::Response& r) { handle_chat(*s, q, r); }));
    http.Post("/api/generate",
              wrap([s](const httplib::Request& q, httplib::Response& r) { handle_generate(*s, q, r); }));
    http.Post("/api/pull", wrap([s](const httplib::Request& q, httplib::Response& r) { handle_pull(*s, q, r); }));
}

}  // namespace cactus::server
