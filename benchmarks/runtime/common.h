#pragma once

// Shared pieces of the runtime benchmark driver: the interface every system under test (mxtasking,
// oneTBB, std::thread pool) implements, sizes, timing with the time-stamp counter, completion
// signalling and statistics.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <mx/system/cpu.h>

namespace mx::bench {

/// Problem sizes; one struct for all benchmarks so the CLI can fill it in one place.
struct Sizes {
    std::uint64_t tasks{1'000'000};   // spawn_local: empty tasks per worker
    std::uint32_t chunk{256};         // spawn_local: tasks spawned per round of a root task
    std::uint64_t hops{200'000};      // ping_pong: hops in total; all_to_all: hops per worker
    std::uint32_t in_flight{64};      // all_to_all: tasks in flight per worker
    std::uint32_t fib_n{27};          // fib: argument
    std::uint32_t spread_depth{6};    // fib: levels of the tree that are spread over workers
    std::uint32_t samples{200};       // wakeup: latency samples per state
    std::uint32_t sleep_gap_us{3000}; // wakeup: idle time before a "sleeping" sample
    std::uint32_t spin_gap_us{2};     // wakeup: idle time before a "spinning" sample
    double idle_seconds{0.5};         // idle_cpu: length of one measurement window
};

/// One timed run: how many tasks ran and how long it took.
struct Run {
    std::uint64_t tasks{0};
    std::uint64_t cycles{0}; // time-stamp counter ticks, wall time
    double seconds{0.0};     // the same interval from steady_clock
};

/// Start/stop of one run on both clocks.
class Stopwatch {
public:
    Stopwatch() noexcept : _start_time(std::chrono::steady_clock::now()), _start_cycles(system::cycles()) {}
    [[nodiscard]] Run stop(std::uint64_t tasks) const noexcept {
        const std::uint64_t end_cycles = system::cycles();
        const auto end_time = std::chrono::steady_clock::now();
        return Run{tasks, end_cycles - _start_cycles,
                   std::chrono::duration<double>(end_time - _start_time).count()};
    }

private:
    std::chrono::steady_clock::time_point _start_time;
    std::uint64_t _start_cycles;
};

/// Counts down arrivals; the last one wakes the thread blocked in wait(). Used by every variant
/// so that the end of a run is detected the same way everywhere.
class Completion {
public:
    explicit Completion(std::uint64_t count) noexcept : _remaining(count) {}
    void arrive() noexcept {
        if (_remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            _done.store(1, std::memory_order_release);
            _done.notify_all();
            // The waiter may destroy this object once it sees _released, not before: notify_all
            // above still touches it.
            _released.store(1, std::memory_order_release);
        }
    }
    void wait() const noexcept {
        while (_done.load(std::memory_order_acquire) == 0) {
            _done.wait(0, std::memory_order_acquire);
        }
        while (_released.load(std::memory_order_acquire) == 0) {
            system::pause();
        }
    }

private:
    // Decremented by tasks on any worker; read by the last one.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _remaining;
    // Set once by the last arriving task, read by the waiting thread.
    alignas(system::cache_line_size) std::atomic<std::uint32_t> _done{0};
    std::atomic<std::uint32_t> _released{0};
};

/// A system under test with a fixed number of workers. Threads are started by the factory and
/// stay alive (idle) between runs so that A/B runs can be interleaved.
class System {
public:
    virtual ~System() = default;
    [[nodiscard]] virtual std::string name() const = 0;
    [[nodiscard]] virtual bool supports(const std::string &benchmark) const = 0;
    virtual Run spawn_local(const Sizes &sizes) = 0;
    virtual Run ping_pong(const Sizes &sizes) = 0;
    virtual Run all_to_all(const Sizes &sizes) = 0;
    virtual Run fib(const Sizes &sizes) = 0;
    /// One sample: spawns a task from this (non-worker) thread to worker 0, waits until it ran
    /// and returns the ticks from just before the spawn to the first instruction of the task.
    virtual std::uint64_t wakeup_sample() = 0;
    /// Sleep counter of the runtime (mx only), to tell whether a worker really slept.
    [[nodiscard]] virtual std::uint64_t sleeps() const { return 0; }
    [[nodiscard]] virtual bool counts_sleeps() const { return false; }
    /// Runs a task that keeps its worker busy for about a millisecond on every worker and returns
    /// once all are done (what an idle window starts after).
    virtual void touch_all_workers() = 0;
    /// Starts recording a task timeline (mx variants only): "" or why not.
    virtual std::string start_trace(std::uint32_t events_per_worker, bool queue_times) {
        static_cast<void>(events_per_worker);
        static_cast<void>(queue_times);
        return name() + " records no traces";
    }
    /// Stops recording; writes the trace to `path` unless it is empty and, with `profile`, puts
    /// the per-task-type table into `report`. Returns "" or the error.
    virtual std::string stop_trace(const std::string &path, bool profile, std::string &report) {
        static_cast<void>(path);
        static_cast<void>(profile);
        static_cast<void>(report);
        return {};
    }
};

/// How an mxtasking variant sets up the runtime and places its tasks.
enum class MxMode : std::uint8_t {
    fifo,    // mx: local_order = fifo, pinning from the CLI, roots and fib's top levels placed
    lifo,    // mx_lifo: the same with local_order = lifo (depth-first; for fork/join)
    defaults // mx_default: RuntimeConfig{} with only the worker count set; nothing placed
};
/// `work_stealing` is RuntimeConfig::work_stealing (--no-steal turns it off for every mode).
std::unique_ptr<System> make_mxtasking(std::uint16_t workers, MxMode mode, bool pin, bool work_stealing);
std::unique_ptr<System> make_tbb_task_group(std::uint16_t workers);
std::unique_ptr<System> make_tbb_enqueue(std::uint16_t workers);
std::unique_ptr<System> make_threads(std::uint16_t workers, bool pin);

/// fib(n) computed serially: the reference every parallel variant must reproduce.
constexpr std::uint64_t fib_reference(std::uint32_t n) noexcept {
    std::uint64_t a = 0;
    std::uint64_t b = 1;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t next = a + b;
        a = b;
        b = next;
    }
    return a;
}

/// Calls of the naive recursion for fib(n): 2 * fib(n + 1) - 1. Every fib variant reports this
/// as its task count, so tasks per second are comparable although the shapes differ.
constexpr std::uint64_t fib_calls(std::uint32_t n) noexcept { return 2 * fib_reference(n + 1) - 1; }

/// Small deterministic generator for targets in all_to_all.
inline std::uint32_t xorshift(std::uint32_t &state) noexcept {
    state ^= state << 13U;
    state ^= state >> 17U;
    state ^= state << 5U;
    return state;
}

/// Idle time between runs of different variants, so spinning threads of the previous variant
/// have gone to sleep before the next one is timed.
void settle() noexcept;

/// Busy-waits for about `micros` microseconds (on the time-stamp counter).
void spin_for_micros(double micros) noexcept;

/// Ticks of the time-stamp counter per second, calibrated once against steady_clock.
double tsc_hz() noexcept;

} // namespace mx::bench
