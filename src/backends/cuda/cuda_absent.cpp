// make_backend's CUDA branch in builds without CUDA (CMake CACTUS_CUDA=OFF, or AUTO without nvcc).
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"

namespace cactus {

bool cuda_compiled() { return false; }

std::vector<std::string> cuda_devices() { return {}; }

std::unique_ptr<Backend> make_cuda_backend(const std::string& device, std::chrono::milliseconds) {
    fail("backend: device '%s' needs the CUDA backend, and this build has none (configure with -DCACTUS_CUDA=ON)",
         device.c_str());
}

}  // namespace cactus
