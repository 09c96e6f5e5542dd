#pragma once

// Epoch-based memory reclamation, the worker's part. Not API: see docs/design/synchronization.md.
// The global epoch and objects retired from outside the workers are in RuntimeCore.

#include <cstdint>
#include <memory>
#include <vector>

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
        : enabled(on), epoch_check_tasks(check_tasks), task(std::move(reclaim_task)) {}

    bool enabled;                    // RuntimeConfig::memory_reclamation
    std::uint8_t local_epoch{0};     // global epoch mod buckets, refreshed per buffer
    std::uint32_t epoch_check_tasks; // tasks between two epoch checks (at least 1)
    std::uint32_t tasks_since_epoch_check{0};
    bool pending{false};          // the reclamation task is queued
    std::vector<Retired> retired; // in retire order, so oldest epoch first
    std::unique_ptr<Task> task;   // not allocated, so live_tasks() does not count it
};

/// The task through which `worker` frees what it retired: pinned to the worker, low priority.
std::unique_ptr<Task> make_reclaim_task(Worker &worker);

} // namespace mx::tasking::detail
