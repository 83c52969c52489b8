#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace cactus {

namespace {

constexpr size_t kHostAlignment = 64;

}  // namespace

bool Tensor::contiguous_rows() const {
    return nb[1] == dtype_row_bytes(type, ne[0]) && nb[2] == nb[1] * ne[1] && nb[3] == nb[2] * ne[2];
}

size_t Tensor::bytes() const {
    CACTUS_ASSERT(contiguous_rows());
    return nb[1] * rows();
}

void* Tensor::data() const {
    CACTUS_ASSERT(buffer != nullptr);
    return static_cast<uint8_t*>(buffer->base()) + offset;
}

Tensor Tensor::rows_view(size_t first, size_t n) const {
    CACTUS_ASSERT(ne[2] == 1 && ne[3] == 1 && first + n <= ne[1]);
    // an internal layout (DType) interleaves groups of 8 rows: views of whole groups only
    CACTUS_ASSERT(!dtype_is_internal(type) || (first % 8 == 0 && n % 8 == 0));
    Tensor v = *this;
    v.offset = offset + first * nb[1];
    v.ne[1] = n;
    v.nb[2] = v.nb[3] = nb[1] * n;
    return v;
}

Tensor Tensor::reshaped(size_t width, size_t n_rows) const {
    CACTUS_ASSERT(contiguous_rows() && width * n_rows == elements());
    return make_tensor(buffer, offset, type, width, n_rows);
}

Tensor make_tensor(Buffer* buffer, size_t offset, DType type, size_t width, size_t n_rows) {
    Tensor t;
    t.buffer = buffer;
    t.offset = offset;
    t.type = type;
    t.ne[0] = width;
    t.ne[1] = n_rows;
    t.nb[0] = dtype_traits(type).block_size == 1 ? dtype_traits(type).block_bytes : 0;
    t.nb[1] = dtype_row_bytes(type, width);
    t.nb[2] = t.nb[3] = t.nb[1] * n_rows;
    CACTUS_ASSERT(buffer == nullptr || offset + t.nb[2] <= buffer->size());
    return t;
}

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
    const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    data_ = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
    if (data_ == nullptr) fail("HostBuffer: cannot allocate %zu bytes", bytes);
    std::memset(data_, 0, rounded == 0 ? kHostAlignment : rounded);
}

HostBuffer::~HostBuffer() { std::free(data_); }

}  // namespace cactus
