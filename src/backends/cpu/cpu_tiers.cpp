#include "backends/cpu/cpu_tiers.h"

namespace cactus {

namespace {

size_t slot(DType type) { return static_cast<size_t>(type); }

}  // namespace

bool cpu_reads(const CpuKernels& k, DType type) {
    if (slot(type) >= kDTypeSlots) return false;
    if (dtype_traits(static_cast<uint32_t>(type)) == nullptr && !dtype_is_internal(type)) return false;
    return type == DType::F32 || k.vec_dot[slot(type)] != nullptr;
}

bool cpu_repacks_into(const CpuKernels& k, DType type) {
    if (slot(type) >= kDTypeSlots || !dtype_is_internal(type)) return false;
    for (size_t s = 0; s < kDTypeSlots; ++s) {
        if (k.repack[s] != nullptr && k.repack_type[s] == type) return true;
    }
    return false;
}

DType cpu_repack_target(const CpuKernels& k, DType type) {
    if (slot(type) >= kDTypeSlots || k.repack[slot(type)] == nullptr) return type;
    return k.repack_type[slot(type)];
}

std::vector<std::string> cpu_own_kernels(const CpuKernels& tier, const CpuKernels& below, DType type) {
    const size_t s = slot(type);
    std::vector<std::string> own;
    if (s >= kDTypeSlots) return own;
    if (tier.vec_dot[s] && tier.vec_dot[s] != below.vec_dot[s]) own.push_back("vec_dot");
    if (tier.gemm_tile[s] && tier.gemm_tile[s] != below.gemm_tile[s]) own.push_back("gemm_tile");
    if (tier.panel_gemm[s] && tier.panel_gemm[s] != below.panel_gemm[s]) own.push_back("panel");
    if (tier.panel_decode[s] && tier.panel_decode[s] != below.panel_decode[s]) own.push_back("decode");
    if (tier.dequantize_row[s] && tier.dequantize_row[s] != below.dequantize_row[s]) own.push_back("dequantize");
    return own;
}

const std::vector<DType>& cpu_doc_weight_types() {
    static const std::vector<DType> types = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                                             DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                                             DType::Q4_K, DType::Q5_K, DType::Q6_K};
    return types;
}

}  // namespace cactus
