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

#include "support/runtime_fixture.h"

namespace mx::sync_test {

// Loop sizing, bounded waits, seeds and mixing come from the runtime tests' support header;
// these tests are lighter per iteration, so TSan builds divide loops by 2 instead of 8.
using test::eventually;
using test::mix;
using test::patience;
using test::spin_until;
using test::test_seed;
using test::tsan_build;
inline std::uint32_t scaled(std::uint32_t count, std::uint32_t tsan_divisor = 2) noexcept {
    return test::scaled(count, tsan_divisor);
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
