// Dispatch: where a spawned task with routing annotations goes, and how a worker fills its task
// buffer from its task pool (TaskPool), the synchronization domains it owns and its remote queues.

#include "mx/tasking/runtime.h"

namespace mx::tasking::detail {

std::uint32_t Worker::fill() noexcept {
    Task **buffer = _buffer.tasks.data();
    const auto capacity = static_cast<std::uint32_t>(_buffer.capacity());
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

void Worker::put_back_buffer() noexcept {
    // In reverse, each to the front: the tasks keep their order for the next start().
    IntrusiveQueue<Task> chains[priority_count];
    for (std::uint32_t i = _buffer.position; i < _buffer.size; ++i) {
        chains[static_cast<std::size_t>(_buffer.tasks[i]->priority())].push_back(*_buffer.tasks[i]);
    }
    _pool.prepend_pinned(chains);
    _buffer.size = _buffer.position = 0;
    release_domains();
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
    std::uint16_t target = task.target_worker();
    if (target == any_worker) {
        if (task.target_region() == any_region) {
            count_spawn(task);
            push_local(task);
            return;
        }
        // Out-of-range regions and workers are taken modulo the count (documented on Annotation).
        const auto &workers =
            _core->workers_of_region(static_cast<std::uint8_t>(task.target_region() % _core->region_count()));
        target = workers[_region_round_robin++ % workers.size()];
    } else if (target >= _core->worker_count()) [[unlikely]] {
        target = static_cast<std::uint16_t>(target % _core->worker_count());
    }
    count_spawn(task);
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
