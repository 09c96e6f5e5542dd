// Coroutine tasks on the runtime: same results as sequential code, frames recycled, parked tasks
// mixed with plain tasks, group size honoured, stop with parked tasks.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "mx/coro/coroutine.h"
#include "mx/coro/frame_pool.h"
#include "mx/tasking/coroutine_task.h"
#include "mx/tasking/runtime.h"

namespace {

using mx::tasking::CoroutineTask;
using mx::tasking::Runtime;
using mx::tasking::RuntimeConfig;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;

/// A binary search that suspends at every probe; writes its result into a slot.
class Search final : public CoroutineTask {
public:
    Search(std::span<const std::uint32_t> table, std::uint32_t key, std::size_t *out) noexcept
        : _table(table), _key(key), _out(out) {}

protected:
    mx::coro::Coroutine<> body(TaskContext &) noexcept override {
        std::size_t low = 0;
        std::size_t size = _table.size();
        while (size > 1) {
            const std::size_t half = size / 2;
            const std::uint32_t value = co_await mx::coro::load<mx::coro::Interleaved>(_table[low + half]);
            low = value < _key ? low + half : low;
            size -= half;
        }
        if (size == 1 && _table[low] < _key) {
            ++low;
        }
        *_out = low;
    }

private:
    std::span<const std::uint32_t> _table;
    std::uint32_t _key;
    std::size_t *_out;
};

std::vector<std::uint32_t> sorted_table(std::size_t size, std::mt19937 &random) {
    std::vector<std::uint32_t> table(size);
    for (auto &value : table) {
        value = static_cast<std::uint32_t>(random() % (size * 4 + 1));
    }
    std::sort(table.begin(), table.end());
    return table;
}

class CoroutineTaskTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CoroutineTaskTest, MatchesSequentialLowerBound) {
    const auto [workers, group] = GetParam();
    const unsigned seed = 42U + static_cast<unsigned>(workers * 17 + group);
    std::mt19937 random{seed};
    SCOPED_TRACE("seed " + std::to_string(seed));
    RuntimeConfig config;
    config.workers = static_cast<std::uint16_t>(workers);
    config.coroutine_group_size = static_cast<std::uint16_t>(group);
    Runtime runtime{config};
    for (const std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{1000}, std::size_t{65537}}) {
        const std::vector<std::uint32_t> table = sorted_table(size, random);
        constexpr std::size_t lookups = 2000;
        std::vector<std::uint32_t> keys(lookups);
        for (auto &key : keys) {
            key = static_cast<std::uint32_t>(random() % (size * 4 + 2));
        }
        std::vector<std::size_t> results(lookups, ~std::size_t{0});
        for (std::size_t i = 0; i < lookups; ++i) {
            runtime.spawn(
                *runtime.new_task<Search>(std::span<const std::uint32_t>{table}, keys[i], &results[i]));
        }
        runtime.wait();
        for (std::size_t i = 0; i < lookups; ++i) {
            const auto expected = static_cast<std::size_t>(
                std::lower_bound(table.begin(), table.end(), keys[i]) - table.begin());
            ASSERT_EQ(results[i], expected) << "size " << size << " key " << keys[i];
        }
        EXPECT_EQ(runtime.live_tasks(), 0U);
    }
}

INSTANTIATE_TEST_SUITE_P(WorkersAndGroups, CoroutineTaskTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(1, 4, 16)),
                         [](const auto &param_info) {
                             return std::to_string(std::get<0>(param_info.param)) + "_workers_g" +
                                    std::to_string(std::get<1>(param_info.param));
                         });

TEST(CoroutineTask, FramesAreRecycledOnTheWorker) {
    RuntimeConfig config;
    config.workers = 1;
    config.coroutine_group_size = 8;
    Runtime runtime{config};
    std::mt19937 random{7};
    const std::vector<std::uint32_t> table = sorted_table(4096, random);
    std::vector<std::size_t> results(500);
    std::int64_t outstanding_before = 0;
    std::uint64_t refills_after_first = 0;
    std::int64_t outstanding_after = -1;
    for (int round = 0; round < 3; ++round) {
        runtime.spawn([&] { outstanding_before = mx::coro::FramePool::local().outstanding(); },
                      mx::tasking::Annotation{.target_worker = 0});
        runtime.wait();
        for (std::size_t i = 0; i < results.size(); ++i) {
            runtime.spawn(*runtime.new_task<Search>(std::span<const std::uint32_t>{table},
                                                    static_cast<std::uint32_t>(i * 31), &results[i]));
        }
        runtime.wait();
        runtime.spawn(
            [&, round] {
                outstanding_after = mx::coro::FramePool::local().outstanding();
                if (round == 0) {
                    refills_after_first = mx::coro::FramePool::local().refills();
                } else {
                    // Later rounds reuse the frames of the first: no new memory.
                    EXPECT_EQ(mx::coro::FramePool::local().refills(), refills_after_first);
                }
            },
            mx::tasking::Annotation{.target_worker = 0});
        runtime.wait();
        EXPECT_EQ(outstanding_after, outstanding_before) << "coroutine frames leaked in round " << round;
    }
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

TEST(CoroutineTask, MixesWithPlainTasksOnOneWorker) {
    RuntimeConfig config;
    config.workers = 1;
    config.coroutine_group_size = 4;
    Runtime runtime{config};
    std::mt19937 random{11};
    const std::vector<std::uint32_t> table = sorted_table(10000, random);
    std::vector<std::size_t> results(300);
    std::atomic<int> plain{0};
    for (std::size_t i = 0; i < results.size(); ++i) {
        runtime.spawn(*runtime.new_task<Search>(std::span<const std::uint32_t>{table},
                                                static_cast<std::uint32_t>(i * 97), &results[i]));
        runtime.spawn([&plain] { plain.fetch_add(1); });
    }
    runtime.wait();
    EXPECT_EQ(plain.load(), 300);
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto key = static_cast<std::uint32_t>(i * 97);
        EXPECT_EQ(results[i], static_cast<std::size_t>(std::lower_bound(table.begin(), table.end(), key) -
                                                       table.begin()));
    }
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

/// Suspends forever (until destroyed): checks that stop() destroys parked tasks and frames.
class Forever final : public CoroutineTask {
protected:
    mx::coro::Coroutine<> body(TaskContext &) noexcept override {
        static const int anchor = 0;
        while (true) {
            co_await mx::coro::prefetch<mx::coro::Interleaved>(&anchor);
        }
    }
};

TEST(CoroutineTask, StopDestroysParkedTasks) {
    RuntimeConfig config;
    config.workers = 1;
    config.coroutine_group_size = 4;
    Runtime runtime{config};
    for (int i = 0; i < 3; ++i) { // fewer than the group: they stay parked and cycle
        runtime.spawn(*runtime.new_task<Forever>());
    }
    runtime.spawn([] { return TaskResult::stop(); });
    runtime.wait();
    runtime.stop();
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

/// Logs its id at the start and after every resume; suspends `steps` times.
class Recorder final : public CoroutineTask {
public:
    Recorder(int id, int steps, std::vector<int> &log) noexcept : _id(id), _steps(steps), _log(&log) {}

protected:
    mx::coro::Coroutine<> body(TaskContext &) noexcept override {
        static const int anchor = 0;
        _log->push_back(_id);
        for (int step = 0; step < _steps; ++step) {
            co_await mx::coro::prefetch<mx::coro::Interleaved>(&anchor);
            _log->push_back(_id);
        }
    }

private:
    int _id;
    int _steps;
    std::vector<int> *_log; // written by the one worker only
};

TEST(CoroutineTask, ParkedTasksResumeRoundRobinWithTheNewcomerLast) {
    // While the group is full, every other member of the group is resumed exactly once between
    // two steps of a task, so the task's prefetch has G - 1 other steps to complete: between two
    // entries of one task the log holds G - 1 resumes plus the starts of newcomers that took the
    // place of finished tasks (they go to the end of the round, as in mx::coro::interleave).
    constexpr int group = 4;
    constexpr int tasks = 60;
    RuntimeConfig config;
    config.workers = 1;
    config.coroutine_group_size = group;
    config.local_order = mx::tasking::LocalOrder::fifo; // the tasks start in spawn order
    Runtime runtime{config};
    std::vector<int> log;
    log.reserve(4096);
    std::mt19937 random{5};
    std::vector<int> steps(tasks);
    for (int &s : steps) {
        s = 1 + static_cast<int>(random() % 9);
    }
    // Spawned from a task, so all are queued before the worker takes the first one.
    runtime.spawn([&](TaskContext &context) noexcept {
        for (int id = 0; id < tasks; ++id) {
            context.spawn(*context.new_task<Recorder>(id, steps[static_cast<std::size_t>(id)], log));
        }
        return TaskResult::remove();
    });
    runtime.wait();
    std::vector<int> entries(tasks, 0);
    for (const int id : log) {
        ++entries[static_cast<std::size_t>(id)];
    }
    for (int id = 0; id < tasks; ++id) {
        ASSERT_EQ(entries[static_cast<std::size_t>(id)], steps[static_cast<std::size_t>(id)] + 1)
            << "task " << id;
    }
    // Up to the start of the last task the pool never runs dry, so the group stays full.
    const auto last_start =
        static_cast<std::size_t>(std::find(log.begin(), log.end(), tasks - 1) - log.begin());
    std::vector<std::size_t> previous(tasks, log.size());
    std::vector<std::size_t> starts_before(log.size() + 1, 0); // starts among entries [0, i)
    for (std::size_t i = 0; i < log.size(); ++i) {
        const auto id = static_cast<std::size_t>(log[i]);
        starts_before[i + 1] = starts_before[i] + (previous[id] == log.size() ? 1 : 0);
        previous[id] = i;
    }
    std::fill(previous.begin(), previous.end(), log.size());
    std::size_t checked = 0;
    for (std::size_t i = 0; i <= last_start; ++i) {
        const auto id = static_cast<std::size_t>(log[i]);
        if (previous[id] != log.size() && previous[id] >= static_cast<std::size_t>(group)) {
            const std::size_t resumes_between =
                i - previous[id] - 1 - (starts_before[i] - starts_before[previous[id] + 1]);
            EXPECT_EQ(resumes_between, static_cast<std::size_t>(group - 1))
                << "task " << id << " at entry " << i << " of " << ::testing::PrintToString(log);
            ++checked;
        }
        previous[id] = i;
    }
    EXPECT_GT(checked, 100U);
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

TEST(CoroutineTask, GroupSizeFollowsTheModel) {
    using mx::tasking::coroutine_group_size;
    // G = ceil((stall - switch) / (compute + switch)) + 1
    EXPECT_EQ(coroutine_group_size(50, 10, 10), 3);    // ceil(40 / 20) + 1
    EXPECT_EQ(coroutine_group_size(101, 10, 20), 5);   // ceil(91 / 30) + 1
    EXPECT_EQ(coroutine_group_size(5, 10, 10), 1);     // no stall to hide: no interleaving
    EXPECT_EQ(coroutine_group_size(3000, 10, 10), 16); // clamped to the outstanding-miss limit
    const std::uint16_t measured = mx::tasking::default_coroutine_group_size();
    EXPECT_EQ(mx::tasking::default_coroutine_group_size(), measured) << "measured once per process";
}

} // namespace
