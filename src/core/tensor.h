#pragma once
// Buffers and tensor views: the currency between model code and a backend.
//
// A Buffer is a block of bytes that a backend owns (host memory, the mapped bytes of a GGUF file,
// or device memory). A Tensor is a view into one: {buffer, offset, type, shape, strides}. Model
// code passes Tensors to the backend and never dereferences them; only the backend that owns the
// buffer knows whether base() is a host or a device address.
//
// Shapes follow GGUF/ggml order: ne[0] is the innermost (contiguous) dimension, so a matrix of
// n_rows rows of width w has ne = {w, n_rows, 1, 1}. Shape comments in model code are written
// outermost first, as [n_rows, w].
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace cactus {

class Buffer {
public:
    virtual ~Buffer() = default;
    // Start address in the owning backend's address space (host pointer for the CPU backend).
    virtual void* base() const = 0;
    virtual size_t size() const = 0;
    // Which backend owns it ("cpu", "cuda:0"); a backend refuses tensors of other backends.
    virtual const char* device() const = 0;
};

struct Tensor {
    Buffer* buffer = nullptr;  // not owned
    size_t offset = 0;         // bytes from buffer->base()
    DType type = DType::F32;
    size_t ne[4] = {0, 1, 1, 1};  // elements per dimension, ne[0] innermost
    size_t nb[4] = {0, 0, 0, 0};  // bytes between consecutive elements / rows / planes / cubes

    bool empty() const { return buffer == nullptr; }
    size_t width() const { return ne[0]; }
    size_t rows() const { return ne[1] * ne[2] * ne[3]; }
    size_t elements() const { return ne[0] * rows(); }
    size_t row_bytes() const { return nb[1]; }
    // Rows are packed one after another (a plain matrix, or a view of its first rows).
    bool contiguous_rows() const;
    size_t bytes() const;  // of a contiguous tensor

    // Backend-side access: the address of element row `row` (rows counted over ne[1..3]).
    void* data() const;
    template <class T>
    T* as() const {
        return static_cast<T*>(data());
    }

    // A view of rows [first, first + n) of a 2-D tensor.
    Tensor rows_view(size_t first, size_t n) const;
    // The same contiguous bytes seen as [n_rows, width] (width * n_rows == elements()).
    Tensor reshaped(size_t width, size_t n_rows) const;
};

// A contiguous tensor [n_rows, width] of `type` at `offset` bytes into `buffer`.
Tensor make_tensor(Buffer* buffer, size_t offset, DType type, size_t width, size_t n_rows = 1);

// Host memory owned by the buffer (CPU backend activations, small weights, test data).
class HostBuffer final : public Buffer {
public:
    explicit HostBuffer(size_t bytes);
    ~HostBuffer() override;
    void* base() const override { return data_; }
    size_t size() const override { return size_; }
    const char* device() const override { return "cpu"; }

private:
    void* data_ = nullptr;
    size_t size_ = 0;
};

// Host memory owned by someone else (the mapped GGUF file): the weights stay shared with the page
// cache, nothing is copied.
class ExternalHostBuffer final : public Buffer {
public:
    ExternalHostBuffer(const void* data, size_t bytes) : data_(const_cast<void*>(data)), size_(bytes) {}
    void* base() const override { return data_; }
    size_t size() const override { return size_; }
    const char* device() const override { return "cpu"; }

private:
    void* data_;
    size_t size_;
};

}  // namespace cactus
