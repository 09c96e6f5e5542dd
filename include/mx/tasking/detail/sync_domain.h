#pragma once

// Synchronization domains: the queues of resources serialized by scheduling. Not API: see
// docs/design/scheduler.md and synchronization.md.

#include <atomic>
#include <cstdint>

#include "mx/system/cpu.h"
#include "mx/tasking/annotation.h"
#include "mx/tasking/detail/queues.h"
#include "mx/tasking/task.h"

namespace mx::tasking::detail {

/// A synchronization domain (mxkernel paper, section 5): the task queue of the resources that
/// map to it and are serialized by scheduling (or have scheduled writers). Exactly one worker
/// drains it at a time, the holder, and it holds the domain until the tasks it took have run,
/// so tasks of one resource never overlap and leave each producer's queue in order. The domain
/// belongs to one worker, its owner, until an idle worker steals it: queue and routing move in
/// one step, because producers push into the domain, not into a worker.
struct alignas(system::cache_line_size) SyncDomain {
    // Pushed by any thread, popped by the holder only.
    MpscQueue<Task> queues[priority_count];
    // 0 when nobody drains the domain, else the draining worker's id + 1. Taken (CAS) by the
    // owner for the tasks of one buffer and by a thief for the moment it takes the domain over.
    alignas(system::cache_line_size) std::atomic<std::uint32_t> holder{0};
    // The worker that drains the domain and that producers wake. Written by a thief while it
    // holds the domain; read by producers and by the owner.
    std::atomic<std::uint16_t> owner{0};
    // Tasks taken from the queues so far: written by the holder, read by balancing workers.
    std::atomic<std::uint64_t> drained{0};
    // Accumulated access weight of the resources mapped here (guarded by the mapping mutex).
    std::uint64_t weight{0};

    /// Makes `worker` the holder if nobody holds the domain.
    bool try_hold(std::uint16_t worker) noexcept {
        std::uint32_t free = 0;
        return holder.compare_exchange_strong(free, std::uint32_t{worker} + 1U, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }
    /// The holder lets go. Release: the next holder sees what the tasks did to the resources.
    void release() noexcept { holder.store(0, std::memory_order_release); }
    /// Whether `worker` holds the domain (only the holder can see its own id there, so a relaxed
    /// load is exact for that question).
    [[nodiscard]] bool held_by(std::uint16_t worker) const noexcept {
        return holder.load(std::memory_order_relaxed) == std::uint32_t{worker} + 1U;
    }
    /// Any thread's view: whether `thief` could take the domain over: another worker owns it,
    /// tasks wait in it and nobody drains it.
    [[nodiscard]] bool stealable_by(std::uint16_t thief) const noexcept {
        return owner.load(std::memory_order_relaxed) != thief &&
               holder.load(std::memory_order_relaxed) == 0 && !looks_empty();
    }

    /// Any thread: whether no task is queued (a snapshot).
    [[nodiscard]] bool looks_empty() const noexcept {
        for (const auto &queue : queues) {
            if (!queue.looks_empty()) {
                return false;
            }
        }
        return true;
    }
};

} // namespace mx::tasking::detail
