#include "engine/retrieval/index_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "chat/json_parse.h"
#include "core/error.h"
#include "core/sha256.h"
#include "engine/model_store.h"

namespace cactus {

namespace {

constexpr char kMagic[8] = {'C', 'R', 'A', 'G', 'I', 'D', 'X', '1'};
constexpr uint32_t kVersion = 1;
constexpr int kManifestVersion = 1;
constexpr uint64_t kMaxManifestBytes = uint64_t(64) << 20;
constexpr uint64_t kMaxChunksBytes = uint64_t(16) << 30;

template <typename T>
void put(std::string* out, T v) {  // little-endian hosts only (x86-64, arm64)
    out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// Bounds-checked reader over untrusted bytes.
struct Reader {
    const std::string& bytes;
    size_t pos = 0;

    size_t left() const { return bytes.size() - pos; }
    template <typename T>
    T get(const char* what) {
        if (left() < sizeof(T)) fail("chunks.bin: %s at byte %zu is past the end (%zu bytes)", what, pos, bytes.size());
        T v;
        std::memcpy(&v, bytes.data() + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string get_string(const char* what) {
        uint32_t n = get<uint32_t>(what);
        if (n > left()) fail("chunks.bin: %s length %u at byte %zu exceeds the %zu bytes left", what, n, pos, left());
        std::string s = bytes.substr(pos, n);
        pos += n;
        return s;
    }
};

// No fsync: after a crash a renamed file may hold partial bytes, which read_index detects (sizes
// and hash against the manifest) and rebuilds, so durability costs nothing in correctness.
void write_atomic(const std::string& path, const std::string& bytes) {
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) fail("write_index: cannot create %s: %s", tmp.c_str(), std::strerror(errno));
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = std::fflush(f) == 0 && ok;
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        std::remove(tmp.c_str());
        fail("write_index: cannot write %s: %s", path.c_str(), std::strerror(err));
    }
}

void make_dirs(const std::string& path) {
    for (size_t pos = 1; pos <= path.size(); ++pos) {
        if (pos != path.size() && path[pos] != '/') continue;
        std::string prefix = path.substr(0, pos);
        if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
            fail("write_index: cannot create folder %s: %s", prefix.c_str(), std::strerror(errno));
        }
    }
}

}  // namespace

std::string fast_hash_hex(const std::string& bytes) {
    // Four independent multiply-xorshift lanes over 8-byte words (then the tail), so the hash runs
    // near memory speed; chunks.bin is hundreds of MB at 10^5 chunks, where SHA-256 took seconds.
    const uint64_t kMul = 0x9E3779B97F4A7C15ull;
    uint64_t lane[4] = {1, 2, 3, 4};
    size_t i = 0;
    for (; i + 32 <= bytes.size(); i += 32) {
        for (int k = 0; k < 4; ++k) {
            uint64_t w;
            std::memcpy(&w, bytes.data() + i + 8 * k, 8);
            lane[k] = (lane[k] ^ w) * kMul;
            lane[k] ^= lane[k] >> 29;
        }
    }
    uint64_t h = bytes.size() * kMul;
    for (; i < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * kMul;
    for (uint64_t l : lane) {
        h = (h ^ l) * kMul;
        h ^= h >> 31;
    }
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

std::string sha256_hex(const std::string& bytes) {
    Sha256 h;
    h.update(bytes.data(), bytes.size());
    return h.hex_digest();
}

bool read_file_bytes(const std::string& path, std::string* out, uint64_t max_bytes) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return false;
    out->clear();
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
        if (out->size() + n > max_bytes) {
            std::fclose(f);
            errno = EFBIG;
            return false;
        }
        out->append(buf, n);
    }
    bool ok = !std::ferror(f);
    std::fclose(f);
    return ok;
}

nlohmann::ordered_json manifest_to_json(const IndexManifest& m) {
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const CorpusFile& f : m.files) {
        files.push_back({{"name", f.name}, {"size", f.size}, {"mtime_ns", f.mtime_ns}, {"sha256", f.sha256}});
    }
    return {{"format", "cactus-rag-index"},
            {"version", kManifestVersion},
            {"corpus", m.corpus},
            {"embedder", m.embedder_id},
            {"dim", m.dim},
            {"chunking",
             {{"max_tokens", m.chunking.max_tokens},
              {"overlap", m.chunking.overlap},
              {"min_tokens", m.chunking.min_tokens}}},
            {"files", files},
            {"changed_while_reading", m.changed_while_reading},
            {"chunks_bytes", m.chunks_bytes},
            {"chunks_hash", m.chunks_hash}};
}

IndexManifest manifest_from_json(const nlohmann::ordered_json& j) {
    try {
        if (j.at("format").get<std::string>() != "cactus-rag-index" || j.at("version").get<int>() != kManifestVersion) {
            fail("manifest: unknown format or version");
        }
        IndexManifest m;
        m.corpus = j.at("corpus").get<std::string>();
        m.embedder_id = j.at("embedder").get<std::string>();
        m.dim = j.at("dim").get<size_t>();
        const nlohmann::ordered_json& c = j.at("chunking");
        m.chunking = {c.at("max_tokens").get<size_t>(), c.at("overlap").get<size_t>(),
                      c.at("min_tokens").get<size_t>()};
        for (const nlohmann::ordered_json& f : j.at("files")) {
            m.files.push_back({f.at("name").get<std::string>(), f.at("size").get<uint64_t>(),
                               f.at("mtime_ns").get<int64_t>(), f.at("sha256").get<std::string>()});
        }
        m.changed_while_reading = j.at("changed_while_reading").get<std::vector<std::string>>();
        m.chunks_bytes = j.at("chunks_bytes").get<uint64_t>();
        m.chunks_hash = j.at("chunks_hash").get<std::string>();
        return m;
    } catch (const nlohmann::json::exception& e) {
        fail("manifest: %s", e.what());
    }
}

bool manifest_matches(const IndexManifest& stored, const IndexManifest& current) {
    if (stored.corpus != current.corpus || stored.embedder_id != current.embedder_id || stored.dim != current.dim) {
        return false;
    }
    const ChunkingOptions &a = stored.chunking, &b = current.chunking;
    if (a.max_tokens != b.max_tokens || a.overlap != b.overlap || a.min_tokens != b.min_tokens) return false;
    if (!stored.changed_while_reading.empty() || stored.files.size() != current.files.size()) return false;
    for (size_t i = 0; i < stored.files.size(); ++i) {
        const CorpusFile &s = stored.files[i], &c = current.files[i];
        if (s.name != c.name || s.size != c.size || s.mtime_ns != c.mtime_ns || s.sha256 != c.sha256) return false;
    }
    return true;
}

std::string serialize_chunks(const std::vector<Chunk>& chunks, const std::vector<float>& vectors, size_t dim) {
    CACTUS_ASSERT(vectors.size() == chunks.size() * dim);
    std::string out(kMagic, sizeof(kMagic));
    put<uint32_t>(&out, kVersion);
    put<uint32_t>(&out, static_cast<uint32_t>(dim));
    put<uint64_t>(&out, chunks.size());
    for (const Chunk& c : chunks) {
        put<uint32_t>(&out, static_cast<uint32_t>(c.source.size()));
        out += c.source;
        put<uint32_t>(&out, static_cast<uint32_t>(c.content.size()));
        out += c.content;
        put<uint64_t>(&out, c.ordinal);
    }
    out.append(reinterpret_cast<const char*>(vectors.data()), vectors.size() * sizeof(float));
    return out;
}

void parse_chunks(const std::string& bytes, size_t dim, std::vector<Chunk>* chunks, std::vector<float>* vectors) {
    if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
        fail("chunks.bin: bad magic");
    }
    Reader r{bytes, sizeof(kMagic)};
    uint32_t version = r.get<uint32_t>("version");
    if (version != kVersion) fail("chunks.bin: version %u, expected %u", version, kVersion);
    uint32_t file_dim = r.get<uint32_t>("dim");
    if (file_dim != dim || dim == 0) fail("chunks.bin: dim %u, expected %zu", file_dim, dim);
    uint64_t n = r.get<uint64_t>("chunk count");
    // Each chunk takes at least 16 bytes of header and dim floats: a count beyond that is a lie.
    if (n > r.left() / (16 + sizeof(float) * dim))
        fail("chunks.bin: %llu chunks cannot fit in %zu bytes", static_cast<unsigned long long>(n), r.left());
    chunks->clear();
    chunks->reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
        Chunk c;
        c.source = r.get_string("source");
        c.content = r.get_string("content");
        c.ordinal = r.get<uint64_t>("ordinal");
        chunks->push_back(std::move(c));
    }
    if (r.left() != n * dim * sizeof(float)) {
        fail("chunks.bin: %zu bytes of vectors, expected %llu", r.left(),
             static_cast<unsigned long long>(n * dim * sizeof(float)));
    }
    vectors->resize(n * dim);
    if (r.left() > 0) std::memcpy(vectors->data(), bytes.data() + r.pos, r.left());  // an empty corpus has none
}

std::string default_index_root() { return model_cache_dir() + "/index"; }

std::string index_dir(const std::string& root, const std::string& corpus_abs, const std::string& embedder_id) {
    // The NUL keeps ("/a", "bc") and ("/ab", "c") apart.
    return root + "/" + sha256_hex(corpus_abs + std::string(1, '\0') + embedder_id);
}

void write_index(const std::string& dir, IndexManifest manifest, const std::vector<Chunk>& chunks,
                 const std::vector<float>& vectors) {
    make_dirs(dir);
    std::string bytes = serialize_chunks(chunks, vectors, manifest.dim);
    manifest.chunks_bytes = bytes.size();
    manifest.chunks_hash = fast_hash_hex(bytes);
    write_atomic(dir + "/chunks.bin", bytes);
    write_atomic(dir + "/manifest.json", manifest_to_json(manifest).dump());
}

bool read_index(const std::string& dir, const IndexManifest& current, std::vector<Chunk>* chunks,
                std::vector<float>* vectors, std::string* why) {
    std::string text;
    if (!read_file_bytes(dir + "/manifest.json", &text, kMaxManifestBytes)) {
        *why = "no readable manifest";
        return false;
    }
    try {
        IndexManifest stored = manifest_from_json(parse_json(text, "manifest.json"));
        if (!manifest_matches(stored, current)) {
            *why = "the corpus, embedder or chunking changed";
            return false;
        }
        std::string bytes;
        if (!read_file_bytes(dir + "/chunks.bin", &bytes, kMaxChunksBytes) || bytes.size() != stored.chunks_bytes ||
            fast_hash_hex(bytes) != stored.chunks_hash) {
            *why = "chunks.bin is missing or does not match the manifest";
            return false;
        }
        parse_chunks(bytes, current.dim, chunks, vectors);
        return true;
    } catch (const Error& e) {
        *why = e.what();
        return false;
    }
}

}  // namespace cactus
