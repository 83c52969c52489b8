// Probe for tests/ops/test_quant_oracle.py: runs our quantization kernels on raw bytes from stdin
// and writes raw results to stdout, so Python can compare them with the gguf package.
//
//   quant_probe dequant  TYPE N   stdin: one row of N elements in TYPE   stdout: N float32
//   quant_probe quantize TYPE N   stdin: N float32                      stdout: the TYPE row
//   quant_probe dot      TYPE N   stdin: TYPE row of N, then N float32 activations
//                                 stdout: activations quantized to vec_dot_type(TYPE), then
//                                 float32 vec_dot_ref, then float32 of every CPU kernel table
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "ops/quant.h"

namespace {

using cactus::DType;

DType parse_type(const char* name) {
    for (uint32_t id = 0; id < 32; ++id) {
        const cactus::DTypeTraits* t = cactus::dtype_traits(id);
        if (t != nullptr && std::strcmp(t->name, name) == 0) return static_cast<DType>(id);
    }
    cactus::fail("quant_probe: unknown type %s", name);
}

std::vector<uint8_t> read_exact(size_t bytes) {
    std::vector<uint8_t> buf(bytes);
    if (bytes != 0 && std::fread(buf.data(), 1, bytes, stdin) != bytes) {
        cactus::fail("quant_probe: stdin ended before %zu bytes", bytes);
    }
    return buf;
}

void write_bytes(const void* data, size_t bytes) {
    if (std::fwrite(data, 1, bytes, stdout) != bytes) cactus::fail("quant_probe: write failed");
}

void run(const std::string& mode, DType type, size_t n) {
    const size_t row_bytes = cactus::dtype_row_bytes(type, n);
    if (mode == "dequant") {
        std::vector<uint8_t> src = read_exact(row_bytes);
        std::vector<float> out(n);
        cactus::dequantize_row_ref(type, out.data(), src.data(), n);
        write_bytes(out.data(), n * sizeof(float));
    } else if (mode == "quantize") {
        std::vector<uint8_t> src = read_exact(n * sizeof(float));
        std::vector<uint8_t> out(row_bytes);
        cactus::quantize_row_ref(type, out.data(), reinterpret_cast<const float*>(src.data()), n);
        write_bytes(out.data(), row_bytes);
    } else if (mode == "dot") {
        std::vector<uint8_t> w = read_exact(row_bytes);
        std::vector<uint8_t> x = read_exact(n * sizeof(float));
        const DType dot_type = cactus::vec_dot_type(type);
        std::vector<uint8_t> xq(cactus::dtype_row_bytes(dot_type, n));
        cactus::quantize_row_ref(dot_type, xq.data(), reinterpret_cast<const float*>(x.data()), n);
        write_bytes(xq.data(), xq.size());
        const float ref = cactus::vec_dot_ref(type, w.data(), xq.data(), n);
        write_bytes(&ref, sizeof(ref));
        for (const cactus::CpuKernels* k : cactus::cpu_kernel_tables()) {
            const float v = k->vec_dot[static_cast<size_t>(type)](w.data(), xq.data(), n);
            write_bytes(&v, sizeof(v));
        }
    } else {
        cactus::fail("quant_probe: unknown mode %s (dequant, quantize, dot)", mode.c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: quant_probe dequant|quantize|dot TYPE N\n");
        return 2;
    }
    try {
        const long long n = std::atoll(argv[3]);
        if (n <= 0) cactus::fail("quant_probe: bad element count %s", argv[3]);
        run(argv[1], parse_type(argv[2]), static_cast<size_t>(n));
    } catch (const cactus::Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
