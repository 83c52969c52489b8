// cactus chat [MODEL]: interactive multi-turn chat. Each turn re-renders the conversation; the
// engine's session recomputes only the tokens after the cached prefix.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli_common.h"
#include "core/error.h"

namespace cactus::cli {

namespace {

struct ChatArgs {
    ModelArgs model;
    SamplingArgs sampling;
    SpecArgs spec;
    std::string system = "You are a helpful assistant.";
    std::vector<std::string> images;  // for the first message
    std::vector<std::string> audio;   // for the first message
    bool show_metrics = false;
};

void print_help() {
    std::fprintf(stderr,
                 "Type a message and press Enter. Commands: /image PATH, /audio WAV (attach to the next message), "
                 "/reset (new conversation), /exit.\n");
}

nlohmann::ordered_json initial_messages(const std::string& system) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    return messages;
}

int chat_command(const ChatArgs& args) {
    const SpecOptions spec = spec_options(args.spec);
    std::unique_ptr<Engine> engine = load_engine(args.model, spec);
    GenerationOptions options = generation_options(args.sampling);
    nlohmann::ordered_json messages = initial_messages(args.system);
    std::vector<std::string> pending = args.images;       // images for the next message
    std::vector<std::string> pending_audio = args.audio;  // clips for the next message
    print_help();
    std::string line;
    for (;;) {
        std::fprintf(stderr, "> ");
        std::fflush(stderr);
        if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
        if (line.empty()) continue;
        if (line == "/reset") {
            messages = initial_messages(args.system);
            engine->reset();
            std::fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (line.rfind("/image ", 0) == 0) {
            pending.push_back(line.substr(7));
            std::fprintf(stderr, "(%zu image(s) for the next message)\n", pending.size());
            continue;
        }
        if (line.rfind("/audio ", 0) == 0) {
            pending_audio.push_back(line.substr(7));
            std::fprintf(stderr, "(%zu audio clip(s) for the next message)\n", pending_audio.size());
            continue;
        }
        nlohmann::ordered_json user = {{"role", "user"}, {"content", line}};
        if (!pending.empty()) user["images"] = pending;
        if (!pending_audio.empty()) user["audio"] = pending_audio;
        messages.push_back(user);
        try {
            std::string prompt = engine->render_chat(messages, nlohmann::ordered_json(), true);
            CompletionResult r =
                complete_messages(*engine, prompt, messages, options, [](const std::string& piece, int32_t) {
                    std::fwrite(piece.data(), 1, piece.size(), stdout);
                    std::fflush(stdout);
                });
            pending.clear();
            pending_audio.clear();
            std::fputc('\n', stdout);
            std::fflush(stdout);
            messages.push_back({{"role", "assistant"}, {"content", r.text}});
            if (args.show_metrics) print_metrics(r.metrics, spec.type != SpecType::off);
        } catch (const Error& e) {
            messages.erase(messages.end() - 1);
            pending.clear();  // a bad image or clip is not retried with the next message
            pending_audio.clear();
            std::fprintf(stderr, "error: %s\n", e.what());
        }
    }
    return 0;
}

}  // namespace

void register_chat(CLI::App& app) {
    auto args = std::make_shared<ChatArgs>();
    CLI::App* chat = app.add_subcommand("chat", "Interactive multi-turn chat on stdin/stdout");
    add_model_args(*chat, args->model);
    add_sampling_args(*chat, args->sampling);
    add_spec_args(*chat, args->spec);
    chat->add_option("--system", args->system, "The system message (\"\" = none: the template's default)")
        ->capture_default_str();
    chat->add_option("--image", args->images, "An image for the first message (repeatable; needs the mmproj)");
    chat->add_option("--audio", args->audio,
                     "A WAV clip for the first message (repeatable; needs an mmproj with an audio tower)");
    chat->add_flag("--metrics", args->show_metrics, "Print speed after each reply");
    chat->callback([args]() { throw CLI::RuntimeError(chat_command(*args)); });
}

}  // namespace cactus::cli
