#pragma once

// The task pool: where a worker's tasks wait until it takes them into its prefetch buffer. Not
// API: see docs/design/scheduler.md.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "mx/system/cpu.h"
#include "mx/tasking/annotation.h"
#include "mx/tasking/detail/queues.h"
#include "mx/tasking/detail/steal_deque.h"
#include "mx/tasking/task.h"

namespace mx::tasking::detail {

/// A worker's task pool. Per priority:
/// - a pinned FIFO (owner-private, no atomics) for the tasks of squads the worker adopted;
/// - a work-stealing deque for the tasks the worker spawns for itself: the owner takes them in
///   batches (newest first with LocalOrder::lifo, oldest first with fifo), idle workers steal
///   batches of the oldest (and hand back those annotated with this worker or its region into
///   a queue of their own, which the owner takes first);
/// - one multi-producer FIFO per NUMA region of the producer for tasks sent here by other
///   workers and outside threads. Producers of one region share a queue, so remote pushes
///   contend only within a region and the worker polls regions x priorities queues.
/// Without stealing, every local task goes into the pinned queue (in the configured order).
class TaskPool {
public:
    TaskPool(std::uint16_t regions, bool stealing, bool lifo)
        : _regions(regions), _stealing(stealing), _lifo(lifo), _remote(std::make_unique<Remote[]>(regions)) {}

    /// A task the worker spawned for itself: stealable when stealing is on.
    [[gnu::always_inline]] void push_local(Task &task) noexcept {
        const std::size_t priority = index(task.priority());
        if (_stealing) {
            _deques[priority].push(task);
        } else if (_lifo) {
            _pinned[priority].push_front(task);
        } else {
            _pinned[priority].push_back(task);
        }
    }
    /// A task that must run on this worker, in front of the deque's tasks, after the pinned
    /// tasks queued before it.
    void push_pinned(Task &task) noexcept { _pinned[index(task.priority())].push_back(task); }
    /// Puts each priority's chain in front of that priority's pinned tasks (order kept).
    void prepend_pinned(IntrusiveQueue<Task> (&chains)[priority_count]) noexcept {
        for (std::size_t priority = 0; priority < priority_count; ++priority) {
            _pinned[priority].prepend(chains[priority]);
        }
    }
    /// Any thread: a task a thief took from this worker's deque although it is annotated for
    /// this worker (or its region). It runs before the worker's other local tasks of its
    /// priority: it was among the oldest of the deque, and a producer task that a thief happened
    /// to take must not wait until everything it produced has run.
    void push_returned(Task &task) noexcept { _returned.queues[index(task.priority())].push(task); }
    void push_remote(Task &task, std::uint8_t producer_region) noexcept {
        _remote[producer_region].queues[index(task.priority())].push(task);
    }

    /// Owner only: moves up to `capacity` local tasks of `priority` into `buffer` (handed-back
    /// tasks first, then pinned, then the deque).
    std::uint32_t take_local(std::size_t priority, Task **buffer, std::uint32_t capacity) noexcept {
        std::uint32_t count = 0;
        if (_stealing && !_returned.queues[priority].empty()) [[unlikely]] {
            count = _returned.queues[priority].pop_into(buffer, capacity);
        }
        while (count < capacity) {
            Task *task = _pinned[priority].pop_front();
            if (task == nullptr) {
                break;
            }
            buffer[count++] = task;
        }
        if (_stealing && count < capacity) {
            count += _lifo ? _deques[priority].take_newest(buffer + count, capacity - count)
                           : _deques[priority].take_oldest(buffer + count, capacity - count);
        }
        return count;
    }
    /// Owner only: moves up to `capacity` tasks of `priority` from the remote queues into
    /// `buffer`, starting with `own_region`'s queue.
    std::uint32_t take_remote(std::size_t priority, Task **buffer, std::uint32_t capacity,
                              std::uint8_t own_region) noexcept {
        std::uint32_t count = 0;
        for (std::uint16_t r = 0; r < _regions && count < capacity; ++r) {
            auto &queue = _remote[(std::size_t{own_region} + r) % _regions].queues[priority];
            count += queue.pop_into(buffer + count, capacity - count);
        }
        return count;
    }

    /// Any thread: the stealable tasks of one priority.
    [[nodiscard]] StealDeque &deque(std::size_t priority) noexcept { return _deques[priority]; }
    /// Any thread: whether any deque holds tasks (a snapshot).
    [[nodiscard]] bool has_stealable() const noexcept {
        for (const auto &deque : _deques) {
            if (!deque.empty()) {
                return true;
            }
        }
        return false;
    }

    /// Owner only (or after the owner stopped). Remote queues in the middle of a push count as
    /// non-empty.
    [[nodiscard]] bool empty() const noexcept {
        for (std::size_t priority = 0; priority < priority_count; ++priority) {
            if (!_pinned[priority].empty() || !_deques[priority].empty() ||
                !_returned.queues[priority].empty()) {
                return false;
            }
            for (std::uint16_t r = 0; r < _regions; ++r) {
                if (!_remote[r].queues[priority].empty()) {
                    return false;
                }
            }
        }
        return true;
    }

private:
    static std::size_t index(Priority priority) noexcept { return static_cast<std::size_t>(priority); }

    struct alignas(system::cache_line_size) Remote {
        MpscQueue<Task> queues[priority_count];
    };
    std::uint16_t _regions;
    bool _stealing;
    bool _lifo;
    IntrusiveQueue<Task> _pinned[priority_count]; // owner-private
    StealDeque _deques[priority_count];           // owner pushes and takes, thieves steal
    std::unique_ptr<Remote[]> _remote;            // pushed by anyone, popped by the owner
    Remote _returned;                             // pushed by thieves, popped by the owner
};

} // namespace mx::tasking::detail
