// Baseline: std::thread workers, each with a mutex-protected task queue, tasks allocated with
// new/delete (the process's malloc). Scheduling policy is the same as mxtasking's so that only
// the mechanics differ: tasks go to the spawning worker unless they name a target, no work
// stealing, up to 64 tasks taken per queue visit, idle workers spin for the same 100,000 TSC
// ticks and then sleep on a condition variable.

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common.h"

namespace mx::bench {

namespace {

constexpr std::uint16_t any_thread = 0xFFFF;
constexpr std::uint32_t batch_size = 64;
constexpr std::uint64_t idle_spin_cycles = 100'000;

class Pool;

class PoolTask {
public:
    PoolTask() noexcept = default;
    PoolTask(const PoolTask &) = delete;
    PoolTask &operator=(const PoolTask &) = delete;
    virtual ~PoolTask() = default;
    /// Returns true when the pool shall delete the task after it ran.
    virtual bool run(Pool &pool, std::uint16_t worker) noexcept = 0;

    std::uint16_t target{any_thread};
    PoolTask *next{nullptr}; // queue link, guarded by the mutex of the queue holding the task
};

class Pool {
public:
    Pool(std::uint16_t workers, bool pin) : _queues(workers) {
        std::vector<std::size_t> cpus;
        cpu_set_t set;
        CPU_ZERO(&set);
        if (pin && sched_getaffinity(0, sizeof(set), &set) == 0) {
            for (std::size_t cpu = 0; cpu < std::size_t{CPU_SETSIZE}; ++cpu) {
                if (CPU_ISSET(cpu, &set)) {
                    cpus.push_back(cpu);
                }
            }
        }
        for (std::uint16_t w = 0; w < workers; ++w) {
            _threads.emplace_back([this, w, cpus] {
                if (!cpus.empty()) {
                    // Pinned like mxtasking's workers: worker w on the w-th usable CPU.
                    cpu_set_t own;
                    CPU_ZERO(&own);
                    CPU_SET(cpus[w % cpus.size()], &own);
                    pthread_setaffinity_np(pthread_self(), sizeof(own), &own);
                }
                work(w);
            });
        }
    }
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;
    ~Pool() {
        _stop.store(true, std::memory_order_seq_cst);
        for (auto &queue : _queues) {
            const std::lock_guard lock{queue.mutex};
            queue.wakeup.notify_all();
        }
        for (auto &thread : _threads) {
            thread.join();
        }
        for (auto &queue : _queues) {
            while (queue.head != nullptr) {
                PoolTask *task = queue.head;
                queue.head = task->next;
                delete task;
            }
        }
    }

    [[nodiscard]] std::uint16_t workers() const noexcept {
        return static_cast<std::uint16_t>(_queues.size());
    }

    /// From a worker: to the task's target, or to the spawning worker.
    void spawn(PoolTask &task, std::uint16_t from) noexcept {
        push(task, task.target == any_thread ? from : task.target);
    }
    /// From outside: to the task's target, or round robin.
    void spawn_external(PoolTask &task) noexcept {
        const auto next = _next_external.fetch_add(1, std::memory_order_relaxed);
        push(task,
             task.target == any_thread ? static_cast<std::uint16_t>(next % _queues.size()) : task.target);
    }

private:
    struct alignas(system::cache_line_size) Queue {
        std::mutex mutex;
        std::condition_variable wakeup;
        PoolTask *head{nullptr}; // guarded by mutex
        PoolTask *tail{nullptr}; // guarded by mutex
        bool sleeping{false};    // guarded by mutex; set by the owner before it waits
        // Written under the mutex by producers and the owner; read without it by the spinning
        // owner as a hint that the queue is worth locking.
        std::atomic<bool> non_empty{false};
    };

    void push(PoolTask &task, std::uint16_t target) noexcept {
        Queue &queue = _queues[target];
        task.next = nullptr;
        bool wake = false;
        {
            const std::lock_guard lock{queue.mutex};
            if (queue.tail == nullptr) {
                queue.head = &task;
            } else {
                queue.tail->next = &task;
            }
            queue.tail = &task;
            queue.non_empty.store(true, std::memory_order_relaxed);
            wake = queue.sleeping;
        }
        if (wake) {
            queue.wakeup.notify_one();
        }
    }

    std::uint32_t take(Queue &queue, PoolTask **buffer) noexcept {
        const std::lock_guard lock{queue.mutex};
        std::uint32_t count = 0;
        while (count < batch_size && queue.head != nullptr) {
            buffer[count++] = queue.head;
            queue.head = queue.head->next;
        }
        if (queue.head == nullptr) {
            queue.tail = nullptr;
            queue.non_empty.store(false, std::memory_order_relaxed);
        }
        return count;
    }

    void idle(Queue &queue) noexcept {
        const std::uint64_t start = system::cycles();
        while (system::cycles() - start < idle_spin_cycles) {
            if (queue.non_empty.load(std::memory_order_relaxed) || _stop.load(std::memory_order_relaxed)) {
                return;
            }
            system::pause();
        }
        std::unique_lock lock{queue.mutex};
        while (queue.head == nullptr && !_stop.load(std::memory_order_relaxed)) {
            queue.sleeping = true;
            queue.wakeup.wait(lock);
        }
        queue.sleeping = false;
    }

    void work(std::uint16_t id) noexcept {
        Queue &queue = _queues[id];
        PoolTask *buffer[batch_size];
        while (!_stop.load(std::memory_order_relaxed)) {
            const std::uint32_t count = take(queue, buffer);
            if (count == 0) {
                idle(queue);
                continue;
            }
            for (std::uint32_t i = 0; i < count; ++i) {
                if (buffer[i]->run(*this, id)) {
                    delete buffer[i];
                }
            }
        }
    }

    std::vector<Queue> _queues;
    std::vector<std::thread> _threads;
    std::atomic<std::uint32_t> _next_external{0};
    std::atomic<bool> _stop{false}; // written by the destructor, read by the workers
};

class EmptyTask final : public PoolTask {
public:
    bool run(Pool &, std::uint16_t) noexcept override { return true; }
};

class LocalSpawner final : public PoolTask {
public:
    LocalSpawner(std::uint64_t tasks, std::uint32_t chunk, Completion &done) noexcept
        : _remaining(tasks), _chunk(chunk), _done(&done) {}
    bool run(Pool &pool, std::uint16_t worker) noexcept override {
        if (_remaining == 0) {
            _done->arrive();
            return false;
        }
        const std::uint64_t count = std::min<std::uint64_t>(_chunk, _remaining);
        for (std::uint64_t i = 0; i < count; ++i) {
            pool.spawn(*new EmptyTask, worker);
        }
        _remaining -= count;
        pool.spawn(*this, worker);
        return false;
    }

private:
    std::uint64_t _remaining;
    std::uint32_t _chunk;
    Completion *_done;
};

class Hopper final : public PoolTask {
public:
    Hopper(std::uint64_t hops, bool random, std::uint32_t seed, Completion &done) noexcept
        : _remaining(hops), _state(seed | 1U), _random(random), _done(&done) {}
    bool run(Pool &pool, std::uint16_t worker) noexcept override {
        if (_remaining == 0) {
            _done->arrive();
            return false;
        }
        --_remaining;
        const std::uint32_t workers = pool.workers();
        target = static_cast<std::uint16_t>(_random ? xorshift(_state) % workers : (worker + 1U) % workers);
        pool.spawn(*this, worker);
        return false;
    }

private:
    std::uint64_t _remaining;
    std::uint32_t _state;
    bool _random;
    Completion *_done;
};

class Sum final : public PoolTask {
public:
    Sum(Sum *parent, int pending, std::uint64_t *root_result, Completion *done) noexcept
        : _parent(parent), _root_result(root_result), _done(done), _pending(pending) {}
    void deliver(Pool &pool, std::uint16_t worker, std::uint64_t value) noexcept {
        _value.fetch_add(value, std::memory_order_relaxed);
        if (_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            pool.spawn(*this, worker);
        }
    }
    bool run(Pool &pool, std::uint16_t worker) noexcept override {
        const std::uint64_t value = _value.load(std::memory_order_relaxed);
        if (_parent != nullptr) {
            _parent->deliver(pool, worker, value);
        } else {
            *_root_result = value;
            _done->arrive();
        }
        return true;
    }

private:
    Sum *_parent;
    std::uint64_t *_root_result;
    Completion *_done;
    std::atomic<std::uint64_t> _value{0};
    std::atomic<int> _pending;
};

/// Same continuation scheme and spreading of the top levels as the mxtasking variant.
class Fib final : public PoolTask {
public:
    Fib(std::uint32_t n, Sum *parent, std::uint32_t lane, std::uint32_t depth,
        std::uint32_t spread_depth) noexcept
        : _n(n), _lane(lane), _depth(depth), _spread_depth(spread_depth), _parent(parent) {}
    bool run(Pool &pool, std::uint16_t worker) noexcept override {
        if (_n < 2) {
            _parent->deliver(pool, worker, _n);
            return true;
        }
        auto *sum = new Sum(_parent, 2, nullptr, nullptr);
        auto *first = new Fib(_n - 1, sum, 2 * _lane, _depth + 1, _spread_depth);
        auto *second = new Fib(_n - 2, sum, 2 * _lane + 1, _depth + 1, _spread_depth);
        if (_depth < _spread_depth) {
            const std::uint32_t workers = pool.workers();
            first->target = static_cast<std::uint16_t>((2 * _lane) % workers);
            second->target = static_cast<std::uint16_t>((2 * _lane + 1) % workers);
        }
        pool.spawn(*first, worker);
        pool.spawn(*second, worker);
        return true;
    }

private:
    std::uint32_t _n;
    std::uint32_t _lane;
    std::uint32_t _depth;
    std::uint32_t _spread_depth;
    Sum *_parent;
};

class Probe final : public PoolTask {
public:
    bool run(Pool &, std::uint16_t) noexcept override {
        started.store(system::cycles(), std::memory_order_relaxed);
        finished.store(1, std::memory_order_release);
        return false;
    }
    // Written by the worker, read by the sampling thread after `finished`.
    std::atomic<std::uint64_t> started{0};
    std::atomic<std::uint32_t> finished{0};
};

class BusyTask final : public PoolTask {
public:
    explicit BusyTask(Completion &done) noexcept : _done(&done) {}
    bool run(Pool &, std::uint16_t) noexcept override {
        spin_for_micros(1000.0);
        _done->arrive();
        return true;
    }

private:
    Completion *_done;
};

class ThreadsSystem final : public System {
public:
    ThreadsSystem(std::uint16_t workers, bool pin) : _pool(workers, pin), _workers(workers) {
        _probe.target = 0;
    }

    [[nodiscard]] std::string name() const override { return "threads"; }
    [[nodiscard]] bool supports(const std::string &) const override { return true; }

    Run spawn_local(const Sizes &sizes) override {
        Completion done{_workers};
        std::vector<std::unique_ptr<LocalSpawner>> roots;
        for (std::uint16_t w = 0; w < _workers; ++w) {
            roots.push_back(std::make_unique<LocalSpawner>(sizes.tasks, sizes.chunk, done));
            roots.back()->target = w;
        }
        const Stopwatch watch;
        for (auto &root : roots) {
            _pool.spawn_external(*root);
        }
        done.wait();
        return watch.stop(sizes.tasks * _workers);
    }

    Run ping_pong(const Sizes &sizes) override {
        Completion done{1};
        Hopper ball{sizes.hops, false, 1, done};
        ball.target = 0;
        const Stopwatch watch;
        _pool.spawn_external(ball);
        done.wait();
        return watch.stop(sizes.hops);
    }

    Run all_to_all(const Sizes &sizes) override {
        const std::uint64_t tasks = std::uint64_t{sizes.in_flight} * _workers;
        const std::uint64_t hops_per_task = std::max<std::uint64_t>(1, sizes.hops / sizes.in_flight);
        Completion done{tasks};
        std::vector<std::unique_ptr<Hopper>> hoppers;
        for (std::uint64_t i = 0; i < tasks; ++i) {
            hoppers.push_back(std::make_unique<Hopper>(hops_per_task, true,
                                                       static_cast<std::uint32_t>(i * 7919 + 17), done));
            hoppers.back()->target = static_cast<std::uint16_t>(i % _workers);
        }
        const Stopwatch watch;
        for (auto &hopper : hoppers) {
            _pool.spawn_external(*hopper);
        }
        done.wait();
        return watch.stop(tasks * hops_per_task);
    }

    Run fib(const Sizes &sizes) override {
        Completion done{1};
        std::uint64_t result = 0;
        auto *root = new Sum(nullptr, 1, &result, &done);
        auto *top = new Fib(sizes.fib_n, root, 0U, 0U, sizes.spread_depth);
        top->target = 0;
        const Stopwatch watch;
        _pool.spawn_external(*top);
        done.wait();
        const Run run = watch.stop(fib_calls(sizes.fib_n));
        if (result != fib_reference(sizes.fib_n)) {
            std::fprintf(stderr, "threads fib(%u) returned %llu, expected %llu\n", sizes.fib_n,
                         static_cast<unsigned long long>(result),
                         static_cast<unsigned long long>(fib_reference(sizes.fib_n)));
            std::exit(3);
        }
        return run;
    }

    std::uint64_t wakeup_sample() override {
        _probe.finished.store(0, std::memory_order_relaxed);
        const std::uint64_t spawned = system::cycles();
        _pool.spawn_external(_probe);
        while (_probe.finished.load(std::memory_order_acquire) == 0) {
            system::pause();
        }
        const std::uint64_t started = _probe.started.load(std::memory_order_relaxed);
        return started > spawned ? started - spawned : 0;
    }

    void touch_all_workers() override {
        Completion done{_workers};
        for (std::uint16_t w = 0; w < _workers; ++w) {
            auto *task = new BusyTask(done);
            task->target = w;
            _pool.spawn_external(*task);
        }
        done.wait();
    }

private:
    Pool _pool;
    std::uint16_t _workers;
    Probe _probe;
};

} // namespace

std::unique_ptr<System> make_threads(std::uint16_t workers, bool pin) {
    return std::make_unique<ThreadsSystem>(workers, pin);
}

} // namespace mx::bench
