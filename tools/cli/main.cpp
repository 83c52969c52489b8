// The cactus command line: run, chat, pull, list, bench, serve, transcribe, embed.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_common.h"
#include "../server/serve_command.h"

int main(int argc, char** argv) {
    CLI::App app{"cactus: run small language models on your own hardware"};
    app.require_subcommand(1);
    cactus::cli::register_run(app);
    cactus::cli::register_chat(app);
    cactus::cli::register_models(app);
    cactus::cli::register_bench(app);
    cactus::server::register_serve(app);
    cactus::cli::register_transcribe(app);
    cactus::cli::register_embed(app);
    try {
        std::vector<std::string> args = cactus::server::llama_server_spellings(argc, argv);
        std::vector<char*> arg_ptrs;
        for (std::string& a : args) arg_ptrs.push_back(a.data());
        app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
