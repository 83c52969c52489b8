#include "backends/backend.h"

#include "backends/cpu_backend.h"
#include "core/error.h"

namespace cactus {

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
    if (options.device == "cpu") return std::make_unique<CpuBackend>(options.n_threads);
    fail("backend: device '%s' is not available (devices: cpu)", options.device.c_str());
}

std::vector<std::string> available_devices() { return {"cpu"}; }

std::vector<float> download_f32(Backend& backend, const Tensor& t) {
    CACTUS_ASSERT(t.type == DType::F32);
    std::vector<float> out(t.elements());
    backend.download(out.data(), t, out.size() * sizeof(float));
    return out;
}

}  // namespace cactus
