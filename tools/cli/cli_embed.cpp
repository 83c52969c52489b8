// cactus embed -m MODEL [TEXT ...]: one JSON line per text, {"index", "n_tokens", "embedding"}; with no
// TEXT, one text per stdin line. The same embedder as `cactus serve`'s endpoints (embed_service.h).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../server/embed_service.h"
#include "cli_common.h"
#include "core/error.h"
#include "engine/model_store.h"

namespace cactus::cli {

namespace {

struct EmbedArgs {
    std::string model = "smollm2-135m";
    int threads = 0;
    size_t ctx_size = 0;
    std::string device;
    std::string pooling;  // "" = the model's own
    bool no_normalize = false;
    bool no_truncate = false;
    size_t batch = 32;
    std::vector<std::string> texts;
};

std::vector<std::string> stdin_lines() {
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(std::cin, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) fail("embed: line %zu of stdin is empty (one text per line)", lines.size() + 1);
        lines.push_back(line);
    }
    if (lines.empty()) fail("embed: no text given (arguments or one per stdin line)");
    return lines;
}

// per_token (pooling none): "embedding" is a list of rows, one per token; else the one vector.
void print_row(size_t index, const Embedding& e, bool per_token) {
    nlohmann::ordered_json vec = nlohmann::ordered_json::array();
    for (size_t r = 0; r < e.rows; ++r) {
        nlohmann::ordered_json row = nlohmann::ordered_json::array();
        for (size_t i = 0; i < e.dim; ++i) row.push_back(e.values[r * e.dim + i]);
        if (per_token)
            vec.push_back(row);
        else
            vec = row;
    }
    const nlohmann::ordered_json line = {{"index", index}, {"n_tokens", e.n_tokens}, {"embedding", vec}};
    std::fputs((line.dump() + "\n").c_str(), stdout);
}

int embed_command(const EmbedArgs& args) {
    EngineOptions options;
    options.n_threads = args.threads;
    options.n_ctx = args.ctx_size;
    options.device = args.device;
    server::LoadedEmbedder loaded = server::load_embedder(resolve_model_path(args.model), options);
    EmbedOptions eo;
    if (!args.pooling.empty()) eo.pooling = parse_pooling(args.pooling);
    const bool per_token = eo.pooling.value_or(loaded.embedder->default_pooling()) == Pooling::NONE;
    eo.normalize = !args.no_normalize;
    eo.truncate = !args.no_truncate;
    const std::vector<std::string> texts = args.texts.empty() ? stdin_lines() : args.texts;
    for (size_t start = 0; start < texts.size(); start += args.batch) {
        const size_t end = std::min(texts.size(), start + args.batch);
        const std::vector<std::string> part(texts.begin() + start, texts.begin() + end);
        std::vector<Embedding> rows;
        try {
            rows = loaded.embedder->embed(part, eo);
        } catch (const Error& e) {
            fail("embed: texts %zu..%zu: %s", start, end - 1, e.what());
        }
        for (size_t i = 0; i < rows.size(); ++i) print_row(start + i, rows[i], per_token);
        std::fflush(stdout);
    }
    return 0;
}

}  // namespace

void register_embed(CLI::App& app) {
    auto args = std::make_shared<EmbedArgs>();
    CLI::App* cmd = app.add_subcommand("embed", "Text embeddings as JSON lines (texts as arguments or stdin lines)");
    cmd->add_option("-m,--model", args->model,
                    "Model: a short name (all-minilm-l6-v2, smollm2-135m) or a .gguf path; encoders pool as their "
                    "file says, decoders mean-pool their final hidden states")
        ->capture_default_str();
    cmd->add_option("texts", args->texts, "Texts to embed (none: one per stdin line)");
    cmd->add_option("--pooling", args->pooling, "mean, cls, last or none (per-token rows); default: the model's")
        ->check(CLI::IsMember({"none", "mean", "cls", "last"}));
    cmd->add_flag("--no-normalize", args->no_normalize, "Keep the vectors' length (default: unit L2 length)");
    cmd->add_flag("--no-truncate", args->no_truncate, "A text longer than the model takes is an error, not cut");
    cmd->add_option("-t,--threads", args->threads, "CPU threads (0 = all cores)")->check(CLI::Range(0, 256));
    cmd->add_option("-c,--ctx-size", args->ctx_size, "Decoder models: context in tokens (0 = model default)");
    cmd->add_option("--device", args->device, "cpu, cuda or cuda:N (default: $CACTUS_DEVICE, else cpu)");
    cmd->add_option("--batch", args->batch, "Texts per forward pass")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    cmd->callback([args]() { throw CLI::RuntimeError(embed_command(*args)); });
}

}  // namespace cactus::cli
