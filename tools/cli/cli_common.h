#pragma once
// Options and helpers shared by the CLI's subcommands.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "engine/engine.h"

namespace cactus::cli {

struct ModelArgs {
    std::string model = "smollm2-135m";
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

void add_model_args(CLI::App& app, ModelArgs& args);
void add_sampling_args(CLI::App& app, SamplingArgs& args);

std::unique_ptr<Engine> load_engine(const ModelArgs& args);
GenerationOptions generation_options(const SamplingArgs& args);
// A completion of a rendered prompt, with the images of `messages` (their "images" paths) when
// there are any.
CompletionResult complete_messages(Engine& engine, const std::string& prompt, const nlohmann::ordered_json& messages,
                                   const GenerationOptions& options, const TokenCallback& on_token);
// "ttft 12.3 ms | prefill 20 tok @ 1234.5 tok/s | decode 31 tok @ 88.1 tok/s" to stderr.
void print_metrics(const CompletionMetrics& m);

void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_models(CLI::App& app);      // pull, list
void register_bench(CLI::App& app);       // bench (speed, memory), bench --membw
void register_transcribe(CLI::App& app);  // transcribe FILE.wav (Whisper)
void register_embed(CLI::App& app);       // embed -m MODEL [TEXT ...] (JSON lines)
int run_transcribe_bench(const std::string& model, const std::string& audio, const std::vector<int>& threads, int reps,
                         bool json, size_t beam_size);  // bench --transcribe
// bench --mmproj [--image]: image encode ms, image prefill, TTFT (cli_bench_vision.cpp)
int run_vision_bench(const std::string& model, const std::string& mmproj, const std::string& image,
                     const std::vector<int>& threads, int reps, bool json);

}  // namespace cactus::cli
