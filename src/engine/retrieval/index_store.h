#pragma once
// The stored form of a corpus index, kept under the model cache (never in the user's folder):
//   <root>/<sha256 of (absolute corpus path, embedder id)>/manifest.json  what the index was built from
//   <root>/<...>/chunks.bin                                               chunks and their vectors
// manifest.json lists every corpus file (name, size, mtime, sha256), the embedder id and dim,
// the chunking options, and the size and a 64-bit hash of chunks.bin (it catches damage; the
// parser's own bounds checks catch a hostile file whose hash was forged). Both files are replaced atomically
// (temp + rename, chunks.bin first: a manifest only ever names complete chunks). Nothing read back
// is trusted: chunks.bin must match the manifest's size and hash and parse within its own bytes.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/retrieval/corpus_types.h"

namespace cactus {

struct CorpusFile {
    std::string name;
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    std::string sha256;  // of the content as read (hex)
};

// What an index is built from; two are equal when every field is.
struct IndexManifest {
    std::string corpus;  // absolute path
    std::string embedder_id;
    size_t dim = 0;
    ChunkingOptions chunking;
    std::vector<CorpusFile> files;
    std::vector<std::string> changed_while_reading;  // non-empty: the next open rebuilds
    uint64_t chunks_bytes = 0;
    std::string chunks_hash;  // fast_hash_hex of chunks.bin
};

nlohmann::ordered_json manifest_to_json(const IndexManifest& m);
// Throws cactus::Error for anything but a well-formed manifest.
IndexManifest manifest_from_json(const nlohmann::ordered_json& j);

// Whether a stored manifest describes the same corpus state, embedder and chunking as `current`
// (the chunks fields are not compared: they belong to the stored index).
bool manifest_matches(const IndexManifest& stored, const IndexManifest& current);

// chunks.bin: "CRAGIDX1", u32 version, u32 dim, u64 n_chunks, then per chunk {u32 len, source,
// u32 len, content, u64 ordinal}, then [n_chunks, dim] fp32 vectors; all little-endian.
std::string serialize_chunks(const std::vector<Chunk>& chunks, const std::vector<float>& vectors, size_t dim);
// Throws cactus::Error for bad magic, version or dim, or any count or length beyond the bytes.
void parse_chunks(const std::string& bytes, size_t dim, std::vector<Chunk>* chunks, std::vector<float>* vectors);

// The folder of one corpus's index under root (created by write_index).
std::string index_dir(const std::string& root, const std::string& corpus_abs, const std::string& embedder_id);
// $CACTUS_MODELS (or ~/.cache/cactus/models, as model_store.h) + "/index".
std::string default_index_root();

// Writes chunks.bin then manifest.json (manifest's chunks fields are filled in here).
void write_index(const std::string& dir, IndexManifest manifest, const std::vector<Chunk>& chunks,
                 const std::vector<float>& vectors);
// Reads a stored index if it exists and matches `current`; false (with the reason in *why) when
// it is absent, stale, or damaged in any way. Never throws for the stored files' content.
bool read_index(const std::string& dir, const IndexManifest& current, std::vector<Chunk>* chunks,
                std::vector<float>* vectors, std::string* why);

// Small helpers shared with the corpus scan and the tests.
std::string sha256_hex(const std::string& bytes);
std::string fast_hash_hex(const std::string& bytes);  // 16 hex digits; not cryptographic
// Reads a whole file; false when it cannot be opened or read (errno kept).
bool read_file_bytes(const std::string& path, std::string* out, uint64_t max_bytes);

}  // namespace cactus
