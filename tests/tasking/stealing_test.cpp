// Work stealing: idle workers take tasks without a target from busy workers' deques and take
// over synchronization domains whose owner is busy, while pinned tasks stay where they were
// sent and the tasks of one scheduled resource never overlap and keep their order. Also the
// defined outcomes of bad annotations and the runtime's start/stop state.

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include <mx/tasking/runtime.h>

#include "support/runtime_fixture.h"

namespace {

using mx::tasking::AccessMode;
using mx::tasking::Annotation;
using mx::tasking::ResourceAnnotation;
using mx::tasking::ResourcePtr;
using mx::tasking::RuntimeConfig;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;
using mx::test::PaddedCounter;
using mx::test::scaled;

class StealingTest : public mx::test::RuntimeFixture {
protected:
    /// Restarts the runtime of this shape with stealing off and the given balancing interval.
    void restart_without_stealing(std::uint32_t balance_us) {
        RuntimeConfig config = shape_config();
        config.work_stealing = false;
        config.domain_balance_us = balance_us;
        start_runtime(config);
    }
};

Annotation on_worker(std::uint16_t worker) { return Annotation{.target_worker = worker}; }

/// Waits (yielding) until `counter` reaches `value` or the test's patience ran out.
bool spin_until_count(const std::atomic<std::uint64_t> &counter, std::uint64_t value) noexcept {
    const auto deadline = std::chrono::steady_clock::now() + mx::test::patience;
    while (counter.load(std::memory_order_acquire) < value) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::yield();
    }
    return true;
}

/// Waits (yielding) until `done()` holds or the test's patience ran out.
template <class Done>
void wait_for(const Done &done) {
    const auto deadline = std::chrono::steady_clock::now() + mx::test::patience;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
    }
}

std::uint64_t total(const std::vector<mx::tasking::WorkerStatistics> &stats,
                    std::uint64_t mx::tasking::WorkerStatistics::*field) {
    std::uint64_t sum = 0;
    for (const auto &s : stats) {
        sum += s.*field;
    }
    return sum;
}

TEST_P(StealingTest, TasksQueuedBehindABusyWorkerRunElsewhere) {
    if (workers() < 2) {
        GTEST_SKIP() << "nobody to steal";
    }
    // Worker 0 spawns tasks for itself and then waits for all of them inside its own task:
    // only other workers can run them.
    const std::uint32_t count = scaled(2000);
    std::atomic<std::uint64_t> ran{0};
    std::atomic<bool> all_ran{false};
    std::vector<PaddedCounter> per_worker(workers());
    runtime().spawn(
        [&, count](TaskContext &context) {
            for (std::uint32_t i = 0; i < count; ++i) {
                context.spawn([&](TaskContext &inner) {
                    per_worker[inner.worker_id()].value.fetch_add(1, std::memory_order_relaxed);
                    ran.fetch_add(1, std::memory_order_acq_rel);
                });
            }
            all_ran.store(spin_until_count(ran, count), std::memory_order_release);
        },
        on_worker(0));
    runtime().wait();
    EXPECT_TRUE(all_ran.load()) << "tasks queued behind a busy worker were not stolen";
    EXPECT_EQ(ran.load(), count);
    EXPECT_EQ(per_worker[0].value.load(), 0U) << "worker 0 was busy the whole time";
    EXPECT_EQ(total(runtime().statistics(), &mx::tasking::WorkerStatistics::stolen_tasks), count);
}

TEST_P(StealingTest, PinnedTasksNeverLeaveTheirWorker) {
    // Worker 0 is busy while its deque holds tasks pinned to it (and unpinned ones): thieves
    // take the unpinned ones and hand the pinned ones back.
    const std::uint32_t count = scaled(2000);
    std::atomic<std::uint64_t> misplaced{0};
    std::atomic<std::uint64_t> free_ran{0};
    std::atomic<std::uint64_t> pinned_ran{0};
    runtime().spawn(
        [&, count](TaskContext &context) {
            for (std::uint32_t i = 0; i < count; ++i) {
                context.spawn(
                    [&](TaskContext &inner) {
                        misplaced.fetch_add(inner.worker_id() == 0 ? 0U : 1U, std::memory_order_relaxed);
                        pinned_ran.fetch_add(1, std::memory_order_relaxed);
                    },
                    on_worker(0));
                context.spawn([&] { free_ran.fetch_add(1, std::memory_order_acq_rel); });
            }
            if (context.worker_count() > 1) {
                // Long enough for thieves to go through the whole deque.
                spin_until_count(free_ran, count);
            }
        },
        on_worker(0));
    runtime().wait();
    EXPECT_EQ(pinned_ran.load(), count);
    EXPECT_EQ(free_ran.load(), count);
    EXPECT_EQ(misplaced.load(), 0U) << "a task annotated with worker 0 ran elsewhere";
}

TEST_P(StealingTest, HandedBackTasksRunBeforeTheVictimsOtherLocalTasks) {
    if (workers() < 2) {
        GTEST_SKIP() << "nobody to steal";
    }
    // Worker 0's task queues a task pinned to worker 0 first (the oldest in its deque, so in the
    // first batch a thief takes) and then free tasks, and stays busy until a thief ran some of
    // them. The thief hands the pinned task back: worker 0 runs it before any free task that is
    // still in its own deque, in either local order. Worker 1 is the only thief (the others are
    // held busy): a thief runs its batch only after handing the pinned task back, so a stolen
    // task that ran means the pinned one is in worker 0's hand-back queue. With a second thief,
    // that thief's task could run while the first is still between its steal and the hand-back.
    const std::uint32_t count = scaled(2000);
    const auto others = static_cast<std::uint16_t>(workers() - 2);
    std::atomic<std::uint32_t> held{0};
    std::atomic<bool> released{false};
    std::atomic<std::uint64_t> stolen_ran{0};
    std::atomic<std::uint64_t> local_ran{0};
    std::atomic<std::uint64_t> local_before_pinned{~std::uint64_t{0}};
    for (std::uint16_t w = 2; w < workers(); ++w) {
        runtime().spawn(
            [&] {
                held.fetch_add(1, std::memory_order_acq_rel);
                wait_for([&] { return released.load(std::memory_order_acquire); });
            },
            on_worker(w));
    }
    runtime().spawn(
        [&, count](TaskContext &context) {
            wait_for([&] { return held.load(std::memory_order_acquire) == others; });
            context.spawn(
                [&](TaskContext &) { local_before_pinned.store(local_ran.load(std::memory_order_relaxed)); },
                on_worker(0));
            for (std::uint32_t i = 0; i < count; ++i) {
                context.spawn([&](TaskContext &inner) {
                    (inner.worker_id() == 0 ? local_ran : stolen_ran).fetch_add(1, std::memory_order_acq_rel);
                });
            }
            EXPECT_TRUE(spin_until_count(stolen_ran, 1)) << "no thief took a task";
            released.store(true, std::memory_order_release);
        },
        on_worker(0));
    runtime().wait();
    EXPECT_EQ(held.load(), others);
    EXPECT_EQ(stolen_ran.load() + local_ran.load(), count);
    EXPECT_EQ(local_before_pinned.load(), 0U) << "free tasks of worker 0 ran before the handed-back one";
}

TEST_P(StealingTest, ThievesTakeLowPriorityProducersBeforeNormalTasks) {
    if (workers() < 2) {
        GTEST_SKIP() << "nobody to steal";
    }
    // Worker 0's task queues many free normal-priority tasks and then one low-priority task (a
    // producer, as a feeder that yields) while every other worker is held busy, then lets them go
    // and stays busy until the low task ran elsewhere. A thief takes the low task first, so at
    // most a batch per other thief of the normal tasks ran before it; taking the normal tasks
    // first would run nearly all of them before it.
    const std::uint32_t count = scaled(4000);
    const std::uint16_t others = static_cast<std::uint16_t>(workers() - 1);
    std::atomic<std::uint32_t> held{0};
    std::atomic<bool> released{false};
    std::atomic<std::uint64_t> normal_ran{0};
    std::atomic<std::uint64_t> normal_before_low{~std::uint64_t{0}};
    std::atomic<bool> low_ran{false};
    for (std::uint16_t w = 1; w <= others; ++w) {
        runtime().spawn(
            [&] {
                held.fetch_add(1, std::memory_order_acq_rel);
                wait_for([&] { return released.load(std::memory_order_acquire); });
            },
            on_worker(w));
    }
    runtime().spawn(
        [&, count](TaskContext &context) {
            wait_for([&] { return held.load(std::memory_order_acquire) == others; });
            for (std::uint32_t i = 0; i < count; ++i) {
                context.spawn([&] { normal_ran.fetch_add(1, std::memory_order_acq_rel); });
            }
            context.spawn(
                [&] {
                    normal_before_low.store(normal_ran.load(std::memory_order_acquire));
                    low_ran.store(true, std::memory_order_release);
                },
                Annotation{.priority = mx::tasking::Priority::low});
            released.store(true, std::memory_order_release);
            wait_for([&] { return low_ran.load(std::memory_order_acquire); });
        },
        on_worker(0));
    runtime().wait();
    EXPECT_TRUE(low_ran.load());
    EXPECT_EQ(normal_ran.load(), count);
    EXPECT_LT(normal_before_low.load(), count / 2) << "the thieves took the normal tasks first";
}

/// Fork/join without annotations: the recursion spreads by stealing alone.
class Fib final : public mx::tasking::Task {
public:
    Fib(std::uint32_t n, std::atomic<std::uint64_t> &sum) noexcept : _n(n), _sum(&sum) {}
    TaskResult execute(TaskContext &context) noexcept override {
        if (_n < 2) {
            _sum->fetch_add(_n, std::memory_order_relaxed);
            return TaskResult::remove();
        }
        context.spawn(*context.new_task<Fib>(_n - 1, *_sum));
        return TaskResult::successor_and_remove(context.new_task<Fib>(_n - 2, *_sum));
    }

private:
    std::uint32_t _n;
    std::atomic<std::uint64_t> *_sum;
};

TEST_P(StealingTest, ForkJoinSumsUnderBothLocalOrders) {
    for (const auto order : {mx::tasking::LocalOrder::lifo, mx::tasking::LocalOrder::fifo}) {
        auto config = shape_config();
        config.local_order = order;
        start_runtime(config);
        std::atomic<std::uint64_t> sum{0};
        const std::uint32_t n = mx::test::tsan_build ? 16 : 21;
        runtime().spawn(*runtime().new_task<Fib>(n, sum));
        runtime().wait();
        std::uint64_t a = 0;
        std::uint64_t b = 1;
        for (std::uint32_t i = 0; i < n; ++i) {
            b = std::exchange(a, b) + b;
        }
        EXPECT_EQ(sum.load(), a);
    }
}

/// A scheduled resource's state as its tasks see it: who runs, and the last sequence number per
/// producer. The checker itself is the resource (serialized by scheduling, so no latch).
struct Account {
    std::atomic<std::uint32_t> running{0}; // atomic only so that a broken runtime is reported, not raced
    std::vector<std::uint64_t> last;       // per producer: the last sequence number seen

    /// One task's step: counts an overlap with another task of this resource and a step of
    /// `producer` that comes after a later one of it.
    void step(std::uint16_t producer, std::uint64_t sequence, std::atomic<std::uint64_t> &overlaps,
              std::atomic<std::uint64_t> &out_of_order) noexcept {
        if (running.exchange(1, std::memory_order_acq_rel) != 0) {
            overlaps.fetch_add(1, std::memory_order_relaxed);
        }
        if (last[producer] >= sequence) {
            out_of_order.fetch_add(1, std::memory_order_relaxed);
        }
        last[producer] = sequence;
        running.store(0, std::memory_order_release);
    }
};

TEST_P(StealingTest, ScheduledTasksNeverOverlapAndKeepOrderWhileDomainsMove) {
    const std::uint16_t n = workers();
    // Resources whose domains start on worker 0, and producers on every worker plus outside.
    const std::uint32_t resources_count = 2U * runtime().domain_count();
    const std::uint16_t producers = static_cast<std::uint16_t>(n + 1);
    std::vector<ResourcePtr> resources;
    for (std::uint32_t r = 0; r < resources_count; ++r) {
        ResourceAnnotation annotation{.primitive = mx::sync::Primitive::scheduling};
        annotation.worker = static_cast<std::uint16_t>(r % 2 == 0 ? 0 : r % n);
        resources.push_back(runtime().new_resource<Account>(annotation));
        resources.back().get<Account>()->last.assign(producers, 0);
    }
    const std::uint32_t per_producer = scaled(3000);
    std::atomic<std::uint64_t> overlaps{0};
    std::atomic<std::uint64_t> out_of_order{0};
    std::atomic<std::uint64_t> ran{0};
    const auto make_step = [&](ResourcePtr resource, std::uint16_t producer, std::uint64_t sequence) {
        return [&, resource, producer, sequence] {
            resource.get<Account>()->step(producer, sequence, overlaps, out_of_order);
            ran.fetch_add(1, std::memory_order_relaxed);
        };
    };
    // Worker 0 is held busy for a while, so the domains it owns must be stolen to make progress.
    // It starts before anything is queued, so it holds no domain while it waits.
    std::atomic<bool> release{false};
    std::atomic<bool> blocking{false};
    runtime().spawn(
        [&release, &blocking] {
            blocking.store(true, std::memory_order_release);
            mx::test::spin_until(release);
        },
        on_worker(0));
    ASSERT_TRUE(mx::test::eventually([&blocking] { return blocking.load(std::memory_order_acquire); }));
    for (std::uint16_t p = 0; p < n; ++p) {
        runtime().spawn(
            [&, p](TaskContext &context) {
                for (std::uint32_t i = 0; i < per_producer; ++i) {
                    const ResourcePtr resource = resources[(i * 7U + p) % resources.size()];
                    context.spawn(make_step(resource, p, i + 1U),
                                  Annotation{.resource = resource, .access = AccessMode::write});
                }
            },
            on_worker(p));
    }
    for (std::uint32_t i = 0; i < per_producer; ++i) {
        const ResourcePtr resource = resources[(i * 3U) % resources.size()];
        runtime().spawn(make_step(resource, n, i + 1U),
                        Annotation{.resource = resource, .access = AccessMode::write});
    }
    if (n > 1) {
        // Everything but worker 0's own producer can run while worker 0 is held.
        EXPECT_TRUE(spin_until_count(ran, std::uint64_t{per_producer} * n))
            << "tasks of domains owned by a busy worker were not taken over";
    }
    release.store(true, std::memory_order_release);
    runtime().wait();
    EXPECT_EQ(ran.load(), std::uint64_t{per_producer} * producers);
    EXPECT_EQ(overlaps.load(), 0U) << "two tasks of one scheduled resource overlapped";
    EXPECT_EQ(out_of_order.load(), 0U) << "a producer's tasks on one resource ran out of order";
    if (n > 1) {
        EXPECT_GT(total(runtime().statistics(), &mx::tasking::WorkerStatistics::stolen_domains), 0U);
    }
    for (const ResourcePtr resource : resources) {
        runtime().delete_resource(resource);
    }
}

/// Every worker busy with tasks of its own, and all scheduled resources in worker 0's domains:
/// nobody is idle, so nothing is stolen, and only balancing by measured load moves domains.
/// Returns the domains moved by balancing; checks order and mutual exclusion throughout.
std::uint64_t run_skewed_domain_load(mx::tasking::Runtime &runtime, bool expect_moves) {
    const std::uint16_t n = runtime.worker_count();
    std::vector<ResourcePtr> resources;
    for (std::uint32_t r = 0; r < 2U * runtime.domain_count(); ++r) {
        ResourceAnnotation annotation{.primitive = mx::sync::Primitive::scheduling};
        annotation.worker = 0;
        resources.push_back(runtime.new_resource<Account>(annotation));
        resources.back().get<Account>()->last.assign(1, 0);
    }
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> overlaps{0};
    std::atomic<std::uint64_t> out_of_order{0};
    std::atomic<std::uint64_t> ran{0};
    // Busy work pinned to each worker, re-spawned until the end, so no worker ever idles.
    struct Busy {
        static void spawn_on(TaskContext &context, std::uint16_t worker, std::atomic<bool> &stop) {
            context.spawn(
                [worker, &stop](TaskContext &inner) {
                    const std::uint64_t until = mx::system::cycles() + 20'000;
                    while (mx::system::cycles() < until) {
                        mx::system::pause();
                    }
                    if (!stop.load(std::memory_order_acquire)) {
                        spawn_on(inner, worker, stop);
                    }
                },
                Annotation{.target_worker = worker});
        }
    };
    for (std::uint16_t w = 0; w < n; ++w) {
        runtime.spawn([w, &done](TaskContext &context) { Busy::spawn_on(context, w, done); }, on_worker(w));
    }
    // One outside producer streams tasks onto the resources in rounds until a domain moved (or,
    // when none may move, for a fixed number of rounds).
    const auto moved = [&runtime] {
        return total(runtime.statistics(), &mx::tasking::WorkerStatistics::balanced_domains);
    };
    const auto deadline = std::chrono::steady_clock::now() + mx::test::patience;
    std::uint64_t sequence = 0;
    for (std::uint32_t round = 0; std::chrono::steady_clock::now() < deadline; ++round) {
        if (expect_moves ? moved() > 0 && round >= 20 : round >= 40) {
            break;
        }
        for (std::uint32_t i = 0; i < 2000; ++i) {
            const ResourcePtr resource = resources[i % resources.size()];
            const std::uint64_t step = ++sequence;
            runtime.spawn(
                [&, resource, step] {
                    resource.get<Account>()->step(0, step, overlaps, out_of_order);
                    ran.fetch_add(1, std::memory_order_relaxed);
                },
                Annotation{.resource = resource, .access = AccessMode::write});
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{2});
    }
    done.store(true, std::memory_order_release);
    runtime.wait();
    EXPECT_EQ(ran.load(), sequence);
    EXPECT_EQ(overlaps.load(), 0U) << "two tasks of one scheduled resource overlapped";
    EXPECT_EQ(out_of_order.load(), 0U) << "tasks of one resource ran out of order";
    std::uint32_t elsewhere = 0;
    for (const ResourcePtr resource : resources) {
        elsewhere += runtime.owner_of(resource) != 0 ? 1U : 0U;
        runtime.delete_resource(resource);
    }
    EXPECT_EQ(elsewhere > 0, moved() > 0) << "owners and the balancing count disagree";
    return moved();
}

TEST_P(StealingTest, BalancingMovesDomainsOffAWorkerThatDrainsMostTasks) {
    if (workers() == 1) {
        GTEST_SKIP() << "nobody to balance with";
    }
    restart_without_stealing(200);
    EXPECT_GT(run_skewed_domain_load(runtime(), true), 0U) << "no domain moved off the overloaded worker";
    EXPECT_EQ(total(runtime().statistics(), &mx::tasking::WorkerStatistics::stolen_domains), 0U);
}

TEST_P(StealingTest, WithoutBalancingDomainsStayWithTheirOwner) {
    if (workers() == 1) {
        GTEST_SKIP() << "nobody to balance with";
    }
    restart_without_stealing(0);
    EXPECT_EQ(run_skewed_domain_load(runtime(), false), 0U);
}

TEST_P(StealingTest, OutOfRangeTargetsAreTakenModuloTheCount) {
    const std::uint16_t n = workers();
    const std::uint16_t regions = runtime().region_count();
    std::atomic<std::uint64_t> wrong{0};
    std::atomic<std::uint64_t> ran{0};
    const auto regions_of = workers_by_region();
    const auto check = [&](std::uint16_t expected_worker, std::uint8_t expected_region) {
        return [&, expected_worker, expected_region](TaskContext &context) {
            const bool ok = expected_worker != mx::tasking::any_worker
                                ? context.worker_id() == expected_worker
                                : context.numa_region() == expected_region;
            wrong.fetch_add(ok ? 0U : 1U, std::memory_order_relaxed);
            ran.fetch_add(1, std::memory_order_relaxed);
        };
    };
    // From outside and from inside a task.
    runtime().spawn(check(99 % n, 0), Annotation{.target_worker = 99});
    runtime().spawn(check(mx::tasking::any_worker, static_cast<std::uint8_t>(5 % regions)),
                    Annotation{.target_region = 5});
    runtime().spawn([&](TaskContext &context) {
        context.spawn(check(1000 % n, 0), Annotation{.target_worker = 1000});
        context.spawn(check(mx::tasking::any_worker, static_cast<std::uint8_t>(200 % regions)),
                      Annotation{.target_region = 200});
    });
    runtime().wait();
    EXPECT_EQ(ran.load(), 4U);
    EXPECT_EQ(wrong.load(), 0U);

    // A task cannot report an error: a forced worker out of range is taken modulo the count.
    ResourcePtr created;
    runtime().spawn([&](TaskContext &context) {
        ResourceAnnotation annotation{.primitive = mx::sync::Primitive::scheduling};
        annotation.worker = 77;
        created = context.new_resource<Account>(annotation);
    });
    runtime().wait();
    EXPECT_EQ(runtime().owner_of(created), 77 % n);
    runtime().delete_resource(created);
}

TEST_P(StealingTest, StopReturnsWhileOtherThreadsKeepSpawning) {
    std::atomic<bool> quit{false};
    std::atomic<std::uint64_t> ran{0};
    std::vector<std::thread> spawners;
    for (int t = 0; t < 2; ++t) {
        spawners.emplace_back([&] {
            while (!quit.load(std::memory_order_relaxed)) {
                runtime().spawn([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
            }
        });
    }
    ASSERT_TRUE(mx::test::eventually([&] { return ran.load() > 1000; }));
    auto stopped = std::async(std::launch::async, [this] { runtime().stop(); });
    const bool returned = stopped.wait_for(mx::test::patience) == std::future_status::ready;
    EXPECT_TRUE(returned) << "stop() did not return while other threads kept spawning";
    EXPECT_FALSE(runtime().running());
    quit.store(true);
    for (auto &thread : spawners) {
        thread.join();
    }
    stopped.wait();
    // Spawns during the stop were refused (one racing with the door may wait for the next start).
    runtime().start();
    std::atomic<std::uint64_t> after{0};
    runtime().spawn([&after] { after.fetch_add(1); });
    runtime().wait();
    EXPECT_EQ(after.load(), 1U);
    EXPECT_EQ(runtime().live_tasks(), 0U);
}

TEST_P(StealingTest, RunningIsFalseOnceATaskStoppedTheRuntime) {
    runtime().spawn([] { return TaskResult::stop(); });
    runtime().wait();
    EXPECT_FALSE(runtime().running()) << "a task returned TaskResult::stop()";
    runtime().start();
    EXPECT_TRUE(runtime().running());
    std::atomic<std::uint64_t> ran{0};
    runtime().spawn([&ran] { ran.fetch_add(1); });
    runtime().wait();
    EXPECT_EQ(ran.load(), 1U);
}

TEST_P(StealingTest, NoTaskIsLiveRightAfterWait) {
    // Retired objects make idle workers spawn their reclamation task; it is not an allocated task.
    for (int round = 0; round < 20; ++round) {
        runtime().spawn([](TaskContext &context) {
            context.retire(new int{1}, [](void *object) noexcept { delete static_cast<int *>(object); });
        });
        runtime().wait();
        EXPECT_EQ(runtime().live_tasks(), 0U) << "round " << round;
    }
}

MX_INSTANTIATE_RUNTIME_SUITE(StealingTest);

/// Spins on `cpu` until destroyed: another program taking a core from a worker.
class CpuHog {
public:
    explicit CpuHog(std::uint16_t cpu)
        : _thread([this, cpu] {
              cpu_set_t set;
              CPU_ZERO(&set);
              CPU_SET(cpu, &set);
              pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
              while (!_stop.load(std::memory_order_relaxed)) {
                  mx::system::pause();
              }
          }) {}
    CpuHog(const CpuHog &) = delete;
    CpuHog &operator=(const CpuHog &) = delete;
    ~CpuHog() {
        _stop.store(true, std::memory_order_relaxed);
        _thread.join();
    }

private:
    std::atomic<bool> _stop{false};
    std::thread _thread;
};

TEST(StealingStress, ScheduledResourcesStaySerializedAndOrderedWithACpuHog) {
    // Two workers, a spinning thread pinned to the second one's core: the OS preempts that worker
    // at arbitrary points, and the other worker takes its domains and tasks meanwhile.
    RuntimeConfig config;
    config.workers = 2;
    mx::tasking::Runtime runtime{config};
    const std::uint16_t hog_cpu = runtime.statistics().back().cpu;
    const CpuHog hog{hog_cpu};
    std::vector<ResourcePtr> resources;
    for (std::uint32_t r = 0; r < runtime.domain_count(); ++r) {
        resources.push_back(
            runtime.new_resource<Account>(ResourceAnnotation{.primitive = mx::sync::Primitive::scheduling}));
        resources.back().get<Account>()->last.assign(2, 0);
    }
    std::atomic<std::uint64_t> overlaps{0};
    std::atomic<std::uint64_t> out_of_order{0};
    std::atomic<std::uint64_t> ran{0};
    const std::uint32_t per_producer = scaled(100'000, 20);
    for (std::uint16_t producer = 0; producer < 2; ++producer) {
        runtime.spawn(
            [&, producer](TaskContext &context) {
                for (std::uint32_t i = 0; i < per_producer; ++i) {
                    const ResourcePtr resource = resources[(i * 5U + producer) % resources.size()];
                    const std::uint64_t sequence = i + 1U;
                    context.spawn(
                        [&, resource, producer, sequence] {
                            resource.get<Account>()->step(producer, sequence, overlaps, out_of_order);
                            ran.fetch_add(1, std::memory_order_relaxed);
                        },
                        Annotation{.resource = resource, .access = AccessMode::write});
                }
            },
            on_worker(producer));
    }
    runtime.wait();
    EXPECT_EQ(ran.load(), 2U * per_producer);
    EXPECT_EQ(overlaps.load(), 0U);
    EXPECT_EQ(out_of_order.load(), 0U);
    for (const ResourcePtr resource : resources) {
        runtime.delete_resource(resource);
    }
}

TEST(StealingConfig, ZeroDomainsPerWorkerIsAConfigError) {
    RuntimeConfig config;
    config.workers = 2;
    config.domains_per_worker = 0;
    try {
        mx::tasking::Runtime runtime{config};
        ADD_FAILURE() << "no ConfigError";
    } catch (const mx::tasking::ConfigError &error) {
        EXPECT_NE(std::string{error.what()}.find("domains_per_worker"), std::string::npos) << error.what();
    }
}

TEST(StealingConfig, DomainsAreWorkersTimesDomainsPerWorker) {
    RuntimeConfig config;
    config.workers = 3;
    config.domains_per_worker = 5;
    mx::tasking::Runtime runtime{config};
    EXPECT_EQ(runtime.domain_count(), 15U);
}

class WaitDeathTest : public ::testing::Test {
protected:
    void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(WaitDeathTest, WaitFromATaskAbortsWithAMessageInEveryBuild) {
    EXPECT_DEATH(
        {
            RuntimeConfig config;
            config.workers = 1;
            mx::tasking::Runtime runtime{config};
            runtime.spawn([&runtime] { runtime.wait(); });
            runtime.wait();
        },
        "Runtime::wait\\(\\) called from a task");
}

} // namespace
