#pragma once
// GGUF reader (versions 2 and 3), memory-mapped. Hostile-input safe: every count, length, dimension
// product, alignment and offset is checked against overflow and the file size before use; a bad
// file throws cactus::Error naming the field.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace cactus {

enum class GgufType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

// One metadata value. Scalars live in the numeric fields; arrays keep their element type and
// either `strings` (STRING elements) or `numbers` (numeric/bool elements, converted to double)
// plus, for integer arrays, `ints` (exact int64 values). Nested arrays are rejected.
struct GgufValue {
    GgufType type = GgufType::U8;
    GgufType array_type = GgufType::U8;  // element type when type == ARRAY
    int64_t i = 0;                       // integer and bool scalars
    uint64_t u = 0;                      // unsigned scalars (also set for non-negative signed)
    double f = 0.0;                      // float scalars (and integer scalars converted)
    std::string str;                     // STRING scalar
    std::vector<std::string> strings;    // ARRAY of STRING
    std::vector<double> numbers;         // ARRAY of numeric / bool
    std::vector<int64_t> ints;           // ARRAY of integer / bool (same length as numbers)
    size_t array_size() const;
};

// "u8", "string", "array", ...; "unknown" for ids outside the enum.
const char* gguf_type_name(GgufType type);
// Bytes of one scalar of a fixed-size type; 0 for STRING, ARRAY and unknown ids.
size_t gguf_scalar_size(GgufType type);

struct GgufTensor {
    std::string name;
    DType type = DType::F32;
    std::vector<uint64_t> dims;  // ne[0] is the innermost (contiguous) dimension, as in GGML
    uint64_t offset = 0;         // relative to the data section
    uint64_t n_elements = 0;
    uint64_t n_bytes = 0;
    const uint8_t* data = nullptr;  // points into the mapping
};

class GgufFile {
public:
    // Opens and fully validates a file. Throws cactus::Error on any problem.
    static std::unique_ptr<GgufFile> open(const std::string& path);
    // Parses an in-memory image (used by tests and the fuzzer); the buffer must outlive the object.
    static std::unique_ptr<GgufFile> from_memory(const uint8_t* data, size_t size);
    ~GgufFile();
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    const std::string& path() const { return path_; }
    size_t file_size() const { return size_; }
    // Byte offset of the (aligned) tensor data section in the file.
    uint64_t data_offset() const { return data_offset_; }

    const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
    const GgufValue* find(const std::string& key) const;
    bool has(const std::string& key) const { return find(key) != nullptr; }

    // Typed getters: throw a cactus::Error naming the key when missing or of the wrong type.
    std::string get_string(const std::string& key) const;
    std::string get_string(const std::string& key, const std::string& fallback) const;
    uint64_t get_uint(const std::string& key) const;  // any non-negative integer type
    uint64_t get_uint(const std::string& key, uint64_t fallback) const;
    double get_float(const std::string& key) const;  // any numeric type
    double get_float(const std::string& key, double fallback) const;
    bool get_bool(const std::string& key, bool fallback) const;
    const std::vector<std::string>& get_string_array(const std::string& key) const;
    const GgufValue& get_array(const std::string& key) const;

    const std::vector<GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* find_tensor(const std::string& name) const;  // nullptr when absent

    // Copies the weights into anonymous memory (huge pages where allowed) and mlocks the copy;
    // if mlock is refused the copy stays, unlocked; with no memory for a copy, mlocks the file's
    // pages instead.
    void lock_in_memory();
    // Copies the tensor data section into anonymous memory and repoints every tensor's `data`
    // there, dropping the copied pages of the file mapping. Idempotent.
    void copy_into_anonymous_memory();
    // A backend keeps its own copy of tensor `name` (a repacked layout, CpuBackend::pack_for_products):
    // its bytes here leave memory. In the anonymous copy, the tensor's `data` moves back to the file
    // mapping (a later reader still gets its bytes, from the file) and the copy's whole pages of it
    // are freed; in the file mapping its whole pages are dropped (they come back if touched).
    // Nothing happens for a tensor whose bytes a consumer reads in place (note_direct_use). Logically
    // const: the tensor's bytes stay the same, only where they live changes.
    void release_tensor_bytes(const std::string& name) const;
    // A consumer keeps a pointer to tensor `name`'s bytes (a weight placed as it is, a get_rows table).
    void note_direct_use(const std::string& name) const;
    // A table read a few rows at a time (Gemma 4's per-layer embeddings: most of the file, a few KB
    // per token): its bytes stay in the file mapping, outside the anonymous copy and the mlock of
    // lock_in_memory, so only the rows read are resident. Called before the copy, the copy leaves it
    // out (no transient copy of it either: Model::mapped_tables names such tables before a load);
    // after, its data moves back to the mapping and the copy's pages of it are freed. Notes a direct
    // use; returns the tensor (its data in the mapping). Logically const, as above.
    const GgufTensor& keep_mapped(const std::string& name) const;
    // Where the tensor data lives now: "mapped" (the file), "anonymous" (a copy) or "locked"
    // (mlock succeeded: on the copy, or on the file's pages when no copy could be made).
    const char* residency() const;

private:
    GgufFile() = default;
    void parse();
    void release();
    bool try_copy_into_anonymous_memory();  // false (nothing changed) when the memory is refused
    // [begin, end) offsets in the data section of the whole pages that hold kept-mapped tensors only
    // (sorted, disjoint): the anonymous copy leaves them untouched.
    std::vector<std::pair<size_t, size_t>> kept_pages() const;

    std::string path_;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    bool owns_mapping_ = false;
    int fd_ = -1;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    size_t mapped_size_ = 0;        // length passed to mmap (0 when not mapped)
    bool locked_ = false;           // mlock succeeded on the data section (copy or file pages)
    uint8_t* anonymous_ = nullptr;  // anonymous copy of the data section (mmap'ed), or nullptr
    size_t anonymous_size_ = 0;
    std::map<std::string, GgufValue> metadata_;
    mutable std::vector<GgufTensor> tensors_;  // data: moved by release_tensor_bytes
    mutable std::vector<bool> used_in_place_;  // per tensor (parse): note_direct_use was called
    mutable std::vector<bool> kept_mapped_;    // per tensor: keep_mapped was called
    std::map<std::string, size_t> tensor_index_;
};

}  // namespace cactus
