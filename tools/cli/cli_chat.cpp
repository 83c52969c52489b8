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
    std::string system = "You are a helpful assistant.";
    bool show_metrics = false;
};

void print_help() {
    std::fprintf(stderr, "Type a message and press Enter. Commands: /reset (new conversation), /exit.\n");
}

nlohmann::ordered_json initial_messages(const std::string& system) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    return messages;
}

int chat_command(const ChatArgs& args) {
    std::unique_ptr<Engine> engine = load_engine(args.model);
    GenerationOptions options = generation_options(args.sampling);
    nlohmann::ordered_json messages = initial_messages(args.system);
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
        messages.push_back({{"role", "user"}, {"content", line}});
        try {
            std::string prompt = engine->render_chat(messages, nlohmann::ordered_json(), true);
            CompletionResult r = engine->complete(prompt, options, [](const std::string& piece, int32_t) {
                std::fwrite(piece.data(), 1, piece.size(), stdout);
                std::fflush(stdout);
            });
            std::fputc('\n', stdout);
            std::fflush(stdout);
            messages.push_back({{"role", "assistant"}, {"content", r.text}});
            if (args.show_metrics) print_metrics(r.metrics);
        } catch (const Error& e) {
            messages.erase(messages.end() - 1);
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
    chat->add_option("--system", args->system, "The system message (\"\" = none: the template's default)")
        ->capture_default_str();
    chat->add_flag("--metrics", args->show_metrics, "Print speed after each reply");
    chat->callback([args]() { throw CLI::RuntimeError(chat_command(*args)); });
}

}  // namespace cactus::cli
