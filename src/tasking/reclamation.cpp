// Epoch-based memory reclamation: retired objects are freed once no task stamped with an epoch up
// to theirs is in flight.

#include "mx/tasking/runtime.h"

#include <chrono>
#include <mutex>

namespace mx::tasking::detail {

/// A worker's reclamation task: owned by the worker (not allocated per pass, so live_tasks()
/// stays 0 after wait()), pinned to it and low priority, spawned again when objects wait.
class ReclaimTask final : public Task {
public:
    explicit ReclaimTask(Worker &worker) noexcept
        : Task(Annotation{.target_worker = worker.id(), .priority = Priority::low}), _worker(&worker) {}
    TaskResult execute(TaskContext &) noexcept override {
        _worker->reclaim_now();
        return TaskResult::done();
    }

private:
    Worker *_worker;
};

std::unique_ptr<Task> make_reclaim_task(Worker &worker) { return std::make_unique<ReclaimTask>(worker); }

void Worker::retire(void *object, void (*deleter)(void *) noexcept) noexcept {
    bump(_shared.retired);
    if (!_reclamation.enabled) {
        deleter(object);
        bump(_shared.reclaimed);
        return;
    }
    _reclamation.retired.push_back(Retired{object, deleter, _core->global_epoch()});
}

void Worker::epoch_duties() noexcept {
    _reclamation.tasks_until_epoch_check = _reclamation.epoch_check_tasks;
    if (!_reclamation.enabled) {
        return;
    }
    _core->try_advance_epoch();
    if (!_reclamation.pending && !_reclamation.retired.empty() &&
        _reclamation.retired.front().epoch < _core->global_epoch()) {
        // Reclamation runs as a (low-priority) task of this worker.
        _reclamation.pending = true;
        spawn(*_reclamation.task);
    }
    if (_id == 0) {
        _core->reclaim_external();
    }
}

void Worker::reclaim_now() noexcept {
    _reclamation.pending = false;
    const std::uint64_t below = _core->reclaimable_below();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < _reclamation.retired.size(); ++i) {
        const Retired &entry = _reclamation.retired[i];
        if (entry.epoch < below) {
            entry.deleter(entry.object);
            bump(_shared.reclaimed);
        } else {
            _reclamation.retired[kept++] = entry;
        }
    }
    _reclamation.retired.resize(kept);
}

void Worker::reclaim_all() noexcept {
    for (const Retired &entry : _reclamation.retired) {
        entry.deleter(entry.object);
        bump(_shared.reclaimed);
    }
    _reclamation.retired.clear();
}

bool RuntimeCore::drained(std::uint32_t buckets) const noexcept {
    // Completed counts first, then spawned: a task whose completion we count had its spawn
    // counted before (release/acquire through the queue and the counters), so per bucket
    // completed <= spawned, and equal sums mean no task of these buckets was queued or running
    // at the moment between the two passes.
    std::uint64_t completed = 0;
    std::uint64_t spawned = 0;
    for (const auto &worker : _workers) {
        for (std::uint32_t b = 0; b < epoch_buckets; ++b) {
            if ((buckets >> b & 1U) != 0) {
                completed += worker->completed(b);
            }
        }
    }
    for (std::uint32_t b = 0; b < epoch_buckets; ++b) {
        if ((buckets >> b & 1U) != 0) {
            spawned += _external_spawned[b].load(std::memory_order_acquire);
            for (const auto &worker : _workers) {
                spawned += worker->spawned(b);
            }
        }
    }
    return completed == spawned;
}

std::uint64_t RuntimeCore::reclaimable_below() const noexcept {
    // Tasks in flight carry stamps in [global - 3, global]. Walk up from the oldest: an object
    // retired in epoch g is safe when g < global and the buckets of [global - 3, g] are empty.
    const std::uint64_t global = global_epoch();
    const std::uint64_t oldest = global >= epoch_buckets - 1 ? global - (epoch_buckets - 1) : 0;
    std::uint32_t buckets = 0;
    std::uint64_t below = oldest;
    for (std::uint64_t epoch = oldest; epoch < global; ++epoch) {
        buckets |= 1U << (epoch % epoch_buckets);
        if (!drained(buckets)) {
            break;
        }
        below = epoch + 1;
    }
    return below;
}

void RuntimeCore::try_advance_epoch() noexcept {
    const auto now = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    std::chrono::steady_clock::now().time_since_epoch())
                                                    .count());
    std::uint64_t last = _epochs.last_advance_ns.load(std::memory_order_relaxed);
    if (now - last < _epochs.interval_ns) {
        return;
    }
    // Only one worker does the check per interval.
    if (!_epochs.last_advance_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
        return;
    }
    const std::uint64_t epoch = _epochs.epoch.load(std::memory_order_acquire);
    // The next epoch reuses the bucket of epoch - 3: it must be empty first.
    if (drained(1U << ((epoch + 1) % epoch_buckets))) {
        _epochs.epoch.store(epoch + 1, std::memory_order_seq_cst);
    }
}

void RuntimeCore::retire(void *object, void (*deleter)(void *) noexcept) noexcept {
    if (!_epochs.enabled) {
        deleter(object);
        return;
    }
    {
        std::lock_guard lock{_epochs.outside_mutex};
        _epochs.outside_retired.push_back(Retired{object, deleter, global_epoch()});
        _epochs.outside_pending.store(true, std::memory_order_seq_cst);
    }
    // Worker 0 reclaims what outside threads retired; it may be asleep without a timeout.
    _workers[0]->wake();
}

void RuntimeCore::reclaim_external() noexcept {
    // Worker 0 comes here on every epoch check: without anything retired from outside, which is
    // the rule, it must not take the mutex (~1 % of a B-link tree run's samples when it did).
    // A retire() racing with this load is seen at the next check.
    if (!_epochs.outside_pending.load(std::memory_order_acquire)) {
        return;
    }
    std::vector<Retired> ready;
    {
        std::lock_guard lock{_epochs.outside_mutex};
        if (_epochs.outside_retired.empty()) {
            return;
        }
        const std::uint64_t below = reclaimable_below();
        std::size_t kept = 0;
        for (const Retired &entry : _epochs.outside_retired) {
            if (entry.epoch < below) {
                ready.push_back(entry);
            } else {
                _epochs.outside_retired[kept++] = entry;
            }
        }
        _epochs.outside_retired.resize(kept);
        _epochs.outside_pending.store(kept != 0, std::memory_order_relaxed);
    }
    for (const Retired &entry : ready) {
        entry.deleter(entry.object);
    }
}

} // namespace mx::tasking::detail
