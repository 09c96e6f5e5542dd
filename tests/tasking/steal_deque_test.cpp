// The work-stealing deque on its own: every task pushed is taken exactly once, by the owner
// (newest-first or oldest-first batches) or by one of several thieves (batches from the top),
// while the ring grows and the owner keeps pushing.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <mx/tasking/detail/steal_deque.h>
#include <mx/tasking/task.h>

#include "support/runtime_fixture.h"

namespace {

using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;
using mx::tasking::detail::StealDeque;

class Item final : public Task {
public:
    explicit Item(std::uint32_t id) noexcept : _id(id) {}
    TaskResult execute(TaskContext &) noexcept override { return TaskResult::done(); }
    [[nodiscard]] std::uint32_t id() const noexcept { return _id; }

private:
    std::uint32_t _id;
};

TEST(StealDeque, OwnerAloneTakesNewestOrOldestFirst) {
    StealDeque deque;
    std::vector<std::unique_ptr<Item>> items;
    for (std::uint32_t i = 0; i < 1000; ++i) { // past the initial ring: it grows
        items.push_back(std::make_unique<Item>(i));
        deque.push(*items.back());
    }
    EXPECT_EQ(deque.size(), 1000);
    Task *out[64];
    std::uint32_t taken = deque.take_newest(out, 64);
    ASSERT_EQ(taken, 64U);
    for (std::uint32_t i = 0; i < taken; ++i) {
        EXPECT_EQ(static_cast<Item *>(out[i])->id(), 999U - i);
    }
    taken = deque.take_oldest(out, 10);
    ASSERT_EQ(taken, 10U);
    for (std::uint32_t i = 0; i < taken; ++i) {
        EXPECT_EQ(static_cast<Item *>(out[i])->id(), i);
    }
    taken = deque.steal(out, 64);
    EXPECT_EQ(taken, static_cast<std::uint32_t>(StealDeque::max_steal)) << "a thief takes at most max_steal";
    EXPECT_EQ(static_cast<Item *>(out[0])->id(), 10U);
    std::uint32_t rest = 0;
    while ((taken = deque.take_newest(out, 64)) > 0) {
        rest += taken;
    }
    EXPECT_EQ(rest, 1000U - 64U - 10U - static_cast<std::uint32_t>(StealDeque::max_steal));
    EXPECT_TRUE(deque.empty());
    EXPECT_EQ(deque.steal(out, 8), 0U);
}

/// The owner pushes `total` items in rounds and takes some back after each round (newest or
/// oldest first), while `thieves` threads steal; each item must be taken exactly once.
void run_race(bool newest, int thieves) {
    const std::uint32_t total = mx::test::scaled(200'000, 10);
    std::vector<std::unique_ptr<Item>> items;
    items.reserve(total);
    for (std::uint32_t i = 0; i < total; ++i) {
        items.push_back(std::make_unique<Item>(i));
    }
    std::vector<std::atomic<std::uint32_t>> taken_count(total);
    StealDeque deque;
    std::atomic<bool> done{false};
    const auto record = [&taken_count](Task *const *tasks, std::uint32_t count) {
        for (std::uint32_t i = 0; i < count; ++i) {
            taken_count[static_cast<const Item *>(tasks[i])->id()].fetch_add(1, std::memory_order_relaxed);
        }
    };
    std::vector<std::thread> threads;
    std::atomic<std::uint64_t> stolen{0};
    for (int t = 0; t < thieves; ++t) {
        threads.emplace_back([&] {
            Task *out[StealDeque::max_steal];
            while (!done.load(std::memory_order_acquire) || !deque.empty()) {
                const std::uint32_t count =
                    deque.steal(out, static_cast<std::uint32_t>(1 + stolen.load() % 40));
                record(out, count);
                stolen.fetch_add(count, std::memory_order_relaxed);
                if (count == 0) {
                    std::this_thread::yield();
                }
            }
        });
    }
    Task *out[64];
    std::uint32_t next = 0;
    std::uint32_t round = 0;
    while (next < total) {
        // Rounds of different sizes: sometimes the deque runs nearly empty (the contested end).
        const std::uint32_t batch = 1 + (round * 37U) % 300U;
        for (std::uint32_t i = 0; i < batch && next < total; ++i) {
            deque.push(*items[next++]);
        }
        const std::uint32_t capacity = 1 + (round * 13U) % 64U;
        record(out, newest ? deque.take_newest(out, capacity) : deque.take_oldest(out, capacity));
        ++round;
    }
    std::uint32_t count = 0;
    while ((count = newest ? deque.take_newest(out, 64) : deque.take_oldest(out, 64)) > 0) {
        record(out, count);
    }
    done.store(true, std::memory_order_release);
    for (auto &thread : threads) {
        thread.join();
    }
    std::uint32_t missing = 0;
    std::uint32_t twice = 0;
    for (std::uint32_t i = 0; i < total; ++i) {
        const std::uint32_t c = taken_count[i].load();
        missing += c == 0 ? 1U : 0U;
        twice += c > 1 ? 1U : 0U;
    }
    EXPECT_EQ(missing, 0U) << "tasks pushed but never taken";
    EXPECT_EQ(twice, 0U) << "tasks taken more than once";
    ::testing::Test::RecordProperty("stolen", std::to_string(stolen.load()));
}

TEST(StealDeque, EveryTaskIsTakenOnceNewestFirstWithThieves) {
    for (const int thieves : {1, 3}) {
        run_race(true, thieves);
    }
}

TEST(StealDeque, EveryTaskIsTakenOnceOldestFirstWithThieves) {
    for (const int thieves : {1, 3}) {
        run_race(false, thieves);
    }
}

} // namespace
