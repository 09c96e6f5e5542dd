// mxtasking variants of the runtime benchmarks, written against the public API only (Runtime,
// Task, TaskContext, new_task, spawn, TaskResult).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mx/tasking/runtime.h>

#include "common.h"

namespace mx::bench {

namespace {

using tasking::Runtime;
using tasking::RuntimeConfig;
using tasking::Task;
using tasking::TaskContext;
using tasking::TaskResult;

class EmptyTask final : public Task {
public:
    TaskResult execute(TaskContext &) noexcept override { return TaskResult::remove(); }
};
static_assert(sizeof(EmptyTask) == system::cache_line_size, "an empty task is one header");

/// One per worker: spawns `chunk` empty tasks locally, then re-spawns itself at low priority, so
/// it runs again only once its worker has run out of other tasks, whatever the local order (FIFO
/// or LIFO): at most chunk + 1 tasks are queued per spawner at any time.
class LocalSpawner final : public Task {
public:
    LocalSpawner(std::uint64_t tasks, std::uint32_t chunk, Completion &done) noexcept
        : _remaining(tasks), _chunk(chunk), _done(&done) {
        annotate(tasking::Priority::low);
    }

    TaskResult execute(TaskContext &context) noexcept override {
        if (_remaining == 0) {
            _done->arrive(); // the last chunk ran before this round
            return TaskResult::done();
        }
        const std::uint64_t count = std::min<std::uint64_t>(_chunk, _remaining);
        for (std::uint64_t i = 0; i < count; ++i) {
            context.spawn(*context.new_task<EmptyTask>());
        }
        _remaining -= count;
        return TaskResult::successor(this);
    }

private:
    std::uint64_t _remaining;
    std::uint32_t _chunk;
    Completion *_done;
};

/// A task that moves to another worker on every execution: to the next worker (ping_pong) or
/// to a pseudo-random one (all_to_all). The same object is re-dispatched, so no allocation is
/// measured, only dispatch.
class Hopper final : public Task {
public:
    Hopper(std::uint64_t hops, bool random, std::uint32_t seed, Completion &done) noexcept
        : _remaining(hops), _state(seed | 1U), _random(random), _done(&done) {}

    TaskResult execute(TaskContext &context) noexcept override {
        if (_remaining == 0) {
            _done->arrive();
            return TaskResult::done();
        }
        --_remaining;
        const std::uint32_t workers = context.worker_count();
        const std::uint32_t next =
            _random ? xorshift(_state) % workers : (context.worker_id() + 1U) % workers;
        annotate(static_cast<std::uint16_t>(next));
        return TaskResult::successor(this);
    }

private:
    std::uint64_t _remaining;
    std::uint32_t _state;
    bool _random;
    Completion *_done;
};

/// Continuation of fib: receives both partial results and passes their sum to its parent.
class Sum final : public Task {
public:
    Sum(Sum *parent, int pending, std::uint64_t *root_result, Completion *done) noexcept
        : _parent(parent), _root_result(root_result), _done(done), _pending(pending) {}

    void deliver(TaskContext &context, std::uint64_t value) noexcept {
        _value.fetch_add(value, std::memory_order_relaxed);
        if (_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            context.spawn(*this);
        }
    }

    TaskResult execute(TaskContext &context) noexcept override {
        const std::uint64_t value = _value.load(std::memory_order_relaxed);
        if (_parent != nullptr) {
            _parent->deliver(context, value);
        } else {
            *_root_result = value;
            _done->arrive();
        }
        return TaskResult::remove();
    }

private:
    Sum *_parent;
    std::uint64_t *_root_result;
    Completion *_done;
    std::atomic<std::uint64_t> _value{0};
    std::atomic<int> _pending;
};

/// Recursive fork/join without blocking: fib(n) forks fib(n-1) and fib(n-2) and hands their sum
/// to a continuation. The top `spread_depth` levels are annotated to alternate workers: how a
/// programmer spreads a recursion over workers without work stealing (mx, mx_lifo). mx_default
/// passes 0 and leaves the spreading to the runtime.
class Fib final : public Task {
public:
    Fib(std::uint32_t n, Sum *parent, std::uint32_t lane, std::uint32_t depth,
        std::uint32_t spread_depth) noexcept
        : _n(n), _lane(lane), _depth(depth), _spread_depth(spread_depth), _parent(parent) {}

    TaskResult execute(TaskContext &context) noexcept override {
        if (_n < 2) {
            _parent->deliver(context, _n);
            return TaskResult::remove();
        }
        auto *sum = context.new_task<Sum>(_parent, 2, nullptr, nullptr);
        auto *first = context.new_task<Fib>(_n - 1, sum, 2 * _lane, _depth + 1, _spread_depth);
        auto *second = context.new_task<Fib>(_n - 2, sum, 2 * _lane + 1, _depth + 1, _spread_depth);
        if (_depth < _spread_depth) {
            const std::uint32_t workers = context.worker_count();
            first->annotate(static_cast<std::uint16_t>((2 * _lane) % workers));
            second->annotate(static_cast<std::uint16_t>((2 * _lane + 1) % workers));
        }
        context.spawn(*first);
        return TaskResult::successor_and_remove(second);
    }

private:
    std::uint32_t _n;
    std::uint32_t _lane;
    std::uint32_t _depth;
    std::uint32_t _spread_depth;
    Sum *_parent;
};

/// Records when it started and that it finished; owned by the benchmark, re-spawned per sample.
class Probe final : public Task {
public:
    TaskResult execute(TaskContext &) noexcept override {
        _started.store(system::cycles(), std::memory_order_relaxed);
        _finished.store(1, std::memory_order_release);
        return TaskResult::done();
    }
    void reset() noexcept { _finished.store(0, std::memory_order_relaxed); }
    [[nodiscard]] bool finished() const noexcept { return _finished.load(std::memory_order_acquire) != 0; }
    [[nodiscard]] std::uint64_t started() const noexcept { return _started.load(std::memory_order_relaxed); }

private:
    // Written by the worker running the probe, read by the sampling thread after _finished.
    std::atomic<std::uint64_t> _started{0};
    std::atomic<std::uint32_t> _finished{0};
};

/// Keeps its worker busy for a while, so every worker has run something before an idle window.
class BusyTask final : public Task {
public:
    explicit BusyTask(Completion &done) noexcept : _done(&done) {}
    TaskResult execute(TaskContext &) noexcept override {
        spin_for_micros(1000.0);
        _done->arrive();
        return TaskResult::remove();
    }

private:
    Completion *_done;
};

RuntimeConfig config_of(std::uint16_t workers, MxMode mode, bool pin, bool work_stealing) {
    RuntimeConfig config;
    config.workers = workers;
    if (mode != MxMode::defaults) {
        config.pin_workers = pin;
        config.local_order = mode == MxMode::lifo ? tasking::LocalOrder::lifo : tasking::LocalOrder::fifo;
    }
    config.work_stealing = work_stealing;
    return config;
}

class MxSystem final : public System {
public:
    MxSystem(std::uint16_t workers, MxMode mode, bool pin, bool work_stealing)
        : _runtime(config_of(workers, mode, pin, work_stealing)), _workers(workers), _mode(mode) {
        _probe.annotate(std::uint16_t{0});
    }

    [[nodiscard]] std::string name() const override {
        return _mode == MxMode::lifo ? "mx_lifo" : _mode == MxMode::defaults ? "mx_default" : "mx";
    }
    [[nodiscard]] bool supports(const std::string &) const override { return true; }

    Run spawn_local(const Sizes &sizes) override {
        Completion done{_workers};
        std::vector<std::unique_ptr<LocalSpawner>> roots;
        for (std::uint16_t w = 0; w < _workers; ++w) {
            roots.push_back(std::make_unique<LocalSpawner>(sizes.tasks, sizes.chunk, done));
            if (_mode != MxMode::defaults) {
                roots.back()->annotate(w);
            }
        }
        const Stopwatch watch;
        for (auto &root : roots) {
            _runtime.spawn(*root);
        }
        done.wait();
        const Run run = watch.stop(sizes.tasks * _workers);
        _runtime.wait();
        return run;
    }

    Run ping_pong(const Sizes &sizes) override {
        Completion done{1};
        Hopper ball{sizes.hops, false, 1, done};
        ball.annotate(std::uint16_t{0});
        const Stopwatch watch;
        _runtime.spawn(ball);
        done.wait();
        const Run run = watch.stop(sizes.hops);
        _runtime.wait();
        return run;
    }

    Run all_to_all(const Sizes &sizes) override {
        const std::uint64_t tasks = std::uint64_t{sizes.in_flight} * _workers;
        const std::uint64_t hops_per_task = std::max<std::uint64_t>(1, sizes.hops / sizes.in_flight);
        Completion done{tasks};
        std::vector<std::unique_ptr<Hopper>> hoppers;
        for (std::uint64_t i = 0; i < tasks; ++i) {
            hoppers.push_back(std::make_unique<Hopper>(hops_per_task, true,
                                                       static_cast<std::uint32_t>(i * 7919 + 17), done));
            hoppers.back()->annotate(static_cast<std::uint16_t>(i % _workers));
        }
        const Stopwatch watch;
        for (auto &hopper : hoppers) {
            _runtime.spawn(*hopper);
        }
        done.wait();
        const Run run = watch.stop(tasks * hops_per_task);
        _runtime.wait();
        return run;
    }

    Run fib(const Sizes &sizes) override {
        Completion done{1};
        std::uint64_t result = 0;
        auto *root = _runtime.new_task<Sum>(nullptr, 1, &result, &done);
        const bool placed = _mode != MxMode::defaults;
        auto *top = _runtime.new_task<Fib>(sizes.fib_n, root, 0U, 0U, placed ? sizes.spread_depth : 0U);
        if (placed) {
            top->annotate(std::uint16_t{0});
        }
        const Stopwatch watch;
        _runtime.spawn(*top);
        done.wait();
        const Run run = watch.stop(fib_calls(sizes.fib_n));
        _runtime.wait();
        if (result != fib_reference(sizes.fib_n)) {
            std::fprintf(stderr, "mx fib(%u) returned %llu, expected %llu\n", sizes.fib_n,
                         static_cast<unsigned long long>(result),
                         static_cast<unsigned long long>(fib_reference(sizes.fib_n)));
            std::exit(3);
        }
        return run;
    }

    std::uint64_t wakeup_sample() override {
        _probe.reset();
        const std::uint64_t spawned = system::cycles();
        _runtime.spawn(_probe);
        while (!_probe.finished()) {
            system::pause();
        }
        // No Runtime::wait() here: it would add a futex round trip to the gap before the next
        // sample, and the probe may be spawned again as soon as its execute() has returned.
        const std::uint64_t started = _probe.started();
        return started > spawned ? started - spawned : 0;
    }

    [[nodiscard]] std::uint64_t sleeps() const override {
        // Worker 0 is the one the probes go to.
        return _runtime.statistics().front().sleeps;
    }
    [[nodiscard]] bool counts_sleeps() const override { return true; }

    void touch_all_workers() override {
        Completion done{_workers};
        for (std::uint16_t w = 0; w < _workers; ++w) {
            auto *task = _runtime.new_task<BusyTask>(done);
            task->annotate(w);
            _runtime.spawn(*task);
        }
        done.wait();
        _runtime.wait();
    }

    std::string start_trace(std::uint32_t events_per_worker, bool queue_times) override {
        return _runtime.start_trace(
            tasking::TraceConfig{.events_per_worker = events_per_worker, .queue_times = queue_times});
    }

    std::string stop_trace(const std::string &path, bool profile, std::string &report) override {
        std::optional<tasking::Trace> trace = _runtime.stop_trace();
        if (!trace) {
            return "no trace was recorded";
        }
        report.clear();
        if (profile) {
            report = trace->profile_table();
        }
        if (path.empty()) {
            return {};
        }
        const tasking::TraceWriteResult written = trace->write(path);
        if (!written.ok()) {
            return written.error;
        }
        report += "trace written to " + path + " (" + std::to_string(written.events) + " events, " +
                  std::to_string(written.dropped) + " dropped)\n";
        return {};
    }

private:
    Runtime _runtime;
    std::uint16_t _workers;
    MxMode _mode;
    Probe _probe;
};

} // namespace

std::unique_ptr<System> make_mxtasking(std::uint16_t workers, MxMode mode, bool pin, bool work_stealing) {
    return std::make_unique<MxSystem>(workers, mode, pin, work_stealing);
}

} // namespace mx::bench
