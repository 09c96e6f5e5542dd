#pragma once

// Binary search on the mxtasking runtime (one worker), two ways:
// - coroutine tasks: the coroutine lookup of coroutine_search.h as a CoroutineTask; the worker's
//   group of G parked tasks interleaves them (compare: stand-alone coroutines, same G);
// - annotated tasks: one plain task per lookup that does one probe per run, annotates the next
//   probe's address as its prefetch hint and returns itself as successor; the worker prefetches
//   the hint of the task d positions ahead in its buffer (compare: the same with prefetching off).
// Lookups are issued from inside the runtime in batches by a low-priority launcher task, so
// spawning from outside is not measured; the worker records when the last lookup finished and
// then wakes the sleeping caller.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "coroutine_search.h"
#include "keys.h"
#include "mx/tasking/coroutine_task.h"
#include "mx/tasking/runtime.h"

namespace mx::bench::bsearch {

/// Completion of a batch of lookups on the one-worker runtime. The count lives on the worker's
/// side only (written by the lookups, all on that worker), and the caller polls a flag on its own
/// line that flips once: a shared counter that the caller reads while the worker decrements it
/// costs a cross-core miss on every few lookups, which the stand-alone loop does not pay.
struct LookupDone {
    /// Written and read only by the worker running the lookups (set by the caller before spawn).
    alignas(system::cache_line_size) std::size_t remaining{0};
    /// Written once by the worker (last lookup), read by the caller once `finished` is set.
    alignas(system::cache_line_size) std::chrono::steady_clock::time_point finished_at{};
    /// Written once by the worker (last lookup), read by the waiting caller.
    std::atomic<bool> finished{false};

    void lookup_done() noexcept {
        if (--remaining == 0) {
            finished_at = std::chrono::steady_clock::now();
            finished.store(true, std::memory_order_release);
            finished.notify_one();
        }
    }
};

template <class Key>
class CoroutineLookup final : public tasking::CoroutineTask {
public:
    CoroutineLookup(std::span<const Key> table, Key key, std::size_t *out, LookupDone *done) noexcept
        : _table(table), _key(key), _out(out), _done(done) {}

protected:
    coro::Coroutine<> body(tasking::TaskContext &) noexcept override {
        const std::span<const Key> table = _table;
        const Key key = _key;
        std::size_t low = 0;
        std::size_t size = table.size();
        while (size > 1) {
            const std::size_t half = size / 2;
            const std::size_t probe = low + half;
            low =
                select_probe(key_less(co_await coro::load<coro::Interleaved>(table[probe]), key), probe, low);
            size -= half;
        }
        if (size == 1 && key_less(table[low], key)) {
            ++low;
        }
        *_out = low;
        _done->lookup_done();
    }

private:
    std::span<const Key> _table;
    Key _key;
    std::size_t *_out;
    LookupDone *_done;
};

template <class Key>
class AnnotatedLookup final : public tasking::Task {
public:
    AnnotatedLookup(std::span<const Key> table, Key key, std::size_t *out, LookupDone *done) noexcept
        : _table(table), _key(key), _size(table.size()), _out(out), _done(done) {
        annotate_next();
    }

    tasking::TaskResult execute(tasking::TaskContext &) noexcept override {
        if (_size > 1) {
            const std::size_t half = _size / 2;
            const std::size_t probe = _low + half;
            _low = select_probe(key_less(_table[probe], _key), probe, _low);
            _size -= half;
            if (_size > 1) {
                annotate_next();
                return tasking::TaskResult::successor(this);
            }
        }
        if (_size == 1 && key_less(_table[_low], _key)) {
            ++_low;
        }
        *_out = _low;
        _done->lookup_done();
        return tasking::TaskResult::remove();
    }

private:
    void annotate_next() noexcept {
        if (_size > 1) {
            annotate(tasking::PrefetchHint::bytes(&_table[_low + _size / 2], sizeof(Key)));
        }
    }
    std::span<const Key> _table;
    Key _key;
    std::size_t _low{0};
    std::size_t _size;
    std::size_t *_out;
    LookupDone *_done;
};

/// Spawns `batch` lookups per run, then itself again at low priority (so it runs once the
/// lookups in flight left the pool).
template <class Lookup, class Key>
class Launcher final : public tasking::Task {
public:
    Launcher(std::span<const Key> table, std::span<const Key> keys, std::span<std::size_t> out,
             LookupDone &done, std::size_t batch) noexcept
        : tasking::Task(tasking::Annotation{.priority = tasking::Priority::low}), _table(table), _keys(keys),
          _out(out), _done(&done), _batch(batch) {}

    tasking::TaskResult execute(tasking::TaskContext &context) noexcept override {
        const std::size_t end = std::min(_next + _batch, _keys.size());
        for (; _next < end; ++_next) {
            context.spawn(*context.new_task<Lookup>(_table, _keys[_next], &_out[_next], _done));
        }
        return _next < _keys.size() ? tasking::TaskResult::successor(this) : tasking::TaskResult::remove();
    }

private:
    std::span<const Key> _table;
    std::span<const Key> _keys;
    std::span<std::size_t> _out;
    LookupDone *_done;
    std::size_t _batch;
    std::size_t _next{0};
};

/// One-worker runtime configured for a variant; kept across repetitions (start-up not timed).
inline std::shared_ptr<tasking::Runtime> make_search_runtime(std::uint16_t group,
                                                             std::uint32_t prefetch_distance, bool dynamic) {
    tasking::RuntimeConfig config;
    config.workers = 1;
    config.coroutine_group_size = group;
    config.prefetch_distance = prefetch_distance;
    config.dynamic_prefetch = dynamic;
    config.task_buffer_size = 64;
    return std::make_shared<tasking::Runtime>(config);
}

/// An idle worker spins for RuntimeConfig::idle_spin_cycles, then sleeps in the kernel; waking
/// a sleeping vCPU took 50-150 us per run on the test VM, a constant that the stand-alone loops
/// (no second thread) do not pay. Called untimed right before a run: the worker is then still
/// spinning when the run's launcher arrives.
inline void wake_worker(tasking::Runtime &runtime) {
    runtime.spawn([]() noexcept {});
    runtime.wait();
}

/// Runs the lookups; returns the worker's clock reading when the last one finished (the caller
/// sleeps meanwhile and wakes up later than that).
template <class Lookup, class Key>
std::chrono::steady_clock::time_point search_on_runtime(tasking::Runtime &runtime, std::span<const Key> table,
                                                        std::span<const Key> keys, std::span<std::size_t> out,
                                                        std::size_t batch) {
    LookupDone done;
    if (keys.empty()) {
        return std::chrono::steady_clock::now();
    }
    MX_ASSERT(runtime.worker_count() == 1, "LookupDone counts on one worker");
    done.remaining = keys.size(); // published to the worker by the spawn below
    runtime.spawn(*runtime.new_task<Launcher<Lookup, Key>>(table, keys, out, done, batch));
    // Sleep instead of spinning: the stand-alone variants have no second thread, and a spinning
    // one can take execution resources from the worker (the two vCPUs may share a core).
    while (!done.finished.load(std::memory_order_acquire)) {
        done.finished.wait(false, std::memory_order_acquire);
    }
    runtime.wait(); // the launcher's last run; returns at once
    return done.finished_at;
}

} // namespace mx::bench::bsearch
