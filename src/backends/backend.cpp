#include "backends/backend.h"

#include <cstdlib>
#include <vector>

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

size_t check_short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                        const Tensor& hist) {
    const size_t n = y.rows();
    const size_t e = y.width();
    const size_t L = w.width();
    if (y.type != DType::F32 || bx.type != DType::F32 || bcx.type != DType::F32 || w.type != DType::F32 ||
        state.type != DType::F32 || hist.type != DType::I32) {
        fail("short_conv: y, bx, bcx, w, state must be F32 and hist I32");
    }
    if (L < 2 || bx.rows() != n || bx.width() != e || bcx.rows() != n || bcx.width() != 3 * e || w.rows() != e ||
        state.width() != e || hist.elements() != n * (L - 1)) {
        fail("short_conv: shapes y [%zu, %zu], bx [%zu, %zu], bcx [%zu, %zu], w [%zu, %zu], state width %zu, hist %zu",
             n, e, bx.rows(), bx.width(), bcx.rows(), bcx.width(), w.rows(), L, state.width(), hist.elements());
    }
    return L;
}

void Backend::short_conv(const Tensor& y, const Tensor& bx, const Tensor& bcx, const Tensor& w, const Tensor& state,
                         const Tensor& hist) {
    const size_t L = check_short_conv(y, bx, bcx, w, state, hist);
    const size_t n = y.rows();
    const size_t e = y.width();
    std::vector<float> h_bcx = download_f32(*this, bcx);
    std::vector<float> h_w = download_f32(*this, w);
    std::vector<float> h_state = download_f32(*this, state);
    std::vector<int32_t> h_hist(hist.elements());
    download(h_hist.data(), hist, h_hist.size() * sizeof(int32_t));
    std::vector<float> h_y(n * e), h_bx(n * e);
    short_conv_ref(h_y.data(), h_bx.data(), h_bcx.data(), h_w.data(), h_state.data(), state.rows(), h_hist.data(), n, e,
                   L);
    upload(y, h_y.data(), h_y.size() * sizeof(float));
    upload(bx, h_bx.data(), h_bx.size() * sizeof(float));
}

void Backend::set_rows(const Tensor& table, const Tensor& x, const Tensor& ids) {
    if (table.type != DType::F32 || x.type != DType::F32 || ids.type != DType::I32 || table.width() != x.width() ||
        ids.elements() != x.rows()) {
        fail("set_rows: table [%zu, %zu] F32, x [%zu, %zu] F32 and ids [%zu] I32 do not fit", table.rows(),
             table.width(), x.rows(), x.width(), ids.elements());
    }
    std::vector<int32_t> h_ids(ids.elements());
    download(h_ids.data(), ids, h_ids.size() * sizeof(int32_t));
    std::vector<float> h_x = download_f32(*this, x);
    for (size_t i = 0; i < h_ids.size(); ++i) {
        if (h_ids[i] < 0) continue;
        if (static_cast<size_t>(h_ids[i]) >= table.rows())
            fail("set_rows: id %d is outside the table of %zu rows", h_ids[i], table.rows());
        upload(table.rows_view(static_cast<size_t>(h_ids[i]), 1), h_x.data() + i * x.width(),
               x.width() * sizeof(float));
    }
}

}  // namespace cactus
