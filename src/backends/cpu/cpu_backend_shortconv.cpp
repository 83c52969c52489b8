// CpuBackend: LFM2's short convolution and the row scatter its conv state uses, on host pointers
// (the op is a few multiply-adds per element, tiny next to the projections around it).
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "ops/ops_ref.h"

namespace cactus {

void CpuBackend::do_short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w,
                               const Tensor& state, const Tensor& hist) {
    const size_t L = w.width();
    // y [n, e], bx [n, e], bcx [n, 3e], w [e, L], state [rows, e], hist [n, L - 1].
    short_conv_ref(y.as<float>(), bx.as<float>(), bcx.as<float>(), w.as<float>(), state.as<float>(), state.rows(),
                   hist.as<int32_t>(), y.rows(), y.width(), L);
}

void CpuBackend::do_set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) {
    const int32_t* id = ids.as<int32_t>();
    const size_t width = x.width();
    for (size_t i = 0; i < x.rows(); ++i) {
        if (id[i] < 0) continue;
        if (static_cast<size_t>(id[i]) >= table.rows())
            fail("set_rows: id %d is outside the table of %zu rows", id[i], table.rows());
        std::memcpy(table.as<float>() + static_cast<size_t>(id[i]) * width, x.as<float>() + i * width,
                    width * sizeof(float));
    }
}

}  // namespace cactus
