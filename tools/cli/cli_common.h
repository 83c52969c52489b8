#pragma once
// Options and helpers shared by the CLI's subcommands.
#include <CLI/CLI.hpp>

#include <memory>
#include <stdexcept>
#include <string>

#include "engine/engine.h"
#include "engine/model_store.h"

namespace cactus::cli {

struct ModelArgs {
    std::string model = kDefaultModel;
    int threads = 0;
    size_t ctx_size = 0;
    bool lock_weights = false;
    std::string device;  // empty = $CACTUS_DEVICE, else cpu
    std::string mmproj;  // vision projector GGUF; empty = $CACTUS_MMPROJ or the model folder's
};

struct SamplingArgs {
    size_t max_new_tokens = 256;
    float temperature = 0.0f;
    int top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    float repeat_penalty = 1.0f;
    uint64_t seed = 0;
    std::vector<std::string> stop;
    bool ignore_eos = false;
};

// Speculative decoding (docs/SPECULATIVE.md): the same replies, fewer model steps.
struct SpecArgs {
    std::string draft;     // --draft MODEL: a short name or a .gguf path (implies --spec draft)
    std::string spec;      // --spec draft|ngram|off (llama.cpp's --spec-type names too); empty = off
    size_t draft_max = 0;  // --draft-max N (1..64); 0 = not given: the engine's default
};

// A command line that cannot run as given (exit status 2, as CLI11's own usage errors).
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void add_model_args(CLI::App& app, ModelArgs& args);
void add_spec_args(CLI::App& app, SpecArgs& args);
// The options the flags ask for (the draft model resolved like MODEL); throws UsageError naming
// the flag for a bad value.
SpecOptions spec_options(const SpecArgs& args);
void add_sampling_args(CLI::App& app, SamplingArgs& args);

std::unique_ptr<Engine> load_engine(const ModelArgs& args, const SpecOptions& spec = SpecOptions());
GenerationOptions generation_options(const SamplingArgs& args);
// A completion of a rendered prompt, with the images and audio of `messages` (their "images" and
// "audio" paths) when there are any.
CompletionResult complete_messages(Engine& engine, const std::string& prompt, const nlohmann::ordered_json& messages,
                                   const GenerationOptions& options, const TokenCallback& on_token);
// "ttft 12.3 ms | prefill 20 tok @ 1234.5 tok/s | decode 31 tok @ 88.1 tok/s" to stderr; with
// speculative decoding on, also the drafts accepted and the tokens per model step.
void print_metrics(const CompletionMetrics& m, bool speculative = false);

void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_models(CLI::App& app);      // pull, list
void register_bench(CLI::App& app);       // bench (speed, memory), bench --membw
void register_transcribe(CLI::App& app);  // transcribe FILE.wav (Whisper)
void register_embed(CLI::App& app);       // embed -m MODEL [TEXT ...] (JSON lines)
// bench --transcribe; device: where Whisper runs ("" = $CACTUS_DEVICE, else cpu); without_timestamps:
// text-only decoding (TranscribeOptions::without_timestamps)
int run_transcribe_bench(const std::string& model, const std::string& audio, const std::vector<int>& threads, int reps,
                         bool json, size_t beam_size, bool without_timestamps, const std::string& device);
// bench --mmproj [--image]: image encode ms, image prefill, TTFT (cli_bench_vision.cpp); the model
// and its towers on device ("" = $CACTUS_DEVICE, else cpu)
int run_vision_bench(const std::string& model, const std::string& mmproj, const std::string& image,
                     const std::vector<int>& threads, int reps, bool json, const std::string& device);

// bench --spec / --draft (cli_bench_spec.cpp): greedy decode of a code-editing reply, plain and
// speculative, per thread count: tok/s, speedup, acceptance rate, tokens per model step.
struct SpecBenchInput {
    std::string model;
    SpecOptions spec;
    std::string prompt_file;  // the request's text; empty = the built-in code edit
    size_t n_gen = 128;
    int reps = 5;
    std::string device;
    bool lock_weights = true;
};
nlohmann::ordered_json run_spec_bench(const SpecBenchInput& input, int threads);  // one row
nlohmann::ordered_json spec_bench_settings(const SpecBenchInput& input);
void print_spec_bench(const nlohmann::ordered_json& settings, const std::vector<nlohmann::ordered_json>& rows);

}  // namespace cactus::cli
