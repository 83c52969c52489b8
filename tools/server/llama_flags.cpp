#include "llama_flags.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace cactus::server {

namespace {

enum class Takes { Nothing, Value, MaybeValue, TwoValues };  // MaybeValue: the next word unless it is a flag
enum class Does { Ours, Ignore, Refuse };

// One llama-server option. Ours: `what` is our spelling ("--pos|--neg" for a switch with
// negations); Ignore and Refuse: `what` is the reason shown.
struct LlamaFlag {
    const char* names;      // llama-server's spellings, comma-separated; the first is shown
    const char* negations;  // a switch's "--no-..." spellings, comma-separated, or ""
    const char* env;        // its variable, or nullptr (a negatable switch also reads the LLAMA_ARG_NO_ twin)
    Takes takes;
    Does does;
    const char* what;
};

// Reasons shared by several flags (docs/SERVER.md, "Flags (llama-server)", says the same).
constexpr const char* kPlacement =
    "the whole model runs on one device (--device, else the one CACTUS_DEVICE names): there is nothing to split or "
    "offload";
constexpr const char* kThreads = "one thread pool (-t) serves prompts and generation and places its own threads";
constexpr const char* kNoSampler =
    "not one of our samplers (top-k, top-p, min-p, temperature, penalties): it stays off";
constexpr const char* kBackendSampling =
    "on a GPU the slots draw from candidates computed there, the same tokens as sampling on the host "
    "(CACTUS_DEVICE_SAMPLING=0 turns it off)";
constexpr const char* kPerRequest = "set it per request (the request field of the same name) instead";
constexpr const char* kKvLayout = "each slot has its own KV cache of -c/-np tokens, kept whole while the slot lives";
constexpr const char* kFromGguf = "RoPE, YaRN and attention-window settings come from the GGUF file";
constexpr const char* kNoUi = "no web UI is served (the HTTP API only)";
constexpr const char* kNoTools = "no built-in agent tools or MCP proxy are served";
constexpr const char* kLogs = "the log is one line per request on stderr (--quiet turns it off)";
constexpr const char* kSpecTuning =
    "speculative decoding here is prompt lookup and a draft model (--spec-type, --model-draft, "
    "--spec-draft-n-max/-min, "
    "-td), each slot's draft length adapting to its acceptance: this setting has no counterpart";
constexpr const char* kDraftCache = "the draft model's cache is f16, whatever -ctk/-ctv say for the served model's";
constexpr const char* kDownload =
    "models are not downloaded: give a .gguf path or a short name ('cactus pull NAME' fetches one)";
constexpr const char* kNoLora = "LoRA adapters and control vectors are not supported";
constexpr const char* kRouter = "one model per server: router mode (several models) is not supported";
constexpr const char* kNoOffline = "nothing is downloaded while serving";
constexpr const char* kNotServing = "not a serving flag here";
constexpr const char* kLookup = "no lookup decoding";
constexpr const char* kCliOnly = "an interactive-mode flag; it has no effect on a server";

// llama-server's options (llama.cpp common/arg.cpp, the server's and the common ones), in its order,
// then older spellings scripts still pass.
const LlamaFlag kLlamaFlags[] = {
    {"-h,--help,--usage", "", nullptr, Takes::Nothing, Does::Ours, "--help"},
    {"--version", "", nullptr, Takes::Nothing, Does::Refuse, kNotServing},
    {"-cl,--cache-list", "", nullptr, Takes::Nothing, Does::Refuse, kNotServing},
    {"--completion-bash", "", nullptr, Takes::Nothing, Does::Refuse, kNotServing},
    {"-t,--threads", "", "LLAMA_ARG_THREADS", Takes::Value, Does::Ours, "--threads"},
    {"-tb,--threads-batch", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"-C,--cpu-mask", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"-Cr,--cpu-range", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--cpu-strict", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--prio", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--poll", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"-Cb,--cpu-mask-batch", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"-Crb,--cpu-range-batch", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--cpu-strict-batch", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--prio-batch", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--poll-batch", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"-lcs,--lookup-cache-static", "", nullptr, Takes::Value, Does::Ignore, kLookup},
    {"-lcd,--lookup-cache-dynamic", "", nullptr, Takes::Value, Does::Ignore, kLookup},
    {"-c,--ctx-size", "", "LLAMA_ARG_CTX_SIZE", Takes::Value, Does::Ours, "--ctx-size"},
    {"--kv-unified-per-slot", "", "LLAMA_ARG_KV_UNIFIED_PER_SLOT", Takes::Value, Does::Ignore, kKvLayout},
    {"-n,--predict,--n-predict", "", "LLAMA_ARG_N_PREDICT", Takes::Value, Does::Ours, "--n-predict"},
    {"-b,--batch-size", "", "LLAMA_ARG_BATCH", Takes::Value, Does::Ours, "--batch-size"},
    {"-ub,--ubatch-size", "", "LLAMA_ARG_UBATCH", Takes::Value, Does::Ours, "--ubatch-size"},
    {"--keep", "", nullptr, Takes::Value, Does::Ignore,
     "no context shift: a reply that fills the slot ends with finish_reason length"},
    {"--swa-full", "", "LLAMA_ARG_SWA_FULL", Takes::Nothing, Does::Ignore, kKvLayout},
    {"-ctxcp,--ctx-checkpoints,--swa-checkpoints", "", "LLAMA_ARG_CTX_CHECKPOINTS", Takes::Value, Does::Ignore,
     kKvLayout},
    {"-cms,--checkpoint-min-step", "", "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT", Takes::Value, Does::Ignore, kKvLayout},
    {"-cram,--cache-ram", "", "LLAMA_ARG_CACHE_RAM", Takes::Value, Does::Ignore, kKvLayout},
    {"-kvu,--kv-unified", "-no-kvu,--no-kv-unified", "LLAMA_ARG_KV_UNIFIED", Takes::Nothing, Does::Ignore, kKvLayout},
    {"--cache-idle-slots", "--no-cache-idle-slots", "LLAMA_ARG_CACHE_IDLE_SLOTS", Takes::Nothing, Does::Ignore,
     kKvLayout},
    {"--context-shift", "--no-context-shift", "LLAMA_ARG_CONTEXT_SHIFT", Takes::Nothing, Does::Ignore,
     "no context shift: a reply that fills the slot ends with finish_reason length"},
    {"-fa,--flash-attn", "", "LLAMA_ARG_FLASH_ATTN", Takes::MaybeValue, Does::Ignore,
     "attention always runs as one fused kernel"},
    {"--perf", "--no-perf", "LLAMA_ARG_PERF", Takes::Nothing, Does::Ignore,
     "timings are always in the responses and in /metrics"},
    {"-e,--escape", "--no-escape", nullptr, Takes::Nothing, Does::Ignore, kCliOnly},
    {"-r,--reverse-prompt", "", nullptr, Takes::Value, Does::Ignore, kCliOnly},
    {"-sp,--special", "", nullptr, Takes::Nothing, Does::Ignore,
     "control tokens of a reply stay out of its text (the tool-call and thinking markers are parsed)"},
    {"--warmup", "--no-warmup", nullptr, Takes::Nothing, Does::Ignore,
     "the model is ready when /health says ok; there is no warm-up run"},
    {"--spm-infill", "", nullptr, Takes::Nothing, Does::Ignore, "/infill is not served"},
    {"--samplers", "", nullptr, Takes::Value, Does::Ours, "--samplers"},
    {"-s,--seed", "", nullptr, Takes::Value, Does::Ours, "--seed"},
    {"--sampler-seq,--sampling-seq", "", nullptr, Takes::Value, Does::Ignore,
     "use --samplers (names separated by ';')"},
    {"--ignore-eos", "", nullptr, Takes::Nothing, Does::Ignore, kPerRequest},
    {"--temp,--temperature", "", "LLAMA_ARG_TEMPERATURE", Takes::Value, Does::Ours, "--temp"},
    {"--top-k", "", "LLAMA_ARG_TOP_K", Takes::Value, Does::Ours, "--top-k"},
    {"--top-p", "", "LLAMA_ARG_TOP_P", Takes::Value, Does::Ours, "--top-p"},
    {"--min-p", "", "LLAMA_ARG_MIN_P", Takes::Value, Does::Ours, "--min-p"},
    {"--top-nsigma,--top-n-sigma", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--xtc-probability", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--xtc-threshold", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--typical,--typical-p", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--repeat-last-n", "", nullptr, Takes::Value, Does::Ours, "--repeat-last-n"},
    {"--repeat-penalty", "", "LLAMA_ARG_REPEAT_PENALTY", Takes::Value, Does::Ours, "--repeat-penalty"},
    {"--presence-penalty", "", "LLAMA_ARG_PRESENCE_PENALTY", Takes::Value, Does::Ours, "--presence-penalty"},
    {"--frequency-penalty", "", "LLAMA_ARG_FREQUENCY_PENALTY", Takes::Value, Does::Ours, "--frequency-penalty"},
    {"--dry-multiplier", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--dry-base", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--dry-allowed-length", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--dry-penalty-last-n", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--dry-sequence-breaker", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--adaptive-target", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--adaptive-decay", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--dynatemp-range", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--dynatemp-exp", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--mirostat", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--mirostat-lr", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"--mirostat-ent", "", nullptr, Takes::Value, Does::Ignore, kNoSampler},
    {"-l,--logit-bias", "", nullptr, Takes::Value, Does::Ignore, kPerRequest},
    {"--grammar", "", nullptr, Takes::Value, Does::Ignore, kPerRequest},
    {"--grammar-file", "", nullptr, Takes::Value, Does::Ignore, kPerRequest},
    {"-j,--json-schema", "", nullptr, Takes::Value, Does::Ignore, kPerRequest},
    {"-jf,--json-schema-file", "", nullptr, Takes::Value, Does::Ignore, kPerRequest},
    {"-bs,--backend-sampling", "", "LLAMA_ARG_BACKEND_SAMPLING", Takes::Nothing, Does::Ignore, kBackendSampling},
    {"--pooling", "", "LLAMA_ARG_POOLING", Takes::Value, Does::Ours, "--pooling"},
    {"--rope-scaling", "", "LLAMA_ARG_ROPE_SCALING_TYPE", Takes::Value, Does::Ignore, kFromGguf},
    {"--rope-scale", "", "LLAMA_ARG_ROPE_SCALE", Takes::Value, Does::Ignore, kFromGguf},
    {"--rope-freq-base", "", "LLAMA_ARG_ROPE_FREQ_BASE", Takes::Value, Does::Ignore, kFromGguf},
    {"--rope-freq-scale", "", "LLAMA_ARG_ROPE_FREQ_SCALE", Takes::Value, Does::Ignore, kFromGguf},
    {"--yarn-orig-ctx", "", "LLAMA_ARG_YARN_ORIG_CTX", Takes::Value, Does::Ignore, kFromGguf},
    {"--yarn-ext-factor", "", "LLAMA_ARG_YARN_EXT_FACTOR", Takes::Value, Does::Ignore, kFromGguf},
    {"--yarn-attn-factor", "", "LLAMA_ARG_YARN_ATTN_FACTOR", Takes::Value, Does::Ignore, kFromGguf},
    {"--yarn-beta-slow", "", "LLAMA_ARG_YARN_BETA_SLOW", Takes::Value, Does::Ignore, kFromGguf},
    {"--yarn-beta-fast", "", "LLAMA_ARG_YARN_BETA_FAST", Takes::Value, Does::Ignore, kFromGguf},
    {"-kvo,--kv-offload", "-nkvo,--no-kv-offload", "LLAMA_ARG_KV_OFFLOAD", Takes::Nothing, Does::Ignore, kPlacement},
    {"--repack", "-nr,--no-repack", "LLAMA_ARG_REPACK", Takes::Nothing, Does::Ignore, kPlacement},
    {"--no-host", "", "LLAMA_ARG_NO_HOST", Takes::Nothing, Does::Ignore, kPlacement},
    {"-ctk,--cache-type-k", "", "LLAMA_ARG_CACHE_TYPE_K", Takes::Value, Does::Ours, "--cache-type-k"},
    {"-ctv,--cache-type-v", "", "LLAMA_ARG_CACHE_TYPE_V", Takes::Value, Does::Ours, "--cache-type-v"},
    {"-dt,--defrag-thold", "", "LLAMA_ARG_DEFRAG_THOLD", Takes::Value, Does::Ignore, kKvLayout},
    {"-np,--parallel", "", "LLAMA_ARG_N_PARALLEL", Takes::Value, Does::Ours, "--parallel"},
    {"-cb,--cont-batching", "-nocb,--no-cont-batching", "LLAMA_ARG_CONT_BATCHING", Takes::Nothing, Does::Ignore,
     "continuous batching is always on"},
    {"-mm,--mmproj", "", "LLAMA_ARG_MMPROJ", Takes::Value, Does::Ours, "--mmproj"},
    {"-mmu,--mmproj-url", "", "LLAMA_ARG_MMPROJ_URL", Takes::Value, Does::Refuse, kDownload},
    {"--mmproj-auto", "--no-mmproj,--no-mmproj-auto", "LLAMA_ARG_MMPROJ_AUTO", Takes::Nothing, Does::Ours,
     "--mmproj-auto|--no-mmproj"},
    {"--mmproj-offload", "--no-mmproj-offload", "LLAMA_ARG_MMPROJ_OFFLOAD", Takes::Nothing, Does::Ignore, kPlacement},
    {"-mmdev,--mmproj-device", "", nullptr, Takes::Value, Does::Ignore, kPlacement},
    {"--image-min-tokens", "", "LLAMA_ARG_IMAGE_MIN_TOKENS", Takes::Value, Does::Ignore,
     "an image takes the tokens its vision projector gives it"},
    {"--image-max-tokens", "", "LLAMA_ARG_IMAGE_MAX_TOKENS", Takes::Value, Does::Ignore,
     "an image takes the tokens its vision projector gives it"},
    {"--mtmd-batch-max-tokens", "", "LLAMA_ARG_MTMD_BATCH_MAX_TOKENS", Takes::Value, Does::Ignore,
     "an image takes the tokens its vision projector gives it"},
    {"--video-fps", "", "LLAMA_ARG_VIDEO_FPS", Takes::Value, Does::Ignore, "video input is not supported"},
    {"--video-timestamp-interval", "", "LLAMA_ARG_VIDEO_TIMESTAMP_INTERVAL", Takes::Value, Does::Ignore,
     "video input is not supported"},
    {"--video-ffmpeg-dir", "", "LLAMA_ARG_VIDEO_FFMPEG_DIR", Takes::Value, Does::Ignore,
     "video input is not supported"},
    {"--rpc", "", "LLAMA_ARG_RPC", Takes::Value, Does::Refuse, "no remote (RPC) backends"},
    {"-lm,--load-mode", "", "LLAMA_ARG_LOAD_MODE", Takes::Value, Does::Ignore,
     "the weights are memory-mapped; --mlock locks them"},
    {"-lzm,--lazy-mode", "", "LLAMA_ARG_LAZY_MODE", Takes::Value, Does::Ignore,
     "the weights are memory-mapped; --mlock locks them"},
    {"--numa", "", "LLAMA_ARG_NUMA", Takes::Value, Does::Ignore, kThreads},
    {"-dev,--device", "", "LLAMA_ARG_DEVICE", Takes::Value, Does::Ours, "--device"},
    {"--list-devices", "", nullptr, Takes::Nothing, Does::Refuse, kNotServing},
    {"-ot,--override-tensor", "", "LLAMA_ARG_OVERRIDE_TENSOR", Takes::Value, Does::Ignore, kPlacement},
    {"-cmoe,--cpu-moe", "", "LLAMA_ARG_CPU_MOE", Takes::Nothing, Does::Ignore, kPlacement},
    {"-ncmoe,--n-cpu-moe", "", "LLAMA_ARG_N_CPU_MOE", Takes::Value, Does::Ignore, kPlacement},
    {"-ncffn,--n-cpu-ffn", "", "LLAMA_ARG_N_CPU_FFN", Takes::Value, Does::Ignore, kPlacement},
    {"-ngl,--gpu-layers,--n-gpu-layers", "", "LLAMA_ARG_N_GPU_LAYERS", Takes::Value, Does::Ignore, kPlacement},
    {"-sm,--split-mode", "", "LLAMA_ARG_SPLIT_MODE", Takes::Value, Does::Ignore, kPlacement},
    {"-ts,--tensor-split", "", "LLAMA_ARG_TENSOR_SPLIT", Takes::Value, Does::Ignore, kPlacement},
    {"-mg,--main-gpu", "", "LLAMA_ARG_MAIN_GPU", Takes::Value, Does::Ignore, kPlacement},
    {"-fit,--fit", "", "LLAMA_ARG_FIT", Takes::Value, Does::Ignore, kPlacement},
    {"-fitt,--fit-target", "", "LLAMA_ARG_FIT_TARGET", Takes::Value, Does::Ignore, kPlacement},
    {"-fitc,--fit-ctx", "", "LLAMA_ARG_FIT_CTX", Takes::Value, Does::Ignore, kPlacement},
    {"--check-tensors", "", nullptr, Takes::Nothing, Does::Ignore,
     "tensor shapes and types are checked on load; values are not scanned"},
    {"--override-kv", "", nullptr, Takes::Value, Does::Refuse, "the GGUF metadata is read as it is"},
    {"--op-offload", "--no-op-offload", nullptr, Takes::Nothing, Does::Ignore, kPlacement},
    {"--lora", "", nullptr, Takes::Value, Does::Refuse, kNoLora},
    {"--lora-scaled", "", nullptr, Takes::Value, Does::Refuse, kNoLora},
    {"--control-vector", "", nullptr, Takes::Value, Does::Refuse, kNoLora},
    {"--control-vector-scaled", "", nullptr, Takes::Value, Does::Refuse, kNoLora},
    {"--control-vector-layer-range", "", nullptr, Takes::TwoValues, Does::Refuse, kNoLora},
    {"-a,--alias", "", "LLAMA_ARG_ALIAS", Takes::Value, Does::Ours, "--alias"},
    {"--tags", "", "LLAMA_ARG_TAGS", Takes::Value, Does::Ignore, "no model tags are shown"},
    {"-m,--model", "", "LLAMA_ARG_MODEL", Takes::Value, Does::Ours, "--model"},
    {"-mu,--model-url", "", "LLAMA_ARG_MODEL_URL", Takes::Value, Does::Refuse, kDownload},
    {"-dr,--docker-repo", "", "LLAMA_ARG_DOCKER_REPO", Takes::Value, Does::Refuse, kDownload},
    {"-hf,-hfr,--hf-repo", "", "LLAMA_ARG_HF_REPO", Takes::Value, Does::Refuse, kDownload},
    {"-hff,--hf-file", "", "LLAMA_ARG_HF_FILE", Takes::Value, Does::Refuse, kDownload},
    {"-hft,--hf-token", "", nullptr, Takes::Value, Does::Ignore, kNoOffline},
    {"--embd-normalize", "", nullptr, Takes::Value, Does::Ignore,
     "embeddings are L2-normalized unless the request says otherwise"},
    {"--host", "", "LLAMA_ARG_HOST", Takes::Value, Does::Ours, "--host"},
    {"--port", "", "LLAMA_ARG_PORT", Takes::Value, Does::Ours, "--port"},
    {"--reuse-port", "", "LLAMA_ARG_REUSE_PORT", Takes::Nothing, Does::Ignore, "one server per port"},
    {"--path", "", "LLAMA_ARG_STATIC_PATH", Takes::Value, Does::Ignore, "no static files are served"},
    {"--cors-origins", "", "LLAMA_ARG_CORS_ORIGINS", Takes::Value, Does::Ours, "--cors"},
    {"--cors-methods", "", "LLAMA_ARG_CORS_METHODS", Takes::Value, Does::Ignore,
     "CORS answers allow GET, POST and OPTIONS with the Authorization and Content-Type headers"},
    {"--cors-headers", "", "LLAMA_ARG_CORS_HEADERS", Takes::Value, Does::Ignore,
     "CORS answers allow GET, POST and OPTIONS with the Authorization and Content-Type headers"},
    {"--cors-credentials", "--no-cors-credentials", "LLAMA_ARG_CORS_CREDENTIALS", Takes::Nothing, Does::Ignore,
     "CORS answers allow GET, POST and OPTIONS with the Authorization and Content-Type headers"},
    {"--api-prefix", "", "LLAMA_ARG_API_PREFIX", Takes::Value, Does::Refuse, "the routes are served at the root only"},
    {"--ui-config,--webui-config", "", "LLAMA_ARG_UI_CONFIG", Takes::Value, Does::Ignore, kNoUi},
    {"--ui-config-file,--webui-config-file", "", "LLAMA_ARG_UI_CONFIG_FILE", Takes::Value, Does::Ignore, kNoUi},
    {"--ui-mcp-proxy,--webui-mcp-proxy", "--no-ui-mcp-proxy,--no-webui-mcp-proxy", "LLAMA_ARG_UI_MCP_PROXY",
     Takes::Nothing, Does::Ignore, kNoTools},
    {"--tools", "", "LLAMA_ARG_TOOLS", Takes::Value, Does::Ignore, kNoTools},
    {"--tools-runtime", "", "LLAMA_ARG_TOOLS_RUNTIME", Takes::Value, Does::Ignore, kNoTools},
    {"--mcp-servers-config", "", "LLAMA_ARG_MCP_SERVERS_CONFIG", Takes::Value, Does::Ignore, kNoTools},
    {"--mcp-servers-json", "", "LLAMA_ARG_MCP_SERVERS_JSON", Takes::Value, Does::Ignore, kNoTools},
    {"-ag,--agent", "-no-ag,--no-agent", "LLAMA_ARG_AGENT", Takes::Nothing, Does::Ignore, kNoTools},
    {"--ui,--webui", "--no-ui,--no-webui", "LLAMA_ARG_UI", Takes::Nothing, Does::Ignore, kNoUi},
    {"--embedding,--embeddings", "", "LLAMA_ARG_EMBEDDINGS", Takes::Nothing, Does::Ours, "--embedding"},
    {"--rerank,--reranking", "", "LLAMA_ARG_RERANKING", Takes::Nothing, Does::Ours, "--rerank"},
    {"--api-key", "", "LLAMA_API_KEY", Takes::Value, Does::Ours, "--api-key"},
    {"--api-key-file", "", "LLAMA_ARG_API_KEY_FILE", Takes::Value, Does::Ours, "--api-key-file"},
    {"--ssl-key-file", "", "LLAMA_ARG_SSL_KEY_FILE", Takes::Value, Does::Ours, "--ssl-key-file"},
    {"--ssl-cert-file", "", "LLAMA_ARG_SSL_CERT_FILE", Takes::Value, Does::Ours, "--ssl-cert-file"},
    {"--chat-template-kwargs", "", "LLAMA_ARG_CHAT_TEMPLATE_KWARGS", Takes::Value, Does::Ours,
     "--chat-template-kwargs"},
    {"-to,--timeout", "", "LLAMA_ARG_TIMEOUT", Takes::Value, Does::Ours, "--timeout"},
    {"--sse-ping-interval", "", "LLAMA_ARG_SSE_PING_INTERVAL", Takes::Value, Does::Ignore,
     "streams send no keep-alive comments"},
    {"--threads-http", "", "LLAMA_ARG_THREADS_HTTP", Takes::Value, Does::Ours, "--threads-http"},
    {"--cache-prompt", "--no-cache-prompt", "LLAMA_ARG_CACHE_PROMPT", Takes::Nothing, Does::Ours,
     "--cache-prompt|--no-cache-prompt"},
    {"--cache-reuse", "", "LLAMA_ARG_CACHE_REUSE", Takes::Value, Does::Ignore,
     "a slot reuses the longest cached prefix; no KV shifting of other chunks"},
    {"--metrics", "", "LLAMA_ARG_ENDPOINT_METRICS", Takes::Nothing, Does::Ours, "--metrics"},
    {"--props", "", "LLAMA_ARG_ENDPOINT_PROPS", Takes::Nothing, Does::Ours, "--props"},
    {"--slots", "--no-slots", "LLAMA_ARG_ENDPOINT_SLOTS", Takes::Nothing, Does::Ours, "--slots|--no-slots"},
    {"--slot-save-path", "", nullptr, Takes::Value, Does::Ignore, "slots are not saved to files"},
    {"--media-path", "", nullptr, Takes::Value, Does::Ignore, "local files (file:// URLs) are not read for media"},
    {"--models-dir", "", "LLAMA_ARG_MODELS_DIR", Takes::Value, Does::Refuse, kRouter},
    {"--models-preset", "", "LLAMA_ARG_MODELS_PRESET", Takes::Value, Does::Refuse, kRouter},
    {"--models-max", "", "LLAMA_ARG_MODELS_MAX", Takes::Value, Does::Ignore, kRouter},
    {"--models-autoload", "--no-models-autoload", "LLAMA_ARG_MODELS_AUTOLOAD", Takes::Nothing, Does::Ignore, kRouter},
    {"--jinja", "--no-jinja", "LLAMA_ARG_JINJA", Takes::Nothing, Does::Ours, "--jinja|--no-jinja"},
    {"--reasoning-format", "", "LLAMA_ARG_THINK", Takes::Value, Does::Ours, "--reasoning-format"},
    {"-rea,--reasoning", "", "LLAMA_ARG_REASONING", Takes::Value, Does::Ours, "--reasoning"},
    {"--reasoning-effort", "", "LLAMA_ARG_REASONING_EFFORT", Takes::Value, Does::Ignore,
     "set chat_template_kwargs per request (or --chat-template-kwargs)"},
    {"--reasoning-budget", "", "LLAMA_ARG_THINK_BUDGET", Takes::Value, Does::Ignore,
     "set chat_template_kwargs per request (or --chat-template-kwargs)"},
    {"--reasoning-budget-message", "", "LLAMA_ARG_THINK_BUDGET_MESSAGE", Takes::Value, Does::Ignore,
     "set chat_template_kwargs per request (or --chat-template-kwargs)"},
    {"--reasoning-preserve", "--no-reasoning-preserve", "LLAMA_ARG_REASONING_PRESERVE", Takes::Nothing, Does::Ignore,
     "set chat_template_kwargs per request (or --chat-template-kwargs)"},
    {"--chat-template", "", "LLAMA_ARG_CHAT_TEMPLATE", Takes::Value, Does::Ours, "--chat-template"},
    {"--chat-template-file", "", "LLAMA_ARG_CHAT_TEMPLATE_FILE", Takes::Value, Does::Ours, "--chat-template-file"},
    {"--skip-chat-parsing", "--no-skip-chat-parsing", "LLAMA_ARG_SKIP_CHAT_PARSING", Takes::Nothing, Does::Ignore,
     "replies are parsed by the format the chat template names"},
    {"--prefill-assistant", "--no-prefill-assistant", "LLAMA_ARG_PREFILL_ASSISTANT", Takes::Nothing, Does::Ignore,
     "a trailing assistant message is continued, as by default in llama-server"},
    {"-sps,--slot-prompt-similarity", "", nullptr, Takes::Value, Does::Ignore,
     "a request takes the free slot with the longest shared prefix"},
    {"--lora-init-without-apply", "", nullptr, Takes::Nothing, Does::Ignore, kNoLora},
    {"--sleep-idle-seconds", "", nullptr, Takes::Value, Does::Ignore, "the model stays loaded"},
    {"--log-disable", "", nullptr, Takes::Nothing, Does::Ours, "--quiet"},
    {"--log-file", "", "LLAMA_ARG_LOG_FILE", Takes::Value, Does::Ignore, kLogs},
    {"--log-jsonl", "--no-log-jsonl", "LLAMA_ARG_LOG_JSONL", Takes::Nothing, Does::Ignore, kLogs},
    {"--log-prompts-dir", "", nullptr, Takes::Value, Does::Ignore, kLogs},
    {"--log-colors", "", "LLAMA_ARG_LOG_COLORS", Takes::Value, Does::Ignore, kLogs},
    {"-v,--verbose,--log-verbose", "", nullptr, Takes::Nothing, Does::Ignore, kLogs},
    {"--offline", "", "LLAMA_ARG_OFFLINE", Takes::Nothing, Does::Ignore, kNoOffline},
    {"-lv,--verbosity,--log-verbosity", "", "LLAMA_ARG_LOG_VERBOSITY", Takes::Value, Does::Ignore, kLogs},
    {"--log-prefix", "--no-log-prefix", "LLAMA_ARG_LOG_PREFIX", Takes::Nothing, Does::Ignore, kLogs},
    {"--log-timestamps", "--no-log-timestamps", "LLAMA_ARG_LOG_TIMESTAMPS", Takes::Nothing, Does::Ignore, kLogs},
    {"--spec-draft-hf,-hfd,-hfrd,--hf-repo-draft", "", "LLAMA_ARG_SPEC_DRAFT_HF_REPO", Takes::Value, Does::Refuse,
     kDownload},
    {"--spec-draft-threads,-td,--threads-draft", "", nullptr, Takes::Value, Does::Ours, "--threads-draft"},
    {"--spec-draft-threads-batch,-tbd,--threads-batch-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-cpu-mask,-Cd,--cpu-mask-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-cpu-range,-Crd,--cpu-range-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-cpu-strict,--cpu-strict-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-prio,--prio-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-poll,--poll-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-cpu-mask-batch,-Cbd,--cpu-mask-batch-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-cpu-strict-batch,--cpu-strict-batch-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-prio-batch,--prio-batch-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-poll-batch,--poll-batch-draft", "", nullptr, Takes::Value, Does::Ignore, kThreads},
    {"--spec-draft-type-k,-ctkd,--cache-type-k-draft", "", "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K", Takes::Value,
     Does::Ignore, kDraftCache},
    {"--spec-draft-type-v,-ctvd,--cache-type-v-draft", "", "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V", Takes::Value,
     Does::Ignore, kDraftCache},
    {"--spec-draft-override-tensor,-otd,--override-tensor-draft", "", nullptr, Takes::Value, Does::Ignore, kPlacement},
    {"--spec-draft-cpu-moe,-cmoed,--cpu-moe-draft", "", "LLAMA_ARG_SPEC_DRAFT_CPU_MOE", Takes::Nothing, Does::Ignore,
     kPlacement},
    {"--spec-draft-n-cpu-moe,--spec-draft-ncmoe,-ncmoed,--n-cpu-moe-draft", "", "LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE",
     Takes::Value, Does::Ignore, kPlacement},
    {"--spec-draft-n-max", "", "LLAMA_ARG_SPEC_DRAFT_N_MAX", Takes::Value, Does::Ours, "--draft-max"},
    {"--spec-draft-n-min", "", "LLAMA_ARG_SPEC_DRAFT_N_MIN", Takes::Value, Does::Ours, "--draft-min"},
    {"--spec-synth-len", "", "LLAMA_ARG_SPEC_SYNTH_LEN", Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-synth-rates", "", "LLAMA_ARG_SPEC_SYNTH_RATES", Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-draft-p-split,--draft-p-split", "", "LLAMA_ARG_SPEC_DRAFT_P_SPLIT", Takes::Value, Does::Ignore,
     kSpecTuning},
    {"--spec-draft-p-min,--draft-p-min", "", "LLAMA_ARG_SPEC_DRAFT_P_MIN", Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-draft-backend-sampling", "--no-spec-draft-backend-sampling", "LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING",
     Takes::Nothing, Does::Ignore, kSpecTuning},
    {"--spec-draft-device,-devd,--device-draft", "", nullptr, Takes::Value, Does::Ignore, kPlacement},
    {"--spec-draft-ngl,-ngld,--gpu-layers-draft,--n-gpu-layers-draft", "", "LLAMA_ARG_N_GPU_LAYERS_DRAFT", Takes::Value,
     Does::Ignore, kPlacement},
    {"--spec-draft-model,-md,--model-draft", "", "LLAMA_ARG_SPEC_DRAFT_MODEL", Takes::Value, Does::Ours,
     "--model-draft"},
    {"--spec-type", "", "LLAMA_ARG_SPEC_TYPE", Takes::Value, Does::Ours, "--spec-type"},
    {"--spec-ngram-mod-n-min", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-mod-n-max", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-mod-n-match", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-simple-size-n", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-simple-size-m", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-simple-min-hits", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-map-k-size-n", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-map-k-size-m", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-map-k-min-hits", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-map-k4v-size-n", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-map-k4v-size-m", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-map-k4v-min-hits", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--draft,--draft-n,--draft-max", "", "LLAMA_ARG_DRAFT_MAX", Takes::Value, Does::Ours, "--draft-max"},
    {"--draft-min,--draft-n-min", "", "LLAMA_ARG_DRAFT_MIN", Takes::Value, Does::Ours, "--draft-min"},
    {"--spec-ngram-size-n", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-size-m", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--spec-ngram-min-hits", "", nullptr, Takes::Value, Does::Ignore, kSpecTuning},
    {"--embd-gemma-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--fim-qwen-1.5b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--fim-qwen-3b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--fim-qwen-7b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--fim-qwen-7b-spec", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--fim-qwen-14b-spec", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--fim-qwen-30b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--gpt-oss-20b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--gpt-oss-120b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--vision-gemma-4b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--vision-gemma-12b-default", "", nullptr, Takes::Nothing, Does::Refuse, kDownload},
    {"--spec-default", "", nullptr, Takes::Nothing, Does::Ours, "--spec-default"},

    {"--mlock", "", "LLAMA_ARG_MLOCK", Takes::Nothing, Does::Ours, "--mlock"},
    {"--mmap", "--no-mmap", "LLAMA_ARG_MMAP", Takes::Nothing, Does::Ignore, "the weights are always memory-mapped"},
    {"--log-format", "", nullptr, Takes::Value, Does::Ignore, kLogs},
    {"-gan,--grp-attn-n", "", nullptr, Takes::Value, Does::Ignore, kFromGguf},
    {"-gaw,--grp-attn-w", "", nullptr, Takes::Value, Does::Ignore, kFromGguf},
    {"-dkvc,--dump-kv-cache", "", nullptr, Takes::Nothing, Does::Ignore, kLogs},
};

// Whether `list` (comma-separated) holds `name`.
bool listed(const char* list, const std::string& name) {
    const char* p = list;
    while (*p != '\0') {
        const char* end = std::strchr(p, ',');
        const size_t n = end ? static_cast<size_t>(end - p) : std::strlen(p);
        if (name.size() == n && name.compare(0, n, p, n) == 0) return true;
        if (end == nullptr) break;
        p = end + 1;
    }
    return false;
}

std::string first_name(const char* list) {
    const char* end = std::strchr(list, ',');
    return end ? std::string(list, end) : std::string(list);
}

struct Match {
    const LlamaFlag* flag = nullptr;
    bool negated = false;
};

Match find_flag(const std::string& name) {
    for (const LlamaFlag& f : kLlamaFlags) {
        if (listed(f.names, name)) return {&f, false};
        if (listed(f.negations, name)) return {&f, true};
    }
    return {};
}

// Our spelling for a flag of kind Ours ("--pos|--neg").
std::string our_spelling(const LlamaFlag& f, bool negated) {
    const char* bar = std::strchr(f.what, '|');
    if (bar == nullptr) return f.what;
    return negated ? std::string(bar + 1) : std::string(f.what, bar);
}

// "--flag_name=V" → name "--flag-name", inline value "V" (llama.cpp reads '_' as '-' in long names).
void split_word(const std::string& word, std::string& name, std::string& value, bool& has_value) {
    const size_t eq = word.find('=');
    has_value = eq != std::string::npos && word.size() > 1;
    name = has_value ? word.substr(0, eq) : word;
    value = has_value ? word.substr(eq + 1) : std::string();
    if (name.rfind("--", 0) == 0) std::replace(name.begin() + 2, name.end(), '_', '-');
}

bool is_flag_word(const std::string& w) {
    if (w.size() < 2 || w[0] != '-') return false;
    return !(std::isdigit(static_cast<unsigned char>(w[1])) || w[1] == '.');  // -1, -.5: a value
}

const char* kSeeHelp = "see 'cactus serve --help' and docs/SERVER.md (llama-server compatibility)";

class Translator {
public:
    Translator(const FlagPredicate& is_ours, const EnvReader& getenv) : is_ours_(is_ours), getenv_(getenv) {}

    TranslatedArgs run(const std::vector<std::string>& args) {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string& word = args[i];
            if (word == "--") {
                out_.args.insert(out_.args.end(), args.begin() + std::ptrdiff_t(i), args.end());
                break;
            }
            if (!is_flag_word(word)) {
                out_.args.push_back(word);
                continue;
            }
            i = command_line_flag(args, i);
        }
        for (const LlamaFlag& f : kLlamaFlags) {
            if (f.env == nullptr || was_given(f)) continue;
            if (environment_flag(f)) given_.push_back(&f);
        }
        return std::move(out_);
    }

private:
    // Handles the flag at args[i]; returns the index of its last word.
    size_t command_line_flag(const std::vector<std::string>& args, size_t i) {
        std::string name, inline_value;
        bool has_inline = false;
        split_word(args[i], name, inline_value, has_inline);
        const Match m = find_flag(name);
        if (m.flag == nullptr) {
            if (is_ours_(name)) {
                out_.args.push_back(has_inline ? name + "=" + inline_value : name);
                return i;
            }
            throw UsageError("unknown flag '" + name + "': " + kSeeHelp);
        }
        const LlamaFlag& f = *m.flag;
        given_.push_back(&f);
        std::vector<std::string> values;
        if (has_inline) values.push_back(inline_value);
        const size_t wanted = f.takes == Takes::TwoValues ? 2 : f.takes == Takes::Value ? 1 : 0;
        if (has_inline && f.takes == Takes::Nothing) throw UsageError("flag '" + name + "' takes no value");
        while (values.size() < wanted) {
            if (i + 1 >= args.size()) throw UsageError("flag '" + name + "' needs a value");
            values.push_back(args[++i]);
        }
        if (f.takes == Takes::MaybeValue && values.empty() && i + 1 < args.size() && !is_flag_word(args[i + 1]))
            values.push_back(args[++i]);
        std::string shown = name;
        for (const std::string& v : values) shown += " " + v;
        act(f, m.negated, values, shown);
        return i;
    }

    // Whether the command line (or an earlier variable) gave `f`, or another spelling of the same
    // option of ours (--draft-max and --spec-draft-n-max): the first one given wins.
    bool was_given(const LlamaFlag& f) const {
        for (const LlamaFlag* g : given_)
            if (g == &f || (f.does == Does::Ours && g->does == Does::Ours && std::strcmp(g->what, f.what) == 0))
                return true;
        return false;
    }

    // A variable of a flag the command line left out, read as llama-server reads it; returns
    // whether it was set.
    bool environment_flag(const LlamaFlag& f) {
        std::string env = f.env;
        const char* value = getenv_(f.env);
        bool negated = false;
        if (f.negations[0] != '\0' && env.rfind("LLAMA_ARG_", 0) == 0) {
            const std::string twin = "LLAMA_ARG_NO_" + env.substr(std::strlen("LLAMA_ARG_"));
            if (const char* set = getenv_(twin.c_str())) {  // any value of the twin means "off"
                act(f, true, {}, twin + "=" + set);
                return true;
            }
        }
        if (value == nullptr) return false;
        std::vector<std::string> values;
        if (f.takes == Takes::Nothing) {
            if (is_falsey(value) && f.negations[0] == '\0') return false;  // a plain switch is only ever turned on
            if (!is_truthy(value) && !is_falsey(value))
                throw UsageError(env + "='" + value +
                                 "' is not a boolean (1, true, on, enabled / 0, false, off, disabled)");
            negated = is_falsey(value);
        } else {
            values.push_back(value);
        }
        if (env == "LLAMA_ARG_MODEL") {  // yields to a positional MODEL too, so it keeps a spelling of its own
            out_.args.insert(out_.args.end(), {kModelFromEnvironment, value});
            return true;
        }
        act(f, negated, values, env + "=" + value);
        return true;
    }

    void act(const LlamaFlag& f, bool negated, const std::vector<std::string>& values, const std::string& shown) {
        switch (f.does) {
            case Does::Ours:
                if (!is_ours_(our_spelling(f, negated)))  // the table names an option register_serve lacks
                    throw std::logic_error("llama_flags: " + first_name(f.names) + " maps to undeclared " +
                                           our_spelling(f, negated));
                out_.args.push_back(our_spelling(f, negated));
                out_.args.insert(out_.args.end(), values.begin(), values.end());
                break;
            case Does::Ignore:
                out_.notices.push_back("ignoring " + shown + ": " + f.what);
                break;
            case Does::Refuse:
                throw UsageError(shown + " is not supported: " + f.what);
        }
    }

    const FlagPredicate& is_ours_;
    const EnvReader& getenv_;
    TranslatedArgs out_;
    std::vector<const LlamaFlag*> given_;
};

}  // namespace

bool is_truthy(const std::string& v) { return v == "1" || v == "true" || v == "on" || v == "enabled"; }
bool is_falsey(const std::string& v) { return v == "0" || v == "false" || v == "off" || v == "disabled"; }

TranslatedArgs translate_llama_server_args(const std::vector<std::string>& args, const FlagPredicate& is_ours,
                                           const EnvReader& getenv) {
    return Translator(is_ours, getenv).run(args);
}

}  // namespace cactus::server
