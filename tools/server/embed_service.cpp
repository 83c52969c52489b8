#include "embed_service.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/format.h"
#include "server.h"
#include "tokenizer/tokenizer.h"

namespace cactus::server {

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

LoadedEmbedder load_embedder(const std::string& path, const EngineOptions& options) {
    LoadedEmbedder out;
    if (TextEmbedder::is_encoder_file(path)) {
        out.embedder = TextEmbedder::load_encoder(path, options.n_threads);
    } else {
        out.engine = Engine::load(path, options);
        out.embedder = TextEmbedder::over_decoder(*out.engine);
    }
    return out;
}

EmbedService::EmbedService(std::string model_path, EngineOptions options, std::optional<Pooling> pooling)
    : path_(std::move(model_path)), options_(std::move(options)), pooling_(pooling) {}

EmbedService::~EmbedService() = default;

void EmbedService::load() {
    std::lock_guard<std::timed_mutex> lock(mutex_);
    load_locked();
    if (!load_error_.empty()) fail("serve: cannot load the embedding model %s: %s", path_.c_str(), load_error_.c_str());
}

double EmbedService::load_locked() {
    if (loaded_.embedder || !load_error_.empty()) return 0;
    const Clock::time_point t0 = Clock::now();
    try {
        loaded_ = load_embedder(path_, options_);
        std::fprintf(stderr, "serve: embeddings from %s (%zu dims, %s pooling)\n", loaded_.embedder->name().c_str(),
                     loaded_.embedder->dim(), pooling_name(pooling_.value_or(loaded_.embedder->default_pooling())));
    } catch (const std::exception& e) {
        // A file that does not load now will not load later: every request gets the same answer.
        load_error_ = e.what();
    }
    return ms_since(t0);
}

std::vector<std::vector<int32_t>> EmbedService::tokens_of(const EmbedRequest& r) const {
    const TextEmbedder& m = *loaded_.embedder;
    const size_t vocab = m.tokenizer().vocab_size();
    std::vector<std::vector<int32_t>> seqs;
    for (size_t i = 0; i < r.inputs.size(); ++i) {
        const EmbedInput& in = r.inputs[i];
        const std::string where = cactus::format("%s[%zu]", r.param, i);
        if (!in.is_ids && in.text.empty()) throw HttpError{400, where + " is an empty string", r.param};
        std::vector<int32_t> ids = in.ids;
        if (!in.is_ids) {
            try {
                ids = m.tokenize(in.text);
            } catch (const Error& e) {  // text the tokenizer refuses (e.g. invalid UTF-8)
                throw HttpError{400, where + ": " + e.what(), r.param};
            }
        }
        if (ids.empty()) throw HttpError{400, where + " has no tokens", r.param};
        for (int32_t id : ids)
            if (id < 0 || static_cast<size_t>(id) >= vocab)
                throw HttpError{400,
                                cactus::format("%s holds token id %d; ids are in [0, %zu)", where.c_str(), id, vocab),
                                r.param};
        if (r.truncate && ids.size() > m.max_tokens()) {
            // As TextEmbedder::embed cuts a text: a final special token ([SEP], EOS) stays last.
            const int32_t last = ids.back();
            const bool keep_last = !in.is_ids && m.tokenizer().is_control(last) && m.max_tokens() >= 2;
            ids.resize(keep_last ? m.max_tokens() - 1 : m.max_tokens());
            if (keep_last) ids.push_back(last);
        }
        if (!r.truncate && ids.size() > m.max_tokens()) {
            throw HttpError{400,
                            cactus::format("%s has %zu tokens but the embedding model takes at most %zu (truncate: "
                                           "true cuts it to fit)",
                                           where.c_str(), ids.size(), m.max_tokens()),
                            r.param, "invalid_request_error", "context_length_exceeded"};
        }
        seqs.push_back(std::move(ids));
    }
    return seqs;
}

EmbedResult EmbedService::embed(const EmbedRequest& r) {
    const Clock::time_point t0 = Clock::now();
    std::unique_lock<std::timed_mutex> lock(mutex_, std::defer_lock);
    if (!lock.try_lock_until(r.deadline))
        throw HttpError{
            503, "the embedding model is busy: no turn came before the request's deadline", "", "server_error", "", 1};
    EmbedResult out;
    out.load_ms = load_locked();
    if (!load_error_.empty())
        throw HttpError{500, "the embedding model " + path_ + " does not load: " + load_error_, "", "server_error"};
    TextEmbedder& m = *loaded_.embedder;
    const Pooling pooling = pooling_.value_or(m.default_pooling());
    if (r.pooled_only && pooling == Pooling::NONE)
        throw HttpError{400, "pooling 'none' gives one vector per token: use POST /embeddings", "pooling"};
    if (r.dimensions > 0 && r.dimensions > m.dim())
        throw HttpError{400,
                        cactus::format("'dimensions' is %zu but the model's vectors have %zu", r.dimensions, m.dim()),
                        "dimensions"};
    const std::vector<std::vector<int32_t>> seqs = tokens_of(r);
    EmbedOptions options;
    options.pooling = pooling;
    options.normalize = r.normalize;
    options.truncate = r.truncate;
    const bool all_texts =
        std::none_of(r.inputs.begin(), r.inputs.end(), [](const EmbedInput& in) { return in.is_ids; });
    try {
        if (all_texts) {
            std::vector<std::string> texts;
            for (const EmbedInput& in : r.inputs) texts.push_back(in.text);
            out.rows = m.embed(texts, options);
        } else {
            out.rows = m.embed_tokens(seqs, options);
        }
    } catch (const Error& e) {  // the inputs were checked above: what is left is the model's own limit
        throw HttpError{400, e.what(), r.param};
    }
    for (Embedding& e : out.rows) {
        if (r.dimensions > 0) keep_dimensions(&e, r.dimensions, r.normalize);
        out.prompt_tokens += e.n_tokens;
    }
    out.pooling = pooling;
    out.model = m.name();
    out.total_ms = ms_since(t0);
    return out;
}

void keep_dimensions(Embedding* e, size_t n, bool normalize) {
    if (e->rows != 1 || n >= e->dim) return;
    e->values.resize(n);
    e->dim = n;
    if (normalize) l2_normalize(&e->values);
}

void normalize_rows(Embedding* e, int mode) {
    if (mode < 0) return;
    for (size_t r = 0; r < e->rows; ++r) {
        float* v = e->values.data() + r * e->dim;
        double norm = 0;
        for (size_t i = 0; i < e->dim; ++i) {
            const double x = std::fabs(v[i]);
            if (mode == 0)
                norm = std::max(norm, x);
            else if (mode == 1)
                norm += x;
            else if (mode == 2)
                norm += x * x;
            else
                norm += std::pow(x, mode);
        }
        if (mode == 0)
            norm /= 32760.0;  // llama.cpp's int16 range
        else if (mode == 2)
            norm = std::sqrt(norm);
        else if (mode > 2)
            norm = std::pow(norm, 1.0 / mode);
        const double scale = norm > 0 ? 1.0 / norm : 0.0;
        for (size_t i = 0; i < e->dim; ++i) v[i] = static_cast<float>(v[i] * scale);
    }
}

}  // namespace cactus::server
