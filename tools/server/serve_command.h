#pragma once
// Hooks `cactus serve` into the command line (tools/cli/main.cpp).
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cactus::server {

void register_serve(CLI::App& app);
// argv of `cactus serve` with llama-server's flags and LLAMA_ARG_* variables read
// (llama_flags.h): its spellings rewritten to ours, ignored ones dropped with a notice on stderr;
// unchanged for other commands. Throws UsageError (exit status 2) for an unknown or refused flag.
std::vector<std::string> llama_server_spellings(CLI::App& app, int argc, char** argv);

}  // namespace cactus::server
