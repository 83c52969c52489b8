#pragma once
// `cactus serve`: an OpenAI- and Ollama-compatible HTTP server over the engine (cpp-httplib).
// server.cpp: routes, auth, CORS, logging, shutdown; openai_api.cpp and ollama_api.cpp: the two
// protocols; completion.cpp: turning a job's events into a response (streamed or whole) with the
// confidence check and the cloud hand-off; src/api/handoff.cpp: the client of the hand-off endpoint.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/handoff.h"
#include "engine/model_store.h"
#include "engine/spec_options.h"
#include "metrics.h"
#include "scheduler.h"
#include "step_backend.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace cactus::server {

using json = nlohmann::ordered_json;

// What a request gets for the sampling fields it leaves out: llama-server's sampling flags
// (--temp, --top-k, ...; serve_command.cpp), with llama-server's defaults, so a client moving from
// llama-server gets the same kind of reply for the same request.
struct RequestDefaults {
    double temperature = 0.8;
    int top_k = 40;
    double top_p = 0.95;
    double min_p = 0.05;
    double repeat_penalty = 1.0;
    int repeat_last_n = 64;
    double presence_penalty = 0.0;
    double frequency_penalty = 0.0;
    int64_t seed = -1;                      // -1: a random seed per request
    int64_t n_predict = -1;                 // -1: what a slot's context leaves
    std::vector<std::string> samplers;      // --samplers order; empty = llama-server's default order
    std::string reasoning_format = "auto";  // --reasoning-format: auto, deepseek, none
    nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // --chat-template-kwargs
    bool cache_prompt = true;
};

struct ServerConfig {
    std::string model = kDefaultModel;
    std::string model_path;                  // resolved .gguf
    std::string alias;                       // name shown to clients; default: the model's short name
    std::vector<std::string> extra_aliases;  // more names of the model (--alias a,b,c): listed and accepted
    std::string host = "127.0.0.1";
    int port = 8080;
    size_t parallel = 1;
    size_t ctx_size = 0;  // over all slots, like llama-server; 0 = 4096 per slot
    int threads = 0;
    std::string device;  // "cpu", "cuda", "cuda:N"; empty = $CACTUS_DEVICE, else the CPU (normalize_device)
    bool lock_weights = false;
    std::vector<std::string> api_keys;      // bearer tokens for every endpoint but /health; empty = none
    std::vector<std::string> cors_origins;  // empty = no CORS headers
    bool metrics = true;
    bool log_requests = true;
    size_t max_queue = 64;
    size_t http_threads = 0;                  // 0 = parallel + max_queue + 16
    double request_timeout_s = 600;           // per request, queue wait included
    double shutdown_timeout_s = 10;           // SIGTERM: in-flight requests get this long, then are cancelled
    size_t prefill_chunk = 256;               // -ub: most prompt tokens one slot adds per step
    size_t step_tokens = 0;                   // -b: tokens per step over all slots; 0 = max(512, prefill_chunk)
    std::string ssl_cert_file, ssl_key_file;  // both set: HTTPS
    HandoffConfig handoff;
    std::string mmproj_path;  // projector .gguf (vision and/or audio); empty = text only (media requests are 400s)
    // Embeddings (embed_service.h): the --embedding-model file, else the served model's own.
    std::string embedding_model_path;  // resolved .gguf; empty = model_path, loaded on first use
    std::string embedding_alias;       // model name in embedding responses
    std::string pooling;               // --pooling: "" = the embedding model's own
    bool encoder_only = false;         // the served model is an encoder: embeddings only, no slots
    RequestDefaults defaults;          // llama-server's sampling flags
    bool slots_endpoint = true;        // --slots / --no-slots: serve GET /slots
    bool props_writable = false;       // --props: POST /props may change the defaults
    // Speculative decoding per slot (--spec-type, --model-draft; scheduler.h): draft_model is the
    // resolved .gguf when type is draft.
    SpecOptions spec;
};

class ServerMedia;   // media.h
class EmbedService;  // embed_service.h

// Raised by request parsing: becomes an OpenAI-style error with this status.
struct HttpError {
    HttpError(int status_, std::string message_, std::string param_ = "", std::string type_ = "invalid_request_error",
              std::string code_ = "", int retry_after_s_ = 0)
        : status(status_),
          message(std::move(message_)),
          param(std::move(param_)),
          type(std::move(type_)),
          code(std::move(code_)),
          retry_after_s(retry_after_s_) {}
    int status;
    std::string message;
    std::string param;  // the offending field, or empty
    std::string type;
    std::string code;
    int retry_after_s;            // 429/503: the Retry-After header
    json extra = json::object();  // more members of the error object (llama-server's n_prompt_tokens, n_ctx)
};

// llama-server's error for a prompt longer than a slot's context: type exceed_context_size_error,
// code 400 and the two sizes beside the message.
HttpError exceed_context_error(size_t n_prompt_tokens, size_t n_ctx, const char* param);

// Route installation: wrap() turns a handler that may throw HttpError into an httplib handler
// with errors in its protocol's shape: OpenAI's {"error": {message, type, param, code}}, Ollama's
// {"error": "..."} or Anthropic's {"type": "error", "error": {type, message}}.
enum class ErrorStyle { openai, ollama, anthropic };
using RawHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
using Wrap = std::function<RawHandler(RawHandler)>;

// Loads the model's slots (make_batched or make_engine_per_slot); called once the port is bound.
using BackendLoader = std::function<std::unique_ptr<StepBackend>()>;

class Server {
public:
    // load: empty when config.encoder_only (no generation: the embedding endpoints only).
    Server(ServerConfig config, BackendLoader load);
    ~Server();
    // Binds, then loads the model while every route answers llama-server's 503 "Loading model";
    // then serves until SIGTERM/SIGINT (and drains within the shutdown bound). Returns 0, or 1
    // when the port cannot be bound; a model that fails to load throws once the port is closed.
    // Prints "serve: ALIAS on URL" once ready.
    int run();

    const ServerConfig& config() const { return config_; }
    StepBackend& backend() { return *backend_; }
    Scheduler& scheduler() { return *scheduler_; }
    Metrics& metrics() { return metrics_; }
    HandoffClient* handoff() { return handoff_.get(); }
    ServerMedia* media() { return media_.get(); }  // nullptr without --mmproj
    EmbedService& embeddings() { return *embeddings_; }
    bool draining() const { return draining_.load(); }
    bool ready() const { return ready_.load(); }
    size_t n_slots() const;  // 0 for an encoder-only server
    size_t busy_slots() const;
    Clock::time_point deadline_from(const json& body) const;

private:
    void install_routes();
    void load_model();
    void make_embeddings();
    RawHandler wrap(RawHandler handler, ErrorStyle style);
    bool authorized(const httplib::Request& req) const;
    void shutdown_when_signalled();
    void wait_until_listening() const;

    ServerConfig config_;
    BackendLoader load_;
    std::unique_ptr<StepBackend> backend_;
    Metrics metrics_;
    std::unique_ptr<Scheduler> scheduler_;
    std::unique_ptr<HandoffClient> handoff_;
    std::unique_ptr<ServerMedia> media_;
    std::unique_ptr<EmbedService> embeddings_;
    std::unique_ptr<httplib::Server> http_;
    std::atomic<bool> ready_{false};  // the model is loaded: routes past the loading answer run
    std::atomic<bool> draining_{false};
    std::atomic<bool> listener_done_{false};
    std::atomic<int> in_flight_{0};
};

void install_openai(Server& server, httplib::Server& http, const Wrap& wrap);
// llama-server's own endpoints: /completion, /infill, /tokenize, /detokenize, /apply-template,
// /props, /slots, /models and /v1/models (llama_api.cpp).
void install_llama(Server& server, httplib::Server& http, const Wrap& wrap);
void install_ollama(Server& server, httplib::Server& http, const Wrap& wrap);
// /v1/responses and the token counters /v1/responses/input_tokens, /v1/chat/completions/input_tokens
// (responses_api.cpp).
void install_responses(Server& server, httplib::Server& http, const Wrap& wrap);
// /v1/messages and /v1/messages/count_tokens (anthropic_api.cpp); wrap gives Anthropic's error shape.
void install_anthropic(Server& server, httplib::Server& http, const Wrap& wrap);
// /v1/embeddings, /embeddings, /rerank and aliases, /api/embed, /api/embeddings (embedding_api.cpp).
void install_embeddings(Server& server, httplib::Server& http, const Wrap& openai, const Wrap& ollama);
// An encoder-only server: /v1/models, /api/tags, and chat/completion endpoints that answer 400.
void install_encoder_only(Server& server, httplib::Server& http, const Wrap& openai, const Wrap& ollama);

// Blocks SIGTERM/SIGINT in the calling thread and the threads it starts later (Server::run()
// receives them with sigtimedwait); ignores SIGPIPE. Call before any thread starts.
void block_shutdown_signals();

// Helpers shared by the protocol files.
void send_json(httplib::Response& res, int status, const json& body);
void send_error(httplib::Response& res, const HttpError& e);
void send_anthropic_error(httplib::Response& res, const HttpError& e);
// Whether the client of the request this HTTP thread handles is still connected (a whole answer is
// waited for before its headers go out, so its status can still say an error).
bool current_client_connected();
// Parses a request body (object; nesting depth checked). Throws HttpError.
json parse_body(const httplib::Request& req);

}  // namespace cactus::server
