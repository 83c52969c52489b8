#pragma once
// Element types of tensors. Numeric values equal GGML's type ids so GGUF files map directly.
#include <cstddef>
#include <cstdint>

namespace cactus {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    BF16 = 30,
    // Internal layouts (never read from or written to a file): weights repacked at load by a
    // backend (ops/q4_k_x8.h, ops/q6_k_x8.h, ops/q4_0_x8.h).
    Q4_K_X8 = 31,
    Q6_K_X8 = 32,
    Q4_0_X8 = 33,
};

// Type ids are below this (the internal layouts included): the size of tables indexed by type.
constexpr size_t kDTypeSlots = 34;

struct DTypeTraits {
    const char* name;
    uint32_t block_size;   // elements per block (1 for plain types)
    uint32_t block_bytes;  // bytes per block
};

// The traits of a type a file may hold; nullptr for ids that are not one (hostile files use them),
// the internal layouts included.
const DTypeTraits* dtype_traits(uint32_t type_id);
// Any type, the internal layouts included (asserts on an unknown id).
const DTypeTraits& dtype_traits(DType type);
// True for the internal layouts (DType comments).
bool dtype_is_internal(DType type);
// The file type an internal layout was repacked from (Q4_K_X8 -> Q4_K); any other type itself.
DType dtype_repacked_from(DType type);
const char* dtype_name(DType type);

// Bytes of one row of n elements; n must be a multiple of the block size (checked by callers).
size_t dtype_row_bytes(DType type, size_t n);

}  // namespace cactus
