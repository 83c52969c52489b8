#include "models/weights.h"

#include <cstring>

#include "backends/backend.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "ops/quant.h"

namespace cactus {

namespace {

std::string shape_string(const std::vector<uint64_t>& dims) {
    std::string s = "{";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "}";
}

const GgufTensor& require_tensor(const GgufFile& file, const std::string& name, const std::vector<uint64_t>& dims) {
    const GgufTensor* t = file.find_tensor(name);
    if (!t) fail("load model: tensor %s is missing", name.c_str());
    std::vector<uint64_t> actual = t->dims;
    while (actual.size() > dims.size() && actual.back() == 1) actual.pop_back();
    if (actual != dims) {
        fail("load model: tensor %s has shape %s, expected %s", name.c_str(), shape_string(t->dims).c_str(),
             shape_string(dims).c_str());
    }
    if (dims[0] % dtype_traits(t->type).block_size != 0) {
        fail("load model: tensor %s: row of %llu is not a multiple of %s blocks", name.c_str(),
             (unsigned long long)dims[0], dtype_name(t->type));
    }
    return *t;
}

void dequantize_to_f32(DType type, float* dst, const void* src, size_t n) {
    if (type == DType::F32) {
        std::memcpy(dst, src, n * sizeof(float));
        return;
    }
    // The scalar reference: every CPU tier's dequantizer equals it bit for bit (tests/ops:
    // CpuKernels.DequantizersMatchReference); unknown type ids are errors.
    dequantize_row_ref(type, dst, src, n);
}

}  // namespace

Tensor WeightLoader::matrix(const std::string& name, size_t n_in, size_t n_out) {
    const Tensor placed = place(name, n_in, n_out);
    const Tensor packed = backend_.pack_for_products(placed);
    if (packed.buffer == placed.buffer) {
        file_.note_direct_use(name);
    } else {
        file_.release_tensor_bytes(name);
    }
    return packed;
}

Tensor WeightLoader::table(const std::string& name, size_t width, size_t n_rows) {
    const Tensor placed = place(name, width, n_rows);
    file_.note_direct_use(name);
    return placed;
}

Tensor WeightLoader::mapped_table(const std::string& name, size_t width, size_t n_rows) {
    require_tensor(file_, name, {width, n_rows});
    file_.keep_mapped(name);
    return place(name, width, n_rows);
}

Tensor WeightLoader::place(const std::string& name, size_t width, size_t n_rows) {
    const GgufTensor& t = require_tensor(file_, name, {width, n_rows});
    if (!backend_.supports_weight(t.type)) {
        fail("load model: tensor %s is %s, which the %s backend cannot multiply by", name.c_str(), dtype_name(t.type),
             backend_.name());
    }
    return backend_.place_weight(t.data, t.type, width, n_rows);
}

Tensor WeightLoader::vector(const std::string& name, size_t n) { return f32_rows(name, n, 1); }

Tensor WeightLoader::f32_rows(const std::string& name, size_t width, size_t n_rows) {
    const GgufTensor& t =
        n_rows == 1 ? require_tensor(file_, name, {width}) : require_tensor(file_, name, {width, n_rows});
    const size_t n = width * n_rows;
    std::vector<float> host(n);
    const size_t row_bytes = dtype_row_bytes(t.type, width);
    for (size_t r = 0; r < n_rows; ++r) {
        dequantize_to_f32(t.type, host.data() + r * width, static_cast<const uint8_t*>(t.data) + r * row_bytes, width);
    }
    vectors_.push_back(backend_.alloc(n * sizeof(float)));
    const Tensor out = make_tensor(vectors_.back().get(), 0, DType::F32, width, n_rows);
    backend_.upload(out, host.data(), n * sizeof(float));
    return out;
}

std::vector<float> WeightLoader::host_vector(const std::string& name, size_t n) const {
    const GgufTensor& t = require_tensor(file_, name, {n});
    std::vector<float> host(n);
    dequantize_to_f32(t.type, host.data(), t.data, n);
    return host;
}

bool WeightLoader::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

std::string layer_tensor(size_t il, const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; }

}  // namespace cactus
