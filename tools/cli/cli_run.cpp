// cactus run [MODEL] -p PROMPT [--image PATH]... [--audio WAV]...: one completion, streamed to stdout; metrics to stderr.
#include <cstdio>
#include <memory>

#include "cli_common.h"

namespace cactus::cli {

namespace {

struct RunArgs {
    ModelArgs model;
    SamplingArgs sampling;
    SpecArgs spec;
    std::string prompt;
    std::vector<std::string> images;
    std::vector<std::string> audio;
    std::string system = "You are a helpful assistant.";
    bool template_system = false;
    bool raw = false;
};

int run_command(const RunArgs& args) {
    const SpecOptions spec = spec_options(args.spec);
    std::unique_ptr<Engine> engine = load_engine(args.model, spec);
    std::string prompt = args.prompt;
    nlohmann::ordered_json user = {{"role", "user"}, {"content", args.prompt}};
    if (!args.images.empty()) user["images"] = args.images;
    if (!args.audio.empty()) user["audio"] = args.audio;
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!args.raw) {
        if (!args.template_system && !args.system.empty())
            messages.push_back({{"role", "system"}, {"content", args.system}});
        messages.push_back(user);
        prompt = engine->render_chat(messages, nlohmann::ordered_json(), /*add_generation_prompt=*/true);
    } else {
        messages.push_back(user);  // raw: the prompt's own markers, else one per image and clip before it
        if (!args.audio.empty() && prompt.find(kAudioMarker) == std::string::npos)
            for (size_t i = 0; i < args.audio.size(); ++i) prompt = kAudioMarker + prompt;
        if (!args.images.empty() && prompt.find(kImageMarker) == std::string::npos)
            for (size_t i = 0; i < args.images.size(); ++i) prompt = kImageMarker + prompt;
    }
    CompletionResult result = complete_messages(*engine, prompt, messages, generation_options(args.sampling),
                                                [](const std::string& piece, int32_t) {
                                                    std::fwrite(piece.data(), 1, piece.size(), stdout);
                                                    std::fflush(stdout);
                                                });
    std::fputc('\n', stdout);
    print_metrics(result.metrics, spec.type != SpecType::off);
    return 0;
}

}  // namespace

void register_run(CLI::App& app) {
    auto args = std::make_shared<RunArgs>();
    CLI::App* run = app.add_subcommand("run", "Generate a reply to one prompt, streamed to stdout");
    add_model_args(*run, args->model);
    add_sampling_args(*run, args->sampling);
    add_spec_args(*run, args->spec);
    run->add_option("-p,--prompt", args->prompt, "The prompt (the user message)")->required();
    run->add_option("--image", args->images, "An image for the prompt (repeatable; needs the model's mmproj)");
    run->add_option("--audio", args->audio,
                    "A WAV clip for the prompt, at most 30 s (repeatable; needs an mmproj with an audio tower)");
    run->add_option("--system", args->system, "The system message")->capture_default_str();
    run->add_flag("--template-system", args->template_system,
                  "Send no system message (the chat template's own default applies, if it has one)");
    run->add_flag("--raw", args->raw, "Complete the prompt text as is (no chat template)");
    run->callback([args]() { throw CLI::RuntimeError(run_command(*args)); });
}

}  // namespace cactus::cli
