// `cactus serve MODEL`: flags (with llama-server's spellings as aliases) → ServerConfig → Server.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "engine/embedding.h"
#include "engine/model_store.h"
#include "serve_command.h"
#include "server.h"

namespace cactus::server {

namespace {

struct ServeArgs {
    ServerConfig config;
    std::string model_flag;
    bool no_metrics = false;
    bool quiet = false;
    bool no_auto_handoff = false;
    bool engine_per_slot = false;
    bool embedding_flag = false;  // llama-server's --embedding(s): the endpoints are always on
    std::string embedding_model;
};

// The alias for a model argument: a known short name as given, else the file's stem.
std::string alias_of(const std::string& name, const std::string& path) {
    return find_known_model(name) ? name : std::filesystem::path(path).stem().string();
}

int serve(ServeArgs& a) {
    ServerConfig& c = a.config;
    if (!a.model_flag.empty()) c.model = a.model_flag;
    if (c.parallel == 0) c.parallel = 1;
    c.metrics = !a.no_metrics;
    c.log_requests = !a.quiet;
    c.handoff.auto_handoff = !a.no_auto_handoff;
    handoff_from_environment(c.handoff);
    c.model_path = resolve_model_path(c.model);
    c.mmproj_path = resolve_mmproj_path(c.model, c.mmproj_path);  // as the C API and `cactus run`
    if (c.alias.empty()) c.alias = alias_of(c.model, c.model_path);
    c.encoder_only = TextEmbedder::is_encoder_file(c.model_path);
    if (!a.embedding_model.empty()) {
        c.embedding_model_path = resolve_model_path(a.embedding_model);
        c.embedding_alias = alias_of(a.embedding_model, c.embedding_model_path);
    } else {
        c.embedding_alias = c.alias;
    }
    block_shutdown_signals();  // before any thread starts (the engines' pools included)
    EngineOptions options;
    options.n_threads = c.threads;
    options.lock_weights = c.lock_weights;
    options.n_ctx = c.ctx_size > 0 ? std::max<size_t>(c.ctx_size / c.parallel, 64) : 4096;
    if (c.encoder_only) {
        std::fprintf(stderr, "serve: %s is an encoder-only model: embedding endpoints only\n", c.model_path.c_str());
        return Server(c, nullptr).run();
    }
    std::fprintf(stderr, "serve: loading %s (%zu slot%s)\n", c.model_path.c_str(), c.parallel,
                 c.parallel == 1 ? "" : "s");
    std::unique_ptr<StepBackend> backend = a.engine_per_slot ? make_engine_per_slot(c.model_path, options, c.parallel)
                                                             : make_batched(c.model_path, options, c.parallel);
    Server server(c, std::move(backend));
    return server.run();
}

}  // namespace

std::vector<std::string> llama_server_spellings(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    if (args.size() < 2 || args[1] != "serve") return args;
    for (std::string& a : args) {
        if (a == "-np")
            a = "--parallel";
        else if (a == "-ub")
            a = "--prefill-chunk";
    }
    return args;
}

void register_serve(CLI::App& app) {
    auto args = std::make_shared<ServeArgs>();
    ServerConfig& c = args->config;
    CLI::App* cmd = app.add_subcommand("serve", "OpenAI- and Ollama-compatible HTTP server (see docs/SERVER.md)");
    cmd->add_option("model", c.model, "Model: a short name (see 'cactus list') or a .gguf path")->capture_default_str();
    cmd->add_option("-m,--model", args->model_flag, "The model (llama-server's spelling)");
    cmd->add_option("--host", c.host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", c.port, "Port")->capture_default_str()->check(CLI::Range(0, 65535));
    cmd->add_option("--parallel", c.parallel, "Slots: requests generated at once (-np)")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    cmd->add_option("-c,--ctx-size", c.ctx_size, "Context over all slots (each gets ctx/parallel); 0 = 4096 per slot");
    cmd->add_option("-t,--threads", c.threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 256));
    cmd->add_flag("--mlock", c.lock_weights, "Lock the weights in memory");
    cmd->add_option("--api-key", c.api_key, "Require 'Authorization: Bearer KEY' on every endpoint but /health")
        ->envname("CACTUS_API_KEY");
    cmd->add_option("--alias", c.alias, "Model name shown to clients");
    cmd->add_option("--mmproj", c.mmproj_path,
                    "Vision projector .gguf: take images in chat requests (default: $CACTUS_MMPROJ, else the one in "
                    "the model's folder)");
    cmd->add_flag("--metrics", c.metrics, "Serve /metrics (on by default)");
    cmd->add_flag("--no-metrics", args->no_metrics, "Do not serve /metrics");
    cmd->add_option("--cors", c.cors_origins,
                    "Allow browser requests from this origin ('*' = any; repeatable; off by default)");
    cmd->add_option("--max-queue", c.max_queue, "Requests that may wait for a slot; more get 429")
        ->capture_default_str()
        ->check(CLI::Range(0, 100000));
    cmd->add_option("--timeout", c.request_timeout_s, "Per-request limit in seconds (queue wait included)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 86400.0));
    cmd->add_option("--shutdown-timeout", c.shutdown_timeout_s, "SIGTERM: seconds in-flight requests may finish")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    cmd->add_option("--threads-http", c.http_threads, "HTTP worker threads (0 = parallel + max-queue + 16)");
    cmd->add_option("--prefill-chunk", c.prefill_chunk, "Most prompt tokens one slot adds per step (-ub)")
        ->capture_default_str()
        ->check(CLI::Range(1, 65536));
    cmd->add_option("--ssl-cert-file", c.ssl_cert_file, "PEM certificate: serve HTTPS");
    cmd->add_option("--ssl-key-file", c.ssl_key_file, "PEM private key for --ssl-cert-file");
    cmd->add_flag("--quiet", args->quiet, "No request log on stderr");
    cmd->add_option("--handoff-url", c.handoff.url, "OpenAI-compatible endpoint for the hand-off (CACTUS_HANDOFF_URL)");
    cmd->add_option("--handoff-key", c.handoff.api_key, "Its API key (CACTUS_HANDOFF_KEY)");
    cmd->add_option("--handoff-model", c.handoff.model, "Model name sent to it (CACTUS_HANDOFF_MODEL)");
    cmd->add_option("--handoff-ca", c.handoff.ca_file, "Extra CA certificates (PEM) to trust (CACTUS_HANDOFF_CA)");
    cmd->add_option("--confidence-threshold", c.handoff.confidence_threshold,
                    "Hand off when the first tokens' mean probability is below this")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--handoff-tokens", c.handoff.confidence_tokens, "How many first tokens the check looks at")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--handoff-timeout-ms", c.handoff.timeout_ms, "Hand-off connect/read limit")
        ->capture_default_str()
        ->check(CLI::Range(1, 600000));
    cmd->add_flag("--engine-per-slot", args->engine_per_slot,
                  "One engine per slot, run one after another (for comparisons; default: one batched model)");
    cmd->add_option("--embedding-model", args->embedding_model,
                    "Model for the embedding and rerank endpoints: a short name (all-minilm-l6-v2) or a .gguf path "
                    "(default: the served model, loaded a second time on the first embedding request)");
    cmd->add_flag("--embedding,--embeddings,--rerank,--reranking", args->embedding_flag,
                  "Accepted for llama-server's sake: the embedding and rerank endpoints are always served");
    cmd->add_option("--pooling", c.pooling, "Pooling of the embedding model's outputs (default: the model's own)")
        ->check(CLI::IsMember({"none", "mean", "cls", "last"}));
    cmd->add_flag("--no-auto-handoff", args->no_auto_handoff,
                  "Hand off only when a request asks (cloud_handoff: true)");
    cmd->callback([args] {
        const int rc = serve(*args);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace cactus::server
