#pragma once
// Reading a corpus folder: its regular .txt/.md files at the top level (links followed), sorted
// by name so chunk ids and results are deterministic.
#include <string>
#include <utility>
#include <vector>

#include "engine/retrieval/index_store.h"

namespace cactus {

struct CorpusScan {
    std::string corpus_abs;  // the folder's absolute, resolved path
    std::vector<CorpusFile> files;
    std::vector<std::string> contents;               // per file, as read
    std::vector<std::string> changed_while_reading;  // size or mtime differed before and after reading
};

// Throws cactus::Error for a missing folder and for an entry it cannot stat or read (naming it).
CorpusScan scan_corpus(const std::string& corpus_dir);

}  // namespace cactus
