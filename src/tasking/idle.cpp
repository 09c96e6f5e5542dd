// Idle workers: spinning, sleeping on a futex and waking up; Runtime::wait() and the wake-ups it
// waits for.

#include "mx/tasking/runtime.h"

#include "futex.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace mx::tasking::detail {

void Worker::idle() noexcept {
    const std::uint64_t start = system::cycles();
    epoch_duties();
    std::uint32_t polls = 0;
    // A trace starting or stopping sends the worker back to its loop, which takes it on.
    while (!_core->stop_requested() && !has_work() && !trace_change_pending()) {
        // Every few polls, look for work to steal: back to run(), which steals it.
        if (_stealing && (++polls & 15U) == 0 && work_to_steal()) {
            break;
        }
        if (system::cycles() - start > _idle_spin_cycles) {
            sleep();
        } else {
            system::pause();
        }
    }
    const std::uint64_t end = system::cycles();
    bump(_shared.idle_cycles, end - start);
#if MX_TRACING
    if (_tracing) [[unlikely]] {
        record(TraceEvent{.start = start, .end = end, .kind = TraceEventKind::idle});
    }
#endif
}

void Worker::sleep() noexcept {
    // Dekker-style handshake with push_remote() and push_domain(): both sides use seq_cst, so
    // either the producer sees sleeping == 1 and wakes us, or we see its task here. Stealable
    // work is only a hint (its owner runs it anyway): spawners wake a sleeper when they see one.
    _shared.sleeping.store(1, std::memory_order_seq_cst);
    _core->count_sleeper(1);
    if (has_work() || _core->stop_requested() || trace_change_pending() || (_stealing && work_to_steal())) {
        _shared.sleeping.store(0, std::memory_order_relaxed);
        _core->count_sleeper(-1);
        return;
    }
    bump(_shared.sleeps);
#if MX_TRACING
    const std::uint64_t start = system::cycles();
#endif
    // Threads in wait() spin a little and then sleep; going to sleep is the moment to tell them.
    _core->notify_idle();
    // Worker 0 also reclaims what outside threads retired: it must not sleep on that either.
    if (_reclamation.retired.empty() && !(_id == 0 && _core->external_retired_pending())) {
        while (_shared.sleeping.load(std::memory_order_acquire) == 1) {
            futex_wait(_shared.sleeping, 1, nullptr);
        }
    } else {
        // Retired objects wait for the epoch to move on: wake up for it even without work.
        const timespec timeout{0, 10'000'000};
        futex_wait(_shared.sleeping, 1, &timeout);
        _shared.sleeping.store(0, std::memory_order_relaxed);
        epoch_duties();
    }
    _core->count_sleeper(-1);
#if MX_TRACING
    if (_tracing) [[unlikely]] {
        record(TraceEvent{.start = start, .end = system::cycles(), .kind = TraceEventKind::sleep});
    }
#endif
}

void Worker::wake() noexcept {
    if (_shared.sleeping.exchange(0, std::memory_order_seq_cst) == 1) {
        futex_wake(_shared.sleeping, 1);
    }
}

void RuntimeCore::notify_idle() noexcept {
    if (_waiters.load(std::memory_order_seq_cst) > 0) {
        _idle_events.fetch_add(1, std::memory_order_seq_cst);
        futex_wake(_idle_events, INT_MAX);
    }
}

void RuntimeCore::wait() noexcept {
    if (current_worker() != nullptr && &current_worker()->core() == this) [[unlikely]] {
        // The calling task is in flight, so the runtime can never be quiescent: a deadlock in
        // every build. Use a TaskGroup continuation instead.
        std::fputs("mxtasking: Runtime::wait() called from a task of the same runtime would never return; "
                   "aborting (wait for tasks from inside a task with a TaskGroup continuation)\n",
                   stderr);
        std::abort();
    }
    const auto done = [this] { return stop_requested() || !running() || quiescent(); };
    // Short phases end soon: spin first (about as long as an idle worker spins), so workers do
    // not have to make a system call on every idle moment just in case somebody waits.
    const std::uint64_t spin_until = system::cycles() + 200'000;
    while (system::cycles() < spin_until) {
        if (done()) {
            return;
        }
        for (int i = 0; i < 64; ++i) {
            system::pause();
        }
    }
    _waiters.fetch_add(1, std::memory_order_seq_cst);
    // Workers wake us when they go to sleep; the timeout covers work that ends while every
    // worker is still spinning.
    const timespec timeout{0, 1'000'000};
    while (true) {
        const std::uint32_t events = _idle_events.load(std::memory_order_seq_cst);
        if (done()) {
            break;
        }
        futex_wait(_idle_events, events, &timeout);
    }
    _waiters.fetch_sub(1, std::memory_order_seq_cst);
}

} // namespace mx::tasking::detail
