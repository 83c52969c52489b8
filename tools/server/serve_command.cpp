// `cactus serve MODEL`: flags (llama-server's spellings and variables too, llama_flags.cpp) →
// ServerConfig → Server.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "chat/builtin_templates.h"
#include "engine/embedding.h"
#include "engine/model_store.h"
#include "kv/kv_options.h"
#include "llama_flags.h"
#include "serve_command.h"
#include "server.h"

namespace cactus::server {

namespace {

// "a, b,c" → {"a", "b", "c"} (blanks around names dropped, empty names skipped).
std::vector<std::string> split_aliases(const std::string& list) {
    std::vector<std::string> names;
    std::string name;
    for (char ch : list + ",") {
        if (ch != ',') {
            name += ch;
            continue;
        }
        const size_t a = name.find_first_not_of(" \t"), b = name.find_last_not_of(" \t");
        if (a != std::string::npos) names.push_back(name.substr(a, b - a + 1));
        name.clear();
    }
    return names;
}

struct ServeArgs {
    ServerConfig config;
    std::string model_flag;
    std::string model_from_environment;  // LLAMA_ARG_MODEL
    bool model_given = false;            // MODEL on the command line
    int parallel = 1;                    // -np; -1 (llama-server's "auto") = 1
    int http_threads = 0;                // --threads-http; -1 = the default
    bool no_metrics = false;
    bool quiet = false;
    bool no_auto_handoff = false;
    bool engine_per_slot = false;
    bool embedding_flag = false;  // llama-server's --embedding(s): the endpoints are always on
    std::string embedding_model;
    bool no_mmproj = false;  // --no-mmproj: no projector unless --mmproj names one
    bool mmproj_auto = false;
    bool jinja = false;  // always: templates are rendered with our Jinja engine
    bool no_jinja = false;
    std::string api_key_file;
    std::string chat_template, chat_template_file;
    std::string cache_type_k = "f16", cache_type_v = "f16";
    std::string samplers, chat_template_kwargs, reasoning = "auto";
    bool cache_prompt = false, no_cache_prompt = false;
    bool slots = false, no_slots = false;
    std::string spec_type, model_draft;  // --spec-type, --model-draft (-md)
    bool spec_default = false;           // llama-server's --spec-default: prompt lookup
};

// --device as ours ("cpu", "cuda", "cuda:N") or llama-server's -dev ("none": the CPU; "CUDA0": cuda:0).
// Several devices (llama.cpp splits layers over them) are refused: the whole model runs on one.
std::string normalize_device(const std::string& device) {
    if (device.empty() || device == "cpu" || device == "cuda" || device.rfind("cuda:", 0) == 0) return device;
    if (device == "none") return "cpu";
    if (device.find(',') != std::string::npos)
        throw UsageError("--device " + device + ": the whole model runs on one device (cpu, cuda or cuda:N)");
    if (device.rfind("CUDA", 0) == 0 && device.size() > 4 &&
        device.find_first_not_of("0123456789", 4) == std::string::npos)
        return "cuda:" + device.substr(4);
    throw UsageError("--device " + device + ": not a device (cpu, cuda, cuda:N; llama-server's none, CUDA0, ...)");
}

// The alias for a model argument: a known short name as given, else the file's stem.
std::string alias_of(const std::string& name, const std::string& path) {
    return find_known_model(name) ? name : std::filesystem::path(path).stem().string();
}

std::string read_text_file(const std::string& path, const char* flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(std::string(flag) + ": cannot read '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string trimmed(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// llama-server's --api-key-file: one key per line; blank lines and lines starting with '#' skipped.
void read_api_key_file(const std::string& path, std::vector<std::string>& keys) {
    std::istringstream lines(read_text_file(path, "--api-key-file"));
    std::string line;
    size_t read = 0;
    while (std::getline(lines, line)) {
        line = trimmed(line);
        if (line.empty() || line[0] == '#') continue;
        keys.push_back(line);
        ++read;
    }
    if (read == 0) throw UsageError("--api-key-file: '" + path + "' holds no key");
}

// --chat-template NAME|JINJA or --chat-template-file FILE → the Jinja source ("" = the GGUF's).
std::string chat_template_source(const ServeArgs& a) {
    if (!a.chat_template.empty() && !a.chat_template_file.empty())
        throw UsageError("give --chat-template or --chat-template-file, not both");
    if (!a.chat_template_file.empty()) {
        std::string source = read_text_file(a.chat_template_file, "--chat-template-file");
        if (trimmed(source).empty()) throw UsageError("--chat-template-file: '" + a.chat_template_file + "' is empty");
        return source;
    }
    if (a.chat_template.empty()) return "";
    if (a.chat_template.find("{%") != std::string::npos || a.chat_template.find("{{") != std::string::npos)
        return a.chat_template;  // Jinja source, as llama-server takes it
    if (const std::string* builtin = builtin_chat_template_named(a.chat_template)) return *builtin;
    throw UsageError("--chat-template '" + a.chat_template + "' is neither Jinja source nor a built-in name (" +
                     builtin_chat_template_names() + ")");
}

// -ctk/-ctv: llama.cpp's cache types that we store: f16, f32, and q8_0 as our int8 rows (a scale
// per 32 values, as q8_0). K and V share one type here.
KvRequest kv_request(const ServeArgs& a) {
    auto ours = [](const std::string& llama, const char* flag) {
        if (llama == "f16") return KvType::F16;
        if (llama == "f32") return KvType::F32;
        if (llama == "q8_0") return KvType::I8;
        throw UsageError(std::string(flag) + " " + llama +
                         " is not supported: the cache types are f16, f32 and q8_0 (int8 rows with a scale per 32)");
    };
    const KvType k = ours(a.cache_type_k, "--cache-type-k");
    const KvType v = ours(a.cache_type_v, "--cache-type-v");
    if (k != v)
        throw UsageError("--cache-type-k " + a.cache_type_k + " and --cache-type-v " + a.cache_type_v +
                         " differ: the K and V caches share one type here");
    KvRequest kv;
    kv.type = static_cast<int>(k);
    return kv;
}

// The sampling flags' and chat flags' values that CLI11's checks cannot judge alone.
void apply_request_defaults(ServeArgs& a) {
    RequestDefaults& d = a.config.defaults;
    if (!a.samplers.empty()) {
        static const char* const known[] = {"penalties", "dry",         "top_n_sigma", "top_k",   "typ_p",
                                            "typical_p", "typical",     "top_p",       "nucleus", "min_p",
                                            "xtc",       "temperature", "temp",        "infill",  "adaptive_p"};
        std::istringstream names(a.samplers);
        std::string name;
        while (std::getline(names, name, ';')) {
            name = trimmed(name);
            if (name.empty()) continue;
            if (std::find(std::begin(known), std::end(known), name) == std::end(known))
                throw UsageError("--samplers: unknown sampler '" + name +
                                 "' (llama-server's names, separated by ';': penalties;top_k;top_p;min_p;temperature)");
            d.samplers.push_back(name);
        }
    }
    if (!a.chat_template_kwargs.empty()) {
        try {
            d.chat_template_kwargs = nlohmann::ordered_json::parse(a.chat_template_kwargs);
        } catch (const std::exception& e) {
            throw UsageError(std::string("--chat-template-kwargs: invalid JSON: ") + e.what());
        }
        if (!d.chat_template_kwargs.is_object())
            throw UsageError("--chat-template-kwargs: must be a JSON object, e.g. '{\"enable_thinking\": false}'");
    }
    if (a.reasoning == "on" || a.reasoning == "off")  // llama-server's -rea: the template's thinking switch
        d.chat_template_kwargs["enable_thinking"] = a.reasoning == "on";
    if (a.no_cache_prompt) d.cache_prompt = false;
}

// --spec-type / --model-draft / --draft-max / --draft-min → config.spec. A draft model alone means
// --spec-type draft, as in llama-server; drafters we lack (llama.cpp's draft-eagle3, draft-mtp, ...)
// are refused by parse_spec_type with the reason.
void apply_spec_settings(ServeArgs& a) {
    SpecOptions& s = a.config.spec;
    if (!a.spec_type.empty()) {
        try {
            s.type = parse_spec_type(a.spec_type);
        } catch (const std::exception& e) {
            throw UsageError(std::string("--spec-type: ") + e.what());
        }
    } else if (a.spec_default) {
        s.type = SpecType::ngram;
    }
    if (!a.model_draft.empty()) {
        if (a.spec_type.empty()) s.type = SpecType::draft;
        if (s.type != SpecType::draft)
            throw UsageError("--model-draft needs --spec-type draft (or no --spec-type): --spec-type " + a.spec_type +
                             " drafts without a model");
        s.draft_model = resolve_model_path(a.model_draft);
    } else if (s.type == SpecType::draft) {
        throw UsageError("--spec-type " + a.spec_type + " needs a draft model: give --model-draft FILE (-md)");
    }
    if (s.draft_threads < 0) s.draft_threads = 0;
    if (s.draft_min > s.draft_max)
        throw UsageError("--draft-min " + std::to_string(s.draft_min) + " is above --draft-max " +
                         std::to_string(s.draft_max));
    if (s.type != SpecType::off && a.engine_per_slot)
        throw UsageError("--engine-per-slot decodes without speculation: leave out --spec-type/--model-draft");
}

void apply_llama_settings(ServeArgs& a) {
    ServerConfig& c = a.config;
    c.parallel = a.parallel < 1 ? 1 : static_cast<size_t>(a.parallel);
    c.http_threads = a.http_threads < 0 ? 0 : static_cast<size_t>(a.http_threads);
    if (c.threads < 0) c.threads = 0;
    if (!a.api_key_file.empty()) read_api_key_file(a.api_key_file, c.api_keys);
    c.api_keys.erase(
        std::remove_if(c.api_keys.begin(), c.api_keys.end(), [](const std::string& k) { return trimmed(k).empty(); }),
        c.api_keys.end());
    if (a.no_slots) c.slots_endpoint = false;
    if (c.step_tokens > 0 && c.step_tokens < c.parallel)
        throw UsageError("--batch-size " + std::to_string(c.step_tokens) + " is below --parallel " +
                         std::to_string(c.parallel) + ": every decoding slot needs a token per step");
    // llama-server takes several comma-separated aliases: the first names the model in replies,
    // every one is listed and accepted by /v1/models/{id}.
    const std::vector<std::string> names = split_aliases(c.alias);
    if (!names.empty()) {
        c.alias = names.front();
        c.extra_aliases.assign(names.begin() + 1, names.end());
    }
    if (a.no_jinja) std::fprintf(stderr, "serve: ignoring --no-jinja: chat templates are always rendered with Jinja\n");
    apply_request_defaults(a);
    apply_spec_settings(a);
}

int serve(ServeArgs& a) {
    block_shutdown_signals();  // before any thread starts (the engines' pools and the listener included)
    apply_llama_settings(a);
    ServerConfig& c = a.config;
    if (!a.model_flag.empty())
        c.model = a.model_flag;
    else if (!a.model_given && !a.model_from_environment.empty())
        c.model = a.model_from_environment;
    c.metrics = !a.no_metrics;
    c.log_requests = !a.quiet;
    c.handoff.auto_handoff = !a.no_auto_handoff;
    handoff_from_environment(c.handoff);
    c.model_path = resolve_model_path(c.model);
    if (!a.no_mmproj || !c.mmproj_path.empty())
        c.mmproj_path = resolve_mmproj_path(c.model, c.mmproj_path);  // as the C API and `cactus run`
    if (c.alias.empty()) c.alias = alias_of(c.model, c.model_path);
    c.encoder_only = TextEmbedder::is_encoder_file(c.model_path);
    if (!a.embedding_model.empty()) {
        c.embedding_model_path = resolve_model_path(a.embedding_model);
        c.embedding_alias = alias_of(a.embedding_model, c.embedding_model_path);
    } else {
        c.embedding_alias = c.alias;
    }
    c.device = normalize_device(c.device);
    EngineOptions options;
    options.n_threads = c.threads;
    options.device = c.device;
    options.lock_weights = c.lock_weights;
    options.n_ctx = c.ctx_size > 0 ? std::max<size_t>(c.ctx_size / c.parallel, 64) : 4096;
    options.kv = kv_request(a);
    options.chat_template = chat_template_source(a);
    if (c.encoder_only) {
        std::fprintf(stderr, "serve: %s is an encoder-only model: embedding endpoints only\n", c.model_path.c_str());
        return Server(c, nullptr).run();
    }
    std::fprintf(stderr, "serve: loading %s (%zu slot%s)\n", c.model_path.c_str(), c.parallel,
                 c.parallel == 1 ? "" : "s");
    const bool per_slot = a.engine_per_slot;
    const std::string path = c.model_path;
    const size_t n = c.parallel;
    BackendLoader load = [per_slot, path, options, n]() -> std::unique_ptr<StepBackend> {
        return per_slot ? make_engine_per_slot(path, options, n) : make_batched(path, options, n);
    };
    Server server(c, std::move(load));
    return server.run();
}

// CLI11's check for a value in [lo, hi], naming llama-server's meaning in the error.
template <typename T>
CLI::Validator in_range(T lo, T hi, const char* meaning) {
    return CLI::Validator(
        [lo, hi, meaning](std::string& text) -> std::string {
            std::istringstream in(text);
            double v = 0;
            if (!(in >> v) || !in.eof()) return "'" + text + "' is not a number";
            if (v < static_cast<double>(lo) || v > static_cast<double>(hi)) {
                std::ostringstream msg;
                msg << text << " is outside [" << lo << ", " << hi << "] (" << meaning << ")";
                return msg.str();
            }
            return "";
        },
        "", "in_range");
}

void add_sampling_flags(CLI::App* cmd, RequestDefaults& d, ServeArgs& a) {
    cmd->add_option("--temp,--temperature", d.temperature, "Temperature when a request gives none (0 = greedy)")
        ->capture_default_str()
        ->check(in_range(0.0, 100.0, "0 = greedy"));
    cmd->add_option("--top-k", d.top_k, "Top-k (0 = off)")
        ->capture_default_str()
        ->check(in_range(0, 1 << 30, "0 = off"));
    cmd->add_option("--top-p", d.top_p, "Top-p (1 = off)")->capture_default_str()->check(in_range(0.0, 1.0, "1 = off"));
    cmd->add_option("--min-p", d.min_p, "Min-p (0 = off)")->capture_default_str()->check(in_range(0.0, 1.0, "0 = off"));
    cmd->add_option("--repeat-penalty", d.repeat_penalty, "Repetition penalty (1 = off)")
        ->capture_default_str()
        ->check(in_range(0.0, 10.0, "1 = off"));
    cmd->add_option("--repeat-last-n", d.repeat_last_n, "Tokens the penalties look back on (0 = off, -1 = context)")
        ->capture_default_str()
        ->check(in_range(-1, 1 << 30, "-1 = the whole context"));
    cmd->add_option("--presence-penalty", d.presence_penalty, "Presence penalty (0 = off)")
        ->capture_default_str()
        ->check(in_range(-2.0, 2.0, "0 = off"));
    cmd->add_option("--frequency-penalty", d.frequency_penalty, "Frequency penalty (0 = off)")
        ->capture_default_str()
        ->check(in_range(-2.0, 2.0, "0 = off"));
    cmd->add_option("-s,--seed", d.seed, "Seed when a request gives none (-1 = random per request)")
        ->capture_default_str()
        ->check(in_range<int64_t>(-1, 0xFFFFFFFFLL, "-1 = random"));
    cmd->add_option("-n,--n-predict,--predict", d.n_predict,
                    "Most tokens a reply gets when the request gives no max_tokens (-1 = the slot's room)")
        ->capture_default_str()
        ->check(in_range<int64_t>(-2, int64_t(1) << 40, "-1 = no limit, -2 = until the context is full"));
    cmd->add_option("--samplers", a.samplers, "Sampler order, llama-server's names separated by ';'");
    cmd->add_option("--reasoning-format", d.reasoning_format,
                    "Thinking in replies: auto or deepseek (reasoning_content), none (left in content)")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
                if (v == "auto" || v == "deepseek" || v == "none") return "";
                if (v == "deepseek-legacy")
                    return "deepseek-legacy is not supported: thinking goes to reasoning_content (deepseek) or "
                           "stays in content (none), not both";
                return "'" + v + "' is not one of auto, deepseek, none";
            },
            "", "reasoning_format"));
    cmd->add_option("--reasoning", a.reasoning, "Thinking on, off or auto (the chat template's enable_thinking)")
        ->capture_default_str()
        ->check(CLI::IsMember({"on", "off", "auto"}));
    cmd->add_option("--chat-template-kwargs", a.chat_template_kwargs,
                    "JSON object handed to every chat template render, e.g. '{\"enable_thinking\":false}'");
    cmd->add_flag("--cache-prompt", a.cache_prompt, "Reuse a slot's cached prefix (the default)");
    cmd->add_flag("--no-cache-prompt", a.no_cache_prompt, "Requests default to cache_prompt: false");
}

// Speculative decoding (docs/SERVER.md, "Speculative decoding"): llama-server's flags.
void add_spec_flags(CLI::App* cmd, ServeArgs& a) {
    SpecOptions& s = a.config.spec;
    cmd->add_option("--spec-type", a.spec_type,
                    "Speculative decoding: off, ngram (prompt lookup) or draft (a draft model and prompt lookup); "
                    "llama.cpp's names too (ngram-simple, draft-simple, ...)");
    cmd->add_option("--model-draft", a.model_draft,
                    "Draft model (-md): a short name or a .gguf path with the served model's vocabulary");
    cmd->add_option("--draft-max", s.draft_max, "Most tokens a slot drafts per step (--spec-draft-n-max)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--draft-min", s.draft_min, "Fewer drafted tokens are not verified (--spec-draft-n-min)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1024));
    cmd->add_option("--threads-draft", s.draft_threads, "Threads of the draft model (-td; 0 or -1 = as -t)")
        ->check(CLI::Range(-1, 256));
    cmd->add_flag("--spec-default", a.spec_default, "llama-server's default speculation: prompt lookup (ngram)");
}

void add_llama_server_flags(CLI::App* cmd, ServeArgs& a) {
    ServerConfig& c = a.config;
    cmd->add_option("--chat-template", a.chat_template,
                    std::string("Chat template replacing the GGUF's: Jinja source, or a built-in name (") +
                        builtin_chat_template_names() + ")");
    cmd->add_option("--chat-template-file", a.chat_template_file, "Chat template (Jinja) replacing the GGUF's");
    cmd->add_flag("--jinja", a.jinja, "Accepted: chat templates are always rendered with Jinja");
    cmd->add_flag("--no-jinja", a.no_jinja, "Accepted with a notice: templates are always rendered with Jinja");
    cmd->add_option("--cache-type-k", a.cache_type_k, "KV cache type (-ctk): f16, f32 or q8_0 (int8)")
        ->capture_default_str();
    cmd->add_option("--cache-type-v", a.cache_type_v, "KV cache type (-ctv): the same as --cache-type-k")
        ->capture_default_str();
    cmd->add_option("-b,--batch-size", c.step_tokens, "Tokens per step over all slots (0 = max(512, prefill chunk))")
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("--api-key-file", a.api_key_file, "File of API keys, one per line ('#' starts a comment)");
    cmd->add_flag("--slots", a.slots, "Serve GET /slots (the default)");
    cmd->add_flag("--no-slots", a.no_slots, "Do not serve GET /slots");
    cmd->add_flag("--props", c.props_writable, "POST /props may change the request defaults");
    cmd->add_flag("--no-mmproj", a.no_mmproj, "No projector (images, audio) unless --mmproj names one");
    cmd->add_flag("--mmproj-auto", a.mmproj_auto, "Find the model's vision projector (the default)");
    add_spec_flags(cmd, a);
}

}  // namespace

std::vector<std::string> llama_server_spellings(CLI::App& app, int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    if (args.size() < 2 || args[1] != "serve") return args;
    const CLI::App* cmd = app.get_subcommand("serve");
    const std::vector<std::string> rest(args.begin() + 2, args.end());
    TranslatedArgs t = translate_llama_server_args(
        rest, [cmd](const std::string& name) { return cmd->get_option_no_throw(name) != nullptr; },
        [](const char* name) { return static_cast<const char*>(std::getenv(name)); });
    for (const std::string& notice : t.notices) std::fprintf(stderr, "serve: %s\n", notice.c_str());
    std::vector<std::string> out(args.begin(), args.begin() + 2);
    out.insert(out.end(), t.args.begin(), t.args.end());
    return out;
}

void register_serve(CLI::App& app) {
    auto args = std::make_shared<ServeArgs>();
    ServerConfig& c = args->config;
    CLI::App* cmd = app.add_subcommand("serve",
                                       "OpenAI-, Ollama- and llama-server-compatible HTTP server "
                                       "(see docs/SERVER.md)");
    CLI::Option* positional =
        cmd->add_option("model", c.model, "Model: a short name (see 'cactus list') or a .gguf path")
            ->capture_default_str();
    cmd->add_option("-m,--model", args->model_flag, "The model (llama-server's spelling)");
    cmd->add_option(kModelFromEnvironment, args->model_from_environment)->group("");  // hidden: LLAMA_ARG_MODEL
    cmd->add_option("--host", c.host, "Address to listen on")->capture_default_str();
    cmd->add_option("--port", c.port, "Port")->capture_default_str()->check(CLI::Range(0, 65535));
    cmd->add_option("--parallel", args->parallel, "Slots: requests generated at once (-np; -1 = 1)")
        ->capture_default_str()
        ->check(CLI::Range(-1, 256));
    cmd->add_option("-c,--ctx-size", c.ctx_size, "Context over all slots (each gets ctx/parallel); 0 = 4096 per slot");
    cmd->add_option("-t,--threads", c.threads, "CPU threads (0 or -1 = all cores)")->check(CLI::Range(-1, 256));
    cmd->add_option("--device", c.device,
                    "cpu, cuda or cuda:N: the model, its slots' batched steps, the draft model and the media "
                    "towers (llama-server's -dev: none, CUDA0, ...; default: $CACTUS_DEVICE, else cpu)");
    cmd->add_flag("--mlock", c.lock_weights, "Lock the weights in memory");
    cmd->add_option("--api-key", c.api_keys,
                    "Require 'Authorization: Bearer KEY' on every endpoint but /health (several: comma-separated)")
        ->delimiter(',')
        ->envname("CACTUS_API_KEY");
    cmd->add_option("-a,--alias", c.alias, "Model name shown to clients");
    cmd->add_option("--mmproj", c.mmproj_path,
                    "Projector .gguf: take images and/or audio in chat requests, as its towers allow (default: "
                    "$CACTUS_MMPROJ, else the one in the model's folder)");
    cmd->add_flag("--metrics", c.metrics, "Serve /metrics (on by default)");
    cmd->add_flag("--no-metrics", args->no_metrics, "Do not serve /metrics");
    cmd->add_option("--cors", c.cors_origins,
                    "Allow browser requests from this origin ('*' = any; repeatable or comma-separated; off by "
                    "default)")
        ->delimiter(',');
    cmd->add_option("--max-queue", c.max_queue, "Requests that may wait for a slot; more get 429")
        ->capture_default_str()
        ->check(CLI::Range(0, 100000));
    cmd->add_option("--timeout", c.request_timeout_s, "Per-request limit in seconds (queue wait included)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 86400.0));
    cmd->add_option("--shutdown-timeout", c.shutdown_timeout_s, "SIGTERM: seconds in-flight requests may finish")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    cmd->add_option("--threads-http", args->http_threads, "HTTP worker threads (0 or -1 = parallel + max-queue + 16)")
        ->check(CLI::Range(-1, 4096));
    cmd->add_option("--prefill-chunk,--ubatch-size", c.prefill_chunk, "Most prompt tokens one slot adds per step (-ub)")
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
    add_llama_server_flags(cmd, *args);
    add_sampling_flags(cmd, c.defaults, *args);
    cmd->footer(
        "llama-server's flags and LLAMA_ARG_* variables are read too: each is used, ignored with a notice, or "
        "refused with the reason (docs/SERVER.md, 'Flags (llama-server)').\n");
    cmd->callback([args, positional] {
        args->model_given = positional->count() > 0;
        const int rc = serve(*args);
        if (rc != 0) throw CLI::RuntimeError(rc);
    });
}

}  // namespace cactus::server
