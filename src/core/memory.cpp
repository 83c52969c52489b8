#include "core/memory.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace cactus {

namespace {

constexpr size_t kPage = 4096, kHugePage = size_t{2} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

HugePageMemory::HugePageMemory(size_t bytes) : size_(bytes), mapped_(round_up(bytes, kPage)) {
    const size_t reserve = mapped_ + kHugePage;
    void* p = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) fail("cannot allocate %zu bytes of anonymous memory", bytes);
    // keep the 2 MiB-aligned part of the reservation, unmap what lies before and after it
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = round_up(start, kHugePage);
    if (aligned > start) ::munmap(p, aligned - start);
    const uintptr_t end = start + reserve;
    if (end > aligned + mapped_) ::munmap(reinterpret_cast<void*>(aligned + mapped_), end - (aligned + mapped_));
    data_ = reinterpret_cast<uint8_t*>(aligned);
    ::madvise(data_, mapped_, MADV_HUGEPAGE);  // a hint: ignored where THP is off
}

HugePageMemory::~HugePageMemory() { ::munmap(data_, mapped_); }

size_t resident_memory_bytes() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (f == nullptr) return 0;
    char line[256];
    size_t kb = 0;
    while (std::fgets(line, sizeof(line), f) != nullptr) {
        if (std::strncmp(line, "VmRSS:", 6) == 0) {
            std::sscanf(line + 6, "%zu", &kb);
            break;
        }
    }
    std::fclose(f);
    return kb * 1024;
}

uint64_t sum_words(const uint64_t* words, size_t n) {
    constexpr size_t kAheadWords = 32768 / sizeof(uint64_t);
    uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __builtin_prefetch(words + i + kAheadWords);  // one cache line per 8 words; never faults
        for (int k = 0; k < 8; ++k) acc[k] += words[i + k];
    }
    for (; i < n; ++i) acc[0] += words[i];
    uint64_t total = 0;
    for (uint64_t a : acc) total += a;
    return total;
}

}  // namespace cactus
