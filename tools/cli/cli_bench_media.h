#pragma once
// Shared by the mmproj benches (cli_bench_vision.cpp, cli_bench_audio.cpp): timing statistics and
// which towers an mmproj holds.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cactus::cli {

using BenchClock = std::chrono::steady_clock;

inline double bench_ms_since(BenchClock::time_point start) {
    return std::chrono::duration<double, std::milli>(BenchClock::now() - start).count();
}

struct BenchStats {
    double median = 0.0, min = 0.0, max = 0.0;
};

inline BenchStats bench_stats(std::vector<double> v) {
    BenchStats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    s.median = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.min = v.front();
    s.max = v.back();
    return s;
}

inline nlohmann::ordered_json bench_stats_json(const BenchStats& s) {
    return nlohmann::ordered_json{{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

bool mmproj_path_has_vision(const std::string& mmproj_path);  // clip.has_vision_encoder
bool mmproj_path_has_audio(const std::string& mmproj_path);   // clip.has_audio_encoder

// The audio section of bench --mmproj: a table on stdout, or (json) only the returned object;
// {"skipped": why} when the mmproj has no audio tower. threads: the counts resolved (> 0).
// device: the model's and the towers' ("" = $CACTUS_DEVICE, else cpu).
nlohmann::ordered_json run_audio_bench(const std::string& model_path, const std::string& mmproj_path,
                                       const std::vector<int>& threads, int reps, bool json, const std::string& device);

}  // namespace cactus::cli
