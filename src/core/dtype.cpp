#include "core/dtype.h"

#include "core/error.h"

namespace cactus {

namespace {

struct Entry {
    uint32_t id;
    DTypeTraits traits;
};

struct InternalEntry {
    uint32_t id;
    DTypeTraits traits;
    DType repacked_from;
};

constexpr Entry kTypes[] = {
    {0, {"F32", 1, 4}},       {1, {"F16", 1, 2}},       {2, {"Q4_0", 32, 18}},    {3, {"Q4_1", 32, 20}},
    {6, {"Q5_0", 32, 22}},    {7, {"Q5_1", 32, 24}},    {8, {"Q8_0", 32, 34}},    {9, {"Q8_1", 32, 36}},
    {10, {"Q2_K", 256, 84}},  {11, {"Q3_K", 256, 110}}, {12, {"Q4_K", 256, 144}}, {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}}, {15, {"Q8_K", 256, 292}}, {24, {"I8", 1, 1}},       {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},      {27, {"I64", 1, 8}},      {28, {"F64", 1, 8}},      {30, {"BF16", 1, 2}},
};

// Layouts the backends make at load (DType comments); a file's type id never maps to them.
constexpr InternalEntry kInternalTypes[] = {
    {31, {"Q4_K_X8", 256, 148}, DType::Q4_K},
    {32, {"Q6_K_X8", 256, 210}, DType::Q6_K},
    {33, {"Q4_0_X8", 32, 18}, DType::Q4_0},
};

}  // namespace

const DTypeTraits* dtype_traits(uint32_t type_id) {
    for (const Entry& e : kTypes) {
        if (e.id == type_id) return &e.traits;
    }
    return nullptr;
}

const DTypeTraits& dtype_traits(DType type) {
    const uint32_t id = static_cast<uint32_t>(type);
    const DTypeTraits* t = dtype_traits(id);
    for (const InternalEntry& e : kInternalTypes) {
        if (e.id == id) t = &e.traits;
    }
    CACTUS_ASSERT(t != nullptr);
    return *t;
}

bool dtype_is_internal(DType type) {
    for (const InternalEntry& e : kInternalTypes) {
        if (e.id == static_cast<uint32_t>(type)) return true;
    }
    return false;
}

DType dtype_repacked_from(DType type) {
    for (const InternalEntry& e : kInternalTypes) {
        if (e.id == static_cast<uint32_t>(type)) return e.repacked_from;
    }
    return type;
}

const char* dtype_name(DType type) { return dtype_traits(type).name; }

size_t dtype_row_bytes(DType type, size_t n) {
    const DTypeTraits& t = dtype_traits(type);
    CACTUS_ASSERT(n % t.block_size == 0);
    return n / t.block_size * t.block_bytes;
}

}  // namespace cactus
