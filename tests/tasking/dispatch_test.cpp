// Dispatch: where tasks run (explicit worker, NUMA region, round-robin from outside) and in
// which order (FIFO per producer, high before normal before low), plus spawn storms whose
// counters must add up exactly.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include <mx/tasking/runtime.h>

#include "support/runtime_fixture.h"

namespace {

using mx::tasking::Annotation;
using mx::tasking::Priority;
using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;
using mx::test::PaddedCounter;
using mx::test::scaled;

class DispatchTest : public mx::test::RuntimeFixture {};

/// Index of the first element where `values` is not 0, 1, 2, ... or values.size() if none.
std::size_t first_out_of_sequence(const std::vector<std::uint32_t> &values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (values[i] != i) {
            return i;
        }
    }
    return values.size();
}

Annotation on_worker(std::uint16_t worker) { return Annotation{.target_worker = worker}; }

/// The configuration of static dispatch: no stealing, FIFO local order.
mx::tasking::RuntimeConfig without_stealing(mx::tasking::RuntimeConfig config) {
    config.work_stealing = false;
    config.local_order = mx::tasking::LocalOrder::fifo;
    return config;
}

TEST_P(DispatchTest, LocalSpawnsRunInSpawnOrder) {
    // Static dispatch only: with stealing, idle workers take local tasks.
    start_runtime(without_stealing(shape_config()));
    const std::uint32_t count = scaled(3000);
    // Appended only on the producing worker (checked); read after wait().
    std::vector<std::uint32_t> order;
    order.reserve(count);
    std::atomic<std::uint64_t> misplaced{0};

    runtime().spawn([&order, &misplaced, count](TaskContext &context) {
        const std::uint16_t self = context.worker_id();
        for (std::uint32_t i = 0; i < count; ++i) {
            context.spawn([&order, &misplaced, self, i](TaskContext &inner) {
                if (inner.worker_id() != self) {
                    misplaced.fetch_add(1, std::memory_order_relaxed);
                    return;
                }
                order.push_back(i);
            });
        }
    });
    runtime().wait();

    EXPECT_EQ(misplaced.load(), 0U) << "tasks without annotation must stay on the spawning worker";
    ASSERT_EQ(order.size(), count);
    const std::size_t bad = first_out_of_sequence(order);
    EXPECT_EQ(bad, order.size()) << "local spawn " << (bad < order.size() ? order[bad] : 0)
                                 << " ran at position " << bad;
}

TEST_P(DispatchTest, OutsideSpawnsToExplicitWorkerRunInSpawnOrder) {
    const std::uint32_t count = scaled(1000);
    const std::uint16_t n = workers();
    // order[w] is appended only on worker w (checked).
    std::vector<std::vector<std::uint32_t>> order(n);
    for (auto &list : order) {
        list.reserve(count);
    }
    std::atomic<std::uint64_t> misplaced{0};

    for (std::uint32_t i = 0; i < count; ++i) {
        for (std::uint16_t w = 0; w < n; ++w) {
            runtime().spawn(
                [&order, &misplaced, w, i](TaskContext &context) {
                    if (context.worker_id() != w) {
                        misplaced.fetch_add(1, std::memory_order_relaxed);
                        return;
                    }
                    order[w].push_back(i);
                },
                on_worker(w));
        }
    }
    runtime().wait();

    EXPECT_EQ(misplaced.load(), 0U);
    for (std::uint16_t w = 0; w < n; ++w) {
        ASSERT_EQ(order[w].size(), count) << "worker " << w;
        const std::size_t bad = first_out_of_sequence(order[w]);
        EXPECT_EQ(bad, count) << "worker " << w << " ran outside spawn " << (bad < count ? order[w][bad] : 0)
                              << " at position " << bad;
    }
}

/// Every worker and two outside threads spawn numbered tasks to one consumer worker at the same
/// time; per producer, the consumer must see the numbers in order.
TEST_P(DispatchTest, RemoteSpawnsKeepOrderPerProducer) {
    // The consumer's own spawns to itself are local: FIFO and unstolen only in static dispatch.
    start_runtime(without_stealing(shape_config()));
    const std::uint32_t count = scaled(1500);
    const std::uint16_t n = workers();
    const auto consumer = static_cast<std::uint16_t>(n - 1);
    constexpr std::uint16_t outside_producers = 2;
    const auto producers = static_cast<std::uint16_t>(n + outside_producers);

    struct Record {
        std::uint16_t producer;
        std::uint32_t sequence;
    };
    std::vector<Record> seen; // appended on the consumer only (checked)
    seen.reserve(std::size_t{count} * producers);
    std::atomic<std::uint64_t> misplaced{0};

    const auto make_task = [&seen, &misplaced, consumer](std::uint16_t producer, std::uint32_t sequence) {
        return [&seen, &misplaced, consumer, producer, sequence](TaskContext &context) {
            if (context.worker_id() != consumer) {
                misplaced.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            seen.push_back(Record{producer, sequence});
        };
    };

    std::atomic<bool> go{false};
    for (std::uint16_t w = 0; w < n; ++w) {
        runtime().spawn(
            [&, w](TaskContext &context) {
                mx::test::spin_until(go);
                for (std::uint32_t i = 0; i < count; ++i) {
                    context.spawn(make_task(w, i), on_worker(consumer));
                }
            },
            on_worker(w));
    }
    std::vector<std::thread> threads;
    for (std::uint16_t t = 0; t < outside_producers; ++t) {
        threads.emplace_back([&, t] {
            mx::test::spin_until(go);
            for (std::uint32_t i = 0; i < count; ++i) {
                runtime().spawn(make_task(static_cast<std::uint16_t>(n + t), i), on_worker(consumer));
            }
        });
    }
    go.store(true, std::memory_order_release);
    for (auto &thread : threads) {
        thread.join();
    }
    runtime().wait();

    EXPECT_EQ(misplaced.load(), 0U);
    ASSERT_EQ(seen.size(), std::size_t{count} * producers);
    std::vector<std::uint32_t> next(producers, 0);
    for (std::size_t position = 0; position < seen.size(); ++position) {
        const Record record = seen[position];
        ASSERT_LT(record.producer, producers);
        ASSERT_EQ(record.sequence, next[record.producer])
            << "producer " << record.producer << " (>= " << n
            << " is an outside thread) out of order at position " << position;
        ++next[record.producer];
    }
}

enum class PrioritySource { local, other_worker, outside_thread };

/// One worker is held busy by a blocker while tasks of interleaved priorities (low, normal,
/// high, low, ...) queue up for it; once released, it must run all high, then all normal, then
/// all low tasks, each group in spawn order.
void check_priority_order(mx::tasking::Runtime &runtime, PrioritySource source) {
    constexpr Priority cycle[] = {Priority::low, Priority::normal, Priority::high};
    const std::uint32_t per_priority = scaled(200, 4);
    const std::uint16_t n = runtime.worker_count();
    const auto target = static_cast<std::uint16_t>(n - 1);

    struct Record {
        Priority priority;
        std::uint32_t sequence;
    };
    std::vector<Record> seen; // appended on the target worker only (checked)
    seen.reserve(std::size_t{per_priority} * 3);
    std::atomic<std::uint64_t> misplaced{0};
    std::atomic<bool> started{false};
    std::atomic<bool> queued{false};

    const auto spawn_all = [&](auto &&spawn) {
        for (std::uint32_t i = 0; i < per_priority; ++i) {
            for (const Priority priority : cycle) {
                spawn(
                    [&seen, &misplaced, target, priority, i](TaskContext &context) {
                        if (context.worker_id() != target) {
                            misplaced.fetch_add(1, std::memory_order_relaxed);
                            return;
                        }
                        seen.push_back(Record{priority, i});
                    },
                    Annotation{.target_worker = target, .priority = priority});
            }
        }
    };

    if (source == PrioritySource::local) {
        // The blocker is the producer: everything it spawns stays queued until it returns.
        runtime.spawn(
            [&](TaskContext &context) {
                spawn_all([&context](auto f, Annotation a) { context.spawn(std::move(f), a); });
            },
            on_worker(target));
    } else {
        runtime.spawn(
            [&](TaskContext &) {
                started.store(true, std::memory_order_release);
                mx::test::spin_until(queued);
            },
            on_worker(target));
        ASSERT_TRUE(mx::test::eventually([&] { return started.load(std::memory_order_acquire); }));
        if (source == PrioritySource::outside_thread) {
            spawn_all([&runtime](auto f, Annotation a) { runtime.spawn(std::move(f), a); });
            queued.store(true, std::memory_order_release);
        } else {
            runtime.spawn(
                [&](TaskContext &context) {
                    spawn_all([&context](auto f, Annotation a) { context.spawn(std::move(f), a); });
                    queued.store(true, std::memory_order_release);
                },
                on_worker(0));
        }
    }
    runtime.wait();

    EXPECT_EQ(misplaced.load(), 0U);
    ASSERT_EQ(seen.size(), std::size_t{per_priority} * 3);
    std::uint32_t next[3] = {0, 0, 0};
    for (std::size_t position = 0; position < seen.size(); ++position) {
        const Record record = seen[position];
        if (position > 0) {
            ASSERT_LE(static_cast<int>(seen[position - 1].priority), static_cast<int>(record.priority))
                << "a task of priority " << static_cast<int>(seen[position - 1].priority)
                << " (0 = high) ran before one of priority " << static_cast<int>(record.priority)
                << " at position " << position;
        }
        const auto index = static_cast<std::size_t>(record.priority);
        ASSERT_EQ(record.sequence, next[index]) << "FIFO broken within priority " << index;
        ++next[index];
    }
}

TEST_P(DispatchTest, PrioritiesOrderLocalQueue) {
    start_runtime(without_stealing(shape_config()));
    check_priority_order(runtime(), PrioritySource::local);
}

TEST_P(DispatchTest, PrioritiesOrderQueueFromOutsideThread) {
    check_priority_order(runtime(), PrioritySource::outside_thread);
}

TEST_P(DispatchTest, PrioritiesOrderQueueFromOtherWorker) {
    if (workers() < 2) {
        GTEST_SKIP() << "needs a second worker to produce while the first is blocked";
    }
    check_priority_order(runtime(), PrioritySource::other_worker);
}

TEST_P(DispatchTest, ExplicitWorkerRunsThere) {
    const std::uint32_t per_worker = scaled(200);
    const std::uint16_t n = workers();
    std::vector<PaddedCounter> ran(n);
    std::atomic<std::uint64_t> misplaced{0};
    const auto make_task = [&ran, &misplaced](std::uint16_t target) {
        return [&ran, &misplaced, target](TaskContext &context) {
            if (context.worker_id() != target) {
                misplaced.fetch_add(1, std::memory_order_relaxed);
            }
            ran[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
        };
    };

    // From outside, and from inside a task on every worker.
    for (std::uint16_t w = 0; w < n; ++w) {
        for (std::uint32_t i = 0; i < per_worker; ++i) {
            runtime().spawn(make_task(w), on_worker(w));
        }
        runtime().spawn(
            [&make_task, n, per_worker](TaskContext &context) {
                for (std::uint16_t target = 0; target < n; ++target) {
                    for (std::uint32_t i = 0; i < per_worker; ++i) {
                        context.spawn(make_task(target), on_worker(target));
                    }
                }
            },
            on_worker(w));
    }
    runtime().wait();

    EXPECT_EQ(misplaced.load(), 0U);
    for (std::uint16_t w = 0; w < n; ++w) {
        EXPECT_EQ(ran[w].value.load(), std::uint64_t{per_worker} * (1U + n)) << "worker " << w;
    }
}

TEST_P(DispatchTest, RegionTasksRunInRegionAndSpreadOverItsWorkers) {
    // With stealing, workers of the region may take each other's region tasks: the region holds,
    // the spread over its workers is only guaranteed by static dispatch.
    for (const bool stealing : {false, true}) {
        auto config = shape_config();
        config.work_stealing = stealing;
        start_runtime(config);
        const auto regions = workers_by_region();
        const std::uint16_t n = workers();
        ASSERT_EQ(regions.size(), runtime().region_count());
        for (std::size_t r = 0; r < regions.size(); ++r) {
            ASSERT_FALSE(regions[r].empty()) << "region " << r << " has no worker";
        }
        // from_outside[w] / from_worker[w]: tasks of each source that ran on worker w.
        std::vector<PaddedCounter> from_outside(n);
        std::vector<PaddedCounter> from_worker(n);
        std::atomic<std::uint64_t> wrong_region{0};
        const auto make_task = [&wrong_region](std::vector<PaddedCounter> &ran, std::uint8_t region) {
            return [&ran, &wrong_region, region](TaskContext &context) {
                if (context.numa_region() != region) {
                    wrong_region.fetch_add(1, std::memory_order_relaxed);
                }
                ran[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
            };
        };

        for (std::size_t r = 0; r < regions.size(); ++r) {
            const auto region = static_cast<std::uint8_t>(r);
            const auto count = static_cast<std::uint32_t>(4 * regions[r].size());
            for (std::uint32_t i = 0; i < count; ++i) {
                Task *task = runtime().new_task(make_task(from_outside, region));
                task->annotate_region(region);
                runtime().spawn(*task);
            }
            runtime().spawn(
                [&make_task, &from_worker, region, count](TaskContext &context) {
                    for (std::uint32_t i = 0; i < count; ++i) {
                        context.spawn(make_task(from_worker, region), Annotation{.target_region = region});
                    }
                },
                on_worker(0));
        }
        runtime().wait();

        EXPECT_EQ(wrong_region.load(), 0U)
            << "a task annotated with a region ran on a worker of another region";
        for (std::size_t r = 0; r < regions.size(); ++r) {
            for (const std::uint16_t w : regions[r]) {
                if (stealing) {
                    continue;
                }
                EXPECT_GE(from_outside[w].value.load(), 1U)
                    << "outside spawns to region " << r << " never reached its worker " << w;
                // Worker 0 also ran the producer tasks; those are not counted here.
                EXPECT_GE(from_worker[w].value.load(), 1U)
                    << "spawns from a worker to region " << r << " never reached its worker " << w;
            }
        }
    }
}

TEST_P(DispatchTest, OutsideSpawnsWithoutTargetSpreadAndAllRun) {
    const std::uint16_t n = workers();
    const std::uint32_t per_worker = scaled(400);
    const std::uint32_t count = per_worker * n;
    std::vector<PaddedCounter> ran(n);
    for (std::uint32_t i = 0; i < count; ++i) {
        runtime().spawn([&ran](TaskContext &context) {
            ran[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
        });
    }
    runtime().wait();

    std::uint64_t total = 0;
    for (std::uint16_t w = 0; w < n; ++w) {
        total += ran[w].value.load();
        // Round-robin gives exactly per_worker each; allow slack for a smarter policy, but not
        // for sending everything to one worker.
        EXPECT_GE(ran[w].value.load(), per_worker / 2) << "worker " << w << " got too few outside spawns";
    }
    EXPECT_EQ(total, count) << "outside spawns without a target were lost";
}

/// Every worker spawns many tasks to every worker; each of those spawns children to targets
/// derived from a seed. Per-worker executions must equal the spawns aimed at that worker, and
/// the workers' spawn statistics must add up to the number of spawns.
TEST_P(DispatchTest, CrossWorkerSpawnStorm) {
    const std::uint64_t seed = mx::test::test_seed();
    const std::uint16_t n = workers();
    const std::uint32_t per_pair = scaled(300, 16);
    constexpr std::uint32_t children = 2;

    std::vector<PaddedCounter> expected(n);
    std::vector<PaddedCounter> executed(n);
    std::atomic<std::uint64_t> misplaced{0};

    const auto leaf = [&executed, &misplaced](std::uint16_t target) {
        return [&executed, &misplaced, target](TaskContext &context) {
            if (context.worker_id() != target) {
                misplaced.fetch_add(1, std::memory_order_relaxed);
            }
            executed[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
        };
    };
    const auto middle = [&, seed](std::uint16_t target, std::uint16_t origin, std::uint32_t index) {
        return [&, seed, target, origin, index](TaskContext &context) {
            if (context.worker_id() != target) {
                misplaced.fetch_add(1, std::memory_order_relaxed);
            }
            executed[context.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
            for (std::uint32_t c = 0; c < children; ++c) {
                const auto child_target = static_cast<std::uint16_t>(
                    mx::test::mix(seed, (std::uint64_t{origin} << 32U) | index, c) % n);
                expected[child_target].value.fetch_add(1, std::memory_order_relaxed);
                context.spawn(leaf(child_target), on_worker(child_target));
            }
        };
    };

    std::atomic<bool> go{false};
    for (std::uint16_t w = 0; w < n; ++w) {
        runtime().spawn(
            [&, w](TaskContext &context) {
                mx::test::spin_until(go);
                std::uint32_t index = 0;
                for (std::uint32_t i = 0; i < per_pair; ++i) {
                    for (std::uint16_t target = 0; target < n; ++target) {
                        expected[target].value.fetch_add(1, std::memory_order_relaxed);
                        context.spawn(middle(target, w, index++), on_worker(target));
                    }
                }
            },
            on_worker(w));
    }
    go.store(true, std::memory_order_release);
    runtime().wait();

    const std::uint64_t spawned_by_workers = std::uint64_t{n} * n * per_pair * (1 + children);
    std::uint64_t total = 0;
    EXPECT_EQ(misplaced.load(), 0U);
    for (std::uint16_t w = 0; w < n; ++w) {
        total += executed[w].value.load();
        EXPECT_EQ(executed[w].value.load(), expected[w].value.load()) << "worker " << w;
    }
    EXPECT_EQ(total, spawned_by_workers);

    std::uint64_t stat_executed = 0;
    std::uint64_t stat_spawned = 0;
    for (const auto &stats : runtime().statistics()) {
        stat_executed += stats.tasks_executed;
        stat_spawned += stats.spawned_local + stats.spawned_remote;
    }
    EXPECT_EQ(stat_executed, spawned_by_workers + n)
        << "tasks_executed must count every task run (plus roots)";
    EXPECT_EQ(stat_spawned, spawned_by_workers)
        << "spawned_local + spawned_remote must count every worker spawn";
}

/// Several outside threads allocate and spawn at once, some to explicit workers and some not.
TEST_P(DispatchTest, SpawnsFromSeveralOutsideThreads) {
    const std::uint16_t n = workers();
    constexpr std::uint16_t thread_count = 4;
    const std::uint32_t per_thread = scaled(3000);
    std::vector<PaddedCounter> ran_per_thread(thread_count);
    std::atomic<std::uint64_t> misplaced{0};
    std::atomic<bool> go{false};

    std::vector<std::thread> threads;
    for (std::uint16_t t = 0; t < thread_count; ++t) {
        threads.emplace_back([&, t] {
            mx::test::spin_until(go);
            for (std::uint32_t i = 0; i < per_thread; ++i) {
                if (i % 2 == 0) {
                    const auto target = static_cast<std::uint16_t>((i / 2 + t) % n);
                    Task *task =
                        runtime().new_task([&ran_per_thread, &misplaced, t, target](TaskContext &context) {
                            if (context.worker_id() != target) {
                                misplaced.fetch_add(1, std::memory_order_relaxed);
                            }
                            ran_per_thread[t].value.fetch_add(1, std::memory_order_relaxed);
                        });
                    task->annotate(target);
                    runtime().spawn(*task);
                } else {
                    runtime().spawn([&ran_per_thread, t] { ran_per_thread[t].value.fetch_add(1); });
                }
            }
        });
    }
    go.store(true, std::memory_order_release);
    for (auto &thread : threads) {
        thread.join();
    }
    runtime().wait();

    EXPECT_EQ(misplaced.load(), 0U);
    for (std::uint16_t t = 0; t < thread_count; ++t) {
        EXPECT_EQ(ran_per_thread[t].value.load(), per_thread) << "outside thread " << t;
    }
}

/// Hops by bypass (TaskResult::bypass(this)) until `hops` reached `total`. The first run
/// queues a witness that notes how many hops it saw when it ran; every hop notes its worker.
class BypassHopper final : public Task {
public:
    BypassHopper(std::uint32_t total, std::vector<std::uint16_t> &hop_workers,
                 std::uint32_t &witness_saw) noexcept
        : _total(total), _hop_workers(&hop_workers), _witness_saw(&witness_saw) {}
    TaskResult execute(TaskContext &context) noexcept override {
        _hop_workers->push_back(context.worker_id());
        if (_hop_workers->size() == 1) {
            // Captures the vector, not the task: the last hop destroys the task.
            context.spawn([hops = _hop_workers, saw = _witness_saw] {
                *saw = static_cast<std::uint32_t>(hops->size());
            });
        }
        return _hop_workers->size() < _total ? TaskResult::bypass(this) : TaskResult::remove();
    }

private:
    std::uint32_t _total;
    std::vector<std::uint16_t> *_hop_workers; // appended by the hops, which run one after another
    std::uint32_t *_witness_saw;
};

TEST_P(DispatchTest, BypassRunsTheSuccessorBeforeQueuedTasksButNotForever) {
    // The witness must stay queued on the hopper's worker (a thief would run it early).
    start_runtime(without_stealing(shape_config()));
    const std::uint16_t target = static_cast<std::uint16_t>(workers() - 1);
    const std::uint32_t total = 100;
    std::vector<std::uint16_t> hop_workers;
    std::uint32_t witness_saw = 0;
    auto *hopper = runtime().new_task<BypassHopper>(total, hop_workers, witness_saw);
    hopper->annotate(target);
    runtime().spawn(*hopper);
    runtime().wait();

    ASSERT_EQ(hop_workers.size(), total);
    EXPECT_TRUE(std::all_of(hop_workers.begin(), hop_workers.end(), [target](std::uint16_t w) {
        return w == target;
    })) << "a bypassed successor runs on the worker that ran its predecessor";
    // The witness was queued before the first bypass: bypassed hops run ahead of it, but a
    // worker bypasses only a few tasks in a row, so it runs long before the chain ends.
    EXPECT_GT(witness_saw, 1U) << "the bypassed successor ran only after a queued task";
    EXPECT_LT(witness_saw, total) << "a bypass chain starved the worker's queued tasks";
    EXPECT_EQ(runtime().live_tasks(), 0U);
}

TEST_P(DispatchTest, BypassToATaskRoutedElsewhereSpawnsIt) {
    const std::uint16_t n = workers();
    std::vector<PaddedCounter> misplaced(n);
    std::atomic<std::uint64_t> ran{0};
    // Every worker hands a successor for every worker over by bypass: the ones for other workers
    // must go through the pools of those workers instead.
    for (std::uint16_t from = 0; from < n; ++from) {
        for (std::uint16_t to = 0; to < n; ++to) {
            runtime().spawn(
                [&, to](TaskContext &context) {
                    auto *next = context.new_task([&, to](TaskContext &inner) {
                        if (inner.worker_id() != to) {
                            misplaced[to].value.fetch_add(1, std::memory_order_relaxed);
                        }
                        ran.fetch_add(1, std::memory_order_relaxed);
                    });
                    next->annotate(to);
                    return TaskResult::bypass_and_remove(next);
                },
                on_worker(from));
        }
    }
    runtime().wait();

    EXPECT_EQ(ran.load(), std::uint64_t{n} * n);
    for (std::uint16_t w = 0; w < n; ++w) {
        EXPECT_EQ(misplaced[w].value.load(), 0U) << "successor for worker " << w << " ran elsewhere";
    }
    EXPECT_EQ(runtime().live_tasks(), 0U);
}

/// A step on a resource that notes where it ran and hands itself on `hops` times through the
/// pool (a successor that is not a bypass), so an inline run ends at its first hand-on.
class InlineStep final : public Task {
public:
    InlineStep(mx::tasking::ResourcePtr resource, std::uint32_t hops, std::atomic<std::uint64_t> &steps,
               std::atomic<std::uint16_t> &first_worker, std::atomic<std::uint32_t> &runs) noexcept
        : _hops(hops), _steps(&steps), _first_worker(&first_worker), _runs(&runs) {
        annotate(resource, mx::tasking::AccessMode::read_only);
    }
    TaskResult execute(TaskContext &context) noexcept override {
        if (_runs->fetch_add(1, std::memory_order_relaxed) == 0) {
            _first_worker->store(context.worker_id(), std::memory_order_relaxed);
        }
        _steps->fetch_add(1, std::memory_order_relaxed);
        return _runs->load(std::memory_order_relaxed) <= _hops ? TaskResult::successor(this)
                                                               : TaskResult::remove();
    }

private:
    std::uint32_t _hops;
    std::atomic<std::uint64_t> *_steps;
    std::atomic<std::uint16_t> *_first_worker;
    // Runs so far (nothing writes the resource, so no optimistic run repeats); outlives the task.
    std::atomic<std::uint32_t> *_runs;
};

TEST_P(DispatchTest, RunInlineRunsTheTaskBeforeItReturnsAndQueuesItsHandOn) {
    // Without stealing, a hand-on queued on this worker cannot run before the caller returns.
    start_runtime(without_stealing(shape_config()));
    mx::tasking::ResourceAnnotation annotation;
    annotation.primitive = mx::sync::Primitive::optimistic_latched;
    const auto resource = runtime().new_resource<std::uint64_t>(annotation, std::uint64_t{7});
    const std::uint16_t n = workers();
    const std::uint32_t hops = 3;
    std::vector<PaddedCounter> not_inline(n);
    std::atomic<std::uint64_t> steps{0};
    std::vector<std::atomic<std::uint16_t>> first_worker(n);
    std::vector<std::atomic<std::uint32_t>> runs(n);
    for (std::uint16_t w = 0; w < n; ++w) {
        first_worker[w].store(mx::tasking::any_worker);
        runtime().spawn(
            [&, w, resource](TaskContext &context) {
                auto *step = context.new_task<InlineStep>(resource, hops, steps, first_worker[w], runs[w]);
                context.run_inline(*step);
                // Ran before run_inline returned, on this worker, and only its first step: the
                // hand-on is queued.
                if (first_worker[w].load(std::memory_order_relaxed) != context.worker_id() ||
                    runs[w].load(std::memory_order_relaxed) != 1U) {
                    not_inline[w].value.fetch_add(1, std::memory_order_relaxed);
                }
            },
            on_worker(w));
    }
    runtime().wait();

    for (std::uint16_t w = 0; w < n; ++w) {
        EXPECT_EQ(not_inline[w].value.load(), 0U) << "worker " << w;
    }
    EXPECT_GE(steps.load(), std::uint64_t{n} * (hops + 1U));
    EXPECT_EQ(runtime().live_tasks(), 0U);
    runtime().delete_resource(resource);
}

TEST_P(DispatchTest, RunInlineSpawnsWhereTheTaskCannotRunHere) {
    // Without stealing and in FIFO order, a task spawned locally runs only after its spawner.
    start_runtime(without_stealing(shape_config()));
    mx::tasking::ResourceAnnotation annotation;
    annotation.primitive = mx::sync::Primitive::spinlock;
    const auto resource = runtime().new_resource<std::uint64_t>(annotation, std::uint64_t{7});
    const std::uint16_t n = workers();
    // Per worker: [0] the inner task of a caller on a resource ran, [1] the innermost task of an
    // inline run ran. Set by those tasks, read by their callers (same worker) and the test.
    std::vector<std::atomic<std::uint32_t>> ran(std::size_t{n} * 2);
    std::atomic<std::uint64_t> ran_early{0};
    std::atomic<std::uint64_t> misplaced{0};
    std::atomic<std::uint64_t> remote_ran{0};
    // Per worker, a resource serialized by scheduling and the order its two tasks ran in (they
    // run one after the other in the resource's domain).
    mx::tasking::ResourceAnnotation by_scheduling;
    by_scheduling.primitive = mx::sync::Primitive::scheduling;
    std::vector<mx::tasking::ResourcePtr> scheduled;
    std::vector<std::vector<int>> scheduled_order(n);
    for (std::uint16_t w = 0; w < n; ++w) {
        by_scheduling.worker = w;
        scheduled.push_back(runtime().new_resource<std::uint64_t>(by_scheduling, std::uint64_t{0}));
    }
    for (std::uint16_t w = 0; w < n; ++w) {
        std::atomic<std::uint32_t> &on_resource = ran[std::size_t{w} * 2];
        std::atomic<std::uint32_t> &innermost = ran[std::size_t{w} * 2 + 1];
        // 1. The caller runs under a resource's latch: a plain spawn.
        auto *caller = runtime().new_task(
            [&](TaskContext &context) {
                context.run_inline(*context.new_task([&] { on_resource.store(1); }));
                if (on_resource.load() != 0) {
                    ran_early.fetch_add(1);
                }
            },
            on_worker(w));
        caller->annotate(resource, mx::tasking::AccessMode::write);
        runtime().spawn(*caller);
        // 2. Inside an inline run, run_inline spawns: no nesting.
        runtime().spawn(
            [&](TaskContext &context) {
                context.run_inline(*context.new_task([&](TaskContext &middle) {
                    middle.run_inline(*middle.new_task([&] { innermost.store(1); }));
                    if (innermost.load() != 0) {
                        ran_early.fetch_add(1);
                    }
                }));
            },
            on_worker(w));
        // 3. A task on a resource serialized by scheduling keeps its place behind the tasks of
        //    that resource spawned before it, even while this worker holds the resource's domain
        //    (the caller runs by bypass right after a task of that domain).
        auto *holder = runtime().new_task([&, w](TaskContext &holding) {
            auto *bypassed = holding.new_task([&, w](TaskContext &context) {
                auto *first = context.new_task([&, w] { scheduled_order[w].push_back(1); });
                first->annotate(scheduled[w], mx::tasking::AccessMode::write);
                context.spawn(*first);
                auto *second = context.new_task([&, w] { scheduled_order[w].push_back(2); });
                second->annotate(scheduled[w], mx::tasking::AccessMode::write);
                context.run_inline(*second);
            });
            return TaskResult::bypass_and_remove(bypassed);
        });
        holder->annotate(scheduled[w], mx::tasking::AccessMode::write);
        runtime().spawn(*holder);
        // 4. A task annotated for another worker goes there.
        const auto other = static_cast<std::uint16_t>((w + 1U) % n);
        runtime().spawn(
            [&, other](TaskContext &context) {
                context.run_inline(*context.new_task(
                    [&, other](TaskContext &inner) {
                        if (inner.worker_id() != other) {
                            misplaced.fetch_add(1);
                        }
                        remote_ran.fetch_add(1);
                    },
                    on_worker(other)));
            },
            on_worker(w));
    }
    runtime().wait();

    EXPECT_EQ(ran_early.load(), 0U) << "run_inline ran a task it should have spawned";
    EXPECT_EQ(misplaced.load(), 0U);
    EXPECT_EQ(remote_ran.load(), n);
    for (const auto &flag : ran) {
        EXPECT_EQ(flag.load(), 1U) << "a spawned task never ran";
    }
    for (std::uint16_t w = 0; w < n; ++w) {
        EXPECT_EQ(scheduled_order[w], (std::vector<int>{1, 2})) << "resource of worker " << w;
        runtime().delete_resource(scheduled[w]);
    }
    EXPECT_EQ(runtime().live_tasks(), 0U);
    runtime().delete_resource(resource);
}

MX_INSTANTIATE_RUNTIME_SUITE(DispatchTest);

} // namespace
