#pragma once

// Shared helpers for the runtime tests: a fixture parameterized over worker counts and simulated
// NUMA shapes that checks for leaked tasks at teardown, sanitizer-aware loop sizes, seeds that
// can be replayed, and bounded waits so that a broken runtime fails a test instead of hanging it.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <mx/tasking/runtime.h>

#if defined(__SANITIZE_THREAD__)
#define MX_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MX_TEST_TSAN 1
#endif
#endif

namespace mx::test {

#if defined(MX_TEST_TSAN)
inline constexpr bool tsan_build = true;
#else
inline constexpr bool tsan_build = false;
#endif

/// Iteration counts are written for the debug preset; ThreadSanitizer with 8 workers
/// oversubscribed on 2 cores runs roughly an order of magnitude slower, so loops shrink there.
/// Deliberately not constexpr: lambdas capture the results by value, and clang warns about
/// capturing a constant expression.
inline std::uint32_t scaled(std::uint32_t count, std::uint32_t tsan_divisor = 8) noexcept {
    if constexpr (tsan_build) {
        const std::uint32_t reduced = count / tsan_divisor;
        return reduced > 0 ? reduced : 1;
    } else {
        static_cast<void>(tsan_divisor);
        return count;
    }
}

/// Upper bound for every wait on another thread: long enough never to fire on a loaded machine
/// under TSan, short enough that a lost wake-up shows up as a failure rather than a ctest timeout.
inline constexpr std::chrono::seconds patience{20};

/// Polls `predicate` until it holds or `timeout` passed. Returns whether it held.
template <class Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = patience) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!predicate()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds{200});
    }
    return true;
}

/// Spins (yielding, so oversubscribed workers and the test thread get a core) until `flag` is
/// set. Used inside tasks that hold a worker busy; gives up after `patience` so that a broken
/// runtime cannot hang the suite. Returns whether the flag was seen.
inline bool spin_until(const std::atomic<bool> &flag) noexcept {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!flag.load(std::memory_order_acquire)) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::yield();
    }
    return true;
}

/// Seed for randomized tests: $MX_TEST_SEED if set, else fresh. Printed so a failure can be
/// replayed with the same schedule of targets.
inline std::uint64_t test_seed() {
    std::uint64_t seed = 0;
    if (const char *text = std::getenv("MX_TEST_SEED"); text != nullptr && *text != '\0') {
        seed = std::strtoull(text, nullptr, 10);
    } else {
        std::random_device device;
        seed = (std::uint64_t{device()} << 32U) | device();
    }
    std::printf("[   SEED   ] %llu (replay with MX_TEST_SEED=%llu)\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(seed));
    ::testing::Test::RecordProperty("seed", std::to_string(seed));
    return seed;
}

/// A stateless mix of a few numbers into a well-spread 64-bit value (splitmix64 finalizer), so
/// tasks can derive random choices from (seed, ids) without sharing a generator.
constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) noexcept {
    std::uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1) + 0xBF58476D1CE4E5B9ULL * (c + 1);
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

/// CPU time of the whole process (all threads), for the idle-sleep check.
inline std::chrono::nanoseconds process_cpu_time() noexcept {
    timespec now{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return std::chrono::seconds{now.tv_sec} + std::chrono::nanoseconds{now.tv_nsec};
}

/// One runtime shape the parameterized fixtures run on.
struct RuntimeShape {
    const char *name;
    std::optional<std::uint16_t> workers;
    const char *topology; ///< "" = the real machine (or $MX_TOPOLOGY)
    std::uint16_t expected_workers;
    std::uint16_t expected_regions; ///< 0 = whatever the machine has
};

inline std::vector<RuntimeShape> runtime_shapes() {
    return {
        {"workers1", 1, "", 1, 0},
        {"workers2", 2, "", 2, 0},
        {"workers4", 4, "", 4, 0},
        {"workers8", 8, "", 8, 0},
        {"numa2x1", std::nullopt, "2x1", 2, 2},
        {"numa2x2", std::nullopt, "2x2", 4, 2},
        {"numa4x2", std::nullopt, "4x2", 8, 4},
    };
}

/// The shapes among runtime_shapes() with these names, in that list's order (suites that are too
/// slow for all of them pick a few).
inline std::vector<RuntimeShape> runtime_shapes_named(std::initializer_list<std::string_view> names) {
    std::vector<RuntimeShape> shapes;
    for (const auto &shape : runtime_shapes()) {
        if (std::find(names.begin(), names.end(), std::string_view(shape.name)) != names.end()) {
            shapes.push_back(shape);
        }
    }
    return shapes;
}

inline std::string shape_name(const ::testing::TestParamInfo<RuntimeShape> &info) { return info.param.name; }

/// Failure messages name the shape instead of dumping its bytes.
inline void PrintTo(const RuntimeShape &shape, std::ostream *out) { *out << shape.name; }

/// Starts a runtime of the parameter's shape before each test and, after it, waits for all work
/// and checks that every runtime-owned task was freed (ASan's leak checker covers the rest).
class RuntimeFixture : public ::testing::TestWithParam<RuntimeShape> {
protected:
    void SetUp() override { start_runtime(shape_config()); }

    void TearDown() override { finish_runtime(); }

    /// The configuration of the parameter's shape; tests may adjust it and restart.
    [[nodiscard]] tasking::RuntimeConfig shape_config() const {
        tasking::RuntimeConfig config;
        config.workers = GetParam().workers;
        config.topology = GetParam().topology;
        return config;
    }

    /// Replaces the runtime (running the leak check on the old one first).
    void start_runtime(const tasking::RuntimeConfig &config) {
        finish_runtime();
        _runtime = std::make_unique<tasking::Runtime>(config);
    }

    void finish_runtime() {
        if (!_runtime) {
            return;
        }
        _runtime->wait();
        EXPECT_EQ(_runtime->live_tasks(), std::uint64_t{0})
            << "runtime-owned tasks were not freed after wait() (a task leaked or was dropped)";
        _runtime.reset();
    }

    [[nodiscard]] tasking::Runtime &runtime() noexcept { return *_runtime; }
    [[nodiscard]] std::uint16_t workers() const noexcept { return _runtime->worker_count(); }

    /// Worker ids per NUMA region, as the runtime reports them.
    [[nodiscard]] std::vector<std::vector<std::uint16_t>> workers_by_region() const {
        std::vector<std::vector<std::uint16_t>> regions(_runtime->region_count());
        for (const auto &stats : _runtime->statistics()) {
            regions.at(stats.numa_region).push_back(stats.worker);
        }
        return regions;
    }

private:
    std::unique_ptr<tasking::Runtime> _runtime;
};

/// Counter on its own cache line, so per-worker counters do not slow each other down.
struct alignas(system::cache_line_size) PaddedCounter {
    std::atomic<std::uint64_t> value{0};
};

} // namespace mx::test

#define MX_INSTANTIATE_RUNTIME_SUITE(fixture)                                                                \
    INSTANTIATE_TEST_SUITE_P(Shapes, fixture, ::testing::ValuesIn(::mx::test::runtime_shapes()),             \
                             ::mx::test::shape_name)
