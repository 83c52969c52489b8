#include "server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <httplib.h>

#include "api/request.h"
#include "core/error.h"
#include "core/format.h"
#include "embed_service.h"
#include "media.h"

namespace cactus::server {

namespace {

thread_local Clock::time_point t_request_start;

// The connection of the request this HTTP thread handles. cpp-httplib (0.11) gives a handler no
// socket, so the socket is found once by its two addresses (fd -2: not looked up yet, -1: none).
struct Peer {
    std::string remote_addr;
    int remote_port = -1;
    int local_port = -1;
    int fd = -2;
};
thread_local Peer t_peer;

int port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    return -1;
}

std::string address_of(const sockaddr_storage& a) {
    char text[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof(text));
    else if (a.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof(text));
    return text;
}

int find_peer_socket(const Peer& peer) {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return -1;
    int found = -1;
    while (dirent* e = readdir(dir)) {
        const int fd = std::atoi(e->d_name);
        if (fd <= 2) continue;
        sockaddr_storage remote{}, local{};
        socklen_t rlen = sizeof(remote), llen = sizeof(local);
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rlen) != 0) continue;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0) continue;
        if (port_of(remote) == peer.remote_port && port_of(local) == peer.local_port &&
            address_of(remote) == peer.remote_addr) {
            found = fd;
            break;
        }
    }
    closedir(dir);
    return found;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool is_ollama_path(const std::string& path) { return path == "/" || path.rfind("/api/", 0) == 0; }
bool is_anthropic_path(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

// Anthropic's error types, by status (docs.anthropic.com/en/api/errors).
const char* anthropic_error_type(int status) {
    switch (status) {
        case 400:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 403:
            return "permission_error";
        case 404:
            return "not_found_error";
        case 413:
            return "request_too_large";
        case 429:
            return "rate_limit_error";
        case 503:
        case 529:
            return "overloaded_error";
        default:
            return "api_error";
    }
}

}  // namespace

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const HttpError& e) {
    json err = {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code.empty() ? json(e.status) : json(e.code)}};
    // llama-server's errors carry the HTTP status as their code; an OpenAI-style code string
    // (invalid_api_key, model_not_found, ...) stays where one names the fault more closely.
    if (e.type == "exceed_context_size_error") err["code"] = e.status;
    for (const auto& [key, value] : e.extra.items()) err[key] = value;
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    send_json(res, e.status, json{{"error", err}});
}

void send_anthropic_error(httplib::Response& res, const HttpError& e) {
    if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
    send_json(res, e.status,
              json{{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}});
}

HttpError exceed_context_error(size_t n_prompt_tokens, size_t n_ctx, const char* param) {
    HttpError e{400,
                cactus::format("the request (%zu tokens) exceeds the available context size (%zu tokens); shorten "
                               "it or start the server with a larger --ctx-size",
                               n_prompt_tokens, n_ctx),
                param, "exceed_context_size_error"};
    e.extra = json{{"n_prompt_tokens", n_prompt_tokens}, {"n_ctx", n_ctx}};
    return e;
}

bool current_client_connected() {
    if (t_peer.fd == -2) t_peer.fd = find_peer_socket(t_peer);
    if (t_peer.fd < 0) return true;  // not found: the deadline bounds the wait
    pollfd p{t_peer.fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
    if (poll(&p, 1, 0) <= 0) return true;
    if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return false;
    char byte;  // readable: a pipelined request, or the end of the stream
    return recv(t_peer.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

json parse_body(const httplib::Request& req) {
    json body;
    try {
        body = api::parse_json_text(req.body.c_str(), "the request body");
    } catch (const std::exception& e) {
        throw HttpError{400, std::string("invalid JSON: ") + e.what(), ""};
    }
    if (!body.is_object()) throw HttpError{400, "the request body must be a JSON object", ""};
    return body;
}

Server::Server(ServerConfig config, BackendLoader load) : config_(std::move(config)), load_(std::move(load)) {
    if (!config_.encoder_only && !load_) fail("Server: a generating server needs a model loader");
    if (!config_.handoff.url.empty()) handoff_ = std::make_unique<HandoffClient>(config_.handoff);
    if (!config_.ssl_cert_file.empty() || !config_.ssl_key_file.empty()) {
        if (config_.ssl_cert_file.empty() || config_.ssl_key_file.empty())
            fail("serve: --ssl-cert-file and --ssl-key-file go together");
        http_ = std::make_unique<httplib::SSLServer>(config_.ssl_cert_file.c_str(), config_.ssl_key_file.c_str());
    } else {
        http_ = std::make_unique<httplib::Server>();
    }
    if (!http_->is_valid()) fail("serve: cannot set up the HTTP server (certificate or key unreadable?)");
    install_routes();
}

// Everything that reads the model: the slots, the mmproj's towers, the embedding service.
void Server::load_model() {
    if (load_) {
        backend_ = load_();
        std::unique_ptr<SlotDrafter> drafter;
        if (config_.spec.type != SpecType::off) {
            std::unique_ptr<StepBackend> draft_model;
            if (config_.spec.type == SpecType::draft)
                draft_model = load_draft_model(config_.spec, *backend_, config_.threads);
            drafter = std::make_unique<SlotDrafter>(config_.spec, std::move(draft_model));
        }
        SchedulerOptions so;
        so.max_queue = config_.max_queue;
        so.prefill_chunk = config_.prefill_chunk;
        so.step_tokens = config_.step_tokens > 0 ? config_.step_tokens : std::max<size_t>(512, config_.prefill_chunk);
        scheduler_ = std::make_unique<Scheduler>(*backend_, so, metrics_, std::move(drafter));
    }
    if (!config_.mmproj_path.empty() && backend_)
        media_ = std::make_unique<ServerMedia>(config_.mmproj_path, backend_->engine(), config_.threads);
    make_embeddings();
}

Server::~Server() {
    if (scheduler_) scheduler_->stop();
}

void Server::make_embeddings() {
    EngineOptions options;
    options.n_threads = config_.threads;
    options.lock_weights = config_.lock_weights;
    options.n_ctx = backend_ ? backend_->n_ctx() : 0;
    const std::optional<Pooling> pooling =
        config_.pooling.empty() ? std::nullopt : std::optional<Pooling>(parse_pooling(config_.pooling));
    const bool own_file = !config_.embedding_model_path.empty();
    embeddings_ =
        std::make_unique<EmbedService>(own_file ? config_.embedding_model_path : config_.model_path, options, pooling);
    // A file of its own (or an encoder served alone) loads now, so a bad one stops the start-up;
    // the served decoder's second copy waits for the first embedding request.
    if (own_file || !backend_) embeddings_->load();
}

size_t Server::n_slots() const { return scheduler_ ? scheduler_->n_slots() : 0; }
size_t Server::busy_slots() const { return scheduler_ ? scheduler_->busy() : 0; }

Clock::time_point Server::deadline_from(const json& body) const {
    auto it = body.find("timeout");
    double seconds = config_.request_timeout_s;
    if (it != body.end() && !it->is_null()) {
        if (!it->is_number() || it->get<double>() <= 0.0 || it->get<double>() > config_.request_timeout_s)
            throw HttpError{
                400, cactus::format("'timeout' must be a number of seconds in (0, %g]", config_.request_timeout_s),
                "timeout"};
        seconds = it->get<double>();
    }
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool Server::authorized(const httplib::Request& req) const {
    if (config_.api_keys.empty() || req.path == "/health") return true;
    const std::string bearer = req.get_header_value("Authorization");
    const std::string x_api_key = req.get_header_value("x-api-key");
    for (const std::string& key : config_.api_keys)
        if (bearer == "Bearer " + key || x_api_key == key) return true;
    return false;
}

RawHandler Server::wrap(RawHandler handler, ErrorStyle style) {
    return [handler, style](const httplib::Request& req, httplib::Response& res) {
        auto fail_with = [&](const HttpError& e) {
            if (style == ErrorStyle::ollama)
                send_json(res, e.status, json{{"error", e.message}});
            else if (style == ErrorStyle::anthropic)
                send_anthropic_error(res, e);
            else
                send_error(res, e);
        };
        try {
            handler(req, res);
        } catch (const HttpError& e) {
            fail_with(e);
        } catch (const std::exception& e) {
            fail_with(HttpError{500, e.what(), "", "server_error"});
        }
    };
}

void Server::install_routes() {
    httplib::Server& http = *http_;
    const size_t threads = config_.http_threads > 0 ? config_.http_threads : config_.parallel + config_.max_queue + 16;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_keep_alive_timeout(5);
    http.set_read_timeout(60);
    http.set_write_timeout(60);
    http.set_payload_max_length(32u << 20);

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        t_request_start = Clock::now();
        t_peer = Peer{req.remote_addr, req.remote_port, req.local_port, -2};
        in_flight_.fetch_add(1);
        if (!config_.cors_origins.empty()) {
            const std::string origin = req.get_header_value("Origin");
            for (const std::string& allowed : config_.cors_origins) {
                if (allowed == "*" || allowed == origin) {
                    res.set_header("Access-Control-Allow-Origin", allowed == "*" ? "*" : origin);
                    res.set_header("Access-Control-Allow-Headers",
                                   "Authorization, Content-Type, x-api-key, anthropic-version");
                    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
                    break;
                }
            }
            if (req.method == "OPTIONS") {
                res.status = 204;
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        if (!ready_.load()) {  // llama-server's answer while loading, before the key check as there
            send_json(res, 503,
                      json{{"error", {{"message", "Loading model"}, {"type", "unavailable_error"}, {"code", 503}}}});
            return httplib::Server::HandlerResponse::Handled;
        }
        if (!authorized(req)) {
            res.set_header("WWW-Authenticate", "Bearer");
            if (is_ollama_path(req.path))
                send_json(res, 401, json{{"error", "invalid or missing API key"}});
            else if (is_anthropic_path(req.path))
                send_anthropic_error(res, HttpError{401, "invalid or missing API key (x-api-key: ...)"});
            else
                send_error(res, HttpError{401, "invalid or missing API key (Authorization: Bearer ...)", "",
                                          "authentication_error", "invalid_api_key"});
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        const double seconds = std::chrono::duration<double>(Clock::now() - t_request_start).count();
        in_flight_.fetch_sub(1);
        std::string endpoint = req.matches.empty() ? std::string("other") : req.path;
        if (endpoint.rfind("/v1/models/", 0) == 0) endpoint = "/v1/models/{id}";
        if (endpoint.rfind("/slots/", 0) == 0) endpoint = "/slots/{id}";
        metrics_.observe_request(endpoint, res.status, seconds);
        if (config_.log_requests) {
            std::fprintf(stderr, "%s %s %s %d %.1f ms\n", req.remote_addr.c_str(), req.method.c_str(), req.path.c_str(),
                         res.status, seconds * 1000.0);
        }
    });
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        if (res.status == 404) {
            const HttpError e{404, "no route for " + req.method + " " + req.path, "", "not_found_error"};
            if (is_anthropic_path(req.path))
                send_anthropic_error(res, e);
            else
                send_error(res, e);
        }
    });

    Wrap openai = [this](RawHandler h) { return wrap(std::move(h), ErrorStyle::openai); };
    Wrap ollama = [this](RawHandler h) { return wrap(std::move(h), ErrorStyle::ollama); };
    Wrap anthropic = [this](RawHandler h) { return wrap(std::move(h), ErrorStyle::anthropic); };
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (draining())
            send_json(res, 503, json{{"status", "shutting down"}});
        else
            send_json(
                res, 200,
                json{{"status", "ok"}, {"slots_idle", n_slots() - busy_slots()}, {"slots_processing", busy_slots()}});
    });
    if (config_.metrics) {
        http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
            res.set_content(metrics_.render(n_slots()), "text/plain; version=0.0.4");
        });
    }
    if (!config_.encoder_only) {
        install_openai(*this, http, openai);
        install_llama(*this, http, openai);
        install_ollama(*this, http, ollama);
        install_responses(*this, http, openai);
        install_anthropic(*this, http, anthropic);
    } else {
        install_encoder_only(*this, http, openai, ollama);
    }
    install_embeddings(*this, http, openai, ollama);
}

void Server::shutdown_when_signalled() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    const timespec poll = {0, 200 * 1000 * 1000};
    while (http_->is_running() || !draining_.load()) {
        const int sig = sigtimedwait(&set, nullptr, &poll);
        if (sig == SIGTERM || sig == SIGINT) break;
        if (draining_.load()) return;  // stop() from elsewhere
    }
    draining_.store(true);
    std::fprintf(stderr, "serve: shutting down (in-flight requests get %.0f s)\n", config_.shutdown_timeout_s);
    const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                          std::chrono::duration<double>(config_.shutdown_timeout_s));
    auto idle = [&] {
        return busy_slots() == 0 && (!scheduler_ || scheduler_->queued() == 0) && in_flight_.load() <= 0;
    };
    while (!idle() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!idle() && scheduler_) {
        std::fprintf(stderr, "serve: cancelling %zu running and %zu queued requests\n", scheduler_->busy(),
                     scheduler_->queued());
        scheduler_->cancel_all();
        // Cancelled streams still end properly (finish_reason, [DONE]); give them a moment.
        const Clock::time_point last = Clock::now() + std::chrono::seconds(2);
        while (in_flight_.load() > 0 && Clock::now() < last) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    wait_until_listening();
    http_->stop();
}

// httplib's stop() does nothing until the listener thread runs: a stop right after the start (a
// model that fails at once, an early SIGTERM) waits for it first (bounded).
void Server::wait_until_listening() const {
    const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
    while (!http_->is_running() && !listener_done_.load() && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int Server::run() {
    if (!http_->bind_to_port(config_.host.c_str(), config_.port)) {
        std::fprintf(stderr, "serve: cannot listen on %s:%d\n", config_.host.c_str(), config_.port);
        return 1;
    }
    // Listening starts before the model loads, so /health answers 503 "Loading model" meanwhile.
    std::thread listener([this] {
        http_->listen_after_bind();
        listener_done_.store(true);
        draining_.store(true);  // ends shutdown_when_signalled() when the listener stops by itself
    });
    try {
        load_model();
    } catch (...) {
        wait_until_listening();
        http_->stop();
        listener.join();
        throw;
    }
    if (scheduler_) scheduler_->start();
    ready_.store(true);
    std::fprintf(stderr, "serve: %s on %s://%s:%d (%zu slot%s, %zu tokens each)\n", config_.alias.c_str(),
                 config_.ssl_cert_file.empty() ? "http" : "https", config_.host.c_str(), config_.port, n_slots(),
                 n_slots() == 1 ? "" : "s", backend_ ? backend_->n_ctx() : 0);
    std::fflush(stderr);
    shutdown_when_signalled();  // returns once the listener is stopped
    listener.join();
    if (scheduler_) scheduler_->stop();
    std::fprintf(stderr, "serve: stopped\n");
    return 0;
}

void block_shutdown_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

}  // namespace cactus::server
