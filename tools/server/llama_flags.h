#pragma once
// llama-server's command line read by `cactus serve`, so a script that starts llama-server starts
// us with the same flags and environment. Each llama-server flag (common/arg.cpp of llama.cpp)
// either names one of our options (rewritten to our spelling for CLI11), is accepted and ignored
// with a one-line notice saying why, or is refused with the reason. A flag's LLAMA_ARG_* variable
// counts where the command line does not give the flag, as in llama-server.
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cactus::server {

// A command line we cannot serve: one line for the user, exit status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct TranslatedArgs {
    std::vector<std::string> args;     // what CLI11 parses
    std::vector<std::string> notices;  // one line per ignored flag or variable
};

using FlagPredicate = std::function<bool(const std::string&)>;
using EnvReader = std::function<const char*(const char*)>;

// args: the words after `serve`. is_ours: whether our command declares a spelling. Spellings
// llama-server accepts that CLI11 cannot declare (-ngl, -ctk) become ours; `--flag=V` and
// `--flag_name` forms are read too. Throws UsageError for an unknown or refused flag.
TranslatedArgs translate_llama_server_args(const std::vector<std::string>& args, const FlagPredicate& is_ours,
                                           const EnvReader& getenv);

// The option LLAMA_ARG_MODEL becomes: the model when neither MODEL nor -m is on the command line.
constexpr const char* kModelFromEnvironment = "--model-from-environment";

// llama.cpp's spellings of a boolean in an environment variable.
bool is_truthy(const std::string& value);  // 1, true, on, enabled
bool is_falsey(const std::string& value);  // 0, false, off, disabled

}  // namespace cactus::server
