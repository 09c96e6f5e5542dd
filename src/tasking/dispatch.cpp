// Dispatch: where a spawned task with routing annotations goes, and how a worker fills its task
// buffer from its task pool (TaskPool), the synchronization domains it owns and its remote queues.

#include "mx/tasking/runtime.h"

namespace mx::tasking::detail {

std::uint32_t Worker::fill(Task **buffer, std::uint32_t capacity) noexcept {
    for (std::size_t priority = 0; priority < priority_count; ++priority) {
        std::uint32_t count = _pool.take_local(priority, buffer, capacity);
        if (count < capacity && !_domains.empty()) {
            count += take_domains(priority, buffer + count, capacity - count);
        }
        if (count < capacity) {
            count += _pool.take_remote(priority, buffer + count, capacity - count, _region);
        }
        if (count > 0) {
            return count;
        }
    }
    return 0;
}

bool Worker::has_work() const noexcept {
    if (!_pool.empty()) {
        return true;
    }
    for (const std::uint32_t id : _domains) {
        if (!_core->domain(id).looks_empty()) {
            return true;
        }
    }
    return false;
}

void Worker::spawn_routed(Task &task) noexcept {
    if (Squad *squad = task.squad(); squad != nullptr) {
        squad->push(task); // counted when the squad is published
        return;
    }
    if (routed_to_owner(task)) {
        // Through the domain's queue even when this worker holds the domain: the task may only
        // run after the tasks queued before it.
        count_spawn(task);
        _core->push_domain(task, domain_of(task.resource()));
        return;
    }
    count_spawn(task);
    if (task.target_worker() == any_worker && task.target_region() == any_region) {
        push_local(task);
        return;
    }
    const std::uint16_t target =
        _core->target_of(task, task.target_worker() == any_worker ? _region_round_robin++ : 0);
    if (target == _id) {
        // Into the deque like the worker's other tasks, so it keeps its place among them: a thief
        // that takes it hands it back (see steal_tasks_from).
        push_local(task);
    } else {
        bump(_shared.spawned_remote);
        _core->worker(target).push_remote(task, _region);
    }
}

} // namespace mx::tasking::detail
