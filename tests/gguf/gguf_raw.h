#pragma once
// Hand-built GGUF images for hostile-input tests: every field can be set to any value, including
// ones the writer refuses (bad counts, unknown types, misaligned or overlapping offsets).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace gguf_raw {

using Bytes = std::vector<uint8_t>;

inline void put_bytes(Bytes& out, const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
}
template <typename T>
void put(Bytes& out, T v) {
    put_bytes(out, &v, sizeof(T));
}
inline void put_string(Bytes& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    put_bytes(out, s.data(), s.size());
}

// One key/value pair: key, type id, then raw value bytes.
inline Bytes kv(const std::string& key, uint32_t type, const Bytes& value) {
    Bytes out;
    put_string(out, key);
    put<uint32_t>(out, type);
    out.insert(out.end(), value.begin(), value.end());
    return out;
}
inline Bytes kv_u32(const std::string& key, uint32_t v) {
    Bytes b;
    put<uint32_t>(b, v);
    return kv(key, 4, b);
}
inline Bytes kv_string(const std::string& key, const std::string& v) {
    Bytes b;
    put_string(b, v);
    return kv(key, 8, b);
}
// An array header (element type, count) followed by `payload` as the elements.
inline Bytes kv_array(const std::string& key, uint32_t element_type, uint64_t count, const Bytes& payload) {
    Bytes b;
    put<uint32_t>(b, element_type);
    put<uint64_t>(b, count);
    b.insert(b.end(), payload.begin(), payload.end());
    return kv(key, 9, b);
}

struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type = 0;  // F32
    uint64_t offset = 0;
    std::optional<uint32_t> n_dims;       // overrides dims.size()
    std::optional<uint64_t> name_length;  // overrides name.size()
};

struct File {
    char magic[4] = {'G', 'G', 'U', 'F'};
    uint32_t version = 3;
    std::optional<uint64_t> n_tensors;  // override tensors.size()
    std::optional<uint64_t> n_kv;       // override kvs.size()
    std::vector<Bytes> kvs;
    std::vector<Tensor> tensors;
    uint64_t pad_to = 32;   // the header is zero-padded to this before the data section
    size_t data_bytes = 0;  // bytes of tensor data appended (pattern, not zeros)

    Bytes build() const {
        Bytes out;
        put_bytes(out, magic, 4);
        put<uint32_t>(out, version);
        put<uint64_t>(out, n_tensors.value_or(tensors.size()));
        put<uint64_t>(out, n_kv.value_or(kvs.size()));
        for (const Bytes& k : kvs) out.insert(out.end(), k.begin(), k.end());
        for (const Tensor& t : tensors) {
            put<uint64_t>(out, t.name_length.value_or(t.name.size()));
            put_bytes(out, t.name.data(), t.name.size());
            put<uint32_t>(out, t.n_dims.value_or(static_cast<uint32_t>(t.dims.size())));
            for (uint64_t d : t.dims) put<uint64_t>(out, d);
            put<uint32_t>(out, t.type);
            put<uint64_t>(out, t.offset);
        }
        while (pad_to > 1 && out.size() % pad_to != 0) out.push_back(0);
        for (size_t k = 0; k < data_bytes; ++k) out.push_back(static_cast<uint8_t>(k * 7 + 1));
        return out;
    }
};

// A small valid file: one metadata string, one F32 tensor 'w' of 8x2 (64 bytes).
inline File valid_file() {
    File f;
    f.kvs.push_back(kv_string("general.architecture", "test"));
    f.tensors.push_back(Tensor{"w", {8, 2}, 0, 0, std::nullopt, std::nullopt});
    f.data_bytes = 64;
    return f;
}

}  // namespace gguf_raw
