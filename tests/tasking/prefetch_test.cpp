// Prefetch scheduling: which task's data is prefetched when, for static and dynamic distances.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <type_traits>
#include <vector>

#include "mx/tasking/detail/prefetch.h"
#include "mx/tasking/runtime.h"

namespace {

using mx::tasking::Annotation;
using mx::tasking::PrefetchHint;
using mx::tasking::Runtime;
using mx::tasking::RuntimeConfig;
using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;
using mx::tasking::detail::compute_prefetch_slots;

TEST(PrefetchLines, MaskNamesEachLineOnceInOrder) {
    alignas(64) static std::byte object[64 * 64];
    const auto lines_of = [](std::uint64_t mask) {
        std::vector<std::size_t> lines;
        mx::tasking::detail::for_each_masked_line(object, mask, [&lines](const std::byte *line) noexcept {
            lines.push_back(static_cast<std::size_t>(line - object) / 64);
        });
        return lines;
    };
    EXPECT_EQ(lines_of(0), (std::vector<std::size_t>{}));
    EXPECT_EQ(lines_of(0b1), (std::vector<std::size_t>{0}));
    EXPECT_EQ(lines_of(0b11111), (std::vector<std::size_t>{0, 1, 2, 3, 4})); // a run from the start
    EXPECT_EQ(lines_of(0b11110), (std::vector<std::size_t>{1, 2, 3, 4}));
    EXPECT_EQ(lines_of(0b100101), (std::vector<std::size_t>{0, 2, 5}));
    EXPECT_EQ(lines_of(~std::uint64_t{0} >> 4U).size(), 60U);
    EXPECT_EQ(lines_of(std::uint64_t{1} << 59U), (std::vector<std::size_t>{59}));
}

class OneLineTask final : public Task {
public:
    TaskResult execute(TaskContext &) noexcept override { return TaskResult::done(); }
};

template <std::size_t PayloadBytes>
class SizedTask final : public Task {
public:
    TaskResult execute(TaskContext &) noexcept override { return TaskResult::done(); }

private:
    [[maybe_unused]] std::array<std::byte, PayloadBytes> _payload{};
};

// The worker prefetches the lines of a task object after its first with the task's data; the
// count shares a byte with the allocation's size class, which must come back unchanged.
TEST(PrefetchDescriptor, LinesAndSizeClassShareTheByte) {
    using mx::tasking::detail::RuntimeCore;
    Runtime runtime{RuntimeConfig{.workers = 1}};
    const auto check = [&runtime]<class T>(std::type_identity<T>, std::uint32_t lines_beyond_first) {
        Task *task = runtime.new_task<T>();
        EXPECT_TRUE(task->is_runtime_owned()) << sizeof(T);
        EXPECT_EQ(RuntimeCore::size_class_of(*task), mx::memory::size_class_of(sizeof(T))) << sizeof(T);
        EXPECT_EQ(RuntimeCore::descriptor_lines_beyond_first(*task), lines_beyond_first) << sizeof(T);
        runtime.delete_task(*task); // frees through the size class read back from the byte
    };
    static_assert(sizeof(OneLineTask) == 64 && sizeof(SizedTask<64>) == 128 && sizeof(SizedTask<128>) == 192);
    check(std::type_identity<OneLineTask>{}, 0);
    check(std::type_identity<SizedTask<64>>{}, 1);
    check(std::type_identity<SizedTask<128>>{}, 2);
    check(std::type_identity<SizedTask<192>>{}, 3);
    check(std::type_identity<SizedTask<960>>{}, 3);  // 1 KiB: capped
    check(std::type_identity<SizedTask<4032>>{}, 3); // oversized: aligned new and delete
    SizedTask<64> outside; // not allocated by the runtime: its size is unknown to the worker
    EXPECT_FALSE(outside.is_runtime_owned());
    EXPECT_EQ(RuntimeCore::descriptor_lines_beyond_first(outside), 0U);
}

TEST(PrefetchSlots, EqualCostsGiveAFixedDistance) {
    // Each task runs 100 cycles, each prefetch needs 200: prefetch two tasks ahead.
    const std::vector<std::uint32_t> expected(8, 100);
    const std::vector<std::uint32_t> cost(8, 200);
    std::vector<std::uint32_t> slots(8);
    compute_prefetch_slots(expected.data(), cost.data(), 8, slots.data());
    EXPECT_EQ(slots, (std::vector<std::uint32_t>{0, 0, 0, 1, 2, 3, 4, 5}));
}

TEST(PrefetchSlots, LongTasksNeedNoDistance) {
    const std::vector<std::uint32_t> expected(5, 1000);
    const std::vector<std::uint32_t> cost(5, 300);
    std::vector<std::uint32_t> slots(5);
    compute_prefetch_slots(expected.data(), cost.data(), 5, slots.data());
    EXPECT_EQ(slots, (std::vector<std::uint32_t>{0, 0, 1, 2, 3}));
}

TEST(PrefetchSlots, SlotsNeverDecrease) {
    const std::vector<std::uint32_t> expected{50, 50, 50, 50, 50};
    const std::vector<std::uint32_t> cost{0, 0, 140, 10, 500};
    std::vector<std::uint32_t> slots(5);
    compute_prefetch_slots(expected.data(), cost.data(), 5, slots.data());
    // Task 2 would need position 0 (140 > 100 cycles of tasks 0 and 1) but task 1 already has
    // slot 1; task 4's 500 cycles are not reachable at all.
    EXPECT_EQ(slots, (std::vector<std::uint32_t>{0, 1, 1, 2, 2}));
}

TEST(PrefetchSlots, ZeroCostPrefetchesJustBefore) {
    const std::vector<std::uint32_t> expected(4, 10);
    const std::vector<std::uint32_t> cost(4, 0);
    std::vector<std::uint32_t> slots(4);
    compute_prefetch_slots(expected.data(), cost.data(), 4, slots.data());
    EXPECT_EQ(slots, (std::vector<std::uint32_t>{0, 1, 2, 3}));
}

// Records, for every prefetch callback, which task position was executing when it fired.
struct Log {
    std::mutex mutex;
    int executed{0};
    std::vector<std::pair<int, int>> prefetched; // (task id, tasks executed before the prefetch)
};
Log *log_instance = nullptr;

class Probe final : public Task {
public:
    Probe(int id, std::uint32_t expected) noexcept : _id(id) {
        annotate(PrefetchHint::callback(&Probe::on_prefetch));
        Annotation a = annotation();
        a.expected_cycles = expected;
        annotate(a);
    }
    TaskResult execute(TaskContext &) noexcept override {
        const std::lock_guard lock{log_instance->mutex};
        ++log_instance->executed;
        return TaskResult::remove();
    }
    static void on_prefetch(const Task &task) noexcept {
        const std::lock_guard lock{log_instance->mutex};
        log_instance->prefetched.emplace_back(static_cast<const Probe &>(task)._id, log_instance->executed);
    }

private:
    int _id;
};

// One worker, one producer task that spawns 8 probes locally: they land in one buffer in order.
std::vector<std::pair<int, int>> run_probes(const RuntimeConfig &config, std::uint32_t expected) {
    Log log;
    log_instance = &log;
    {
        Runtime runtime{config};
        runtime.spawn([expected](TaskContext &context) {
            for (int i = 0; i < 8; ++i) {
                context.spawn(*context.new_task<Probe>(i, expected));
            }
        });
        runtime.wait();
        EXPECT_EQ(runtime.live_tasks(), 0U);
    }
    log_instance = nullptr;
    return log.prefetched;
}

TEST(WorkerPrefetch, StaticDistancePrefetchesTaskIPlusD) {
    RuntimeConfig config;
    config.workers = 1;
    config.local_order = mx::tasking::LocalOrder::fifo; // the probes run in spawn order
    config.prefetch_distance = 3;
    const auto log = run_probes(config, 0);
    ASSERT_EQ(log.size(), 8U);
    // The first three at buffer start, then probe i+3 right before probe i runs.
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(log[static_cast<std::size_t>(i)].first, i);
        EXPECT_EQ(log[static_cast<std::size_t>(i)].second, i < 3 ? 0 : i - 3);
    }
}

TEST(WorkerPrefetch, OffMeansNoPrefetch) {
    RuntimeConfig config;
    config.workers = 1;
    config.prefetch_distance = 0;
    EXPECT_TRUE(run_probes(config, 0).empty());
}

TEST(WorkerPrefetch, DynamicDistanceFollowsAnnotatedRunTimes) {
    RuntimeConfig config;
    config.workers = 1;
    config.local_order = mx::tasking::LocalOrder::fifo; // the probes run in spawn order
    config.dynamic_prefetch = true;
    config.load_latency_cycles = 250; // one line per probe: 250 cycles to cover
    // Probes annotated with 100 cycles each: three tasks ahead (300 >= 250).
    const auto log = run_probes(config, 100);
    ASSERT_EQ(log.size(), 8U);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(log[static_cast<std::size_t>(i)].first, i);
        EXPECT_EQ(log[static_cast<std::size_t>(i)].second, i < 3 ? 0 : i - 3);
    }
    // 1000-cycle probes: one ahead is enough.
    const auto slow = run_probes(config, 1000);
    ASSERT_EQ(slow.size(), 8U);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(slow[static_cast<std::size_t>(i)].second, i < 1 ? 0 : i - 1);
    }
}

TEST(WorkerPrefetch, HintKindsAndLineCounts) {
    alignas(64) static std::byte data[64 * 64];
    Probe probe{0, 0};
    probe.annotate(PrefetchHint::bytes(data, 200));
    EXPECT_EQ(mx::tasking::detail::prefetch_lines(probe), 4U);
    probe.annotate(PrefetchHint::lines(data, 0b1011));
    EXPECT_EQ(mx::tasking::detail::prefetch_lines(probe), 3U);
    EXPECT_EQ(probe.prefetch_hint().address(), data);
    mx::tasking::detail::prefetch_task_data(probe); // must not fault
    probe.annotate(PrefetchHint::lines(data, (std::uint64_t{1} << 59U), mx::system::PrefetchMode::for_write));
    EXPECT_EQ(probe.prefetch_hint().mode(), mx::system::PrefetchMode::for_write);
    EXPECT_EQ(mx::tasking::detail::prefetch_lines(probe), 1U);
    mx::tasking::detail::prefetch_task_data(probe);
}

} // namespace
