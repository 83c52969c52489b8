#include "gguf/gguf_writer.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace cactus {

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
    put_bytes(out, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    put_bytes(out, s.data(), s.size());
}

// Appends one numeric element of `type`, from an integer or a float source.
void put_number(std::vector<uint8_t>& out, GgufType type, int64_t i, double f) {
    switch (type) {
        case GgufType::U8:
            put<uint8_t>(out, static_cast<uint8_t>(i));
            break;
        case GgufType::I8:
            put<int8_t>(out, static_cast<int8_t>(i));
            break;
        case GgufType::U16:
            put<uint16_t>(out, static_cast<uint16_t>(i));
            break;
        case GgufType::I16:
            put<int16_t>(out, static_cast<int16_t>(i));
            break;
        case GgufType::U32:
            put<uint32_t>(out, static_cast<uint32_t>(i));
            break;
        case GgufType::I32:
            put<int32_t>(out, static_cast<int32_t>(i));
            break;
        case GgufType::U64:
            put<uint64_t>(out, static_cast<uint64_t>(i));
            break;
        case GgufType::I64:
            put<int64_t>(out, i);
            break;
        case GgufType::BOOL:
            put<uint8_t>(out, i != 0 ? 1 : 0);
            break;
        case GgufType::F32:
            put<float>(out, static_cast<float>(f));
            break;
        case GgufType::F64:
            put<double>(out, f);
            break;
        default:
            fail("GgufWriter: type %s is not numeric", gguf_type_name(type));
    }
}

bool is_float_type(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }

bool is_numeric_type(GgufType t) { return gguf_scalar_size(t) != 0; }

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
    while (out.size() % alignment != 0) out.push_back(0);
}

}  // namespace

GgufWriter::GgufWriter(uint32_t version) : version_(version) {
    if (version != 2 && version != 3) fail("GgufWriter: version %u is not 2 or 3", version);
}

void GgufWriter::begin_key(const std::string& key, GgufType type) {
    if (!keys_.insert(key).second) fail("GgufWriter: duplicate metadata key '%s'", key.c_str());
    put_string(kv_bytes_, key);
    put<uint32_t>(kv_bytes_, static_cast<uint32_t>(type));
    ++n_kv_;
}

void GgufWriter::add_scalar_bytes(const std::string& key, GgufType type, const void* v, size_t n) {
    begin_key(key, type);
    put_bytes(kv_bytes_, v, n);
}

void GgufWriter::set_alignment(uint32_t alignment) { add_u32("general.alignment", alignment); }

void GgufWriter::add_u8(const std::string& key, uint8_t v) { add_scalar_bytes(key, GgufType::U8, &v, 1); }
void GgufWriter::add_i8(const std::string& key, int8_t v) { add_scalar_bytes(key, GgufType::I8, &v, 1); }
void GgufWriter::add_u16(const std::string& key, uint16_t v) { add_scalar_bytes(key, GgufType::U16, &v, 2); }
void GgufWriter::add_i16(const std::string& key, int16_t v) { add_scalar_bytes(key, GgufType::I16, &v, 2); }
void GgufWriter::add_i32(const std::string& key, int32_t v) { add_scalar_bytes(key, GgufType::I32, &v, 4); }
void GgufWriter::add_u64(const std::string& key, uint64_t v) { add_scalar_bytes(key, GgufType::U64, &v, 8); }
void GgufWriter::add_i64(const std::string& key, int64_t v) { add_scalar_bytes(key, GgufType::I64, &v, 8); }
void GgufWriter::add_f32(const std::string& key, float v) { add_scalar_bytes(key, GgufType::F32, &v, 4); }
void GgufWriter::add_f64(const std::string& key, double v) { add_scalar_bytes(key, GgufType::F64, &v, 8); }

void GgufWriter::add_u32(const std::string& key, uint32_t v) {
    if (key == "general.alignment") {
        if (v == 0 || (v & (v - 1)) != 0 || v > (1u << 20)) {
            fail("GgufWriter: alignment %u is not a power of two in [1, 1048576]", v);
        }
        alignment_ = v;
    }
    add_scalar_bytes(key, GgufType::U32, &v, 4);
}

void GgufWriter::add_bool(const std::string& key, bool v) {
    uint8_t b = v ? 1 : 0;
    add_scalar_bytes(key, GgufType::BOOL, &b, 1);
}

void GgufWriter::add_string(const std::string& key, const std::string& v) {
    begin_key(key, GgufType::STRING);
    put_string(kv_bytes_, v);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
    begin_key(key, GgufType::ARRAY);
    put<uint32_t>(kv_bytes_, static_cast<uint32_t>(GgufType::STRING));
    put<uint64_t>(kv_bytes_, v.size());
    for (const std::string& s : v) put_string(kv_bytes_, s);
}

void GgufWriter::add_int_array(const std::string& key, GgufType element_type, const std::vector<int64_t>& v) {
    if (!is_numeric_type(element_type) || is_float_type(element_type)) {
        fail("GgufWriter: '%s': %s is not an integer element type", key.c_str(), gguf_type_name(element_type));
    }
    begin_key(key, GgufType::ARRAY);
    put<uint32_t>(kv_bytes_, static_cast<uint32_t>(element_type));
    put<uint64_t>(kv_bytes_, v.size());
    for (int64_t x : v) put_number(kv_bytes_, element_type, x, 0.0);
}

void GgufWriter::add_float_array(const std::string& key, GgufType element_type, const std::vector<double>& v) {
    if (!is_float_type(element_type)) {
        fail("GgufWriter: '%s': %s is not a float element type", key.c_str(), gguf_type_name(element_type));
    }
    begin_key(key, GgufType::ARRAY);
    put<uint32_t>(kv_bytes_, static_cast<uint32_t>(element_type));
    put<uint64_t>(kv_bytes_, v.size());
    for (double x : v) put_number(kv_bytes_, element_type, 0, x);
}

void GgufWriter::add_value(const std::string& key, const GgufValue& value) {
    switch (value.type) {
        case GgufType::STRING:
            add_string(key, value.str);
            return;
        case GgufType::U32:
            add_u32(key, static_cast<uint32_t>(value.u));
            return;
        case GgufType::ARRAY:
            if (value.array_type == GgufType::STRING) return add_string_array(key, value.strings);
            if (is_float_type(value.array_type)) return add_float_array(key, value.array_type, value.numbers);
            return add_int_array(key, value.array_type, value.ints);
        default:
            break;
    }
    if (!is_numeric_type(value.type)) {
        fail("GgufWriter: '%s': unknown value type %u", key.c_str(), static_cast<uint32_t>(value.type));
    }
    begin_key(key, value.type);
    put_number(kv_bytes_, value.type, value.i, value.f);
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<uint64_t>& dims, const void* data,
                            size_t n_bytes) {
    const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
    if (traits == nullptr) fail("GgufWriter: tensor '%s': unknown type %u", name.c_str(), static_cast<uint32_t>(type));
    if (name.size() > 63) fail("GgufWriter: tensor name '%s' is longer than 63 bytes", name.c_str());
    if (dims.empty() || dims.size() > 4) fail("GgufWriter: tensor '%s': %zu dims", name.c_str(), dims.size());
    uint64_t n_elements = 1;
    for (uint64_t d : dims) {
        if (d == 0 || __builtin_mul_overflow(n_elements, d, &n_elements)) {
            fail("GgufWriter: tensor '%s': bad dims", name.c_str());
        }
    }
    if (dims[0] % traits->block_size != 0) {
        fail("GgufWriter: tensor '%s': dims[0] %llu not a multiple of %u", name.c_str(),
             static_cast<unsigned long long>(dims[0]), traits->block_size);
    }
    uint64_t expected = n_elements / traits->block_size * traits->block_bytes;
    if (expected != n_bytes) {
        fail("GgufWriter: tensor '%s': %zu data bytes, shape needs %llu", name.c_str(), n_bytes,
             static_cast<unsigned long long>(expected));
    }
    if (!tensor_names_.insert(name).second) fail("GgufWriter: duplicate tensor name '%s'", name.c_str());
    const auto* b = static_cast<const uint8_t*>(data);
    tensors_.push_back(Tensor{name, type, dims, std::vector<uint8_t>(b, b + n_bytes)});
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
    std::vector<uint8_t> out;
    put_bytes(out, "GGUF", 4);
    put<uint32_t>(out, version_);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, n_kv_);
    put_bytes(out, kv_bytes_.data(), kv_bytes_.size());
    uint64_t offset = 0;
    for (const Tensor& t : tensors_) {
        put_string(out, t.name);
        put<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
        for (uint64_t d : t.dims) put<uint64_t>(out, d);
        put<uint32_t>(out, static_cast<uint32_t>(t.type));
        put<uint64_t>(out, offset);
        offset += (t.bytes.size() + alignment_ - 1) / alignment_ * alignment_;
    }
    pad_to(out, alignment_);
    for (const Tensor& t : tensors_) {
        put_bytes(out, t.bytes.data(), t.bytes.size());
        pad_to(out, alignment_);
    }
    return out;
}

void GgufWriter::write_file(const std::string& path) const {
    std::vector<uint8_t> bytes = to_bytes();
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) fail("GgufWriter: cannot create '%s'", path.c_str());
    size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
    int closed = std::fclose(f);
    if (written != bytes.size() || closed != 0) fail("GgufWriter: cannot write '%s'", path.c_str());
}

}  // namespace cactus
