// cactus_rag_query and the corpus of a handle (api/rag_api.h).
#include "api/rag_api.h"

#include <cstdlib>
#include <sys/stat.h>

#include "api/guard.h"
#include "api/response.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/corpus_embedder.h"
#include "engine/model_store.h"
#include "engine/retrieval/corpus_index.h"

namespace cactus::api {

namespace {

using json = nlohmann::ordered_json;

constexpr const char* kDefaultRagModel = "all-minilm-l6-v2";
constexpr size_t kGroundingChunks = 5;  // Cactus's RAG_TOP_K

bool file_exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The embedder of the corpus: the handle's own, or a separate encoder kept in handle.rag_embedder.
TextEmbedder& rag_embedder(Handle& h) {
    const char* env = std::getenv("CACTUS_RAG_MODEL");
    std::string choice = env != nullptr ? env : "";
    if (choice.empty()) {
        const std::string pulled = model_cache_dir() + "/" + kDefaultRagModel + ".gguf";
        choice = file_exists(pulled) ? pulled : "self";
    }
    if (choice != "self") {
        h.rag_embedder = TextEmbedder::load_encoder(resolve_model_path(choice));
        return *h.rag_embedder;
    }
    if (!h.embedder) {
        if (!h.engine) fail("corpus_dir: this model cannot embed text");
        h.embedder = TextEmbedder::over_decoder(*h.engine);
    }
    return *h.embedder;
}

// The text of a message's content: a string, or the text parts of a content-part array.
std::string content_text(const json& content) {
    if (content.is_string()) return content.get<std::string>();
    std::string text;
    if (content.is_array())
        for (const json& part : content)
            if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                part["text"].is_string())
                text += (text.empty() ? "" : "\n") + part["text"].get<std::string>();
    return text;
}

}  // namespace

void open_corpus(Handle& handle, const std::string& corpus_dir, bool cache_index) {
    TextEmbedder& model = rag_embedder(handle);
    CorpusOptions options;
    options.cache_index = cache_index;
    handle.corpus = CorpusIndex::open(corpus_dir, corpus_embedder(model), options);
    const CorpusBuildStats& s = handle.corpus->stats();
    CACTUS_LOG_INFO("corpus %s: %zu chunks of %zu files with %s (%s, %.1f s)", corpus_dir.c_str(),
                    handle.corpus->size(), s.files, model.name().c_str(),
                    s.from_cache ? "stored index reused" : "indexed", s.seconds_total);
}

json ground_messages(Handle& handle, const json& messages) {
    if (!handle.corpus || !messages.is_array()) return messages;
    for (size_t i = messages.size(); i-- > 0;) {
        const json& m = messages[i];
        if (!m.is_object() || m.value("role", "") != "user" || !m.contains("content")) continue;
        const std::string question = content_text(m["content"]);
        if (question.empty()) return messages;
        const std::string context = rag_grounding_text(handle.corpus->query(question, kGroundingChunks));
        if (context.empty()) return messages;
        const std::string preface =
            context +
            "Answer the question below from the context above and name the sources (file names) you used. "
            "If the answer is not in the context, say that you do not have enough information.\n\n";
        json grounded = messages;
        json& content = grounded[i]["content"];
        if (content.is_string()) {
            content = preface + content.get<std::string>();
        } else {
            content.insert(content.begin(), json{{"type", "text"}, {"text", preface}});
        }
        return grounded;
    }
    return messages;
}

}  // namespace cactus::api

extern "C" {

int cactus_rag_query(cactus_model_t model, const char* query, char* response_buffer, size_t buffer_size, size_t top_k) {
    using namespace cactus;
    using json = nlohmann::ordered_json;
    return api::guarded("cactus_rag_query", [&]() -> int {
        api::check_buffer(response_buffer, buffer_size);
        if (query == nullptr) fail("query is NULL");
        api::Lease lease(model, api::Use::EMBED);
        api::Handle& h = *lease.handle();
        std::string text;
        if (!h.corpus) {
            text = api::dump(
                {{"chunks", json::array()}, {"error", "No corpus index loaded (pass corpus_dir to cactus_init)"}});
        } else if (query[0] == '\0') {
            text = api::dump({{"chunks", json::array()}, {"error", "Empty query"}});
        } else {
            text = rag_results_json(h.corpus->query(query, top_k));
        }
        const int written = api::write_text(text, response_buffer, buffer_size);
        if (written == CACTUS_BUFFER_TOO_SMALL) {
            fail("the response needs %zu bytes but buffer_size is %zu", text.size() + 1, buffer_size);
        }
        return h.corpus && query[0] != '\0' ? written : 0;
    });
}

}  // extern "C"
