#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "core/error.h"

namespace cactus {

const char* const kNewlineRunsRegex = "[^\\n]+|[\\n]+";

namespace {

// llama.cpp's whitespace set (Unicode White_Space), used for \s and \S so that PCRE2's own
// definition (which leaves out U+0085) cannot differ from it.
const char* kWhitespaceClass =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool name_in(const std::string& name, std::initializer_list<const char*> names) {
    for (const char* n : names) {
        if (name == n) return true;
    }
    return false;
}

// Rewrites \s and \S to the explicit whitespace class (inside or outside brackets).
std::string expand_whitespace(const std::string& regex) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < regex.size(); ++i) {
        const char c = regex[i];
        if (c == '\\' && i + 1 < regex.size()) {
            const char next = regex[i + 1];
            if (next == 's') {
                out += in_class ? std::string(kWhitespaceClass) : "[" + std::string(kWhitespaceClass) + "]";
            } else if (next == 'S' && !in_class) {
                out += "[^" + std::string(kWhitespaceClass) + "]";
            } else if (next == 'S') {
                fail("PreTokenizer: \\S inside a character class is not supported: %s", regex.c_str());
            } else {
                out += c;
                out += next;
            }
            ++i;
            continue;
        }
        if (c == '[' && !in_class)
            in_class = true;
        else if (c == ']' && in_class)
            in_class = false;
        out += c;
    }
    return out;
}

}  // namespace

PreTokenizerConfig pre_tokenizer_config(const std::string& name) {
    PreTokenizerConfig config;
    if (name.empty() || name == "default") {
        config.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"};
    } else if (name_in(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                              "jina-v5-nano"})) {
        config.regexes = {kLlama3Regex};
        config.ignore_merges = true;
        config.add_bos = true;
    } else if (name_in(name, {"dbrx", "smaug-bpe"})) {
        config.regexes = {kLlama3Regex};
    } else if (name_in(name, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan",
                              "solar-open"})) {
        config.regexes = {kQwen2Regex};
        config.clean_spaces =
            !name_in(name, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"});
    } else if (name_in(name, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b",
                              "mellum2"})) {
        config.regexes = {"\\p{N}", kGpt2Regex};
        config.clean_spaces = !name_in(name, {"smollm", "command-r"});
    } else if (name_in(name, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                              "mellum", "modern-bert", "mpt", "olmo", "jais", "exaone4", "jina-v1-en", "jina-v2-code",
                              "roberta-bpe"})) {
        config.regexes = {kGpt2Regex};
    } else if (name_in(name, {"trillion", "granite-docling"})) {
        config.regexes = {kGpt2Regex};
        config.clean_spaces = false;
    } else if (name_in(name, {"gemma4", "granite-embed-multi-311m"})) {
        // Merges run over whole lines, spaces included; runs of newlines are words of their own.
        config.regexes = {kNewlineRunsRegex};
        config.byte_encode = false;
        config.escape_whitespaces = true;
        config.whole_newline_runs = true;
        config.force_add_bos = true;  // llama.cpp PR #21500: files converted with add_bos false
    } else {
        fail("pre_tokenizer_config: unknown pre-tokenizer '%s'", name.c_str());
    }
    return config;
}

struct PreTokenizer::Compiled {
    pcre2_code* code = nullptr;  // null: kNewlineRunsRegex, split by hand
    ~Compiled() {
        if (code) pcre2_code_free(code);
    }
};

namespace {
// Match data is per call, so one tokenizer can encode on several threads at once.
struct MatchData {
    pcre2_match_data* data;
    explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
        if (!data) fail("PreTokenizer: out of memory for match data");
    }
    ~MatchData() { pcre2_match_data_free(data); }
    MatchData(const MatchData&) = delete;
    MatchData& operator=(const MatchData&) = delete;
};
}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
    for (const std::string& regex : regexes) {
        if (regex == kNewlineRunsRegex) {
            compiled_.push_back(std::make_unique<Compiled>());
            continue;
        }
        const std::string expanded = expand_whitespace(regex);
        auto compiled = std::make_unique<Compiled>();
        int error_code = 0;
        PCRE2_SIZE error_offset = 0;
        compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expanded.c_str()), expanded.size(),
                                       PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
        if (!compiled->code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error_code, message, sizeof(message));
            fail("PreTokenizer: cannot compile regex '%s' at %zu: %s", regex.c_str(), static_cast<size_t>(error_offset),
                 reinterpret_cast<const char*>(message));
        }
        pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
        compiled_.push_back(std::move(compiled));
    }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// Splits text[begin, end) into matches and the gaps between them; appends piece ends.
void split_piece(const pcre2_code* code, pcre2_match_data* match, const std::string& text, size_t begin, size_t end,
                 std::vector<size_t>& ends) {
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
    const size_t length = end - begin;
    size_t cursor = 0;  // relative to begin
    size_t gap_start = 0;
    while (cursor < length) {
        const int rc = pcre2_match(code, subject, length, cursor, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) fail("PreTokenizer: regex match failed with code %d", rc);
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const size_t match_start = ovector[0], match_end = ovector[1];
        if (match_end == match_start) {  // empty match: step over one character
            cursor = match_start + 1;
            while (cursor < length && (static_cast<uint8_t>(text[begin + cursor]) & 0xC0) == 0x80) ++cursor;
            continue;
        }
        if (match_start > gap_start) ends.push_back(begin + match_start);
        ends.push_back(begin + match_end);
        gap_start = cursor = match_end;
    }
    if (gap_start < length) ends.push_back(end);
}

// kNewlineRunsRegex on text[begin, end): '\n' is never part of a longer UTF-8 sequence, so bytes
// can be compared whatever the rest of the text holds.
void split_newline_runs(const std::string& text, size_t begin, size_t end, std::vector<size_t>& ends) {
    size_t i = begin;
    while (i < end) {
        const bool newline = text[i] == '\n';
        while (i < end && (text[i] == '\n') == newline) ++i;
        ends.push_back(i);
    }
}

}  // namespace

std::vector<size_t> PreTokenizer::split_ends(const std::string& text) const {
    std::vector<size_t> ends = {text.size()};
    for (const auto& compiled : compiled_) {
        std::vector<size_t> next;
        next.reserve(ends.size() * 2);
        std::unique_ptr<MatchData> match;
        if (compiled->code) match = std::make_unique<MatchData>(compiled->code);
        size_t begin = 0;
        for (const size_t end : ends) {
            if (match) {
                split_piece(compiled->code, match->data, text, begin, end, next);
            } else {
                split_newline_runs(text, begin, end, next);
            }
            begin = end;
        }
        ends = std::move(next);
    }
    if (text.empty()) ends.clear();
    return ends;
}

std::vector<std::string> PreTokenizer::split(const std::string& text) const {
    std::vector<std::string> words;
    size_t begin = 0;
    for (const size_t end : split_ends(text)) {
        words.emplace_back(text, begin, end - begin);
        begin = end;
    }
    return words;
}

}  // namespace cactus
