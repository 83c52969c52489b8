#pragma once
// Process memory figures for metrics, and anonymous memory for data read end to end (weights).
#include <cstddef>
#include <cstdint>

namespace cactus {

// `bytes` of zeroed anonymous memory, 2 MiB-aligned and hinted for transparent huge pages (where
// the kernel allows): what the decode streams every token wants, as 4 KiB pages cost page walks.
// The tail is whole 4 KiB pages, so no huge page is half empty. Throws when the memory cannot be had.
class HugePageMemory {
public:
    explicit HugePageMemory(size_t bytes);
    ~HugePageMemory();
    HugePageMemory(const HugePageMemory&) = delete;
    HugePageMemory& operator=(const HugePageMemory&) = delete;
    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0, mapped_ = 0;
};

// The read loop of the bandwidth measurements (`cactus bench --membw`, `matmul_bench --vs-read`):
// the sum of n 64-bit words with independent accumulators so loads, not adds, limit the speed,
// prefetching 32 KiB ahead as the decode kernels prefetch their next rows (`cactus bench --membw` on
// a Zen 5 VM: one thread reads 31 GB/s without, 37 GB/s with; 1, 2, 8, 16 KiB: 28 to 36).
uint64_t sum_words(const uint64_t* words, size_t n);

// Resident set size in bytes (includes mapped weights that are actually resident); 0 if unknown.
size_t resident_memory_bytes();

}  // namespace cactus
