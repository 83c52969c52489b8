#pragma once
// SHA-256 (FIPS 180-4), streaming. Used to verify downloaded model files.
#include <cstddef>
#include <cstdint>
#include <string>

namespace cactus {

class Sha256 {
public:
    Sha256();
    void update(const void* data, size_t size);
    std::string hex_digest();  // finishes the hash; call once

private:
    void compress(const uint8_t* block);

    uint32_t state_[8];
    uint8_t buffer_[64];
    size_t buffered_ = 0;
    uint64_t total_bytes_ = 0;
};

}  // namespace cactus
