#pragma once
// Weights of a model: GGUF tensors checked against the shapes the architecture expects, then placed
// by the backend (the CPU keeps the mapped file bytes; a GPU uploads them). Norm and bias vectors
// are dequantized to F32 first.
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace cactus {

class Backend;
class GgufFile;

class WeightLoader {
public:
    WeightLoader(const GgufFile& file, Backend& backend) : file_(file), backend_(backend) {}

    // W [n_out, n_in] (GGUF dims {n_in, n_out}) that is only multiplied by: the backend may keep it
    // in a layout of its own (Backend::pack_for_products), and the file's bytes of it then leave
    // memory (GgufFile::release_tensor_bytes). Throws naming the tensor and both shapes, or the type
    // when the backend cannot multiply by it.
    Tensor matrix(const std::string& name, size_t n_in, size_t n_out);
    // The same [n_rows, width] as it is in the file: a get_rows table (token embeddings), also when it
    // is multiplied by too, or rows read by other ops.
    Tensor table(const std::string& name, size_t width, size_t n_rows);
    // A table read a few rows per step (GgufFile::keep_mapped): it stays in the file mapping even
    // when the weights are locked in memory, so only the rows read become resident.
    Tensor mapped_table(const std::string& name, size_t width, size_t n_rows);
    // A 1-D tensor of n elements as F32 (norm weights, biases).
    Tensor vector(const std::string& name, size_t n);
    // A small 2-D tensor [n_rows, width] (GGUF dims {width, n_rows}) as F32 (convolution taps).
    Tensor f32_rows(const std::string& name, size_t width, size_t n_rows);
    // A 1-D tensor of n elements as host floats (scalars and small tables the model reads itself:
    // Gemma 4's layer output scale and RoPE frequency factors).
    std::vector<float> host_vector(const std::string& name, size_t n) const;
    bool has(const std::string& name) const;

private:
    Tensor place(const std::string& name, size_t width, size_t n_rows);  // checked, placed as it is

    const GgufFile& file_;
    Backend& backend_;
    std::vector<std::unique_ptr<Buffer>> vectors_;  // the F32 copies of the vectors
};

// "blk.<il>.<suffix>".
std::string layer_tensor(size_t il, const char* suffix);

}  // namespace cactus
