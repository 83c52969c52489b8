#pragma once
// Builds a GGUF file (version 2 or 3) in memory from metadata and tensors; used by tests, the
// fuzzer's seed generator and converters. Only valid files come out: keys and tensor names are
// unique, tensor shapes fit their type's block size, offsets are aligned.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace cactus {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t version = 3);

    // Writes general.alignment (u32, a power of two up to 1 MiB); without it the alignment is 32.
    // add_u32("general.alignment", a) does the same.
    void set_alignment(uint32_t alignment);

    void add_u8(const std::string& key, uint8_t v);
    void add_i8(const std::string& key, int8_t v);
    void add_u16(const std::string& key, uint16_t v);
    void add_i16(const std::string& key, int16_t v);
    void add_u32(const std::string& key, uint32_t v);
    void add_i32(const std::string& key, int32_t v);
    void add_u64(const std::string& key, uint64_t v);
    void add_i64(const std::string& key, int64_t v);
    void add_f32(const std::string& key, float v);
    void add_f64(const std::string& key, double v);
    void add_bool(const std::string& key, bool v);
    void add_string(const std::string& key, const std::string& v);
    void add_string_array(const std::string& key, const std::vector<std::string>& v);
    // Numeric / bool arrays: integer element types take `ints`, float types take `numbers`.
    void add_int_array(const std::string& key, GgufType element_type, const std::vector<int64_t>& v);
    void add_float_array(const std::string& key, GgufType element_type, const std::vector<double>& v);
    // Any value as the reader returns it (round trips GgufFile::metadata()).
    void add_value(const std::string& key, const GgufValue& value);

    // dims[0] is innermost; `data` holds exactly the tensor's byte size and is copied.
    void add_tensor(const std::string& name, DType type, const std::vector<uint64_t>& dims, const void* data,
                    size_t n_bytes);

    std::vector<uint8_t> to_bytes() const;
    void write_file(const std::string& path) const;

private:
    struct Tensor {
        std::string name;
        DType type;
        std::vector<uint64_t> dims;
        std::vector<uint8_t> bytes;
    };
    void add_scalar_bytes(const std::string& key, GgufType type, const void* v, size_t n);
    void begin_key(const std::string& key, GgufType type);

    uint32_t version_;
    uint32_t alignment_ = 32;
    uint64_t n_kv_ = 0;
    std::set<std::string> keys_;
    std::set<std::string> tensor_names_;
    std::vector<uint8_t> kv_bytes_;  // serialized key/value pairs in insertion order
    std::vector<Tensor> tensors_;
};

}  // namespace cactus
