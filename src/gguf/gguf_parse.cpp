// GGUF parsing: header, metadata, tensor infos, data section. Every read is bounds-checked against
// the bytes that exist; every count is checked against the bytes that could hold it before any
// allocation; every product and sum is checked for overflow. Rules follow ggml's gguf.cpp, plus
// a few stricter ones (no zero dims, no n_dims 0, bounded alignment, no overlapping tensors).
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace cactus {

namespace {

constexpr uint32_t kMaxDims = 4;                           // GGML_MAX_DIMS
constexpr size_t kMaxTensorName = 63;                      // GGML_MAX_NAME - 1
constexpr uint64_t kMaxAlignment = 1ull << 20;             // 1 MiB; larger is hostile, not useful
constexpr size_t kMinKvBytes = 8 + 4 + 1;                  // key length, type, smallest value
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, one dim, type, offset

// Reads little-endian values from [base, base + size) with bounds checks.
class Cursor {
public:
    Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}

    size_t pos() const { return pos_; }
    size_t left() const { return size_ - pos_; }

    void need(size_t n, const std::string& what) const {
        if (n > left()) {
            fail("gguf: %s at offset %zu: needs %zu bytes but only %zu remain (file size %zu)", what.c_str(), pos_, n,
                 left(), size_);
        }
    }

    template <typename T>
    T read(const std::string& what) {
        need(sizeof(T), what);
        T value;
        std::memcpy(&value, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }

    std::string read_string(const std::string& what) {
        uint64_t length = read<uint64_t>(what + " length");
        if (length > left()) {
            fail("gguf: %s at offset %zu: string length %llu past end of file (%zu bytes remain)", what.c_str(), pos_,
                 static_cast<unsigned long long>(length), left());
        }
        std::string out(reinterpret_cast<const char*>(base_ + pos_), static_cast<size_t>(length));
        pos_ += static_cast<size_t>(length);
        return out;
    }

    // A count of items each taking at least `min_item_bytes`: rejects counts the file cannot hold.
    uint64_t read_count(const std::string& what, size_t min_item_bytes) {
        size_t at = pos_;
        uint64_t count = read<uint64_t>(what);
        if (min_item_bytes > 0 && count > left() / min_item_bytes) {
            fail(
                "gguf: %s at offset %zu: %llu items of at least %zu bytes cannot fit in the %zu "
                "bytes that remain",
                what.c_str(), at, static_cast<unsigned long long>(count), min_item_bytes, left());
        }
        return count;
    }

private:
    const uint8_t* base_;
    size_t size_;
    size_t pos_ = 0;
};

bool is_known_type(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::F64); }

GgufType read_value_type(Cursor& in, const std::string& what) {
    size_t at = in.pos();
    uint32_t id = in.read<uint32_t>(what);
    if (!is_known_type(id)) fail("gguf: %s at offset %zu: unknown value type %u", what.c_str(), at, id);
    return static_cast<GgufType>(id);
}

// Reads one fixed-size scalar and stores it in every field that represents it exactly.
void read_scalar(Cursor& in, GgufType type, const std::string& what, GgufValue& out) {
    auto set_signed = [&](int64_t v) {
        out.i = v;
        out.u = v >= 0 ? static_cast<uint64_t>(v) : 0;
        out.f = static_cast<double>(v);
    };
    auto set_unsigned = [&](uint64_t v) {
        out.u = v;
        out.i = static_cast<int64_t>(v);
        out.f = static_cast<double>(v);
    };
    switch (type) {
        case GgufType::U8:
            set_unsigned(in.read<uint8_t>(what));
            break;
        case GgufType::I8:
            set_signed(in.read<int8_t>(what));
            break;
        case GgufType::U16:
            set_unsigned(in.read<uint16_t>(what));
            break;
        case GgufType::I16:
            set_signed(in.read<int16_t>(what));
            break;
        case GgufType::U32:
            set_unsigned(in.read<uint32_t>(what));
            break;
        case GgufType::I32:
            set_signed(in.read<int32_t>(what));
            break;
        case GgufType::U64:
            set_unsigned(in.read<uint64_t>(what));
            break;
        case GgufType::I64:
            set_signed(in.read<int64_t>(what));
            break;
        case GgufType::BOOL:
            set_unsigned(in.read<uint8_t>(what) != 0 ? 1 : 0);
            break;
        case GgufType::F32:
            out.f = in.read<float>(what);
            break;
        case GgufType::F64:
            out.f = in.read<double>(what);
            break;
        default:
            fail("gguf: %s: type %s is not a scalar", what.c_str(), gguf_type_name(type));
    }
}

bool is_integer_like(GgufType t) { return t != GgufType::F32 && t != GgufType::F64; }

void read_array(Cursor& in, const std::string& what, GgufValue& out) {
    out.array_type = read_value_type(in, what + " array element type");
    if (out.array_type == GgufType::ARRAY) {
        fail("gguf: %s at offset %zu: nested arrays are not supported", what.c_str(), in.pos() - 4);
    }
    size_t element_bytes = out.array_type == GgufType::STRING ? 8 : gguf_scalar_size(out.array_type);
    uint64_t count = in.read_count(what + " array length", element_bytes);
    size_t n = static_cast<size_t>(count);
    if (out.array_type == GgufType::STRING) {
        out.strings.reserve(n);
        std::string element_what = what + " string element";
        for (size_t k = 0; k < n; ++k) out.strings.push_back(in.read_string(element_what));
        return;
    }
    out.numbers.reserve(n);
    bool integer = is_integer_like(out.array_type);
    if (integer) out.ints.reserve(n);
    std::string element_what = what + " array element";
    GgufValue element;
    for (size_t k = 0; k < n; ++k) {
        read_scalar(in, out.array_type, element_what, element);
        out.numbers.push_back(element.f);
        if (integer) out.ints.push_back(element.i);
    }
}

GgufValue read_value(Cursor& in, const std::string& key) {
    std::string what = "metadata '" + key + "'";
    GgufValue value;
    value.type = read_value_type(in, what + " type");
    if (value.type == GgufType::STRING) {
        value.str = in.read_string(what + " value");
    } else if (value.type == GgufType::ARRAY) {
        read_array(in, what, value);
    } else {
        read_scalar(in, value.type, what + " value", value);
    }
    return value;
}

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

uint64_t checked_alignment(const std::map<std::string, GgufValue>& metadata) {
    auto it = metadata.find("general.alignment");
    if (it == metadata.end()) return 32;
    const GgufValue& v = it->second;
    if (v.type != GgufType::U32) {
        fail("gguf: metadata 'general.alignment' has type %s, expected u32", gguf_type_name(v.type));
    }
    uint64_t a = v.u;
    if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment) {
        fail("gguf: metadata 'general.alignment' = %llu is not a power of two in [1, %llu]",
             static_cast<unsigned long long>(a), static_cast<unsigned long long>(kMaxAlignment));
    }
    return a;
}

// Reads one tensor info (name, dims, type, offset) and computes its element and byte counts.
GgufTensor read_tensor_info(Cursor& in, size_t index) {
    GgufTensor t;
    t.name = in.read_string(format("tensor #%zu name", index));
    if (t.name.size() > kMaxTensorName) {
        fail("gguf: tensor #%zu name '%.40s...' is %zu bytes long (max %zu)", index, t.name.c_str(), t.name.size(),
             kMaxTensorName);
    }
    std::string what = "tensor '" + t.name + "'";
    uint32_t n_dims = in.read<uint32_t>(what + " n_dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
        fail("gguf: %s: n_dims %u out of range [1, %u]", what.c_str(), n_dims, kMaxDims);
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t dim = in.read<uint64_t>(what + " dims");
        if (dim == 0) fail("gguf: %s: dims[%u] = 0 (every dimension must be > 0)", what.c_str(), d);
        if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail("gguf: %s: dims[%u] = %llu exceeds INT64_MAX", what.c_str(), d, static_cast<unsigned long long>(dim));
        }
        if (__builtin_mul_overflow(n_elements, dim, &n_elements) ||
            n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail("gguf: %s: product of dims overflows at dims[%u] = %llu", what.c_str(), d,
                 static_cast<unsigned long long>(dim));
        }
        t.dims.push_back(dim);
    }
    uint32_t type_id = in.read<uint32_t>(what + " type");
    const DTypeTraits* traits = dtype_traits(type_id);
    if (traits == nullptr) fail("gguf: %s: unknown tensor type %u", what.c_str(), type_id);
    t.type = static_cast<DType>(type_id);
    if (t.dims[0] % traits->block_size != 0) {
        fail("gguf: %s: dims[0] = %llu is not a multiple of the %s block size %u", what.c_str(),
             static_cast<unsigned long long>(t.dims[0]), traits->name, traits->block_size);
    }
    t.n_elements = n_elements;
    if (__builtin_mul_overflow(n_elements / traits->block_size, uint64_t{traits->block_bytes}, &t.n_bytes)) {
        fail("gguf: %s: byte size of %llu %s elements overflows", what.c_str(),
             static_cast<unsigned long long>(n_elements), traits->name);
    }
    t.offset = in.read<uint64_t>(what + " offset");
    return t;
}

// Checks offsets against the alignment, the data section and each other; sets data pointers.
void place_tensors(std::vector<GgufTensor>& tensors, const uint8_t* base, size_t file_size, uint64_t data_offset,
                   uint64_t alignment) {
    uint64_t data_size = data_offset <= file_size ? file_size - data_offset : 0;
    for (GgufTensor& t : tensors) {
        const char* name = t.name.c_str();
        auto offset = static_cast<unsigned long long>(t.offset);
        if (t.offset % alignment != 0) {
            fail("gguf: tensor '%s': offset %llu is not a multiple of the alignment %llu", name, offset,
                 static_cast<unsigned long long>(alignment));
        }
        if (data_offset > file_size) {
            fail("gguf: tensor '%s': data section starts at %llu, past end of file (size %zu)", name,
                 static_cast<unsigned long long>(data_offset), file_size);
        }
        if (t.offset > data_size) {
            fail("gguf: tensor '%s': offset %llu past end of file (data section size %llu)", name, offset,
                 static_cast<unsigned long long>(data_size));
        }
        if (t.n_bytes > data_size - t.offset) {
            fail("gguf: tensor '%s': offset %llu + size %llu past end of file (data section size %llu)", name, offset,
                 static_cast<unsigned long long>(t.n_bytes), static_cast<unsigned long long>(data_size));
        }
        t.data = base + data_offset + t.offset;
    }
    std::vector<const GgufTensor*> by_offset;
    for (const GgufTensor& t : tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t k = 1; k < by_offset.size(); ++k) {
        const GgufTensor& prev = *by_offset[k - 1];
        const GgufTensor& cur = *by_offset[k];
        if (prev.offset + prev.n_bytes > cur.offset) {
            fail("gguf: tensor '%s': offset %llu overlaps tensor '%s' (offset %llu, size %llu)", cur.name.c_str(),
                 static_cast<unsigned long long>(cur.offset), prev.name.c_str(),
                 static_cast<unsigned long long>(prev.offset), static_cast<unsigned long long>(prev.n_bytes));
        }
    }
}

}  // namespace

void GgufFile::parse() {
    Cursor in(base_, size_);
    in.need(4, "magic");
    if (std::memcmp(base_, "GGUF", 4) != 0) {
        fail("gguf: bad magic %02x %02x %02x %02x (expected 'GGUF')", base_[0], base_[1], base_[2], base_[3]);
    }
    in.read<uint32_t>("magic");
    version_ = in.read<uint32_t>("version");
    if (version_ == 1) fail("gguf: version %u is not supported (only versions 2 and 3)", version_);
    if (version_ != 2 && version_ != 3) {
        fail("gguf: version %u is not supported (only versions 2 and 3%s)", version_,
             (version_ & 0xffff) == 0 ? "; big-endian file?" : "");
    }
    uint64_t n_tensors = in.read_count("tensor count", kMinTensorInfoBytes);
    uint64_t n_kv = in.read_count("metadata count", kMinKvBytes);

    for (uint64_t k = 0; k < n_kv; ++k) {
        std::string key = in.read_string(format("metadata #%llu key", static_cast<unsigned long long>(k)));
        if (metadata_.count(key) != 0) fail("gguf: duplicate metadata key '%s'", key.c_str());
        GgufValue value = read_value(in, key);
        metadata_.emplace(std::move(key), std::move(value));
    }
    alignment_ = checked_alignment(metadata_);

    tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensor t = read_tensor_info(in, static_cast<size_t>(k));
        if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
            fail("gguf: duplicate tensor name '%s'", t.name.c_str());
        }
        tensors_.push_back(std::move(t));
    }
    data_offset_ = align_up(in.pos(), alignment_);
    place_tensors(tensors_, base_, size_, data_offset_, alignment_);
    used_in_place_.assign(tensors_.size(), false);
    kept_mapped_.assign(tensors_.size(), false);
}

}  // namespace cactus
