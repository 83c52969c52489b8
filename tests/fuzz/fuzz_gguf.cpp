// libFuzzer target for the GGUF reader: any input must parse or throw cactus::Error; never crash,
// read out of bounds or hand out a tensor pointer outside the input.
//   build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCACTUS_FUZZ=ON && ninja -C build-fuzz fuzz_gguf
//   seeds: build-fuzz/bin/fuzz_gguf_seeds corpus/   run: build-fuzz/bin/fuzz_gguf corpus/ -dict=tests/fuzz/gguf.dict
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        auto file = cactus::GgufFile::from_memory(data, size);
        uint64_t sum = 0;
        for (const cactus::GgufTensor& t : file->tensors()) {
            if (t.data < data || t.n_bytes > size || t.data + t.n_bytes > data + size) std::abort();
            sum += t.data[0] + t.data[t.n_bytes - 1];  // touch both ends (ASan checks the bounds)
            if (file->find_tensor(t.name) != &t) std::abort();
        }
        for (const auto& entry : file->metadata()) sum += entry.second.array_size() + entry.first.size();
        sum += file->get_uint("general.alignment", 0);
        (void)file->get_string("general.architecture", "");
        if (sum == 0xdeadbeef) return 0;  // keep `sum` alive
    } catch (const cactus::Error&) {
        // rejected cleanly
    }
    return 0;
}
