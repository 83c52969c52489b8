// backend_caps: the backends' own answers about what they run, as JSON on stdout, for
// scripts/gen_ops_doc.py (docs/OPS.md) and tests/backends/test_ops_doc.py.
//   - "backends": per backend (cpu; cuda from cuda_supports, compiled in every build and answered
//     without a GPU), per op, the weight / table / KV types supports(op, type) accepts;
//   - "cpu_tiers": per CPU kernel table this machine runs (generic first), what it repacks at load
//     and which kernels of each format are its own (cpu_tiers.h);
//   - "cpu_tiers_compiled": every table this build has (the doc needs a machine that runs them all).
// Usage: backend_caps
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_tiers.h"
#include "backends/cuda/cuda_caps.h"
#include "core/error.h"

namespace {

using cactus::DType;
using cactus::Op;
using nlohmann::ordered_json;

// The operand types the table's columns show: the file formats, and int8 for KV rows.
std::vector<DType> column_types() {
    std::vector<DType> types = cactus::cpu_doc_weight_types();
    types.push_back(DType::I8);
    return types;
}

template <class Supports>
ordered_json support_table(const Supports& supports) {
    ordered_json ops = ordered_json::object();
    for (size_t i = 0; i < cactus::kOpCount; ++i) {
        const Op op = static_cast<Op>(i);
        ordered_json types = ordered_json::array();
        for (DType t : column_types()) {
            if (supports(op, t)) types.push_back(cactus::dtype_name(t));
        }
        ops[cactus::op_name(op)] = types;
    }
    return ops;
}

ordered_json cpu_tiers() {
    ordered_json tiers = ordered_json::array();
    const std::vector<const cactus::CpuKernels*> tables = cactus::cpu_kernel_tables();
    for (size_t i = 0; i < tables.size(); ++i) {
        const cactus::CpuKernels& k = *tables[i];
        const cactus::CpuKernels& below = i == 0 ? cactus::CpuKernels() : *tables[i - 1];
        ordered_json repacks = ordered_json::object(), own = ordered_json::object();
        for (DType t : cactus::cpu_doc_weight_types()) {
            const DType to = cactus::cpu_repack_target(k, t);
            if (to != t) repacks[cactus::dtype_name(t)] = cactus::dtype_name(to);
            const std::vector<std::string> kernels = cactus::cpu_own_kernels(k, below, t);
            if (!kernels.empty()) own[cactus::dtype_name(t)] = kernels;
        }
        tiers.push_back({{"name", k.isa_name}, {"repacks", repacks}, {"own_kernels", own}});
    }
    return tiers;
}

}  // namespace

int main() {
    try {
        cactus::CpuBackend cpu(1);
        ordered_json out;
        ordered_json types = ordered_json::array();
        for (DType t : column_types()) types.push_back(cactus::dtype_name(t));
        ordered_json ops = ordered_json::array();
        for (size_t i = 0; i < cactus::kOpCount; ++i) ops.push_back(cactus::op_name(static_cast<Op>(i)));
        out["ops"] = ops;
        out["types"] = types;
        out["backends"]["cpu"] = support_table([&](Op op, DType t) { return cpu.supports(op, t); });
        out["backends"]["cuda"] = support_table([](Op op, DType t) { return cactus::cuda_supports(op, t); });
        out["cpu_tiers"] = cpu_tiers();
        out["cpu_tiers_compiled"] = cactus::cpu_kernel_tier_names();
        out["devices"] = cactus::available_devices();
        std::printf("%s\n", out.dump(1).c_str());
        return 0;
    } catch (const cactus::Error& e) {
        std::fprintf(stderr, "backend_caps: %s\n", e.what());
        return 1;
    }
}
