#include "models/intermediates.h"

#include <algorithm>

#include "backends/backend.h"
#include "core/error.h"

namespace cactus {

void Taps::select(const std::vector<std::string>& names) {
    names_ = names;
    recorded_.clear();
}

void Taps::record(Backend& backend, const char* name, int il, const Tensor& t) {
    if (names_.empty() || std::find(names_.begin(), names_.end(), name) == names_.end()) return;
    const std::string key = il < 0 ? std::string(name) : std::string(name) + "." + std::to_string(il);
    RecordedTensor& r = recorded_[key];
    if (r.width != 0 && r.width != t.width()) {
        fail("record_intermediates: %s changed width from %zu to %zu", key.c_str(), r.width, t.width());
    }
    r.width = t.width();
    const std::vector<float> rows = download_f32(backend, t);
    r.data.insert(r.data.end(), rows.begin(), rows.end());
}

Intermediates Taps::take() {
    Intermediates out;
    out.swap(recorded_);
    return out;
}

}  // namespace cactus
