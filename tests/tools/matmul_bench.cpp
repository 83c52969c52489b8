// Matmul micro-benchmark (informational, never a test condition): times cactus::matmul on random
// weights of one type (TYPE DENSE: the encoders' dense_gemm on f32 weights) with the machine's
// kernel table and prints ms per call and GFLOP/s.
//
//   matmul_bench TYPE N_IN N_OUT TOKENS[,TOKENS...] THREADS [SECONDS [COPIES]] [--vs-read]
//   e.g. matmul_bench F16 384 1536 1,5,64,1500 1 0.5
// TYPE/R (e.g. Q4_K/R) times the table's load-time repacked layout of TYPE (CpuKernels::repack).
//
// Each token count is timed for SECONDS (default 0.5) after one warm-up call; weights larger than
// the caches (e.g. 51864 x 384 F16) measure the one-token path from memory. COPIES (default 1)
// cycles the calls through that many copies of the weights, so a model's shapes (e.g. 1536 x 8960,
// 7.7 MB of Q4_K) can be timed from memory as a model's decode reads them (e.g. 16 copies: 123 MB).
//
// --vs-read (anywhere on the line) alternates one plain read of all copies (cactus::sum_words,
// the loop of `cactus bench --membw`) with one matmul over all copies, for SECONDS, on the same
// pool and memory, and prints the median GB/s of each and the median ratio of adjacent pairs: how
// close the product streams to what this machine reads at that moment. On a host whose bandwidth
// moves between levels within seconds, the pair ratio stays put where separate runs do not
// (Q4_K_X8 1536 x 8960 x 32 copies, AVX2 table: 0.99-1.02 at 1 thread, 0.88-0.89 at 2).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dense_gemm.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "ops/quant.h"

namespace {

using cactus::DType;

DType parse_type(const char* name) {
    for (uint32_t id = 0; id < 32; ++id) {
        const cactus::DTypeTraits* t = cactus::dtype_traits(id);
        if (t != nullptr && std::strcmp(t->name, name) == 0) return static_cast<DType>(id);
    }
    cactus::fail("matmul_bench: unknown type %s", name);
}

std::vector<size_t> parse_list(const char* s) {
    std::vector<size_t> out;
    for (const char* p = s; *p != '\0';) {
        char* end = nullptr;
        out.push_back(std::strtoull(p, &end, 10));
        if (end == p || out.back() == 0) cactus::fail("matmul_bench: bad token count list %s", s);
        p = *end == ',' ? end + 1 : end;
    }
    return out;
}

// n_out rows of n_in elements of `type`, quantized from uniform floats in [-1, 1].
std::vector<uint8_t> random_weights(DType type, size_t n_in, size_t n_out, std::mt19937& rng) {
    const size_t row_bytes = cactus::dtype_row_bytes(type, n_in);
    std::vector<uint8_t> w(row_bytes * n_out);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> row(n_in);
    for (size_t o = 0; o < n_out; ++o) {
        for (float& v : row) v = dist(rng);
        cactus::quantize_row_ref(type, w.data() + o * row_bytes, row.data(), n_in);
    }
    return w;
}

// The weights in memory as the engine keeps them (GgufFile::lock_in_memory, repacked weights):
// huge pages. From a plain heap vector the row-streaming decodes ran 3-4x slower from memory on a
// VM host whose page walks are slow, which the models never see.
class WeightMemory {
public:
    explicit WeightMemory(const std::vector<uint8_t>& bytes) : memory_(bytes.size()) {
        std::memcpy(memory_.data(), bytes.data(), bytes.size());
    }
    const uint8_t* data() const { return memory_.data(); }

private:
    cactus::HugePageMemory memory_;
};

double time_matmul(const std::deque<WeightMemory>& copies, DType type, size_t n_in, size_t n_out, size_t n_tokens,
                   cactus::ThreadPool& pool, double seconds, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n_tokens * n_in), y(n_tokens * n_out);
    for (float& v : x) v = dist(rng);
    const size_t row_bytes = cactus::dtype_row_bytes(type, n_in);
    const auto call = [&](size_t i) {
        const WeightMemory& w = copies[i % copies.size()];
        cactus::matmul(y.data(), w.data(), type, row_bytes, x.data(), n_tokens, n_in, n_out, pool);
    };
    call(0);  // warm-up
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    size_t calls = 0;
    double elapsed = 0.0;
    do {
        call(calls);
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds);
    return elapsed / static_cast<double>(calls);
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct VsRead {
    double read_gbs, matmul_gbs, pair_ratio;  // medians over the pairs
};

// Alternates a plain read of every copy with a one-token matmul over every copy (see --vs-read).
VsRead time_vs_read(const std::deque<WeightMemory>& copies, size_t weight_bytes, DType type, size_t n_in, size_t n_out,
                    cactus::ThreadPool& pool, double seconds, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n_in), y(n_out);
    for (float& v : x) v = dist(rng);
    const size_t row_bytes = cactus::dtype_row_bytes(type, n_in), n_words = weight_bytes / sizeof(uint64_t);
    std::atomic<uint64_t> sink{0};  // keeps the sums alive
    const auto read_all = [&] {
        for (const WeightMemory& w : copies) {
            const uint64_t* words = reinterpret_cast<const uint64_t*>(w.data());
            pool.parallel_for(n_words,
                              [&](size_t b, size_t e) { sink.fetch_add(cactus::sum_words(words + b, e - b)); });
        }
    };
    const auto matmul_all = [&] {
        for (const WeightMemory& w : copies) {
            cactus::matmul(y.data(), w.data(), type, row_bytes, x.data(), 1, n_in, n_out, pool);
        }
    };
    using Clock = std::chrono::steady_clock;
    const auto seconds_of = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    read_all();  // warm-up
    matmul_all();
    const double bytes = static_cast<double>(n_words * sizeof(uint64_t) * copies.size());
    std::vector<double> read_gbs, matmul_gbs, ratios;
    const auto start = Clock::now();
    do {
        const auto t0 = Clock::now();
        read_all();
        const auto t1 = Clock::now();
        matmul_all();
        const auto t2 = Clock::now();
        read_gbs.push_back(bytes / seconds_of(t0, t1) / 1e9);
        matmul_gbs.push_back(bytes / seconds_of(t1, t2) / 1e9);
        ratios.push_back(matmul_gbs.back() / read_gbs.back());
    } while (seconds_of(start, Clock::now()) < seconds);
    return VsRead{median_of(read_gbs), median_of(matmul_gbs), median_of(ratios)};
}

// The encoders' dense_gemm on f32 weights as B rows (TYPE DENSE), for comparison with F32 matmul.
double time_dense(size_t n_in, size_t n_out, size_t n_tokens, cactus::ThreadPool& pool, double seconds,
                  std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> w(n_in * n_out), x(n_tokens * n_in), y(n_tokens * n_out), packed;
    for (float& v : w) v = dist(rng);
    for (float& v : x) v = dist(rng);
    const cactus::DenseB b = {w.data(), n_in, false};
    cactus::dense_gemm(y.data(), n_out, x.data(), n_in, b, n_tokens, n_out, n_in, packed, pool);  // warm-up
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    size_t calls = 0;
    double elapsed = 0.0;
    do {
        cactus::dense_gemm(y.data(), n_out, x.data(), n_in, b, n_tokens, n_out, n_in, packed, pool);
        ++calls;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < seconds);
    return elapsed / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
    const bool vs_read = std::find_if(argv + 1, argv + argc,
                                      [](const char* a) { return std::strcmp(a, "--vs-read") == 0; }) != argv + argc;
    argc = static_cast<int>(
        std::remove_if(argv + 1, argv + argc, [](const char* a) { return std::strcmp(a, "--vs-read") == 0; }) - argv);
    if (argc < 6) {
        std::fprintf(stderr,
                     "usage: matmul_bench TYPE N_IN N_OUT TOKENS[,TOKENS...] THREADS [SECONDS [COPIES]] [--vs-read]\n");
        return 2;
    }
    try {
        const bool dense = std::strcmp(argv[1], "DENSE") == 0;
        const std::string name = argv[1];
        const bool repacked = name.size() > 2 && name.compare(name.size() - 2, 2, "/R") == 0;
        const DType type = parse_type(dense ? "F32" : repacked ? name.substr(0, name.size() - 2).c_str() : argv[1]);
        const size_t n_in = std::strtoull(argv[2], nullptr, 10), n_out = std::strtoull(argv[3], nullptr, 10);
        const std::vector<size_t> tokens = parse_list(argv[4]);
        const int threads = std::atoi(argv[5]);
        const double seconds = argc > 6 ? std::atof(argv[6]) : 0.5;
        const long n_copies = argc > 7 ? std::atol(argv[7]) : 1;
        if (n_in == 0 || n_out == 0 || threads <= 0 || n_copies <= 0)
            cactus::fail("matmul_bench: bad shape, thread count or copy count");
        std::mt19937 rng(1);
        std::vector<uint8_t> w = random_weights(type, n_in, n_out, rng);
        DType run_type = type;
        if (repacked) {  // the table's load-time layout of the type, as CpuBackend::pack_for_products makes it
            const cactus::CpuKernels& k = cactus::cpu_kernels();
            const size_t slot = static_cast<size_t>(type);
            if (k.repack[slot] == nullptr)
                cactus::fail("matmul_bench: the %s table repacks no %s", k.isa_name, argv[1]);
            run_type = k.repack_type[slot];
            std::vector<uint8_t> packed(cactus::dtype_row_bytes(run_type, n_in) * n_out);
            k.repack[slot](packed.data(), w.data(), cactus::dtype_row_bytes(type, n_in), n_out, n_in);
            w.swap(packed);
        }
        std::deque<WeightMemory> weights;
        for (long c = 0; c < n_copies; ++c) weights.emplace_back(w);
        cactus::ThreadPool pool(threads);
        if (vs_read) {
            if (dense) cactus::fail("matmul_bench: --vs-read times the one-token matmul of a quantized TYPE");
            const VsRead r = time_vs_read(weights, w.size(), run_type, n_in, n_out, pool, seconds, rng);
            std::printf(
                "%s %s n_in=%zu n_out=%zu tokens=1 threads=%d copies=%ld  read %.1f GB/s  matmul %.1f GB/s  "
                "matmul / read %.3f (median of adjacent pairs)\n",
                cactus::cpu_kernels().isa_name, argv[1], n_in, n_out, threads, n_copies, r.read_gbs, r.matmul_gbs,
                r.pair_ratio);
            return 0;
        }
        for (size_t t : tokens) {
            const double s = dense ? time_dense(n_in, n_out, t, pool, seconds, rng)
                                   : time_matmul(weights, run_type, n_in, n_out, t, pool, seconds, rng);
            std::printf("%s %s n_in=%zu n_out=%zu tokens=%zu threads=%d  %.4f ms  %.2f GFLOP/s\n",
                        cactus::cpu_kernels().isa_name, argv[1], n_in, n_out, t, threads, s * 1e3,
                        2.0 * n_in * n_out * t / s / 1e9);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
