#include "cli_common.h"

#include <cstdio>

#include "core/error.h"
#include "engine/model_store.h"

namespace cactus::cli {

void add_model_args(CLI::App& app, ModelArgs& args) {
    app.add_option("model", args.model, "Model: a short name (see 'cactus list') or a .gguf path")
        ->capture_default_str();
    app.add_option("-t,--threads", args.threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 256));
    app.add_option("-c,--ctx-size", args.ctx_size, "Context length in tokens (0 = model default, at most 8192)");
    app.add_flag("--mlock", args.lock_weights, "Lock the weights in memory (or copy them to RAM)");
    app.add_option("--device", args.device,
                   "cpu, cuda or cuda:N for the model and its mmproj's towers (default: $CACTUS_DEVICE, else cpu)");
    app.add_option(
        "--mmproj", args.mmproj,
        "Projector .gguf for images and/or audio (default: $CACTUS_MMPROJ, else the one in the model's folder)");
}

void add_sampling_args(CLI::App& app, SamplingArgs& args) {
    app.add_option("-n,--max-new-tokens", args.max_new_tokens, "Most tokens to generate")
        ->capture_default_str()
        ->check(CLI::Range(size_t{1}, size_t{1} << 20));
    app.add_option("--temperature,--temp", args.temperature, "Sampling temperature (0 = greedy)")
        ->capture_default_str()
        ->check(CLI::Range(0.0f, 100.0f));
    app.add_option("--top-k", args.top_k, "Keep the k most likely tokens (0 = off)")->check(CLI::NonNegativeNumber);
    app.add_option("--top-p", args.top_p, "Nucleus sampling mass (1 = off)")->check(CLI::Range(0.0001f, 1.0f));
    app.add_option("--min-p", args.min_p, "Drop tokens below this fraction of the best (0 = off)")
        ->check(CLI::Range(0.0f, 0.9999f));
    app.add_option("--repeat-penalty", args.repeat_penalty, "Repetition penalty (1 = off)")
        ->check(CLI::Range(0.01f, 100.0f));
    app.add_option("-s,--seed", args.seed, "Random seed (0 = from the clock)");
    app.add_option("--stop", args.stop, "Stop when the text contains this (repeatable)");
    app.add_flag("--ignore-eos", args.ignore_eos, "Keep generating past end-of-turn tokens");
}

void add_spec_args(CLI::App& app, SpecArgs& args) {
    app.add_option("--draft", args.draft,
                   "Speculative decoding with this draft model (a short name or a .gguf path with the model's "
                   "vocabulary; implies --spec draft)");
    app.add_option("--spec", args.spec,
                   "Speculative decoding: draft (a --draft model and prompt lookup), ngram (prompt lookup only) or "
                   "off; llama.cpp's --spec-type names are read too");
    app.add_option("--draft-max", args.draft_max, "Most tokens drafted per step (default 16)")
        ->check(CLI::Range(size_t{1}, size_t{64}));
}

SpecOptions spec_options(const SpecArgs& args) {
    SpecOptions spec;
    if (!args.spec.empty()) {
        try {
            spec.type = parse_spec_type(args.spec);
        } catch (const Error& e) {
            throw UsageError(std::string("--spec: ") + e.what());
        }
    } else if (!args.draft.empty()) {
        spec.type = SpecType::draft;
    }
    if (spec.type == SpecType::draft && args.draft.empty())
        throw UsageError("--spec draft needs --draft MODEL (a short name or a .gguf path)");
    if (spec.type != SpecType::draft && !args.draft.empty())
        throw UsageError(std::string("--draft drafts only with --spec draft (got --spec ") + args.spec + ")");
    if (args.draft_max != 0) spec.draft_max = args.draft_max;
    if (spec.type == SpecType::draft) spec.draft_model = resolve_model_path(args.draft);
    return spec;
}

std::unique_ptr<Engine> load_engine(const ModelArgs& args, const SpecOptions& spec) {
    EngineOptions options;
    options.n_threads = args.threads;
    options.n_ctx = args.ctx_size;
    options.lock_weights = args.lock_weights;
    options.device = args.device;
    options.mmproj_path = resolve_mmproj_path(args.model, args.mmproj);
    std::unique_ptr<Engine> engine = Engine::load(resolve_model_path(args.model), options);
    if (spec.type != SpecType::off) engine->set_speculative(spec);
    return engine;
}

CompletionResult complete_messages(Engine& engine, const std::string& prompt, const nlohmann::ordered_json& messages,
                                   const GenerationOptions& options, const TokenCallback& on_token) {
    const std::vector<std::string> images = message_images(messages), audio = message_audio(messages);
    if (images.empty() && audio.empty()) return engine.complete(prompt, options, on_token);
    return engine.complete_with_media(prompt, engine.read_images(images), engine.read_audio(audio), options, on_token);
}

GenerationOptions generation_options(const SamplingArgs& args) {
    GenerationOptions g;
    g.max_tokens = args.max_new_tokens;
    g.sampling.temperature = args.temperature;
    g.sampling.top_k = args.top_k;
    g.sampling.top_p = args.top_p;
    g.sampling.min_p = args.min_p;
    g.sampling.repetition_penalty = args.repeat_penalty;
    g.sampling.seed = args.seed;
    g.stop_sequences = args.stop;
    g.ignore_eos = args.ignore_eos;
    return g;
}

void print_metrics(const CompletionMetrics& m, bool speculative) {
    std::fprintf(stderr, "\n[ttft %.1f ms | prefill %zu tok @ %.1f tok/s | decode %zu tok @ %.1f tok/s | total %.1f ms",
                 m.time_to_first_token_ms, m.prefill_tokens, m.prefill_tps, m.decode_tokens, m.decode_tps,
                 m.total_time_ms);
    if (speculative) {
        std::fprintf(
            stderr, " | drafts accepted %zu/%zu (%.1f%%) | %.2f tok/step", m.draft_accepted, m.draft_tokens,
            m.draft_tokens > 0 ? 100.0 * static_cast<double>(m.draft_accepted) / static_cast<double>(m.draft_tokens)
                               : 0.0,
            m.decode_steps > 0 ? static_cast<double>(m.decode_tokens) / static_cast<double>(m.decode_steps) : 0.0);
    }
    std::fprintf(stderr, "]\n");
}

}  // namespace cactus::cli
