#include "backends/backend.h"

#include <cstdlib>

#include "backends/cpu_backend.h"
#include "core/error.h"

namespace cactus {

// The CUDA branch (src/backends/cuda/cuda_backend.cpp, or cuda_absent.cpp in builds without CUDA).
std::unique_ptr<Backend> make_cuda_backend(const std::string& device, std::chrono::milliseconds timeout);

namespace {

std::chrono::milliseconds gpu_timeout(int option) {
    if (option > 0) return std::chrono::milliseconds(option);
    const char* env = std::getenv("CACTUS_GPU_TIMEOUT_MS");
    if (env == nullptr || *env == '\0') return std::chrono::milliseconds(30000);
    char* end = nullptr;
    const long ms = std::strtol(env, &end, 10);
    if (*end != '\0' || ms <= 0) fail("backend: CACTUS_GPU_TIMEOUT_MS='%s' is not a positive number", env);
    return std::chrono::milliseconds(ms);
}

}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
    if (options.device == "cpu") return std::make_unique<CpuBackend>(options.n_threads);
    if (options.device.rfind("cuda", 0) == 0)
        return make_cuda_backend(options.device, gpu_timeout(options.gpu_timeout_ms));
    fail("backend: device '%s' is not available (devices: cpu, cuda[:N])", options.device.c_str());
}

std::string device_from_env(const std::string& fallback) {
    const char* env = std::getenv("CACTUS_DEVICE");
    return env && *env ? std::string(env) : fallback;
}

std::vector<std::string> available_devices() { return {"cpu"}; }

std::vector<float> download_f32(Backend& backend, const Tensor& t) {
    CACTUS_ASSERT(t.type == DType::F32);
    std::vector<float> out(t.elements());
    backend.download(out.data(), t, out.size() * sizeof(float));
    return out;
}

}  // namespace cactus
