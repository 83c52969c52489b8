// The cactus command line: run, chat, pull, list.
#include <cstdio>
#include <exception>

#include "cli_common.h"

int main(int argc, char** argv) {
    CLI::App app{"cactus: run small language models on your own hardware"};
    app.require_subcommand(1);
    cactus::cli::register_run(app);
    cactus::cli::register_chat(app);
    cactus::cli::register_models(app);
    cactus::cli::register_bench(app);
    cactus::cli::register_transcribe(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
