#pragma once
// What the CUDA backend's kernels run, answerable in every build (with or without CUDA, with or
// without a GPU): CudaBackend::supports answers with it, and docs/OPS.md is generated from it
// (tests/tools/backend_caps.cpp). The weight formats are those of the kernels' type dispatch
// (cuda_kernels.cu); test_backend_ops runs every supported type on the GPU.
#include "backends/backend.h"

namespace cactus {

bool cuda_supports(Op op, DType type);

}  // namespace cactus
