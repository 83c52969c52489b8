#pragma once
// What each CPU kernel tier (the tables of cpu_kernels.h: generic, avx2, avx512, avx512_amx on
// x86-64; neon, neon_dotprod on aarch64) does with each weight format, read from the tables
// themselves: the one source the CPU backend (supports, pack_for_products) and docs/OPS.md
// (tests/tools/backend_caps.cpp, scripts/gen_ops_doc.py) both use.
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/dtype.h"

namespace cactus {

// The table reads rows of `type` in matrix products and row gathers: F32, or a type with a vec_dot.
bool cpu_reads(const CpuKernels& k, DType type);
// `type` is a layout the table repacks some file format into at load (pack_for_products).
bool cpu_repacks_into(const CpuKernels& k, DType type);
// The layout pack_for_products turns `type` into with this table; `type` itself when it is kept.
DType cpu_repack_target(const CpuKernels& k, DType type);

// The kernels of `tier` for weight `type` that are its own (not inherited unchanged from `below`,
// the previous tier): of "vec_dot", "gemm_tile", "panel", "decode", "dequantize".
std::vector<std::string> cpu_own_kernels(const CpuKernels& tier, const CpuKernels& below, DType type);

// The weight formats a GGUF file may hold that the docs list (file order of DType).
const std::vector<DType>& cpu_doc_weight_types();

}  // namespace cactus
