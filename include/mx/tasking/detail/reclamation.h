#pragma once

// Epoch-based memory reclamation: each worker's part (Reclamation) and the runtime-wide part
// (GlobalReclamation, held by RuntimeCore). Not API: see docs/design/synchronization.md.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "mx/system/cpu.h"

#include "mx/tasking/task.h"

namespace mx::tasking::detail {

class Worker;

/// Tasks are stamped with the global epoch (mod epoch_buckets) when dispatched; per-bucket
/// spawned/completed counters tell when no task of an epoch is in flight any more.
inline constexpr std::uint32_t epoch_buckets = 4;

struct Retired {
    void *object;
    void (*deleter)(void *) noexcept;
    std::uint64_t epoch;
};

/// One worker's reclamation state. Owner-private: only the worker thread touches it (and the
/// runtime's destructor, after the thread ended).
struct Reclamation {
    Reclamation(bool on, std::uint32_t check_tasks, std::unique_ptr<Task> reclaim_task) noexcept
        : enabled(on), epoch_check_tasks(check_tasks), tasks_until_epoch_check(check_tasks),
          task(std::move(reclaim_task)) {}

    bool enabled;                          // RuntimeConfig::memory_reclamation
    std::uint8_t local_epoch{0};           // global epoch mod buckets, refreshed per buffer
    std::uint32_t epoch_check_tasks;       // tasks between two epoch checks (at least 1)
    std::uint32_t tasks_until_epoch_check; // counts down per task; the check reloads it
    bool pending{false};                   // the reclamation task is queued
    std::vector<Retired> retired;          // in retire order, so oldest epoch first
    std::unique_ptr<Task> task;            // not allocated, so live_tasks() does not count it
};

/// The runtime-wide part: the global epoch, when it last advanced, and the objects that threads
/// outside the workers retired (worker 0 frees them).
struct GlobalReclamation {
    GlobalReclamation(bool on, std::uint64_t interval) noexcept : enabled(on), interval_ns(interval) {}

    const bool enabled;              // RuntimeConfig::memory_reclamation
    const std::uint64_t interval_ns; // how often the epoch may advance
    std::mutex outside_mutex;
    std::vector<Retired> outside_retired; // guarded by outside_mutex
    // Written under outside_mutex, read by worker 0 on its epoch checks and before it sleeps.
    std::atomic<bool> outside_pending{false};
    // Read by every dispatch; written by the one worker per interval that advances it.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> epoch{0};
    // Claimed (CAS) by the worker that checks the epoch in an interval.
    std::atomic<std::uint64_t> last_advance_ns{0};
};

/// The task through which `worker` frees what it retired: pinned to the worker, low priority.
std::unique_ptr<Task> make_reclaim_task(Worker &worker);

} // namespace mx::tasking::detail
