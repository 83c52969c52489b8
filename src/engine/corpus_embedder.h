#pragma once
// A TextEmbedder (engine/embedding.h) as the retrieval index's CorpusEmbedder
// (engine/retrieval/corpus_types.h): token counts and windows with the model's own tokenizer, so
// chunks of 128 tokens are 128 tokens of the model that embeds them.
#include "engine/embedding.h"
#include "engine/retrieval/corpus_types.h"

namespace cactus {

// `model` must outlive the returned embedder (its functions call it).
CorpusEmbedder corpus_embedder(TextEmbedder& model);

}  // namespace cactus
