// Programmer errors with resources end the program with a message that says what went wrong
// (MX_ASSERT, so only in builds with MX_ENABLE_ASSERTS: debug, relassert, tsan).

#include <gtest/gtest.h>

#include <cstdint>

#include <mx/tasking/runtime.h>

#include "sync_objects.h"
#include "sync_support.h"

namespace {

using mx::sync::Primitive;
using mx::sync_test::Pair;
using mx::sync_test::reading;
using mx::tasking::ResourcePtr;
using mx::tasking::Runtime;
using mx::tasking::RuntimeConfig;
using mx::tasking::TaskContext;

#if defined(MX_ENABLE_ASSERTS)

class SyncDeathTest : public ::testing::Test {
protected:
    void SetUp() override {
        // The runtime has threads: re-execute the binary for each death test instead of forking.
        GTEST_FLAG_SET(death_test_style, "threadsafe");
    }
};

RuntimeConfig two_workers() {
    RuntimeConfig config;
    config.workers = 2;
    return config;
}

/// Spawns a task annotated read_only on a resource of `primitive` that writes to it anyway.
void write_through_read_only(Primitive primitive) {
    Runtime runtime{two_workers()};
    // (Readers of an optimistically scheduled resource are validated, not checked: they run
    // unvalidated only on the worker holding the domain, which a reader cannot ask for.)
    mx::tasking::ResourceAnnotation annotation = mx::sync_test::forced(primitive);
    annotation.worker = 0;
    const ResourcePtr resource = runtime.new_resource<Pair>(annotation, std::uint64_t{0});
    mx::tasking::Annotation on_owner = reading(resource);
    on_owner.target_worker = 0;
    runtime.spawn([resource] { ++resource.get<Pair>()->a; }, on_owner);
    runtime.wait();
}

TEST_F(SyncDeathTest, WritingToAReadOnlyAnnotatedObjectAsserts) {
    for (const Primitive primitive : {Primitive::spinlock, Primitive::rw_latch, Primitive::scheduling}) {
        EXPECT_DEATH(write_through_read_only(primitive), "task annotated read_only modified its resource")
            << mx::sync::to_string(primitive);
    }
}

TEST_F(SyncDeathTest, DeletingAResourceTwiceAsserts) {
    EXPECT_DEATH(
        {
            Runtime runtime{two_workers()};
            const ResourcePtr resource =
                runtime.new_resource<Pair>(mx::tasking::ResourceAnnotation{}, std::uint64_t{0});
            runtime.delete_resource(resource);
            runtime.delete_resource(resource);
        },
        "resource deleted twice");
}

TEST_F(SyncDeathTest, DeletingAResourceTwiceInsideTasksAsserts) {
    EXPECT_DEATH(
        {
            Runtime runtime{two_workers()};
            const ResourcePtr resource =
                runtime.new_resource<Pair>(mx::tasking::ResourceAnnotation{}, std::uint64_t{0});
            runtime.spawn([resource](TaskContext &context) {
                context.delete_resource(resource);
                context.delete_resource(resource);
            });
            runtime.wait();
        },
        "resource deleted twice");
}

TEST_F(SyncDeathTest, SpawningFromAnOptimisticReaderAsserts) {
    EXPECT_DEATH(
        {
            Runtime runtime{two_workers()};
            const ResourcePtr resource = runtime.new_resource<Pair>(
                mx::sync_test::forced(Primitive::optimistic_latched), std::uint64_t{0});
            runtime.spawn([](TaskContext &context) { context.spawn([] {}); }, reading(resource));
            runtime.wait();
        },
        "return successors via TaskResult instead of spawning");
}

#else

TEST(SyncDeathTest, AssertsAreCompiledOut) {
    GTEST_SKIP() << "MX_ENABLE_ASSERTS is not defined in this build: the death tests need MX_ASSERT";
}

#endif

} // namespace
