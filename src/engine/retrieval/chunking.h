#pragma once
// Cactus's chunking recipe (research/EMBEDDINGS_RAG.md §1.2): a file's paragraphs end at blank
// lines and before markdown headings; paragraphs are packed into chunks of at most max_tokens
// tokens; a paragraph longer than that is cut into windows overlapping by `overlap` tokens; a
// file's last chunk under min_tokens joins the one before it.
#include <string>
#include <vector>

#include "engine/retrieval/corpus_types.h"

namespace cactus {

// The paragraphs of a text: split at blank lines (runs collapse) and before lines starting with
// '#'; each paragraph's lines keep their order, joined by '\n', and are trimmed of outer blanks.
std::vector<std::string> split_paragraphs(const std::string& text);

// Windows of whole words with at most max_tokens tokens each (counted by count_tokens over the
// window's text), the next window starting so that about `overlap` tokens repeat. A single word
// longer than max_tokens is its own window. Used when CorpusEmbedder::split_tokens is unset.
std::vector<std::string> split_words(const std::string& text, size_t max_tokens, size_t overlap,
                                     const std::function<size_t(const std::string&)>& count_tokens);

// The chunks of one file's text, ordinals from 0.
std::vector<Chunk> chunk_text(const std::string& text, const std::string& source, const CorpusEmbedder& embedder,
                              const ChunkingOptions& options);

}  // namespace cactus
