#pragma once

// Helpers shared by the synchronization and reclamation tests: the runtime shapes every
// concurrency test runs on, the primitives it is repeated for, sanitizer-aware loop sizes,
// replayable seeds and bounded waits (a broken runtime fails a test instead of hanging it).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <mx/sync/primitives.h>
#include <mx/tasking/runtime.h>

namespace mx::sync_test {

#if defined(MX_TSAN)
inline constexpr bool tsan_build = true;
#else
inline constexpr bool tsan_build = false;
#endif

/// Loop sizes are written for the ASan build; ThreadSanitizer with 8 workers on 2 cores is an
/// order of magnitude slower, so loops shrink there. Not constexpr: lambdas capture the result by value and
/// clang warns when a constant expression is captured.
inline std::uint32_t scaled(std::uint32_t count, std::uint32_t tsan_divisor = 2) noexcept {
    if constexpr (tsan_build) {
        const std::uint32_t reduced = count / tsan_divisor;
        return reduced > 0 ? reduced : 1;
    } else {
        static_cast<void>(tsan_divisor);
        return count;
    }
}

inline constexpr std::chrono::seconds patience{20};

/// Polls `predicate` until it holds or `timeout` passed.
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

/// Spins (yielding, so oversubscribed workers get a core) until `flag` is set or `patience`
/// ran out. Returns whether the flag was seen.
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

/// $MX_TEST_SEED or a fresh seed, printed so a failure can be replayed.
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
    return seed;
}

/// splitmix64 finalizer over a few numbers: tasks derive random choices from (seed, ids)
/// without sharing a generator.
constexpr std::uint64_t mix(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0) noexcept {
    std::uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1) + 0xBF58476D1CE4E5B9ULL * (c + 1);
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31U);
}

/// A runtime shape: worker count on the real machine, or a simulated NUMA topology.
struct Shape {
    const char *name;
    std::optional<std::uint16_t> workers;
    const char *topology;
};

inline std::vector<Shape> shapes() {
    return {{"w1", 1, ""}, {"w2", 2, ""}, {"w4", 4, ""}, {"w8", 8, ""}, {"numa2x2", std::nullopt, "2x2"}};
}

/// The primitives whose tasks really synchronize (none is tested separately).
inline std::vector<sync::Primitive> synchronizing_primitives() {
    using sync::Primitive;
    return {Primitive::spinlock,
            Primitive::rw_latch,
            Primitive::optimistic_latched,
            Primitive::optimistic_scheduled,
            Primitive::htm,
            Primitive::scheduling};
}

inline bool is_optimistic(sync::Primitive primitive) noexcept {
    return primitive == sync::Primitive::optimistic_latched ||
           primitive == sync::Primitive::optimistic_scheduled;
}

inline tasking::RuntimeConfig config_of(const Shape &shape) {
    tasking::RuntimeConfig config;
    config.workers = shape.workers;
    config.topology = shape.topology;
    return config;
}

using PrimitiveShape = std::tuple<sync::Primitive, Shape>;

inline std::string primitive_shape_name(const ::testing::TestParamInfo<PrimitiveShape> &info) {
    return std::string{sync::to_string(std::get<0>(info.param))} + "_" + std::get<1>(info.param).name;
}

inline std::string shape_name(const ::testing::TestParamInfo<Shape> &info) { return info.param.name; }

/// Sum of one statistics field over all workers.
template <class Field>
std::uint64_t total(const tasking::Runtime &runtime, Field field) {
    std::uint64_t sum = 0;
    for (const auto &stats : runtime.statistics()) {
        sum += stats.*field;
    }
    return sum;
}

/// A resource annotation that forces `primitive`; everything else default.
inline tasking::ResourceAnnotation forced(sync::Primitive primitive) {
    tasking::ResourceAnnotation annotation;
    annotation.primitive = primitive;
    return annotation;
}

/// Runs `count` iterations of `body` spread over one producer task per worker (annotated to
/// that worker), so that dispatch from inside the runtime (local and remote pushes) is used as
/// the benchmark driver will. `body(context, index)` spawns the work of one iteration.
template <class Body>
void produce_on_every_worker(tasking::Runtime &runtime, std::uint32_t count, Body body) {
    const std::uint16_t workers = runtime.worker_count();
    for (std::uint16_t w = 0; w < workers; ++w) {
        runtime.spawn(
            [w, workers, count, body](tasking::TaskContext &context) mutable {
                for (std::uint32_t i = w; i < count; i += workers) {
                    body(context, i);
                }
            },
            tasking::Annotation{.target_worker = w});
    }
}

} // namespace mx::sync_test
