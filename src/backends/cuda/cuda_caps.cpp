#include "backends/cuda/cuda_caps.h"

namespace cactus {

namespace {

// The GGUF formats the CUDA kernels read (get_rows, matmul; cuda_kernels.cu's dispatch).
bool cuda_weight_type(DType type) {
    switch (type) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q8_0:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return true;
        default:
            return false;
    }
}

}  // namespace

bool cuda_supports(Op op, DType type) {
    switch (op) {
        case Op::GET_ROWS:
        case Op::MATMUL:
        case Op::MATMULS:
        case Op::MATMUL_ENCODER:
        case Op::MATMUL_ACCUMULATE:
        case Op::GATED_MATMUL:
        case Op::CONV1D:
        case Op::CONV2D:
            return cuda_weight_type(type);
        case Op::KV_STORE:
        case Op::ATTENTION_KV:
            return type == DType::F16 || type == DType::I8 || type == DType::F32;
        case Op::CLAMP:
        case Op::TRANSPOSE:
        case Op::DEPTHWISE_CONV:
        case Op::ATTENTION_LOCAL:
            return type == DType::F32;  // cuda_conformer.cu
        default:
            return type == DType::F32;
    }
}

}  // namespace cactus
