// oneTBB baselines: tbb::task_group (spawn into the running thread's deque, work stealing, join
// by wait) and tbb::task_arena::enqueue (fire-and-forget into the arena's shared FIFO lanes).
// oneTBB cannot send a task to a particular thread, so the cross-worker benchmarks measure its
// own way of moving work: whoever takes the task runs it.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <tbb/global_control.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include "common.h"

namespace mx::bench {

namespace {

/// oneTBB starts at most (hardware threads - 1) worker threads unless allowed more; arenas
/// without a slot for the calling thread need `workers` of them.
void allow_enough_tbb_threads() {
    static const tbb::global_control control{tbb::global_control::max_allowed_parallelism, 65};
}

std::uint64_t fib_task_group(std::uint32_t n) {
    if (n < 2) {
        return n;
    }
    std::uint64_t first = 0;
    tbb::task_group group;
    group.run([&first, n] { first = fib_task_group(n - 1); });
    const std::uint64_t second = fib_task_group(n - 2);
    group.wait();
    return first + second;
}

void check_fib(const char *variant, std::uint32_t n, std::uint64_t result) {
    if (result != fib_reference(n)) {
        std::fprintf(stderr, "%s fib(%u) returned %llu, expected %llu\n", variant, n,
                     static_cast<unsigned long long>(result),
                     static_cast<unsigned long long>(fib_reference(n)));
        std::exit(3);
    }
}

/// A chain of tasks: each one schedules the next, `hops` times, through a task_group or the
/// arena's enqueue.
template <class Schedule>
class Chain {
public:
    Chain(std::uint64_t hops, Schedule schedule, Completion &done) noexcept
        : _remaining(hops), _schedule(schedule), _done(&done) {}

    void hop() {
        if (_remaining == 0) {
            _done->arrive();
            return;
        }
        --_remaining;
        _schedule([this] { hop(); });
    }

private:
    std::uint64_t _remaining; // touched by one task at a time (the chain is sequential)
    Schedule _schedule;
    Completion *_done;
};

class TaskGroupSystem final : public System {
public:
    explicit TaskGroupSystem(std::uint16_t workers) : _arena(workers), _workers(workers) {
        allow_enough_tbb_threads();
        _arena.initialize();
    }

    [[nodiscard]] std::string name() const override { return "tbb_task_group"; }
    [[nodiscard]] bool supports(const std::string &benchmark) const override {
        return benchmark == "spawn_local" || benchmark == "ping_pong" || benchmark == "all_to_all" ||
               benchmark == "fib";
    }

    Run spawn_local(const Sizes &sizes) override {
        // The calling thread takes the arena's reserved slot and is one of the `workers` threads.
        return _arena.execute([&sizes, this] {
            const Stopwatch watch;
            tbb::task_group roots;
            for (std::uint16_t w = 0; w < _workers; ++w) {
                roots.run([&sizes] {
                    tbb::task_group group;
                    std::uint64_t remaining = sizes.tasks;
                    while (remaining > 0) {
                        const std::uint64_t count = std::min<std::uint64_t>(sizes.chunk, remaining);
                        for (std::uint64_t i = 0; i < count; ++i) {
                            group.run([] {});
                        }
                        group.wait();
                        remaining -= count;
                    }
                });
            }
            roots.wait();
            return watch.stop(sizes.tasks * _workers);
        });
    }

    Run ping_pong(const Sizes &sizes) override { return chains(1, sizes.hops); }

    Run all_to_all(const Sizes &sizes) override {
        return chains(std::uint64_t{sizes.in_flight} * _workers,
                      std::max<std::uint64_t>(1, sizes.hops / sizes.in_flight));
    }

    Run fib(const Sizes &sizes) override {
        std::uint64_t result = 0;
        const Run run = _arena.execute([&sizes, &result] {
            const Stopwatch watch;
            result = fib_task_group(sizes.fib_n);
            return watch.stop(fib_calls(sizes.fib_n));
        });
        check_fib("tbb_task_group", sizes.fib_n, result);
        return run;
    }

    std::uint64_t wakeup_sample() override { return 0; }
    void touch_all_workers() override {}

private:
    Run chains(std::uint64_t count, std::uint64_t hops) {
        return _arena.execute([count, hops] {
            Completion done{count};
            tbb::task_group group;
            const auto schedule = [&group](auto &&function) { group.run(function); };
            std::vector<std::unique_ptr<Chain<decltype(schedule)>>> chains;
            for (std::uint64_t i = 0; i < count; ++i) {
                chains.push_back(std::make_unique<Chain<decltype(schedule)>>(hops, schedule, done));
            }
            const Stopwatch watch;
            for (auto &chain : chains) {
                group.run([&chain] { chain->hop(); });
            }
            group.wait();
            return watch.stop(count * hops);
        });
    }

    tbb::task_arena _arena;
    std::uint16_t _workers;
};

class EnqueueSystem final : public System {
public:
    // No slot reserved for the calling thread: `workers` oneTBB threads run the tasks while the
    // caller blocks, as with mxtasking.
    explicit EnqueueSystem(std::uint16_t workers) : _arena(workers, 0), _workers(workers) {
        allow_enough_tbb_threads();
        _arena.initialize();
    }

    [[nodiscard]] std::string name() const override { return "tbb_enqueue"; }
    [[nodiscard]] bool supports(const std::string &benchmark) const override { return benchmark != "fib"; }

    Run spawn_local(const Sizes &sizes) override {
        Completion done{_workers};
        std::vector<std::unique_ptr<Spawner>> roots;
        for (std::uint16_t w = 0; w < _workers; ++w) {
            roots.push_back(std::make_unique<Spawner>(_arena, sizes.tasks, sizes.chunk, done));
        }
        const Stopwatch watch;
        for (auto &root : roots) {
            _arena.enqueue([root = root.get()] { root->round(); });
        }
        done.wait();
        return watch.stop(sizes.tasks * _workers);
    }

    Run ping_pong(const Sizes &sizes) override { return chains(1, sizes.hops); }

    Run all_to_all(const Sizes &sizes) override {
        return chains(std::uint64_t{sizes.in_flight} * _workers,
                      std::max<std::uint64_t>(1, sizes.hops / sizes.in_flight));
    }

    Run fib(const Sizes &) override { return {}; }

    std::uint64_t wakeup_sample() override {
        _finished.store(0, std::memory_order_relaxed);
        const std::uint64_t spawned = system::cycles();
        _arena.enqueue([this] {
            _started.store(system::cycles(), std::memory_order_relaxed);
            _finished.store(1, std::memory_order_release);
        });
        while (_finished.load(std::memory_order_acquire) == 0) {
            system::pause();
        }
        const std::uint64_t started = _started.load(std::memory_order_relaxed);
        return started > spawned ? started - spawned : 0;
    }

    void touch_all_workers() override {
        Completion done{_workers};
        for (std::uint16_t w = 0; w < _workers; ++w) {
            _arena.enqueue([&done] {
                spin_for_micros(1000.0);
                done.arrive();
            });
        }
        done.wait();
    }

private:
    /// spawn_local for enqueue: a round enqueues `chunk` empty tasks; the last of them to finish
    /// enqueues the next round. The count-down costs one atomic decrement per task, which the
    /// other variants do not pay; without it the end of a round cannot be told (enqueue is
    /// only roughly FIFO).
    class Spawner {
    public:
        Spawner(tbb::task_arena &arena, std::uint64_t tasks, std::uint32_t chunk, Completion &done) noexcept
            : _arena(&arena), _remaining(tasks), _chunk(chunk), _done(&done) {}

        void round() {
            if (_remaining == 0) {
                _done->arrive();
                return;
            }
            const std::uint64_t count = std::min<std::uint64_t>(_chunk, _remaining);
            _remaining -= count;
            _pending.store(count, std::memory_order_relaxed);
            for (std::uint64_t i = 0; i < count; ++i) {
                _arena->enqueue([this] {
                    if (_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                        _arena->enqueue([this] { round(); });
                    }
                });
            }
        }

    private:
        tbb::task_arena *_arena;
        std::uint64_t _remaining; // touched by the one round running at a time
        std::uint32_t _chunk;
        Completion *_done;
        // Decremented by the empty tasks of a round on any thread.
        std::atomic<std::uint64_t> _pending{0};
    };

    Run chains(std::uint64_t count, std::uint64_t hops) {
        Completion done{count};
        const auto schedule = [this](auto &&function) { _arena.enqueue(function); };
        std::vector<std::unique_ptr<Chain<decltype(schedule)>>> chains;
        for (std::uint64_t i = 0; i < count; ++i) {
            chains.push_back(std::make_unique<Chain<decltype(schedule)>>(hops, schedule, done));
        }
        const Stopwatch watch;
        for (auto &chain : chains) {
            _arena.enqueue([chain = chain.get()] { chain->hop(); });
        }
        done.wait();
        return watch.stop(count * hops);
    }

    tbb::task_arena _arena;
    std::uint16_t _workers;
    // Written by the probe task on a oneTBB thread, read by the sampling thread.
    std::atomic<std::uint64_t> _started{0};
    std::atomic<std::uint32_t> _finished{0};
};

} // namespace

std::unique_ptr<System> make_tbb_task_group(std::uint16_t workers) {
    return std::make_unique<TaskGroupSystem>(workers);
}
std::unique_ptr<System> make_tbb_enqueue(std::uint16_t workers) {
    return std::make_unique<EnqueueSystem>(workers);
}

} // namespace mx::bench
