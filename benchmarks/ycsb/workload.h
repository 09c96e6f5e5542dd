#pragma once

// YCSB for the B-link tree: keys, the load phase, workloads A (50 % reads, 50 % updates) and C
// (reads only) with Zipfian (scrambled: hot ranks spread over the key space) or uniform
// requests, and the interface every variant (mxtasking, threads, oneTBB) implements.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mx/index/blinktree/node.h"
#include "mx/index/blinktree/tree.h"
#include "mx/system/cpu.h"

namespace mx::bench::ycsb {

using index::blinktree::Key;
using index::blinktree::Value;

/// Requests are handed out in batches of this many per worker (or thread).
inline constexpr std::size_t default_batch = 500;

/// Bijective 64-bit mix (splitmix64 finalizer): key i of the data set, spread over the key space.
constexpr std::uint64_t key_of(std::uint64_t i) noexcept {
    std::uint64_t z = i + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

enum class Kind : std::uint8_t { insert, read, update };

struct YcsbRequest {
    Key key;
    Value value;
    Kind kind;
};

/// Gray et al.'s Zipfian generator as used by YCSB: ranks 0..n-1, rank 0 the most popular.
class Zipfian {
public:
    Zipfian(std::uint64_t n, double theta) : _n(static_cast<double>(n)) {
        double zeta_n = 0;
        for (std::uint64_t i = 1; i <= n; ++i) {
            zeta_n += 1.0 / std::pow(static_cast<double>(i), theta);
        }
        const double zeta_2 = 1.0 + 1.0 / std::pow(2.0, theta);
        _zeta_n = zeta_n;
        _alpha = 1.0 / (1.0 - theta);
        _eta = (1.0 - std::pow(2.0 / _n, 1.0 - theta)) / (1.0 - zeta_2 / zeta_n);
        _half_pow_theta = 1.0 + std::pow(0.5, theta);
    }
    template <class Random>
    std::uint64_t operator()(Random &random) const {
        const double u = std::uniform_real_distribution<double>{0.0, 1.0}(random);
        const double uz = u * _zeta_n;
        if (uz < 1.0) {
            return 0;
        }
        if (uz < _half_pow_theta) {
            return 1;
        }
        const auto rank = static_cast<std::uint64_t>(_n * std::pow(_eta * u - _eta + 1.0, _alpha));
        return std::min(rank, static_cast<std::uint64_t>(_n) - 1U);
    }

private:
    double _n;
    double _zeta_n{0};
    double _alpha{0};
    double _eta{0};
    double _half_pow_theta{0};
};

struct WorkloadConfig {
    std::uint64_t keys{1'000'000};
    std::uint64_t operations{1'000'000};
    bool zipfian{true};
    double theta{0.99};
    std::uint64_t seed{7};
};

struct Workload {
    std::vector<YcsbRequest> load; // inserts of keys 0..n-1 (random order in key space)
    std::vector<YcsbRequest> a;    // 50 % reads, 50 % updates
    std::vector<YcsbRequest> c;    // reads only
};

inline Workload make_workload(const WorkloadConfig &config) {
    Workload workload;
    workload.load.reserve(config.keys);
    for (std::uint64_t i = 0; i < config.keys; ++i) {
        workload.load.push_back({key_of(i), i, Kind::insert});
    }
    std::mt19937_64 random{config.seed};
    const Zipfian zipfian{config.zipfian ? config.keys : 2, config.theta};
    std::uniform_int_distribution<std::uint64_t> uniform{0, config.keys - 1};
    const auto next_key = [&] { return key_of(config.zipfian ? zipfian(random) : uniform(random)); };
    workload.a.reserve(config.operations);
    workload.c.reserve(config.operations);
    for (std::uint64_t i = 0; i < config.operations; ++i) {
        const bool read = (random() & 1U) == 0;
        workload.a.push_back({next_key(), i, read ? Kind::read : Kind::update});
    }
    for (std::uint64_t i = 0; i < config.operations; ++i) {
        workload.c.push_back({next_key(), 0, Kind::read});
    }
    return workload;
}

/// One measured phase of one variant.
struct PhaseResult {
    double seconds{0};
    std::uint64_t cycles{0}; // time-stamp counter cycles of the phase (wall clock)
    std::uint64_t operations{0};
    std::uint64_t found{0}; // reads that found their key, updates that found theirs
    double cpu_seconds{0};  // CPU time of the whole process during the phase (all threads)
};

/// What a variant measures in one run: load, then C, then A on the loaded tree.
struct RunResult {
    PhaseResult load;
    PhaseResult c;
    PhaseResult a;
};

struct VariantConfig {
    std::uint16_t workers{1};
    std::size_t batch{default_batch};
    // mxtasking only
    std::uint32_t prefetch_distance{4}; // the runtime's default is 2; 4 suits the tree's half-key hints
    std::uint32_t task_buffer{tasking::RuntimeConfig{}.task_buffer_size};
    bool dynamic_prefetch{false};
    std::string primitive{"auto"}; // auto = the cost model
    bool prefetch_hints{true};
    std::uint32_t read_prefetch_eighths{index::blinktree::TreeConfig{}.read_prefetch_eighths};
    bool non_temporal_reads{false};
    bool submit_inline{index::blinktree::TreeConfig{}.submit_inline};
    std::uint16_t bypass_min_level{index::blinktree::TreeConfig{}.bypass_min_level};
    bool work_stealing{tasking::RuntimeConfig{}.work_stealing};
    // Static split: worker w's feeder submits the w-th contiguous share of the requests, instead
    // of all feeders claiming batches from one shared cursor (which balances the load by itself).
    bool static_split{false};
    std::optional<bool> payload_step{false}; // unset: the tree decides from the measured latency
    bool interleaved_lookups{index::blinktree::TreeConfig{}.interleaved_lookups};
    std::uint16_t coroutine_group_size{0}; // 0: the runtime's model
    std::string trace;                     // mxtasking: write the run's task timeline here ("" = none)
    bool profile{false};                   // mxtasking: print the run's per-task-type profile
};

/// Wall time and TSC cycles around a phase.
class PhaseTimer {
public:
    void start() noexcept {
        _cpu = process_cpu_seconds();
        _begin = std::chrono::steady_clock::now();
        _cycles = system::cycles();
    }
    PhaseResult stop(std::uint64_t operations, std::uint64_t found) const noexcept {
        const std::uint64_t cycles = system::cycles() - _cycles;
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - _begin;
        return PhaseResult{elapsed.count(), cycles, operations, found, process_cpu_seconds() - _cpu};
    }

private:
    /// Less sensitive than wall time to other processes taking the cores (they still pollute
    /// the caches): the CPU time this process got.
    static double process_cpu_seconds() noexcept {
        timespec now{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
        return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
    }
    double _cpu{0};
    std::chrono::steady_clock::time_point _begin{};
    std::uint64_t _cycles{0};
};

/// Per-worker counters on their own lines; each written by one worker only.
struct alignas(system::cache_line_size) WorkerCounters {
    std::uint64_t found{0};
    std::uint64_t checksum{0};
};

RunResult run_mxtasking(const Workload &workload, const VariantConfig &config);
RunResult run_thread_olc(const Workload &workload, const VariantConfig &config);
RunResult run_thread_rwlatch(const Workload &workload, const VariantConfig &config);
RunResult run_tbb(const Workload &workload, const VariantConfig &config);

} // namespace mx::bench::ycsb
