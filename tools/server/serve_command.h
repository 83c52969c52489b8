#pragma once
// Hooks `cactus serve` into the command line (tools/cli/main.cpp).
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace cactus::server {

void register_serve(CLI::App& app);
// argv with llama-server's multi-letter short flags (-np, -ub) spelled the long way, which CLI11
// cannot declare; unchanged for other commands.
std::vector<std::string> llama_server_spellings(int argc, char** argv);

}  // namespace cactus::server
