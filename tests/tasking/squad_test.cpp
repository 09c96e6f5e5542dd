// Task squads: queued until published, run exactly once, back to back on one worker, handed to
// whichever worker is free.

#include <gtest/gtest.h>

#include <iterator>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "mx/tasking/runtime.h"

namespace {

using mx::tasking::Annotation;
using mx::tasking::Runtime;
using mx::tasking::RuntimeConfig;
using mx::tasking::Squad;
using mx::tasking::TaskContext;

struct Record {
    std::mutex mutex;
    std::vector<std::pair<std::size_t, int>> runs; // (squad, worker) in execution order
};

RuntimeConfig with_workers(int workers) {
    RuntimeConfig config;
    config.workers = static_cast<std::uint16_t>(workers);
    return config;
}

void publish_all(Runtime &runtime, Squad *squads, std::size_t count) {
    std::vector<Squad *> all;
    for (std::size_t s = 0; s < count; ++s) {
        all.push_back(&squads[s]);
    }
    runtime.publish(all);
}

class SquadTest : public ::testing::TestWithParam<int> {};

TEST_P(SquadTest, TasksWaitForPublishAndRunOnceBackToBackOnOneWorker) {
    const int workers = GetParam();
    Runtime runtime{with_workers(workers)};
    constexpr std::size_t squads_count = 6;
    constexpr int per_producer = 50;
    auto squads = std::make_unique<Squad[]>(squads_count);
    Record record;
    std::atomic<int> executed{0};

    // Producers on every worker spawn into every squad.
    for (int producer = 0; producer < workers; ++producer) {
        runtime.spawn(
            [&, producer](TaskContext &context) {
                for (std::size_t s = 0; s < squads_count; ++s) {
                    for (int i = 0; i < per_producer; ++i) {
                        context.spawn(
                            [&, s](TaskContext &inner) {
                                executed.fetch_add(1);
                                const std::lock_guard lock{record.mutex};
                                record.runs.emplace_back(s, inner.worker_id());
                            },
                            Annotation{.squad = &squads[s]});
                    }
                }
                static_cast<void>(producer);
            },
            Annotation{.target_worker = static_cast<std::uint16_t>(producer)});
    }
    runtime.wait(); // squad tasks do not count until published
    EXPECT_EQ(executed.load(), 0);
    for (std::size_t s = 0; s < squads_count; ++s) {
        EXPECT_EQ(squads[s].queued(), static_cast<std::uint64_t>(workers * per_producer));
    }

    publish_all(runtime, squads.get(), squads_count);
    runtime.wait();
    EXPECT_EQ(executed.load(), static_cast<int>(squads_count) * workers * per_producer);
    EXPECT_EQ(runtime.live_tasks(), 0U);

    // Each squad ran on exactly one worker and as one contiguous block on it.
    std::vector<int> worker_of(squads_count, -1);
    std::vector<std::vector<std::size_t>> sequence(static_cast<std::size_t>(workers));
    for (const auto &[squad, worker] : record.runs) {
        if (worker_of[squad] == -1) {
            worker_of[squad] = worker;
        }
        EXPECT_EQ(worker_of[squad], worker) << "squad " << squad << " split over workers";
        sequence[static_cast<std::size_t>(worker)].push_back(squad);
    }
    for (const auto &on_worker : sequence) {
        std::vector<std::size_t> seen;
        for (std::size_t i = 0; i < on_worker.size(); ++i) {
            if (i == 0 || on_worker[i] != on_worker[i - 1]) {
                EXPECT_EQ(std::count(seen.begin(), seen.end(), on_worker[i]), 0) << "squad not back to back";
                seen.push_back(on_worker[i]);
            }
        }
    }

    // A squad is reusable: second phase.
    runtime.spawn([&](TaskContext &context) {
        context.spawn([&] { executed.fetch_add(1); }, Annotation{.squad = &squads[0]});
        context.publish(squads[0]);
    });
    runtime.wait();
    EXPECT_EQ(executed.load(), static_cast<int>(squads_count) * workers * per_producer + 1);
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

// Squads published together go to whichever worker has run out of work: with one worker blocked
// until every squad has run, the others take them all (a static split would leave the blocked
// worker's share waiting, and the blocker would give up after its deadline).
TEST_P(SquadTest, BusyWorkerLeavesItsShareOfSquadsToTheOthers) {
    const int workers = GetParam();
    if (workers < 2) {
        GTEST_SKIP() << "needs a second worker";
    }
    Runtime runtime{with_workers(workers)};
    constexpr std::size_t squads_count = 16;
    constexpr int per_squad = 20;
    auto squads = std::make_unique<Squad[]>(squads_count);
    std::atomic<int> executed{0};
    std::atomic<int> on_blocked{0};
    std::atomic<bool> blocked_started{false};
    std::atomic<bool> all_ran_while_blocked{false};
    runtime.spawn(
        [&] {
            blocked_started.store(true);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (executed.load() < static_cast<int>(squads_count) * per_squad &&
                   std::chrono::steady_clock::now() < deadline) {
                std::this_thread::yield();
            }
            all_ran_while_blocked.store(executed.load() == static_cast<int>(squads_count) * per_squad);
        },
        Annotation{.target_worker = 0});
    while (!blocked_started.load()) {
        std::this_thread::yield();
    }
    for (std::size_t s = 0; s < squads_count; ++s) {
        for (int i = 0; i < per_squad; ++i) {
            runtime.spawn(
                [&](TaskContext &context) {
                    on_blocked.fetch_add(context.worker_id() == 0 ? 1 : 0);
                    executed.fetch_add(1);
                },
                Annotation{.squad = &squads[s]});
        }
    }
    publish_all(runtime, squads.get(), squads_count);
    runtime.wait();
    EXPECT_TRUE(all_ran_while_blocked.load()) << "squads waited for the blocked worker";
    EXPECT_EQ(on_blocked.load(), 0);
    EXPECT_EQ(executed.load(), static_cast<int>(squads_count) * per_squad);
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

TEST_P(SquadTest, ExternalSpawnAndEmptyPublish) {
    Runtime runtime{with_workers(GetParam())};
    Squad squad;
    Squad empty;
    std::atomic<int> executed{0};
    for (int i = 0; i < 100; ++i) {
        runtime.spawn([&] { executed.fetch_add(1); }, Annotation{.squad = &squad});
    }
    runtime.wait();
    EXPECT_EQ(executed.load(), 0);
    runtime.publish(empty);
    runtime.publish(squad);
    runtime.wait();
    EXPECT_EQ(executed.load(), 100);
    EXPECT_EQ(squad.queued(), 0U);
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

// A squad published from inside a task runs on that task's worker before the tasks already
// queued there, in the order its tasks were spawned (the radix join probes a partition right
// after its build this way).
TEST_P(SquadTest, SquadPublishedFromATaskRunsNextOnThatWorker) {
    const int workers = GetParam();
    // With stealing, idle workers may take the plain tasks at any time; the squad's tasks still
    // run in order on the publishing worker. Without it, they also run before the plain tasks.
    for (const bool stealing : {false, true}) {
        RuntimeConfig config = with_workers(workers);
        config.work_stealing = stealing;
        config.local_order = mx::tasking::LocalOrder::fifo; // the plain tasks in spawn order
        Runtime runtime{config};
        Squad squad;
        constexpr int squad_tasks = 40;
        constexpr int plain_tasks = 30;
        std::vector<std::pair<int, int>> order; // (label, worker); labels < 0: plain tasks
        std::mutex mutex;
        const auto record = [&](int label, int worker) {
            const std::lock_guard lock{mutex};
            order.emplace_back(label, worker);
        };
        // Spawned from the last worker, published from worker 0.
        runtime.spawn(
            [&](TaskContext &context) {
                for (int i = 0; i < squad_tasks; ++i) {
                    context.spawn([&, i](TaskContext &inner) { record(i, inner.worker_id()); },
                                  Annotation{.squad = &squad});
                }
            },
            Annotation{.target_worker = static_cast<std::uint16_t>(workers - 1)});
        runtime.wait();
        runtime.spawn(
            [&](TaskContext &context) {
                for (int i = 0; i < plain_tasks; ++i) {
                    context.spawn([&, i](TaskContext &inner) { record(-1 - i, inner.worker_id()); });
                }
                context.publish(squad);
            },
            Annotation{.target_worker = 0});
        runtime.wait();
        ASSERT_EQ(order.size(), static_cast<std::size_t>(squad_tasks + plain_tasks));
        std::vector<std::pair<int, int>> squad_order;
        std::copy_if(order.begin(), order.end(), std::back_inserter(squad_order),
                     [](const auto &entry) { return entry.first >= 0; });
        ASSERT_EQ(squad_order.size(), static_cast<std::size_t>(squad_tasks));
        for (int i = 0; i < squad_tasks; ++i) {
            EXPECT_EQ(squad_order[static_cast<std::size_t>(i)].first, i) << "squad task out of order";
            EXPECT_EQ(squad_order[static_cast<std::size_t>(i)].second, 0)
                << "squad left the publishing worker";
        }
        if (!stealing) {
            for (int i = 0; i < squad_tasks; ++i) {
                EXPECT_EQ(order[static_cast<std::size_t>(i)].first, i) << "squad task behind plain tasks";
            }
            for (int i = 0; i < plain_tasks; ++i) {
                EXPECT_EQ(order[static_cast<std::size_t>(squad_tasks + i)].first, -1 - i);
            }
        }
        EXPECT_EQ(squad.queued(), 0U);
        EXPECT_EQ(runtime.live_tasks(), 0U);
    }
}

TEST_P(SquadTest, BatchesHandTheirTasksOverInOrderAtSubmit) {
    // Producers on every worker collect tasks for every squad in SquadBatches and submit them in
    // two halves; each task runs exactly once, and each producer's tasks in add() order.
    const int workers = GetParam();
    Runtime runtime{with_workers(workers)};
    constexpr std::size_t squads_count = 5;
    constexpr int per_producer = 40;
    auto squads = std::make_unique<Squad[]>(squads_count);
    std::mutex mutex;
    std::vector<std::tuple<std::size_t, int, int>> runs; // (squad, producer, index)
    for (int producer = 0; producer < workers; ++producer) {
        runtime.spawn(
            [&, producer](TaskContext &context) noexcept {
                std::vector<mx::tasking::SquadBatch> batches(squads_count);
                for (std::size_t s = 0; s < squads_count; ++s) {
                    batches[s].assign(squads[s]);
                }
                for (int i = 0; i < per_producer; ++i) {
                    for (std::size_t s = 0; s < squads_count; ++s) {
                        batches[s].add(*context.new_task([&, s, producer, i]() noexcept {
                            const std::lock_guard lock{mutex};
                            runs.emplace_back(s, producer, i);
                        }));
                    }
                    if (i == per_producer / 2) {
                        EXPECT_EQ(batches[0].size(), static_cast<std::uint64_t>(i + 1));
                        for (auto &batch : batches) {
                            batch.submit();
                        }
                        EXPECT_EQ(batches[0].size(), 0U);
                    }
                }
                for (auto &batch : batches) {
                    batch.submit();
                    batch.submit(); // empty: nothing happens
                }
            },
            Annotation{.target_worker = static_cast<std::uint16_t>(producer)});
    }
    runtime.wait();
    EXPECT_TRUE(runs.empty()) << "batched tasks ran before their squad was published";
    for (std::size_t s = 0; s < squads_count; ++s) {
        EXPECT_EQ(squads[s].queued(), static_cast<std::uint64_t>(workers * per_producer));
    }
    publish_all(runtime, squads.get(), squads_count);
    runtime.wait();
    ASSERT_EQ(runs.size(), squads_count * static_cast<std::size_t>(workers * per_producer));
    std::vector<std::vector<int>> next(squads_count, std::vector<int>(static_cast<std::size_t>(workers), 0));
    for (const auto &[squad, producer, index] : runs) {
        int &expected = next[squad][static_cast<std::size_t>(producer)];
        EXPECT_EQ(index, expected) << "squad " << squad << ", producer " << producer;
        expected = index + 1;
    }
    for (std::size_t s = 0; s < squads_count; ++s) {
        EXPECT_EQ(squads[s].queued(), 0U);
    }
    EXPECT_EQ(runtime.live_tasks(), 0U);
}

INSTANTIATE_TEST_SUITE_P(Workers, SquadTest, ::testing::Values(1, 2, 4, 8), [](const auto &param_info) {
    return std::to_string(param_info.param) + "_workers";
});

} // namespace
