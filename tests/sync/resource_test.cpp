// Concurrency tests of tasks on resources, repeated for every synchronizing primitive on 1, 2, 4
// and 8 workers and a simulated 2x2 NUMA machine. Each checks an invariant that a primitive
// which does not isolate writers (or lets a reader use an unvalidated read) breaks: counters
// that must add up, bank transfers that keep the total, and readers that never see a torn pair.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <mx/tasking/runtime.h>

#include "sync_objects.h"
#include "sync_support.h"

namespace {

using mx::sync::Primitive;
using mx::sync_test::Pair;
using mx::sync_test::PairReader;
using mx::sync_test::reading;
using mx::sync_test::ReadStats;
using mx::sync_test::scaled;
using mx::sync_test::writing;
using mx::tasking::AccessMode;
using mx::tasking::Annotation;
using mx::tasking::ResourcePtr;
using mx::tasking::Runtime;
using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;

class PrimitiveTest : public ::testing::TestWithParam<mx::sync_test::PrimitiveShape> {
protected:
    void SetUp() override {
        _runtime = std::make_unique<Runtime>(mx::sync_test::config_of(std::get<1>(GetParam())));
    }
    void TearDown() override {
        _runtime->wait();
        EXPECT_EQ(_runtime->live_tasks(), 0U) << "runtime-owned tasks leaked";
        _runtime.reset();
    }
    [[nodiscard]] Primitive primitive() const { return std::get<0>(GetParam()); }
    [[nodiscard]] Runtime &runtime() { return *_runtime; }

    std::vector<ResourcePtr> make_pairs(std::uint32_t count, std::uint64_t value) {
        std::vector<ResourcePtr> resources;
        for (std::uint32_t i = 0; i < count; ++i) {
            resources.push_back(runtime().new_resource<Pair>(mx::sync_test::forced(primitive()), value));
            EXPECT_EQ(mx::tasking::primitive_of(resources.back()),
                      primitive() == Primitive::htm && !runtime().htm_available() ? Primitive::spinlock
                                                                                  : primitive());
        }
        return resources;
    }
    void delete_all(const std::vector<ResourcePtr> &resources) {
        for (const ResourcePtr resource : resources) {
            runtime().delete_resource(resource);
        }
    }

private:
    std::unique_ptr<Runtime> _runtime;
};

TEST_P(PrimitiveTest, CountersAddUpWhileReadersNeverSeeATornPair) {
    const std::uint64_t seed = mx::sync_test::test_seed();
    // Few counters, so that tasks on different workers really collide.
    const std::vector<ResourcePtr> counters = make_pairs(3, 0);
    const std::uint32_t operations = scaled(12000);
    auto stats = std::make_shared<ReadStats>();
    std::vector<std::atomic<std::uint64_t>> expected(counters.size());
    mx::sync_test::produce_on_every_worker(
        runtime(), operations, [&counters, &expected, stats, seed](TaskContext &context, std::uint32_t i) {
            const std::uint64_t random = mx::sync_test::mix(seed, i);
            const std::size_t index = random % counters.size();
            const ResourcePtr counter = counters[index];
            if ((random >> 16U) % 3 == 0) {
                context.spawn(*context.new_task<PairReader>(counter, stats.get(), (random >> 20U) % 2 == 0));
            } else {
                expected[index].fetch_add(1, std::memory_order_relaxed);
                context.spawn([counter] { mx::sync_test::add(*counter.get<Pair>(), 1); }, writing(counter));
            }
        });
    runtime().wait();
    std::uint64_t writes = 0;
    for (std::size_t i = 0; i < counters.size(); ++i) {
        const Pair &pair = *counters[i].get<Pair>();
        EXPECT_EQ(pair.a, expected[i].load()) << "counter " << i << " lost updates";
        EXPECT_EQ(pair.b, expected[i].load()) << "counter " << i << " lost updates";
        writes += expected[i].load();
    }
    EXPECT_EQ(stats->validated.load() + writes, operations) << "every reader must finish exactly once";
    EXPECT_EQ(stats->torn.load(), 0U) << "a validated read saw a half-written pair";
    EXPECT_EQ(stats->bad_commit.load(), 0U);
    delete_all(counters);
}

TEST_P(PrimitiveTest, BankTransfersKeepTheTotal) {
    const std::uint64_t seed = mx::sync_test::test_seed();
    constexpr std::uint32_t account_count = 16;
    constexpr std::uint64_t initial = 1000;
    constexpr std::uint64_t total = account_count * initial;
    const std::vector<ResourcePtr> accounts = make_pairs(account_count, initial);
    auto stats = std::make_shared<ReadStats>();
    auto rejected = std::make_shared<std::atomic<std::uint64_t>>(0);
    auto deposits = std::make_shared<std::atomic<std::uint64_t>>(0);
    const std::uint32_t transfers = scaled(3000);
    std::uint64_t readers = 0;
    for (std::uint32_t round = 0; round < 3; ++round) {
        for (std::uint32_t i = 0; i < transfers; ++i) {
            if (mx::sync_test::mix(seed, round, i) % 4 == 0) {
                ++readers;
            }
        }
        // A transfer reads and writes two accounts; a task has one resource, so it is a chain:
        // the withdrawal on the source returns the deposit on the target as its successor.
        mx::sync_test::produce_on_every_worker(
            runtime(), transfers,
            [&accounts, stats, rejected, deposits, seed, round](TaskContext &context, std::uint32_t i) {
                const std::uint64_t random = mx::sync_test::mix(seed, round, i);
                const ResourcePtr from = accounts[random % account_count];
                if (random % 4 == 0) {
                    context.spawn(*context.new_task<PairReader>(from, stats.get()));
                    return;
                }
                const ResourcePtr to = accounts[(random >> 8U) % account_count];
                const std::uint64_t amount = 1 + (random >> 20U) % 300;
                context.spawn(
                    [from, to, amount, rejected, deposits](TaskContext &inner) {
                        Pair &source = *from.get<Pair>();
                        if (source.a < amount) {
                            rejected->fetch_add(1, std::memory_order_relaxed);
                            return TaskResult::remove();
                        }
                        mx::sync_test::add(source, 0 - amount);
                        Task *deposit = inner.new_task(
                            [to, amount, deposits] {
                                mx::sync_test::add(*to.get<Pair>(), amount);
                                deposits->fetch_add(1, std::memory_order_relaxed);
                            },
                            writing(to));
                        return TaskResult::successor_and_remove(deposit);
                    },
                    writing(from));
            });
        runtime().wait();
        std::uint64_t sum = 0;
        for (std::uint32_t i = 0; i < account_count; ++i) {
            const Pair &account = *accounts[i].get<Pair>();
            EXPECT_EQ(account.a, account.b) << "account " << i << " after round " << round;
            EXPECT_LE(account.a, total) << "account " << i << " overdrawn (wrapped) after round " << round;
            sum += account.a;
        }
        EXPECT_EQ(sum, total) << "money was created or lost in round " << round;
    }
    EXPECT_EQ(stats->validated.load(), readers);
    EXPECT_EQ(stats->torn.load(), 0U);
    EXPECT_LE(stats->max_value.load(), total);
    EXPECT_GT(deposits->load(), 0U);
    delete_all(accounts);
}

TEST_P(PrimitiveTest, OptimisticReadersOfOneHotPairNeverValidateATornRead) {
    // One object, writers and readers from every worker (and from outside): the worst case for
    // validation. Readers are spawned from the test thread as well, so external dispatch of
    // resource tasks is covered.
    const std::vector<ResourcePtr> hot = make_pairs(1, 0);
    const ResourcePtr pair = hot.front();
    auto stats = std::make_shared<ReadStats>();
    const std::uint32_t operations = scaled(8000);
    std::atomic<std::uint64_t> writes{0};
    mx::sync_test::produce_on_every_worker(
        runtime(), operations, [pair, stats, &writes](TaskContext &context, std::uint32_t i) {
            if (i % 4 == 0) {
                writes.fetch_add(1, std::memory_order_relaxed);
                context.spawn([pair] { mx::sync_test::add(*pair.get<Pair>(), 1); }, writing(pair));
            } else {
                // Every other reader checks its copy in commit() instead of a successor.
                context.spawn(*context.new_task<PairReader>(pair, stats.get(), i % 8 == 1));
            }
        });
    const std::uint32_t external_readers = scaled(500);
    for (std::uint32_t i = 0; i < external_readers; ++i) {
        runtime().spawn(*runtime().new_task<PairReader>(pair, stats.get()));
    }
    runtime().wait();
    EXPECT_EQ(stats->torn.load(), 0U);
    EXPECT_EQ(stats->bad_commit.load(), 0U);
    EXPECT_EQ(stats->validated.load() + writes.load(), operations + external_readers);
    EXPECT_EQ(pair.get<Pair>()->a, writes.load());
    if (runtime().worker_count() == 1) {
        EXPECT_EQ(mx::sync_test::total(runtime(), &mx::tasking::WorkerStatistics::optimistic_retries), 0U)
            << "one worker runs tasks to completion: nothing can invalidate a read";
    }
    delete_all(hot);
}

INSTANTIATE_TEST_SUITE_P(All, PrimitiveTest,
                         ::testing::Combine(::testing::ValuesIn(mx::sync_test::synchronizing_primitives()),
                                            ::testing::ValuesIn(mx::sync_test::shapes())),
                         mx::sync_test::primitive_shape_name);

// --- scheduled primitives: tasks run on the owning worker ----------------------------------

class ScheduledTest : public ::testing::TestWithParam<mx::sync_test::PrimitiveShape> {};

TEST_P(ScheduledTest, TasksThatMustBeSerializedRunOnTheOwningWorker) {
    const Primitive primitive = std::get<0>(GetParam());
    Runtime runtime{mx::sync_test::config_of(std::get<1>(GetParam()))};
    const std::uint16_t workers = runtime.worker_count();
    // Two resources per worker: the weighted round-robin puts them everywhere.
    std::vector<ResourcePtr> resources;
    for (std::uint32_t i = 0; i < 2U * workers; ++i) {
        resources.push_back(runtime.new_resource<Pair>(mx::sync_test::forced(primitive), std::uint64_t{0}));
    }
    std::vector<bool> owned(workers, false);
    for (const ResourcePtr resource : resources) {
        owned[runtime.owner_of(resource)] = true;
    }
    for (std::uint16_t w = 0; w < workers; ++w) {
        EXPECT_TRUE(owned[w]) << "the mapping left worker " << w << " without a resource";
    }

    std::atomic<std::uint64_t> writer_runs{0};
    std::atomic<std::uint64_t> reader_runs{0};
    std::atomic<std::uint64_t> foreign{0};
    std::atomic<std::uint64_t> readers_elsewhere{0};
    // Readers of an optimistically scheduled resource may run anywhere; everything else that
    // is serialized must run on the worker that owns the resource's domain at that moment (a
    // domain moves only while nobody runs its tasks).
    const auto check = [&runtime, &writer_runs, &reader_runs, &foreign, &readers_elsewhere,
                        primitive](TaskContext &context, ResourcePtr resource, bool writer) {
        const bool on_owner = context.worker_id() == runtime.owner_of(resource);
        if (writer || primitive == Primitive::scheduling) {
            foreign.fetch_add(on_owner ? 0U : 1U, std::memory_order_relaxed);
        } else if (!on_owner) {
            readers_elsewhere.fetch_add(1, std::memory_order_relaxed);
        }
        (writer ? writer_runs : reader_runs).fetch_add(1, std::memory_order_relaxed);
    };
    std::uint64_t writers = 0; // spawned
    std::uint64_t readers = 0;
    const std::uint32_t per_source = scaled(400);
    // From outside the runtime (round-robin, or aimed at the wrong worker on purpose) ...
    for (std::uint32_t i = 0; i < per_source; ++i) {
        const ResourcePtr resource = resources[i % resources.size()];
        const bool writer = i % 2 == 0;
        ++(writer ? writers : readers);
        Annotation annotation = writer ? writing(resource) : reading(resource);
        annotation.target_worker = static_cast<std::uint16_t>(i % workers);
        runtime.spawn([check, resource, writer](TaskContext &context) { check(context, resource, writer); },
                      annotation);
    }
    // ... and from inside, on every worker.
    mx::sync_test::produce_on_every_worker(
        runtime, per_source, [&resources, check](TaskContext &context, std::uint32_t i) {
            const ResourcePtr resource = resources[(i * 7U) % resources.size()];
            const bool writer = i % 3 != 0;
            context.spawn([check, resource, writer](TaskContext &inner) { check(inner, resource, writer); },
                          writer ? writing(resource) : reading(resource));
        });
    for (std::uint32_t i = 0; i < per_source; ++i) {
        ++(i % 3 != 0 ? writers : readers); // the producers above: one task per i
    }
    runtime.wait();
    EXPECT_EQ(writer_runs.load(), writers);
    if (primitive == Primitive::optimistic_scheduled) {
        // An optimistic reader that a concurrent writer invalidated runs again.
        EXPECT_GE(reader_runs.load(), readers);
    } else {
        EXPECT_EQ(reader_runs.load(), readers);
    }
    EXPECT_EQ(foreign.load(), 0U) << "a serialized task ran on a worker that does not own its resource";
    for (const ResourcePtr resource : resources) {
        runtime.delete_resource(resource);
    }
}

INSTANTIATE_TEST_SUITE_P(Scheduled, ScheduledTest,
                         ::testing::Combine(::testing::Values(Primitive::scheduling,
                                                              Primitive::optimistic_scheduled),
                                            ::testing::ValuesIn(mx::sync_test::shapes())),
                         mx::sync_test::primitive_shape_name);

// --- optimistic readers: successor after validation, state and annotation restored ---------

/// What every optimistic run of a FailingReader observed. Written by any worker.
struct RetryStats {
    std::atomic<std::uint64_t> runs{0};
    std::atomic<std::uint64_t> successors{0};
    std::atomic<std::uint64_t> bad_state{0};
    std::atomic<std::uint64_t> bad_annotation{0};
    std::atomic<std::uint64_t> bad_successor{0};
};

/// A reader that makes its first `failures` runs fail validation by bumping the resource's
/// version itself (as a concurrent writer would, but deterministically). Each run increments a
/// member that is declared optimistic state and re-annotates the task; each run allocates a
/// successor. Only the successor of the validated run may be dispatched, and it must see the
/// state of exactly one run. With `commit`, each run returns TaskResult::commit() instead, and
/// the same holds for commit(): called once, for the validated run only.
class FailingReader final : public Task {
public:
    FailingReader(ResourcePtr resource, std::uint16_t worker, std::uint32_t failures, RetryStats *stats,
                  bool commit) noexcept
        : Task(Annotation{.target_worker = worker, .resource = resource, .access = AccessMode::read_only}),
          _failures(failures), _stats(stats), _resource(resource), _commit(commit) {}

    TaskResult execute(TaskContext &context) noexcept override {
        _stats->runs.fetch_add(1, std::memory_order_relaxed);
        if (_state.increments != 0 || _state.marker != 0) {
            _stats->bad_state.fetch_add(1, std::memory_order_relaxed);
        }
        if (resource() != _resource || access() != AccessMode::read_only ||
            priority() != mx::tasking::Priority::normal) {
            _stats->bad_annotation.fetch_add(1, std::memory_order_relaxed);
        }
        ++_state.increments;
        _state.marker = 0xABCD;
        // A reader that walks on re-annotates itself; a failed run must undo that.
        annotate(mx::tasking::Priority::high);
        annotate(ResourcePtr{}, AccessMode::none);
        // Not optimistic state on purpose: counts the runs across restores.
        ++_runs;
        if (_runs <= _failures) {
            auto &version = mx::tasking::detail::header_of(_resource).version;
            version.write_lock();
            version.write_end();
        }
        if (_commit) {
            return TaskResult::commit();
        }
        const std::uint32_t increments = _state.increments;
        const std::uint32_t runs = _runs;
        const std::uint32_t failures = _failures;
        RetryStats *stats = _stats;
        Task *successor = context.new_task([stats, increments, runs, failures] {
            stats->successors.fetch_add(1, std::memory_order_relaxed);
            if (increments != 1) {
                stats->bad_state.fetch_add(1, std::memory_order_relaxed);
            }
            if (runs != failures + 1) {
                stats->bad_successor.fetch_add(1, std::memory_order_relaxed);
            }
        });
        return TaskResult::successor_and_remove(successor);
    }

    void commit(TaskContext & /*context*/) noexcept override {
        _stats->successors.fetch_add(1, std::memory_order_relaxed);
        if (_state.increments != 1) {
            _stats->bad_state.fetch_add(1, std::memory_order_relaxed);
        }
        if (_runs != _failures + 1) {
            _stats->bad_successor.fetch_add(1, std::memory_order_relaxed);
        }
    }

    std::span<std::byte> optimistic_state() noexcept override { return state_bytes(_state); }

private:
    struct State {
        std::uint32_t increments{0};
        std::uint32_t marker{0};
    };
    State _state{};
    std::uint32_t _runs{0};
    std::uint32_t _failures;
    RetryStats *_stats;
    ResourcePtr _resource;
    bool _commit;
};

class OptimisticTest : public ::testing::TestWithParam<mx::sync_test::PrimitiveShape> {};

TEST_P(OptimisticTest, SuccessorOrCommitRunsOnlyAfterValidationAndStateIsRestoredOnRetry) {
    const Primitive primitive = std::get<0>(GetParam());
    mx::tasking::RuntimeConfig config = mx::sync_test::config_of(std::get<1>(GetParam()));
    config.optimistic_retries = 8;
    Runtime runtime{config};
    const std::uint16_t workers = runtime.worker_count();
    // Readers on the owner of an optimistically scheduled resource need no validation: put the
    // resource on worker 0 and its readers elsewhere.
    if (primitive == Primitive::optimistic_scheduled && workers < 2) {
        GTEST_SKIP() << "optimistic_scheduled reads on the only worker are never optimistic";
    }
    mx::tasking::ResourceAnnotation annotation = mx::sync_test::forced(primitive);
    annotation.worker = 0;
    const ResourcePtr resource = runtime.new_resource<Pair>(annotation, std::uint64_t{0});
    RetryStats stats;
    // Failures below the retry limit are retried at once; above it the task goes back to the
    // pool and is retried later. Both must behave the same.
    const std::vector<std::uint32_t> failure_counts{0, 1, 3, 8, 12, 20};
    const std::uint32_t per_count = scaled(30);
    std::uint64_t expected_retries = 0;
    for (std::uint32_t i = 0; i < per_count; ++i) {
        for (const std::uint32_t failures : failure_counts) {
            // All on one worker: readers on different workers would invalidate each other with
            // their forced version bumps, and the counts below would not be exact.
            const auto worker = static_cast<std::uint16_t>(workers - 1U);
            // Every other reader delivers through commit() instead of a successor.
            runtime.spawn(*runtime.new_task<FailingReader>(resource, worker, failures, &stats, i % 2 == 1));
            expected_retries += failures;
        }
    }
    runtime.wait();
    const std::uint64_t readers = std::uint64_t{per_count} * failure_counts.size();
    EXPECT_EQ(stats.successors.load(), readers)
        << "exactly one successor or commit() per reader: the validated run's";
    EXPECT_EQ(stats.runs.load(), readers + expected_retries);
    EXPECT_EQ(stats.bad_state.load(), 0U) << "optimistic state was not restored before a retry";
    EXPECT_EQ(stats.bad_annotation.load(), 0U) << "the annotation was not restored before a retry";
    EXPECT_EQ(stats.bad_successor.load(), 0U) << "a successor or commit() of a failed run ran";
    EXPECT_EQ(mx::sync_test::total(runtime, &mx::tasking::WorkerStatistics::optimistic_retries),
              expected_retries);
    EXPECT_EQ(runtime.live_tasks(), 0U) << "successors of failed runs must be freed";
    runtime.delete_resource(resource);
}

INSTANTIATE_TEST_SUITE_P(Optimistic, OptimisticTest,
                         ::testing::Combine(::testing::Values(Primitive::optimistic_latched,
                                                              Primitive::optimistic_scheduled),
                                            ::testing::ValuesIn(mx::sync_test::shapes())),
                         mx::sync_test::primitive_shape_name);

// --- no synchronization ---------------------------------------------------------------------

TEST(NoSynchronization, TasksOnUnsynchronizedResourcesRunWhereverTheyAreSent) {
    mx::tasking::RuntimeConfig config;
    config.workers = 2;
    Runtime runtime{config};
    mx::tasking::ResourceAnnotation annotation;
    annotation.isolation = mx::tasking::Isolation::none;
    const ResourcePtr resource = runtime.new_resource<Pair>(annotation, std::uint64_t{7});
    ASSERT_EQ(mx::tasking::primitive_of(resource), Primitive::none);
    std::atomic<std::uint64_t> ok{0};
    for (std::uint16_t w = 0; w < 2; ++w) {
        Annotation on = reading(resource);
        on.target_worker = w;
        runtime.spawn(
            [resource, w, &ok](TaskContext &context) {
                if (context.worker_id() == w && resource.get<Pair>()->a == 7) {
                    ok.fetch_add(1);
                }
            },
            on);
    }
    runtime.wait();
    EXPECT_EQ(ok.load(), 2U);
    runtime.delete_resource(resource);
}

} // namespace
