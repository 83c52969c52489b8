// The kernel tables, one per ISA tier this machine can run (the matrix products that use them:
// cpu_matmul.cpp).
#include "backends/cpu/cpu_kernels.h"

#include <string>
#include <vector>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/generic/generic_kernels.h"
#include "core/error.h"
#include "ops/quant.h"

#if defined(__x86_64__)
#include "backends/cpu/amx/amx_kernels.h"
#include "backends/cpu/avx2/avx2_kernels.h"
#include "backends/cpu/avx512/avx512_kernels.h"
#endif
#if defined(__aarch64__)
#include "backends/cpu/neon/neon_kernels.h"
#endif

namespace cactus {

namespace {

// Each table is the previous tier plus the entries its ISA accelerates.
struct KernelTables {
    CpuKernels tiers[4];
    size_t count = 0;
};

#if defined(__x86_64__)
void add_isa_tiers(KernelTables& t, const CpuFeatures& f) {
    if (!f.avx2) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_avx2_kernels(t.tiers[t.count++], f.decode_prefetch_l1);
    if (!f.avx512_vnni) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_avx512_kernels(t.tiers[t.count++], f.decode_prefetch_l1);
    if (!f.amx_int8) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_amx_kernels(t.tiers[t.count++]);
}
#elif defined(__aarch64__)
// ASIMD is part of every aarch64 CPU, so the plain NEON tier is always there; sdot is optional.
void add_isa_tiers(KernelTables& t, const CpuFeatures& f) {
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_neon_kernels(t.tiers[t.count++]);
    if (!f.neon_dotprod) return;
    t.tiers[t.count] = t.tiers[t.count - 1];
    register_neon_dotprod_kernels(t.tiers[t.count++]);
}
#else
void add_isa_tiers(KernelTables&, const CpuFeatures&) {}
#endif

const KernelTables& tables() {
    static const KernelTables built = [] {
        KernelTables t;
        register_generic_kernels(t.tiers[0]);
        t.count = 1;
        add_isa_tiers(t, cpu_features());
        return t;
    }();
    return built;
}

}  // namespace

size_t kernel_slot(DType type, const char* caller) {
    const uint32_t id = static_cast<uint32_t>(type);
    if ((dtype_traits(id) == nullptr && !dtype_is_internal(type)) || id >= kDTypeSlots)
        fail("%s: unknown tensor type id %u", caller, static_cast<unsigned>(id));
    return id;
}

void dequantize_row_cpu(DType type, float* dst, const void* src, size_t n) {
    const DequantizeRowFn fn = cpu_kernels().dequantize_row[kernel_slot(type, "dequantize_row")];
    if (fn != nullptr) {
        fn(dst, src, n);
    } else {
        dequantize_row_ref(type, dst, src, n);
    }
}

const CpuKernels& cpu_kernels_generic() { return tables().tiers[0]; }

std::vector<std::string> cpu_kernel_tier_names() {
#if defined(__x86_64__)
    return {"generic", "avx2", "avx512_vnni", "avx512_amx"};
#elif defined(__aarch64__)
    return {"generic", "neon", "neon_dotprod"};
#else
    return {"generic"};
#endif
}
std::vector<const CpuKernels*> cpu_kernel_tables() {
    std::vector<const CpuKernels*> out;
    for (size_t i = 0; i < tables().count; ++i) out.push_back(&tables().tiers[i]);
    return out;
}

}  // namespace cactus
