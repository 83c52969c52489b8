#pragma once
// Retrieval on a C API handle (cactus_init's corpus_dir): which model embeds the corpus, the
// index itself (engine/retrieval/corpus_index.h) and the grounding of completions in it.
#include <string>

#include <nlohmann/json.hpp>

#include "api/handle.h"

namespace cactus::api {

// Builds (or reuses, with cache_index) the index of corpus_dir for the handle. The embedding model
// is $CACTUS_RAG_MODEL when set: "self" (the handle's own model), a known name or a path of an
// encoder GGUF; unset: the pulled all-minilm-l6-v2 when present, else the handle's own model.
void open_corpus(Handle& handle, const std::string& corpus_dir, bool cache_index);

// The messages with the top chunks for the last user message put before that message's text (a
// header, the chunks with their sources, an instruction to answer from them and name the
// sources). Earlier messages are untouched, so the cached prefix of earlier turns stays valid.
// Unchanged when the handle has no corpus or no user message has text.
nlohmann::ordered_json ground_messages(Handle& handle, const nlohmann::ordered_json& messages);

}  // namespace cactus::api
