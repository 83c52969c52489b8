// Embedding and rerank endpoints (docs/SERVER.md, "Embeddings and rerank"): OpenAI's
// /v1/embeddings, llama-server's /embeddings and /rerank, Ollama's /api/embed and /api/embeddings.
// Every one reads its inputs here and gets its vectors from the server's EmbedService.
#include <algorithm>
#include <cstring>

#include <httplib.h>

#include "core/format.h"
#include "embed_service.h"
#include "params.h"
#include "server.h"

namespace cactus::server {

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on one request's inputs

[[noreturn]] void bad(const char* key, const std::string& what) {
    throw HttpError{400, std::string("'") + key + "' " + what, key};
}

bool all_ids(const json& a) {
    return !a.empty() && std::all_of(a.begin(), a.end(), [](const json& v) { return v.is_number_integer(); });
}

EmbedInput ids_input(const json& a, const char* key) {
    EmbedInput in;
    in.is_ids = true;
    for (const json& v : a) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
            bad(key, "must hold token ids (integers >= 0)");
        in.ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    return in;
}

// A string, an array of strings, an array of token ids, or an array of arrays of ids (OpenAI's
// `input`); strings and id arrays may be mixed in the outer array.
std::vector<EmbedInput> read_inputs(const json& body, const char* key) {
    const json* v = field(body, key);
    if (v == nullptr) bad(key, "is required");
    const char* shape = "must be a string, an array of strings, an array of token ids or an array of such arrays";
    std::vector<EmbedInput> out;
    if (v->is_string()) {
        out.push_back(EmbedInput{v->get<std::string>(), {}, false});
    } else if (v->is_array()) {
        if (v->empty()) bad(key, "must not be empty");
        if (all_ids(*v)) return {ids_input(*v, key)};
        for (const json& item : *v) {
            if (item.is_string())
                out.push_back(EmbedInput{item.get<std::string>(), {}, false});
            else if (item.is_array())
                out.push_back(ids_input(item, key));
            else
                bad(key, shape);
        }
    } else {
        bad(key, shape);
    }
    if (out.size() > kMaxInputs) bad(key, cactus::format("has %zu inputs; at most %zu", out.size(), kMaxInputs));
    return out;
}

std::string model_name(Server& server, const json& body) {
    const std::string m = read_string(body, "model", "");
    return m.empty() ? server.config().embedding_alias : m;
}

json floats(const float* v, size_t n) {
    json a = json::array();
    for (size_t i = 0; i < n; ++i) a.push_back(v[i]);
    return a;
}

// The vector's float32 bytes (little-endian, as every platform we build for stores them) in base64.
std::string base64_floats(const std::vector<float>& v) {
    static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bytes(v.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (size_t i = 0; i < bytes.size(); i += 3) {
        uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
        if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
        out += digits[(n >> 18) & 63];
        out += digits[(n >> 12) & 63];
        out += i + 1 < bytes.size() ? digits[(n >> 6) & 63] : '=';
        out += i + 2 < bytes.size() ? digits[n & 63] : '=';
    }
    return out;
}

EmbedRequest base_request(Server& server, const json& body, std::vector<EmbedInput> inputs, const char* param) {
    EmbedRequest r;
    r.inputs = std::move(inputs);
    r.param = param;
    r.truncate = read_bool(body, "truncate", true);
    r.deadline = server.deadline_from(body);
    return r;
}

void handle_openai(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    EmbedRequest r = base_request(server, body, read_inputs(body, "input"), "input");
    const std::string format = read_string(body, "encoding_format", "float");
    if (format != "float" && format != "base64") bad("encoding_format", "must be \"float\" or \"base64\"");
    r.dimensions = static_cast<size_t>(read_int(body, "dimensions", 1, 1 << 20, 0));
    r.pooled_only = true;
    const EmbedResult out = server.embeddings().embed(r);
    json data = json::array();
    for (size_t i = 0; i < out.rows.size(); ++i) {
        const std::vector<float>& v = out.rows[i].values;
        data.push_back(json{{"object", "embedding"},
                            {"index", i},
                            {"embedding", format == "base64" ? json(base64_floats(v)) : floats(v.data(), v.size())}});
    }
    send_json(res, 200,
              json{{"object", "list"},
                   {"data", data},
                   {"model", model_name(server, body)},
                   {"usage", {{"prompt_tokens", out.prompt_tokens}, {"total_tokens", out.prompt_tokens}}}});
}

// llama-server's own format: `content` (or `input`), embd_normalize, every pooling (none: one vector
// per token, never normalised); each result's `embedding` is a list of rows.
void handle_native(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const char* key = field(body, "content") != nullptr ? "content" : "input";
    EmbedRequest r = base_request(server, body, read_inputs(body, key), key);
    const int mode = static_cast<int>(read_int(body, "embd_normalize", -1, 64, 2));
    r.normalize = mode == 2;
    EmbedResult out = server.embeddings().embed(r);
    json results = json::array();
    for (size_t i = 0; i < out.rows.size(); ++i) {
        Embedding& e = out.rows[i];
        if (mode != 2 && out.pooling != Pooling::NONE) normalize_rows(&e, mode);
        json rows = json::array();
        for (size_t k = 0; k < e.rows; ++k) rows.push_back(floats(e.values.data() + k * e.dim, e.dim));
        results.push_back(json{{"index", i}, {"embedding", rows}});
    }
    send_json(res, 200, results);
}

std::vector<std::string> read_documents(const json& body) {
    const char* key = field(body, "documents") != nullptr ? "documents" : "texts";
    const json* v = field(body, key);
    if (v == nullptr) bad("documents", "is required");
    if (!v->is_array() || v->empty()) bad(key, "must be a non-empty array of strings");
    std::vector<std::string> docs;
    for (const json& d : *v) {
        if (d.is_string())
            docs.push_back(d.get<std::string>());
        else if (d.is_object() && d.contains("text") && d["text"].is_string())  // Jina's {"text": ...}
            docs.push_back(d["text"].get<std::string>());
        else
            bad(key, "must be a non-empty array of strings");
    }
    if (docs.size() + 1 > kMaxInputs)
        bad(key, cactus::format("has %zu documents; at most %zu", docs.size(), kMaxInputs - 1));
    return docs;
}

// No cross-encoder weights exist here: a document's relevance_score is the cosine of its embedding
// and the query's (both normalised), so the order is the embedder's.
void handle_rerank(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const json* q = field(body, "query");
    if (q == nullptr || !q->is_string()) bad("query", "must be a string");
    const std::vector<std::string> docs = read_documents(body);
    const size_t top_n = static_cast<size_t>(read_int(body, "top_n", 1, 1 << 20, static_cast<int64_t>(docs.size())));
    const bool return_documents = read_bool(body, "return_documents", false);
    std::vector<EmbedInput> inputs{EmbedInput{q->get<std::string>(), {}, false}};
    for (const std::string& d : docs) inputs.push_back(EmbedInput{d, {}, false});
    EmbedRequest r = base_request(server, body, std::move(inputs), "documents");
    r.pooled_only = true;
    const EmbedResult out = server.embeddings().embed(r);
    const std::vector<float>& qv = out.rows[0].values;
    std::vector<std::pair<float, size_t>> scored;
    for (size_t i = 0; i < docs.size(); ++i) {
        const std::vector<float>& dv = out.rows[i + 1].values;
        double dot = 0;
        for (size_t k = 0; k < qv.size(); ++k) dot += static_cast<double>(qv[k]) * dv[k];
        scored.emplace_back(static_cast<float>(dot), i);
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    json results = json::array();
    for (size_t k = 0; k < scored.size() && k < top_n; ++k) {
        json item = {{"index", scored[k].second}, {"relevance_score", scored[k].first}};
        if (return_documents) item["document"] = json{{"text", docs[scored[k].second]}};
        results.push_back(item);
    }
    send_json(res, 200,
              json{{"model", model_name(server, body)},
                   {"object", "list"},
                   {"usage", {{"prompt_tokens", out.prompt_tokens}, {"total_tokens", out.prompt_tokens}}},
                   {"results", results}});
}

int64_t ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

void handle_ollama_embed(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    EmbedRequest r = base_request(server, body, read_inputs(body, "input"), "input");
    r.dimensions = static_cast<size_t>(read_int(body, "dimensions", 1, 1 << 20, 0));
    r.pooled_only = true;
    const EmbedResult out = server.embeddings().embed(r);
    json embeddings = json::array();
    for (const Embedding& e : out.rows) embeddings.push_back(floats(e.values.data(), e.values.size()));
    send_json(res, 200,
              json{{"model", model_name(server, body)},
                   {"embeddings", embeddings},
                   {"total_duration", ns(out.total_ms)},
                   {"load_duration", ns(out.load_ms)},
                   {"prompt_eval_count", out.prompt_tokens}});
}

// Ollama's older endpoint: one `prompt`, an unnormalised vector.
void handle_ollama_embeddings(Server& server, const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req);
    const json* p = field(body, "prompt");
    if (p == nullptr || !p->is_string()) bad("prompt", "must be a string");
    EmbedRequest r = base_request(server, body, {EmbedInput{p->get<std::string>(), {}, false}}, "prompt");
    r.normalize = false;
    r.pooled_only = true;
    const EmbedResult out = server.embeddings().embed(r);
    send_json(res, 200, json{{"embedding", floats(out.rows[0].values.data(), out.rows[0].values.size())}});
}

}  // namespace

void install_embeddings(Server& server, httplib::Server& http, const Wrap& openai, const Wrap& ollama) {
    Server* s = &server;
    http.Post("/v1/embeddings",
              openai([s](const httplib::Request& q, httplib::Response& r) { handle_openai(*s, q, r); }));
    for (const char* path : {"/embeddings", "/embedding"})
        http.Post(path, openai([s](const httplib::Request& q, httplib::Response& r) { handle_native(*s, q, r); }));
    for (const char* path : {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"})
        http.Post(path, openai([s](const httplib::Request& q, httplib::Response& r) { handle_rerank(*s, q, r); }));
    http.Post("/api/embed",
              ollama([s](const httplib::Request& q, httplib::Response& r) { handle_ollama_embed(*s, q, r); }));
    http.Post("/api/embeddings",
              ollama([s](const httplib::Request& q, httplib::Response& r) { handle_ollama_embeddings(*s, q, r); }));
}

void install_encoder_only(Server& server, httplib::Server& http, const Wrap& openai, const Wrap& ollama) {
    const std::string refusal = "the model '" + server.config().alias +
                                "' is an encoder-only embedding model: it answers /v1/embeddings, /embeddings, /rerank "
                                "and /api/embed; chat and completions need a text-generation model";
    const HttpError refused{400, refusal, "model", "invalid_request_error", "model_not_supported"};
    for (const char* path : {"/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions"})
        http.Post(path, openai([refused](const httplib::Request&, httplib::Response&) { throw refused; }));
    for (const char* path : {"/api/chat", "/api/generate"})
        http.Post(path, ollama([refused](const httplib::Request&, httplib::Response&) { throw refused; }));
    const std::string alias = server.config().alias;
    http.Get("/v1/models", openai([alias](const httplib::Request&, httplib::Response& r) {
                 json m = {{"id", alias}, {"object", "model"}, {"created", 0}, {"owned_by", "cactus"}};
                 send_json(r, 200, json{{"object", "list"}, {"data", json::array({m})}});
             }));
    http.Get("/",
             [](const httplib::Request&, httplib::Response& r) { r.set_content("Ollama is running", "text/plain"); });
    http.Get("/api/version", [](const httplib::Request&, httplib::Response& r) {
        send_json(r, 200, json{{"version", "0.6.0"}, {"cactus", CACTUS_SERVER_VERSION}});
    });
    http.Get("/api/tags", ollama([alias](const httplib::Request&, httplib::Response& r) {
                 json m = {{"name", alias}, {"model", alias}, {"details", {{"family", "bert"}}}};
                 send_json(r, 200, json{{"models", json::array({m})}});
             }));
}

}  // namespace cactus::server
