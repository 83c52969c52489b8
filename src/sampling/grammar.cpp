#include "sampling/grammar.h"

#include <cctype>

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace cactus {

struct CompiledConstraint {
    xgrammar::CompiledGrammar grammar;
    size_t n_vocab;
    // A lazy grammar (a structural tag of "triggered_tags": free text until one of these strings)
    // lists its triggers; empty = the grammar shapes the text from the first token.
    std::vector<std::string> triggers;
    std::shared_ptr<const std::vector<std::string>> token_bytes;  // [n_vocab], to spot a trigger
};

std::string ConstraintSpec::key() const {
    static const char* names[] = {"json_schema:", "json_object:", "structural_tag:", "ebnf:"};
    return std::string(names[static_cast<int>(kind)]) + text;
}

struct GrammarVocab::Impl {
    std::shared_ptr<const std::vector<std::string>> token_bytes;
    xgrammar::TokenizerInfo info;
    xgrammar::GrammarCompiler compiler;
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::shared_ptr<const CompiledConstraint>> cache;

    Impl(const std::vector<std::string>& bytes, const std::vector<int32_t>& stops)
        : token_bytes(std::make_shared<const std::vector<std::string>>(bytes)),
          info(bytes, xgrammar::VocabType::RAW, static_cast<int>(bytes.size()), stops, false),
          // Two compile threads (the machines here have few cores); xgrammar's own cache off:
          // ours keys by the spec text and keeps the shared compiled grammar.
          compiler(info, /*max_threads=*/2, /*cache_enabled=*/false) {}
};

GrammarVocab::GrammarVocab(const std::vector<std::string>& token_bytes, const std::vector<int32_t>& stop_ids)
    : n_vocab_(token_bytes.size()) {
    if (token_bytes.empty()) fail("GrammarVocab: the vocabulary is empty");
    for (int32_t id : stop_ids)
        if (id < 0 || static_cast<size_t>(id) >= token_bytes.size())
            fail("GrammarVocab: stop token %d is outside the vocabulary of %zu", id, token_bytes.size());
    impl_ = std::make_unique<Impl>(token_bytes, stop_ids);
}

GrammarVocab::~GrammarVocab() = default;

size_t GrammarVocab::cached() const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->cache.size();
}

namespace {

bool rule_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// "name ::=" starts at j (a new rule: the alternative before it ended).
bool rule_starts_at(const std::string& g, size_t j) {
    size_t k = j;
    while (k < g.size() && rule_name_char(g[k])) ++k;
    if (k == j) return false;
    while (k < g.size() && (g[k] == ' ' || g[k] == '\t')) ++k;
    return g.compare(k, 3, "::=") == 0;
}

// Copies a quoted string or a character class starting at g[i] (escapes kept); returns the end.
size_t copy_literal(const std::string& g, size_t i, char close, std::string& out) {
    out += g[i++];
    while (i < g.size() && g[i] != close) {
        if (g[i] == '\\' && i + 1 < g.size()) out += g[i++];
        out += g[i++];
    }
    if (i < g.size()) out += g[i++];
    return i;
}

}  // namespace

std::string gbnf_to_xgrammar(const std::string& g) {
    std::string out;
    out.reserve(g.size() + 16);
    bool expect_element = false;  // after "::=", "|" or "(": an empty alternative gets "" there
    size_t mark = 0;              // where in `out` that "" goes
    size_t i = 0;
    while (i < g.size()) {
        const char c = g[i];
        if (c == '#') {  // a comment, to the end of its line
            while (i < g.size() && g[i] != '\n') out += g[i++];
            continue;
        }
        if (std::isspace(static_cast<unsigned char>(c))) {
            out += g[i++];
            continue;
        }
        if (expect_element && (c == '|' || c == ')' || rule_starts_at(g, i))) out.insert(mark, " \"\"");
        expect_element = false;
        if (c == '"') {
            i = copy_literal(g, i, '"', out);
        } else if (c == '[') {
            i = copy_literal(g, i, ']', out);
        } else if (g.compare(i, 3, "::=") == 0) {
            out += "::=";
            i += 3;
            expect_element = true;
        } else {
            expect_element = c == '|' || c == '(';
            out += g[i++];
        }
        mark = out.size();
    }
    if (expect_element) out.insert(mark, " \"\"");
    return out;
}

namespace {

xgrammar::CompiledGrammar compile_spec(xgrammar::GrammarCompiler& c, const ConstraintSpec& spec) {
    using Kind = ConstraintSpec::Kind;
    switch (spec.kind) {
        case Kind::json_object:
            return c.CompileBuiltinJSONGrammar();
        // Whitespace between tokens is limited (any_whitespace with a cap) so a model cannot
        // spend its token budget on blank lines inside a constrained object.
        case Kind::json_schema:
            return c.CompileJSONSchema(spec.text, /*any_whitespace=*/true, std::nullopt, std::nullopt,
                                       /*strict_mode=*/true, /*max_whitespace_cnt=*/2);
        case Kind::structural_tag:
            return c.CompileStructuralTag(spec.text);
        case Kind::ebnf:
            return c.CompileGrammar(gbnf_to_xgrammar(spec.text), "root");
    }
    fail("GrammarVocab::compile: unknown constraint kind %d", static_cast<int>(spec.kind));
}

// The triggers of a structural tag whose top-level format is "triggered_tags" (a lazy grammar).
std::vector<std::string> lazy_triggers(const ConstraintSpec& spec) {
    if (spec.kind != ConstraintSpec::Kind::structural_tag) return {};
    const nlohmann::json tag = nlohmann::json::parse(spec.text, nullptr, /*allow_exceptions=*/false);
    if (!tag.is_object() || !tag.contains("format")) return {};
    const nlohmann::json& format = tag["format"];
    if (!format.is_object() || format.value("type", "") != "triggered_tags") return {};
    std::vector<std::string> triggers;
    for (const nlohmann::json& t : format.value("triggers", nlohmann::json::array()))
        if (t.is_string() && !t.get<std::string>().empty()) triggers.push_back(t.get<std::string>());
    return triggers;
}

}  // namespace

std::shared_ptr<const CompiledConstraint> GrammarVocab::compile(const ConstraintSpec& spec) {
    const std::string key = spec.key();
    {
        std::lock_guard<std::mutex> lock(impl_->mutex);
        auto hit = impl_->cache.find(key);
        if (hit != impl_->cache.end()) return hit->second;
    }
    std::shared_ptr<const CompiledConstraint> compiled;
    try {
        compiled = std::make_shared<CompiledConstraint>(
            CompiledConstraint{compile_spec(impl_->compiler, spec), n_vocab_, lazy_triggers(spec), impl_->token_bytes});
    } catch (const cactus::Error&) {
        throw;
    } catch (const std::exception& e) {
        std::string shown = spec.text.size() > 200 ? spec.text.substr(0, 200) + "..." : spec.text;
        fail("grammar: cannot compile %s: %s", shown.empty() ? "the JSON grammar" : shown.c_str(), e.what());
    }
    std::lock_guard<std::mutex> lock(impl_->mutex);
    constexpr size_t kMaxCached = 64;  // schemas differ per app; keep the cache bounded
    if (impl_->cache.size() >= kMaxCached) impl_->cache.clear();
    impl_->cache.emplace(key, compiled);
    return compiled;
}

// ---- per-request matcher -----------------------------------------------------------------------

struct GrammarConstraint::Impl {
    std::shared_ptr<const CompiledConstraint> compiled;
    xgrammar::GrammarMatcher matcher;
    std::vector<int32_t> bitmask;  // [ceil(n_vocab / 32)] bit i = token i allowed
    int64_t shape[1];
    DLTensor tensor;
    bool engaged;
    std::string tail;  // the last accepted bytes while not engaged, shorter than the longest trigger

    explicit Impl(std::shared_ptr<const CompiledConstraint> c)
        : compiled(std::move(c)), matcher(compiled->grammar), engaged(compiled->triggers.empty()) {
        bitmask.resize(static_cast<size_t>(xgrammar::GetBitmaskSize(static_cast<int>(compiled->n_vocab))));
        shape[0] = static_cast<int64_t>(bitmask.size());
        tensor = DLTensor{};
        tensor.data = bitmask.data();
        tensor.device = DLDevice{kDLCPU, 0};
        tensor.ndim = 1;
        tensor.dtype = xgrammar::GetBitmaskDLType();
        tensor.shape = shape;
        tensor.strides = nullptr;
        tensor.byte_offset = 0;
    }

    void watch_for_trigger(const std::string& text) {
        if (engaged) return;
        tail += text;
        size_t longest = 0;
        for (const std::string& t : compiled->triggers) {
            if (tail.find(t) != std::string::npos) {
                engaged = true;
                tail.clear();
                return;
            }
            longest = std::max(longest, t.size());
        }
        if (tail.size() >= longest) tail.erase(0, tail.size() - (longest - 1));
    }
};

GrammarConstraint::GrammarConstraint(std::shared_ptr<const CompiledConstraint> compiled) {
    if (!compiled) fail("GrammarConstraint: no compiled grammar");
    impl_ = std::make_unique<Impl>(std::move(compiled));
}

GrammarConstraint::~GrammarConstraint() = default;
GrammarConstraint::GrammarConstraint(GrammarConstraint&&) noexcept = default;

void GrammarConstraint::mask(std::vector<float>& logits) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    const size_t n_vocab = impl_->compiled->n_vocab;
    if (impl_->matcher.IsTerminated()) {  // nothing may follow
        for (float& l : logits) l = neg_inf;
        return;
    }
    impl_->matcher.FillNextTokenBitmask(&impl_->tensor);
    const size_t n = std::min(logits.size(), n_vocab);
    const uint32_t* words = reinterpret_cast<const uint32_t*>(impl_->bitmask.data());
    for (size_t w = 0; w * 32 < n; ++w) {
        uint32_t bits = words[w];
        if (bits == 0xFFFFFFFFu) continue;
        const size_t end = std::min(n, w * 32 + 32);
        for (size_t i = w * 32; i < end; ++i)
            if (((bits >> (i - w * 32)) & 1u) == 0) logits[i] = neg_inf;
    }
    for (size_t i = n; i < logits.size(); ++i) logits[i] = neg_inf;  // padding rows of the output
}

bool GrammarConstraint::accept(int32_t token) {
    if (token < 0 || static_cast<size_t>(token) >= impl_->compiled->n_vocab) return false;
    if (!impl_->matcher.AcceptToken(token)) return false;
    impl_->watch_for_trigger((*impl_->compiled->token_bytes)[static_cast<size_t>(token)]);
    return true;
}

bool GrammarConstraint::accept_text(const std::string& text) {
    if (!impl_->matcher.AcceptString(text)) return false;
    impl_->watch_for_trigger(text);
    return true;
}

bool GrammarConstraint::engaged() const { return impl_->engaged; }
bool GrammarConstraint::terminated() const { return impl_->matcher.IsTerminated(); }
bool GrammarConstraint::complete() const { return impl_->matcher.IsCompleted(); }

}  // namespace cactus
