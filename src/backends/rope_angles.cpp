#include "backends/rope_angles.h"

#include "backends/cpu/ops_cpu.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace cactus {

namespace {

bool same_params(const RopeParams& a, const RopeParams& b) {
    return a.style == b.style && a.n_rot == b.n_rot && a.freq_base == b.freq_base && a.freq_scale == b.freq_scale &&
           a.freq_factors == b.freq_factors;
}

}  // namespace

const float* RopeAngles::table(const RopeParams& params, int32_t lo, int32_t hi, ThreadPool& pool) {
    CACTUS_ASSERT(lo <= hi);
    Entry* entry = nullptr;
    for (Entry& e : entries_) {
        if (same_params(e.params, params)) entry = &e;
    }
    if (entry == nullptr) {
        entries_.push_back(Entry{params, 0, -1, {}});
        entry = &entries_.back();
    }
    if (entry->lo == lo && entry->hi == hi) return entry->cos_sin.data();
    const size_t n_pos = static_cast<size_t>(hi - lo) + 1;
    const size_t n_rot = params.n_rot;
    entry->cos_sin.resize(n_pos * n_rot);
    entry->lo = lo;
    entry->hi = hi;
    float* cs = entry->cos_sin.data();
    pool.parallel_for(n_pos, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) rope_cos_sin(cs + i * n_rot, lo + static_cast<int32_t>(i), params);
    });
    return cs;
}

}  // namespace cactus
