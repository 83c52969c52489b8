// Tokenizer::from_gguf: reads tokenizer.ggml.* into a TokenizerSpec.
#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace cactus {

namespace {

std::optional<int64_t> optional_id(const GgufFile& file, const std::string& key) {
    const GgufValue* value = file.find(key);
    if (!value) return std::nullopt;
    switch (value->type) {
        case GgufType::U8:
        case GgufType::U16:
        case GgufType::U32:
        case GgufType::U64:
        case GgufType::I8:
        case GgufType::I16:
        case GgufType::I32:
        case GgufType::I64:
            return value->i;
        default:
            fail("Tokenizer::from_gguf: %s must be an integer", key.c_str());
    }
}

std::optional<bool> optional_bool(const GgufFile& file, const std::string& key) {
    const GgufValue* value = file.find(key);
    if (!value) return std::nullopt;
    if (value->type != GgufType::BOOL) fail("Tokenizer::from_gguf: %s must be a bool", key.c_str());
    return value->i != 0;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
    TokenizerSpec spec;
    spec.model = file.get_string("tokenizer.ggml.model");
    spec.pre = file.get_string("tokenizer.ggml.pre", "");
    spec.tokens = file.get_string_array("tokenizer.ggml.tokens");
    if (file.has("tokenizer.ggml.scores")) {
        const GgufValue& scores = file.get_array("tokenizer.ggml.scores");
        if (scores.array_type != GgufType::F32 && scores.array_type != GgufType::I32) {
            fail("Tokenizer::from_gguf: tokenizer.ggml.scores must be an f32 or i32 array");
        }
        spec.scores.assign(scores.numbers.begin(), scores.numbers.end());
    }
    if (file.has("tokenizer.ggml.token_type")) {
        const GgufValue& types = file.get_array("tokenizer.ggml.token_type");
        if (types.array_type != GgufType::I32) {
            fail("Tokenizer::from_gguf: tokenizer.ggml.token_type must be an i32 array");
        }
        spec.token_types.reserve(types.ints.size());
        for (const int64_t t : types.ints) spec.token_types.push_back(static_cast<int32_t>(t));
    }
    if (file.has("tokenizer.ggml.merges")) spec.merges = file.get_string_array("tokenizer.ggml.merges");

    const std::string p = "tokenizer.ggml.";
    spec.bos_id = optional_id(file, p + "bos_token_id");
    spec.eos_id = optional_id(file, p + "eos_token_id");
    spec.eot_id = optional_id(file, p + "eot_token_id");
    spec.eom_id = optional_id(file, p + "eom_token_id");
    spec.unk_id = optional_id(file, p + "unknown_token_id");
    spec.sep_id = optional_id(file, p + "seperator_token_id");
    spec.pad_id = optional_id(file, p + "padding_token_id");
    spec.mask_id = optional_id(file, p + "mask_token_id");
    spec.fim_pre_id = optional_id(file, p + "fim_pre_token_id");
    spec.fim_suf_id = optional_id(file, p + "fim_suf_token_id");
    spec.fim_mid_id = optional_id(file, p + "fim_mid_token_id");
    spec.fim_pad_id = optional_id(file, p + "fim_pad_token_id");
    spec.fim_rep_id = optional_id(file, p + "fim_rep_token_id");
    spec.fim_sep_id = optional_id(file, p + "fim_sep_token_id");
    spec.add_bos = optional_bool(file, p + "add_bos_token");
    spec.add_eos = optional_bool(file, p + "add_eos_token");
    spec.add_sep = optional_bool(file, p + "add_sep_token");
    spec.add_space_prefix = optional_bool(file, p + "add_space_prefix");
    return from_spec(spec);
}

}  // namespace cactus
