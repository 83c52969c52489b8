// The cactus command line: run, chat, pull, list, bench, serve, transcribe, embed.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli_common.h"
#include "../server/llama_flags.h"
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
    const bool serving = argc > 1 && std::string(argv[1]) == "serve";
    try {
        std::vector<std::string> args = cactus::server::llama_server_spellings(app, argc, argv);
        std::vector<char*> arg_ptrs;
        for (std::string& a : args) arg_ptrs.push_back(a.data());
        app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
    } catch (const CLI::RuntimeError& e) {
        return app.exit(e);
    } catch (const CLI::ExtrasError& e) {
        if (!serving) return app.exit(e);
        const std::string what = e.what();  // "The following argument(s) were not expected: A B"
        std::fprintf(stderr, "cactus serve: unexpected %s: see 'cactus serve --help' (one MODEL at most)\n",
                     what.substr(what.find(':') == std::string::npos ? 0 : what.find(':') + 2).c_str());
        return 2;
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return serving && rc != 0 ? 2 : rc;  // a command line llama-server's users can test: 2, as usage errors
    } catch (const cactus::server::UsageError& e) {
        std::fprintf(stderr, "cactus serve: %s\n", e.what());
        return 2;
    } catch (const cactus::cli::UsageError& e) {
        std::fprintf(stderr, "cactus %s: %s\n", argc > 1 ? argv[1] : "", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
