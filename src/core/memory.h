#pragma once
// Process memory figures for metrics.
#include <cstddef>

namespace cactus {

// Resident set size in bytes (includes mapped weights that are actually resident); 0 if unknown.
size_t resident_memory_bytes();

}  // namespace cactus
