// cactus bench MODEL: prefill (ppN) and decode (tgN) speed, time to first token and memory of one
// model on the CPU, over one or more thread counts; cactus bench --membw: memory bandwidth (the
// bound of decode speed); cactus bench --mmproj: image encode (cli_bench_vision.cpp). A human table
// by default, JSON with --json.
//
// Method (the same as llama.cpp's llama-bench, so bench/compare_llama.py compares like with like):
//   ppN: from an empty cache, one forward call over N deterministic pseudo-random token ids (BOS
//        first when the model wants one); tok/s = N / time; TTFT = that call's time (the first
//        token's logits are ready when it returns).
//   tgN: after a short untimed prompt, N forward calls of one token each (pseudo-random ids);
//        tok/s = N / time of the N calls. Each call downloads the logits (as llama-bench's do).
//   tgN (greedy on device): the same calls returning the argmax computed on the device instead
//        (Model::decode_top, k = 1), as a greedy reply decodes; device backends only.
//   One warm-up run of each, then `reps` timed repetitions; median, min, max and stddev.
// Weights are copied into anonymous memory and locked there unless --no-mlock: mapped weights can
// be paged out mid-run by the machine's reclaimer (docs/ARCHITECTURE.md, "Invariants": memory).
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "backends/cpu/cpu_kernels.h"
#include "cli_common.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "engine/media/whisper_transcribe.h"
#include "engine/model_store.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace cactus::cli {

namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::ordered_json;

struct BenchArgs {
    std::string model = kDefaultModel;
    size_t n_prompt = 512;
    size_t n_gen = 128;
    size_t decode_prompt = 8;  // untimed tokens in the cache before the tgN test
    int reps = 5;
    std::vector<int> threads;  // empty = ThreadPool::default_threads()
    bool json = false;
    bool mlock = true;  // --mlock (default) / --no-mlock
    bool no_mlock = false;
    bool membw = false;
    size_t membw_mib = 256;
    size_t sequences = 1;     // sequences decoded together in the tgN test (one batch per step)
    std::string device;       // empty = $CACTUS_DEVICE, else cpu
    bool transcribe = false;  // --transcribe: speech-to-text speed (cli_bench_transcribe.cpp)
    std::string audio;
    size_t beam_size = 1;             // --transcribe: beams at temperature 0 (1 = greedy)
    bool without_timestamps = false;  // --transcribe: text-only decoding
    std::string mmproj;               // --mmproj: image encode and image prefill (cli_bench_vision.cpp)
    std::string image;                // --image for --mmproj (default: a generated 640x480 image)
    SpecArgs spec;                    // --spec / --draft: speculative decoding next to plain (cli_bench_spec.cpp)
    std::string spec_prompt;          // --spec-prompt: the request's text for it
};

double seconds_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// tokens / seconds, or 0 when undefined (no tokens or no measurable time).
double per_second(double count, double seconds) {
    if (count <= 0.0 || !(seconds > 0.0)) return 0.0;
    return count / seconds;
}

// ---- statistics -----------------------------------------------------------------------------

struct Summary {
    double median = 0.0, min = 0.0, max = 0.0, mean = 0.0, stddev = 0.0;
    std::vector<double> samples;
};

Summary summarize(const std::vector<double>& samples) {
    Summary s;
    s.samples = samples;
    if (samples.empty()) return s;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    s.median = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    s.min = sorted.front();
    s.max = sorted.back();
    double sum = 0.0;
    for (double v : sorted) sum += v;
    s.mean = sum / static_cast<double>(n);
    double sq = 0.0;
    for (double v : sorted) sq += (v - s.mean) * (v - s.mean);
    s.stddev = n > 1 ? std::sqrt(sq / static_cast<double>(n - 1)) : 0.0;
    return s;
}

Json summary_json(const Summary& s) {
    return Json{{"median", s.median}, {"min", s.min},       {"max", s.max},
                {"mean", s.mean},     {"stddev", s.stddev}, {"samples", s.samples}};
}

// ---- deterministic token ids ----------------------------------------------------------------

// splitmix64: a fixed sequence of valid ids, the same on every run and machine.
class TokenSource {
public:
    TokenSource(size_t n_vocab, uint64_t seed) : n_vocab_(n_vocab), state_(seed) {}
    int32_t next() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return static_cast<int32_t>(z % n_vocab_);
    }
    // n ids; the first is `first` when first >= 0.
    std::vector<int32_t> take(size_t n, int32_t first) {
        std::vector<int32_t> ids(n);
        for (size_t i = 0; i < n; ++i) ids[i] = next();
        if (n > 0 && first >= 0) ids[0] = first;
        return ids;
    }

private:
    size_t n_vocab_;
    uint64_t state_;
};

// The BOS id when the model's tokenizer adds one, else -1.
int32_t bos_if_added(const GgufFile& file, size_t n_vocab) {
    if (!file.get_bool("tokenizer.ggml.add_bos_token", false)) return -1;
    uint64_t bos = file.get_uint("tokenizer.ggml.bos_token_id", n_vocab);
    return bos < n_vocab ? static_cast<int32_t>(bos) : -1;
}

// ---- memory ---------------------------------------------------------------------------------

size_t peak_resident_bytes() {
    struct rusage usage;
    std::memset(&usage, 0, sizeof(usage));
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return static_cast<size_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// Bytes of weights one decode step reads: every tensor, except that the tables only gathered from
// give one row: the token embedding when the model has a separate output matrix, and Gemma 4's
// per-layer embeddings (most of its file).
size_t weight_bytes_per_token(const GgufFile& file) {
    bool separate_output = file.find_tensor("output.weight") != nullptr;
    size_t total = 0;
    for (const GgufTensor& t : file.tensors()) {
        if ((separate_output && t.name == "token_embd.weight") || t.name == "per_layer_token_embd.weight") {
            uint64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
            total += static_cast<size_t>(t.n_bytes / std::max<uint64_t>(rows, 1));
            continue;
        }
        total += static_cast<size_t>(t.n_bytes);
    }
    return total;
}

// Bytes of tensor data per type name ("q4_1": ..., "f32": ...), e.g. to label the quantization.
Json weight_types(const GgufFile& file) {
    std::map<std::string, uint64_t> bytes;
    for (const GgufTensor& t : file.tensors()) bytes[dtype_name(t.type)] += t.n_bytes;
    Json out = Json::object();
    for (const auto& entry : bytes) out[entry.first] = entry.second;
    return out;
}

// ---- model runs ------------------------------------------------------------------------------

struct ThreadResult {
    int threads = 0;
    Summary prefill_tps, decode_tps, ttft_ms;
    double load_ms = 0.0;
    size_t kv_bytes = 0;
    size_t rss_loaded = 0;  // resident bytes with the model loaded, after its runs
    // Device backends, over the timed tgN steps: kernels and copies per token, steps that replayed
    // a captured graph, graphs captured (a capture after the warm-up means a step shape changed).
    double kernels_per_token = 0.0, copies_per_token = 0.0;
    uint64_t decode_steps = 0, graph_replays = 0, graph_captures = 0;
    // tgN again, the next token picked greedily on the device (Model::decode_top, k = 1): a few
    // bytes come back per token instead of the logits. Device backends only.
    bool greedy_on_device = false;
    Summary greedy_device_tps;
};

struct Workload {
    std::vector<int32_t> prompt;         // [n_prompt] for ppN
    std::vector<int32_t> decode_prompt;  // untimed prefix of tgN
    std::vector<int32_t> decode_tokens;  // [n_gen] fed one by one
};

Workload make_workload(const BenchArgs& args, const GgufFile& file, size_t n_vocab) {
    CACTUS_ASSERT(n_vocab > 0);
    int32_t bos = bos_if_added(file, n_vocab);
    TokenSource source(n_vocab, 0x5EEDBE7Cull);
    Workload w;
    w.prompt = source.take(args.n_prompt, bos);
    w.decode_prompt = source.take(args.decode_prompt, bos);
    w.decode_tokens = source.take(args.n_gen, -1);
    return w;
}

// Seconds of one ppN run from an empty cache (0 when n_prompt is 0).
double time_prefill(Model& model, const Workload& w, std::vector<float>& logits) {
    model.reset();
    if (w.prompt.empty()) return 0.0;
    Clock::time_point start = Clock::now();
    model.forward(w.prompt.data(), w.prompt.size(), &logits);
    return seconds_between(start, Clock::now());
}

// Seconds of the N decode steps of one tgN run (0 when n_gen is 0). With several sequences each
// step is one batch holding the next token of every sequence (aggregate throughput). With
// greedy_on_device, each step returns its argmax (decode_top, k = 1) instead of the logits.
double time_decode(Model& model, const Workload& w, std::vector<float>& logits, bool greedy_on_device = false) {
    const size_t n_seq = model.info().n_seq;
    for (size_t s = 0; s < n_seq; ++s) {
        model.reset(static_cast<int>(s));
        if (!w.decode_prompt.empty()) {
            model.forward(w.decode_prompt.data(), w.decode_prompt.size(), &logits, nullptr, static_cast<int>(s));
        }
    }
    if (w.decode_tokens.empty()) return 0.0;
    std::vector<int32_t> tokens(n_seq), seq(n_seq);
    for (size_t s = 0; s < n_seq; ++s) seq[s] = static_cast<int32_t>(s);
    Batch batch;
    batch.n = n_seq;
    batch.tokens = tokens.data();
    batch.seq = seq.data();
    std::vector<TopCandidates> top;
    Clock::time_point start = Clock::now();
    for (int32_t id : w.decode_tokens) {
        std::fill(tokens.begin(), tokens.end(), id);
        if (greedy_on_device)
            model.decode_top(batch, 1, &top, nullptr);
        else
            model.decode(batch, &logits);
    }
    return seconds_between(start, Clock::now());
}

ModelOptions bench_model_options(const BenchArgs& args, int threads) {
    ModelOptions options;
    options.n_threads = threads;
    options.device = args.device.empty() ? device_from_env("cpu") : args.device;
    options.n_batch = std::max<size_t>({args.n_prompt, args.sequences, 1});  // ppN is one batch
    options.n_ctx = std::max(args.n_prompt, args.decode_prompt + args.n_gen) + 1;
    options.n_seq = args.sequences;
    return options;
}

// One warm-up run of each test, then args.reps timed repetitions.
ThreadResult bench_model(const BenchArgs& args, Model& model, int threads, const Workload& w) {
    ThreadResult r;
    r.threads = threads;
    std::vector<float> logits;
    time_prefill(model, w, logits);
    time_decode(model, w, logits);
    std::vector<double> pp, tg, ttft;
    BackendCounters decode_counters;
    for (int rep = 0; rep < args.reps; ++rep) {
        double pp_s = time_prefill(model, w, logits);
        const BackendCounters before = model.backend_counters();
        double tg_s = time_decode(model, w, logits);
        const BackendCounters after = model.backend_counters();
        decode_counters.kernels += after.kernels - before.kernels;
        decode_counters.copies += after.copies - before.copies;
        decode_counters.steps += after.steps - before.steps;
        decode_counters.graph_replays += after.graph_replays - before.graph_replays;
        decode_counters.graph_captures += after.graph_captures - before.graph_captures;
        pp.push_back(per_second(static_cast<double>(w.prompt.size()), pp_s));
        ttft.push_back(1e3 * pp_s);
        tg.push_back(per_second(static_cast<double>(w.decode_tokens.size() * args.sequences), tg_s));
    }
    r.prefill_tps = summarize(pp);
    r.decode_tps = summarize(tg);
    r.ttft_ms = summarize(ttft);
    r.kv_bytes = model.kv_bytes();
    // The decode prompt's prefill is inside time_decode too: count per timed token all the same
    // (its few steps are the difference between steps and tokens).
    const double tokens = static_cast<double>(w.decode_tokens.size()) * args.reps;
    if (tokens > 0) {
        r.kernels_per_token = static_cast<double>(decode_counters.kernels) / tokens;
        r.copies_per_token = static_cast<double>(decode_counters.copies) / tokens;
    }
    r.decode_steps = decode_counters.steps;
    r.graph_replays = decode_counters.graph_replays;
    r.graph_captures = decode_counters.graph_captures;
    r.greedy_on_device =
        !w.decode_tokens.empty() && model.device_sampling() && bench_model_options(args, threads).device != "cpu";
    if (r.greedy_on_device) {
        time_decode(model, w, logits, true);
        std::vector<double> tg_greedy;
        for (int rep = 0; rep < args.reps; ++rep) {
            const double s = time_decode(model, w, logits, true);
            tg_greedy.push_back(per_second(static_cast<double>(w.decode_tokens.size() * args.sequences), s));
        }
        r.greedy_device_tps = summarize(tg_greedy);
    }
    return r;
}

std::vector<int> resolved_threads(const std::vector<int>& requested) {
    std::vector<int> out;
    for (int t : requested) out.push_back(t > 0 ? t : ThreadPool::default_threads());
    if (out.empty()) out.push_back(ThreadPool::default_threads());
    return out;
}

// ---- model report ----------------------------------------------------------------------------

struct ModelReport {
    std::string device;  // the backend that ran the model (ModelInfo::device)
    std::string path;
    std::string architecture, name;
    size_t file_bytes = 0, weight_bytes = 0, n_vocab = 0;
    std::string residency;
    Json weight_types;
    std::vector<ThreadResult> results;
    size_t peak_rss = 0, current_rss = 0;
    Json spec_settings;           // null unless --spec / --draft
    std::vector<Json> spec_rows;  // one per thread count
};

Json thread_result_json(const ThreadResult& r, const BenchArgs& args) {
    return Json{{"threads", r.threads},
                {"load_ms", r.load_ms},
                {"rss_loaded_bytes", r.rss_loaded},
                {"kv_bytes", r.kv_bytes},
                {"prefill",
                 {{"test", "pp" + std::to_string(args.n_prompt)}, {"tokens_per_second", summary_json(r.prefill_tps)}}},
                {"decode",
                 {{"test", "tg" + std::to_string(args.n_gen)},
                  {"tokens_per_second", summary_json(r.decode_tps)},
                  {"kernels_per_token", r.kernels_per_token},
                  {"copies_per_token", r.copies_per_token},
                  {"steps", r.decode_steps},
                  {"graph_replays", r.graph_replays},
                  {"graph_captures", r.graph_captures},
                  {"greedy_on_device_tokens_per_second",
                   r.greedy_on_device ? summary_json(r.greedy_device_tps) : Json(nullptr)}}},
                {"ttft_ms", summary_json(r.ttft_ms)}};
}

Json report_json(const ModelReport& m, const BenchArgs& args) {
    Json results = Json::array();
    for (const ThreadResult& r : m.results) results.push_back(thread_result_json(r, args));
    return Json{{"engine", "cactus"},
                {"model", m.path},
                {"architecture", m.architecture},
                {"name", m.name},
                {"file_bytes", m.file_bytes},
                {"weight_bytes_per_token", m.weight_bytes},
                {"weight_types", m.weight_types},
                {"n_vocab", m.n_vocab},
                {"residency", m.residency},
                {"kernels", cpu_kernels().isa_name},
                {"device", m.device},
                {"n_prompt", args.n_prompt},
                {"n_gen", args.n_gen},
                {"decode_prompt", args.decode_prompt},
                {"sequences", args.sequences},
                {"reps", args.reps},
                {"warmup", 1},
                {"results", results},
                {"peak_rss_bytes", m.peak_rss},
                {"rss_bytes", m.current_rss}};
}

// The report with speculative decoding's section when it ran.
Json full_report_json(const ModelReport& m, const BenchArgs& args) {
    Json report = report_json(m, args);
    if (m.spec_settings.is_null()) return report;
    Json spec = m.spec_settings;
    spec["results"] = m.spec_rows;
    report["speculative"] = spec;
    return report;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

void print_row(int threads, const std::string& test, const Summary& tps, const Summary* ttft) {
    std::printf("%7d | %-7s | %10.2f | %10.2f | %10.2f | %8.2f |", threads, test.c_str(), tps.median, tps.min, tps.max,
                tps.stddev);
    if (ttft != nullptr)
        std::printf(" %10.1f\n", ttft->median);
    else
        std::printf(" %10s\n", "-");
}

void print_report(const ModelReport& m, const BenchArgs& args) {
    std::printf("model: %s (%s%s%s, %.1f MiB, weights %s; %.1f MiB read per decoded token)\n", m.path.c_str(),
                m.architecture.c_str(), m.name.empty() ? "" : ", ", m.name.c_str(), mib(m.file_bytes),
                m.residency.c_str(), mib(m.weight_bytes));
    std::printf(
        "kernels: %s (CACTUS_CPU_ISA caps the tier); %d repetitions after 1 warm-up; tok/s median, min, "
        "max, stddev; TTFT = ppN time\n\n",
        cpu_kernels().isa_name, args.reps);
    std::printf("device: %s\n", m.device.c_str());
    std::printf("threads | test    |  tok/s med |  tok/s min |  tok/s max |   stddev |    TTFT ms\n");
    std::printf("--------+---------+------------+------------+------------+----------+-----------\n");
    for (const ThreadResult& r : m.results) {
        if (args.n_prompt > 0) print_row(r.threads, "pp" + std::to_string(args.n_prompt), r.prefill_tps, &r.ttft_ms);
        const std::string tg =
            "tg" + std::to_string(args.n_gen) + (args.sequences > 1 ? "x" + std::to_string(args.sequences) : "");
        if (args.n_gen > 0) print_row(r.threads, tg, r.decode_tps, nullptr);
        if (r.greedy_on_device) print_row(r.threads, tg + " (greedy on device)", r.greedy_device_tps, nullptr);
    }
    for (const ThreadResult& r : m.results) {
        if (args.n_gen == 0) break;
        std::printf(
            "\n%d thread(s): decode streams the weights at %.1f GB/s (compare: cactus bench --membw)", r.threads,
            r.decode_tps.median / static_cast<double>(args.sequences) * static_cast<double>(m.weight_bytes) / 1e9);
    }
    for (const ThreadResult& r : m.results) {
        if (args.n_gen == 0 || r.decode_steps == 0) break;  // the CPU counts nothing
        std::printf(
            "\n%s: %.1f kernel launches and %.1f copies per decoded token; %llu of %llu decode steps replayed a "
            "CUDA graph, %llu graph(s) captured while timed",
            m.device.c_str(), r.kernels_per_token, r.copies_per_token, static_cast<unsigned long long>(r.graph_replays),
            static_cast<unsigned long long>(r.decode_steps), static_cast<unsigned long long>(r.graph_captures));
    }
    if (args.n_gen > 0) std::printf("\n");
    size_t kv = m.results.empty() ? 0 : m.results.back().kv_bytes;
    size_t loaded = 0;
    for (const ThreadResult& r : m.results) loaded = std::max(loaded, r.rss_loaded);
    std::printf(
        "\nRSS with the model loaded %.1f MiB | peak RSS %.1f MiB | after unloading %.1f MiB | KV cache %.1f MiB\n",
        mib(loaded), mib(m.peak_rss), mib(m.current_rss), mib(kv));
    if (!m.spec_settings.is_null()) print_spec_bench(m.spec_settings, m.spec_rows);
}

SpecBenchInput spec_bench_input(const BenchArgs& args, const SpecOptions& spec) {
    SpecBenchInput in;
    in.model = args.model;
    in.spec = spec;
    in.prompt_file = args.spec_prompt;
    in.n_gen = args.n_gen;
    in.reps = args.reps;
    in.device = args.device;
    in.lock_weights = args.mlock && !args.no_mlock;
    return in;
}

int run_model_bench(const BenchArgs& args) {
    const SpecOptions spec = spec_options(args.spec);  // bad flags fail before anything loads
    ModelReport m;
    m.path = resolve_model_path(args.model);
    std::unique_ptr<GgufFile> file = GgufFile::open(m.path);
    for (const std::string& table : Model::mapped_tables(*file)) file->keep_mapped(table);
    if (args.mlock && !args.no_mlock) file->lock_in_memory();
    m.residency = file->residency();
    m.architecture = file->get_string("general.architecture", "");
    m.name = file->get_string("general.name", "");
    m.file_bytes = file->file_size();
    m.weight_bytes = weight_bytes_per_token(*file);
    m.weight_types = weight_types(*file);
    Workload w;
    for (int threads : resolved_threads(args.threads)) {
        if (!args.json) std::fprintf(stderr, "bench: %d thread(s)...\n", threads);
        Clock::time_point load_start = Clock::now();
        std::unique_ptr<Model> model = Model::load(*file, bench_model_options(args, threads));
        double load_ms = 1e3 * seconds_between(load_start, Clock::now());
        if (m.n_vocab == 0) {
            m.n_vocab = model->info().n_vocab;
            m.device = model->info().device;
            w = make_workload(args, *file, m.n_vocab);
        }
        m.results.push_back(bench_model(args, *model, threads, w));
        m.results.back().load_ms = load_ms;
        m.results.back().rss_loaded = resident_memory_bytes();
    }
    m.peak_rss = peak_resident_bytes();
    m.current_rss = resident_memory_bytes();
    if (spec.type != SpecType::off) {
        file.reset();  // the engine maps (and locks) the weights itself
        const SpecBenchInput input = spec_bench_input(args, spec);
        m.spec_settings = spec_bench_settings(input);
        for (int threads : resolved_threads(args.threads)) {
            if (!args.json) std::fprintf(stderr, "bench: speculative decoding, %d thread(s)...\n", threads);
            m.spec_rows.push_back(run_spec_bench(input, threads));
        }
    }
    if (args.json)
        std::printf("%s\n", full_report_json(m, args).dump(2).c_str());
    else
        print_report(m, args);
    return 0;
}

// ---- memory bandwidth ------------------------------------------------------------------------

struct BandwidthResult {
    int threads = 0;
    Summary read_gbs, copy_gbs;
};

// Runs fn(begin, end) over [0, n_words) split across the pool; returns the seconds it took.
template <typename Fn>
double timed_parallel(ThreadPool& pool, size_t n_words, const Fn& fn) {
    Clock::time_point start = Clock::now();
    pool.parallel_for(n_words, [&](size_t begin, size_t end) { fn(begin, end); });
    return seconds_between(start, Clock::now());
}

BandwidthResult measure_bandwidth(int threads, size_t n_words, int reps, uint64_t* src, uint64_t* dst) {
    ThreadPool pool(threads);
    std::atomic<uint64_t> sink{0};  // keeps the sums alive; one add per thread and pass
    auto read = [&](size_t b, size_t e) { sink.fetch_add(sum_words(src + b, e - b), std::memory_order_relaxed); };
    auto copy = [&](size_t b, size_t e) { std::memcpy(dst + b, src + b, (e - b) * sizeof(uint64_t)); };
    timed_parallel(pool, n_words, copy);  // warm-up: pages touched, threads awake
    double bytes = static_cast<double>(n_words * sizeof(uint64_t));
    std::vector<double> read_gbs, copy_gbs;
    for (int rep = 0; rep < reps; ++rep) {
        read_gbs.push_back(per_second(bytes, timed_parallel(pool, n_words, read)) / 1e9);
        copy_gbs.push_back(per_second(2.0 * bytes, timed_parallel(pool, n_words, copy)) / 1e9);
    }
    BandwidthResult r;
    r.threads = threads;
    r.read_gbs = summarize(read_gbs);
    r.copy_gbs = summarize(copy_gbs);
    return r;
}

struct Buffer {
    explicit Buffer(size_t n) : words(n, 1) {}  // filled, so every page is resident
    std::vector<uint64_t> words;
};

int run_bandwidth_bench(const BenchArgs& args) {
    size_t n_words = args.membw_mib * 1024 * 1024 / sizeof(uint64_t);
    Buffer src(n_words), dst(n_words);
    std::vector<BandwidthResult> results;
    for (int threads : resolved_threads(args.threads)) {
        results.push_back(measure_bandwidth(threads, n_words, args.reps, src.words.data(), dst.words.data()));
    }
    if (args.json) {
        Json out = Json::array();
        for (const BandwidthResult& r : results) {
            out.push_back({{"threads", r.threads},
                           {"read_gb_per_s", summary_json(r.read_gbs)},
                           {"copy_gb_per_s", summary_json(r.copy_gbs)}});
        }
        Json doc{{"buffer_mib", args.membw_mib},
                 {"reps", args.reps},
                 {"note", "copy counts bytes read + written (STREAM convention); GB = 1e9 bytes"},
                 {"results", out}};
        std::printf("%s\n", doc.dump(2).c_str());
        return 0;
    }
    std::printf("memory bandwidth, %zu MiB buffers, %d repetitions (GB/s = 1e9 B/s; copy counts read + write)\n\n",
                args.membw_mib, args.reps);
    std::printf("threads | read med | read max | copy med | copy max\n");
    std::printf("--------+----------+----------+----------+---------\n");
    for (const BandwidthResult& r : results) {
        std::printf("%7d | %8.2f | %8.2f | %8.2f | %8.2f\n", r.threads, r.read_gbs.median, r.read_gbs.max,
                    r.copy_gbs.median, r.copy_gbs.max);
    }
    return 0;
}

void check_args(const BenchArgs& args) {
    if (args.n_prompt == 0 && args.n_gen == 0 && !args.membw && !args.transcribe) {
        fail("bench: nothing to measure: both --n-prompt and --n-gen are 0");
    }
    for (int t : args.threads) {
        if (t < 0 || t > 256) fail("bench: thread count %d is outside 0..256", t);
    }
    const bool spec = !args.spec.spec.empty() || !args.spec.draft.empty();
    if (spec && (args.membw || args.transcribe || !args.mmproj.empty() || !args.image.empty()))
        throw UsageError(
            "--spec and --draft measure text decoding: leave out --membw, --transcribe, --mmproj, --image");
    if (spec && args.n_gen == 0) throw UsageError("--spec and --draft measure decoding: --n-gen must be above 0");
}

}  // namespace

void register_bench(CLI::App& app) {
    auto args = std::make_shared<BenchArgs>();
    CLI::App* bench = app.add_subcommand("bench", "Measure prefill/decode speed, TTFT and memory (or --membw)");
    bench->add_option("model", args->model, "Model: a short name (see 'cactus list') or a .gguf path")
        ->capture_default_str();
    bench->add_option("-p,--n-prompt", args->n_prompt, "Prompt tokens of the prefill test (ppN; 0 = skip)")
        ->capture_default_str()
        ->check(CLI::Range(size_t{0}, size_t{1} << 16));
    bench->add_option("-n,--n-gen", args->n_gen, "Tokens of the decode test (tgN; 0 = skip)")
        ->capture_default_str()
        ->check(CLI::Range(size_t{0}, size_t{1} << 16));
    bench->add_option("--decode-prompt", args->decode_prompt, "Untimed prompt tokens before the decode test")
        ->capture_default_str()
        ->check(CLI::Range(size_t{0}, size_t{1} << 16));
    bench->add_option("-r,--reps", args->reps, "Timed repetitions (after one warm-up)")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    bench->add_option("-t,--threads", args->threads, "Thread counts, e.g. -t 1,2 (0 = all cores)")->delimiter(',');
    bench
        ->add_option("--sequences", args->sequences,
                     "Sequences decoded together in the decode test (one batch per step; tok/s is the aggregate)")
        ->check(CLI::Range(1, 256));
    bench->add_flag("--json", args->json, "Print JSON instead of a table");
    bench->add_option("--device", args->device,
                      "cpu, cuda or cuda:N: the model, Whisper (--transcribe), the mmproj's towers (--mmproj) "
                      "(default: $CACTUS_DEVICE, else cpu)");
    bench->add_flag("--mlock", args->mlock, "Lock the weights in RAM or copy them there (the default)");
    bench->add_flag("--no-mlock", args->no_mlock, "Leave the weights memory-mapped");
    bench->add_flag("--membw", args->membw, "Measure memory bandwidth instead (read and copy, per thread count)");
    bench->add_option("--membw-mib", args->membw_mib, "Buffer size of --membw in MiB (well above the caches)")
        ->capture_default_str()
        ->check(CLI::Range(size_t{1}, size_t{1} << 16));
    bench->add_flag("--transcribe", args->transcribe,
                    "Speech to text speed of a Whisper model (RTF, encoder ms, decode tok/s); others are skipped");
    bench->add_option("--audio", args->audio, "WAV file for --transcribe (default: 30 s synthetic signal)");
    bench->add_option("--beam-size", args->beam_size, "Beams for --transcribe (1 = greedy)")
        ->capture_default_str()
        ->check(CLI::Range(size_t{1}, kMaxBeamSize));
    bench->add_flag("--without-timestamps", args->without_timestamps,
                    "--transcribe decodes text only (no timestamp tokens; whisper.cpp's -nt)");
    bench->add_option("--mmproj", args->mmproj,
                      "Projector .gguf: measure image and audio encode ms (the towers it holds), tokens per image "
                      "and per 10 s clip, their prefill and TTFT instead");
    bench->add_option("--image", args->image,
                      "Image for --mmproj (default: a generated 640x480 image; with --image alone the mmproj is "
                      "$CACTUS_MMPROJ or the one beside the model, else the vision test is skipped)");
    add_spec_args(*bench, args->spec);
    bench->add_option("--spec-prompt", args->spec_prompt,
                      "Text file: the request whose greedy reply --spec / --draft decode (default: a built-in code "
                      "edit, whose reply copies its prompt)");
    bench->callback([args]() {
        check_args(*args);
        if (!args->mmproj.empty() || !args->image.empty())
            throw CLI::RuntimeError(run_vision_bench(args->model, args->mmproj, args->image, args->threads, args->reps,
                                                     args->json, args->device));
        if (args->transcribe)
            throw CLI::RuntimeError(run_transcribe_bench(args->model, args->audio, args->threads, args->reps,
                                                         args->json, args->beam_size, args->without_timestamps,
                                                         args->device));
        throw CLI::RuntimeError(args->membw ? run_bandwidth_bench(*args) : run_model_bench(*args));
    });
}

}  // namespace cactus::cli
