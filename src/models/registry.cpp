// The one table that maps general.architecture to a loader. Adding an architecture: one file in
// src/models/ with a load_<arch>() function, and one row here.
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace cactus {

std::unique_ptr<Model> load_llama(const GgufFile& file, const ModelOptions& options);
std::unique_ptr<Model> load_gemma3(const GgufFile& file, const ModelOptions& options);
std::unique_ptr<Model> load_gemma4(const GgufFile& file, const ModelOptions& options);
std::unique_ptr<Model> load_qwen2(const GgufFile& file, const ModelOptions& options);
std::unique_ptr<Model> load_qwen3(const GgufFile& file, const ModelOptions& options);
std::unique_ptr<Model> load_lfm2(const GgufFile& file, const ModelOptions& options);

namespace {

using LoaderFn = std::unique_ptr<Model> (*)(const GgufFile&, const ModelOptions&);

struct Architecture {
    const char* name;
    LoaderFn load;
    const char* mapped_table = nullptr;  // Model::mapped_tables
};

// clang-format off
constexpr Architecture kArchitectures[] = {
    {"llama", load_llama},
    {"gemma3", load_gemma3},
    {"gemma4", load_gemma4, "per_layer_token_embd.weight"},
    {"qwen2", load_qwen2},
    {"qwen3", load_qwen3},
    {"lfm2", load_lfm2},
};
// clang-format on

}  // namespace

std::unique_ptr<Model> Model::load(const GgufFile& file, const ModelOptions& options) {
    const std::string arch = file.get_string("general.architecture");
    for (const Architecture& a : kArchitectures) {
        if (arch == a.name) return a.load(file, options);
    }
    std::string supported;
    for (const Architecture& a : kArchitectures) supported += std::string(supported.empty() ? "" : ", ") + a.name;
    fail("Model::load: architecture '%s' is not supported (supported: %s)", arch.c_str(), supported.c_str());
}

std::vector<std::string> Model::mapped_tables(const GgufFile& file) {
    const std::string arch = file.get_string("general.architecture", "");
    for (const Architecture& a : kArchitectures) {
        if (arch == a.name && a.mapped_table && file.find_tensor(a.mapped_table)) return {a.mapped_table};
    }
    return {};
}

}  // namespace cactus
