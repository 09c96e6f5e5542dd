#pragma once

// Task squads (dissertation ch. 6): tasks that work on the same data collect in a squad instead of
// a worker's pool; when the application publishes the squad, all of its tasks move to one worker
// and run there back to back, so the squad's data stays in that core's caches.

#include <atomic>
#include <cstdint>

#include "mx/system/cpu.h"
#include "mx/tasking/detail/queues.h"
#include "mx/tasking/task.h"
#include "mx/util/assert.h"

namespace mx::tasking {

namespace detail {
class Worker;
class RuntimeCore;
} // namespace detail

/// A squad. Owned by the application (e.g. one per partition); must outlive the tasks spawned
/// into it and may be published many times (once per phase). Not movable: tasks link to it.
///
/// Guarantees: a task annotated with the squad stays queued until the squad is published; a
/// published squad's queued tasks then move to one worker's local FIFO in one block, so they run
/// back to back in the order each producer spawned them. Squads published together are handed
/// out one at a time, largest first (by queued tasks), each to the next worker that has run out
/// of other work: every worker has a feeder task at low priority that takes the next squad, so a
/// slower or busier worker takes fewer squads and no worker idles while squads are left. A
/// single squad published from inside a task runs on that task's worker, ahead of the tasks
/// queued there (the publishing task has just made the squad's data, so it is in that core's
/// cache; the worker's current task buffer still runs first). Tasks spawned into an unpublished
/// squad do not count for Runtime::wait().
class Squad {
public:
    Squad() noexcept = default;
    Squad(const Squad &) = delete;
    Squad &operator=(const Squad &) = delete;

    /// Tasks waiting for the next publish (approximate while producers are active).
    [[nodiscard]] std::uint64_t queued() const noexcept { return _queued.load(std::memory_order_relaxed); }

private:
    friend class detail::Worker;
    friend class detail::RuntimeCore;
    friend class SquadBatch;

    void push(Task &task) noexcept {
        _queued.fetch_add(1, std::memory_order_relaxed);
        _tasks.push(task);
    }

    // Pushed by any producer; popped by the worker that adopts the squad after a publish.
    detail::MpscQueue<Task> _tasks;
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _queued{0};
};

/// Tasks for one squad, collected by one thread and handed to the squad in one step: the same
/// as annotating each task with the squad and spawning it, in add() order, at submit(), but with
/// two atomic operations per batch instead of two per task (a producer that emits one task per
/// full fragment into thousands of squads otherwise pays a locked exchange and a locked add on
/// the squad's lines per task). Owned by the collecting thread; not thread-safe itself.
class SquadBatch {
public:
    SquadBatch() noexcept = default;

    /// The squad submit() hands the tasks to; only while the batch is empty.
    void assign(Squad &squad) noexcept {
        MX_ASSERT(_chain.empty(), "a squad batch changes its squad only while empty");
        _squad = &squad;
    }

    /// Collects a task that nobody has spawned (it is annotated with the batch's squad here).
    void add(Task &task) noexcept {
        MX_ASSERT(_squad != nullptr, "squad batch without a squad");
        task.annotate(_squad);
        _chain.push_back(task);
        ++_count;
    }

    [[nodiscard]] std::uint64_t size() const noexcept { return _count; }

    /// Hands the collected tasks to the squad (they wait there for its next publish); the batch
    /// is empty afterwards. Any thread; batches of several threads may submit concurrently.
    void submit() noexcept {
        if (_count == 0) {
            return;
        }
        _squad->_queued.fetch_add(_count, std::memory_order_relaxed);
        _squad->_tasks.push_all(_chain);
        _count = 0;
    }

private:
    Squad *_squad{nullptr};
    detail::IntrusiveQueue<Task> _chain;
    std::uint64_t _count{0};
};

} // namespace mx::tasking
