// Work stealing: an idle worker takes tasks from other workers' deques, or takes over a
// synchronization domain whose tasks wait; spawners wake a sleeping worker to steal.

#include "mx/tasking/runtime.h"

#include <algorithm>
#include <array>

namespace mx::tasking::detail {

namespace {

/// Xorshift: cheap, and good enough to spread thieves over victims.
std::uint32_t next_random(std::uint32_t &state) noexcept {
    state ^= state << 13U;
    state ^= state >> 17U;
    state ^= state << 5U;
    return state;
}

} // namespace

std::uint32_t Worker::steal() noexcept {
    const std::uint16_t workers = _core->worker_count();
    if (workers == 1) {
        return 0;
    }
    // Own region first (its caches and memory are closer), then the others, each from a random
    // worker on, so thieves spread over victims.
    const std::uint32_t start = next_random(_steal_state);
#if MX_TRACING
    const std::uint64_t began = _tracing ? system::cycles() : 0;
#endif
    const std::uint16_t regions = _core->region_count();
    for (std::uint16_t r = 0; r < regions; ++r) {
        const auto &region = _core->workers_of_region(static_cast<std::uint8_t>((_region + r) % regions));
        for (std::size_t i = 0; i < region.size(); ++i) {
            Worker &victim = _core->worker(region[(start + i) % region.size()]);
            if (&victim == this) {
                continue;
            }
            if (const std::uint32_t count = steal_tasks_from(victim); count > 0) {
#if MX_TRACING
                if (_tracing) [[unlikely]] {
                    record(TraceEvent{.start = began,
                                      .end = system::cycles(),
                                      .count = count,
                                      .other = victim.id(),
                                      .kind = TraceEventKind::steal_tasks});
                    _trace.stolen_until = count;
                }
#endif
                return count;
            }
        }
    }
    if (steal_domain()) {
        const std::uint32_t count = fill();
#if MX_TRACING
        if (_tracing) [[unlikely]] {
            _trace.stolen_until = count;
        }
#endif
        return count;
    }
    return 0;
}

std::uint32_t Worker::steal_tasks_from(Worker &victim) noexcept {
    // High first (urgent work waits behind a busy victim), then low before normal: low-priority
    // tasks are the victim's producers (feeders, spawners that yield), and a thief that takes a
    // producer makes its own stream of work, where half of the victim's small normal tasks are
    // gone after a few steals while the victim still pays for making all of them.
    static constexpr std::array<std::size_t, priority_count> steal_order{
        static_cast<std::size_t>(Priority::high), static_cast<std::size_t>(Priority::low),
        static_cast<std::size_t>(Priority::normal)};
    for (const std::size_t priority : steal_order) {
        StealDeque &deque = victim.pool().deque(priority);
        if (deque.empty()) {
            continue;
        }
        // Half of what waits there (at most half a buffer), in one CAS: fewer trips for a long
        // queue, and the victim keeps work of its own.
        Task **tasks = _buffer.tasks.data();
        const auto wanted = static_cast<std::uint32_t>(std::max<std::size_t>(1, _buffer.capacity() / 2));
        const std::uint32_t taken = deque.steal(tasks, wanted);
        std::uint32_t count = 0;
        for (std::uint32_t i = 0; i < taken; ++i) {
            Task *task = tasks[i];
            if ((task->target_worker() != any_worker && task->target_worker() != _id) ||
                (task->target_region() != any_region && task->target_region() != _region)) [[unlikely]] {
                // Annotated for the victim (or its region): handed back, to run there next.
                victim.push_returned(*task);
                continue;
            }
            tasks[count++] = task;
        }
        if (count > 0) {
            bump(_shared.stolen_tasks, count);
            return count;
        }
    }
    return 0;
}

bool Worker::steal_domain() noexcept {
    const std::uint32_t domains = _core->domain_count();
    for (std::uint32_t i = 0; i < domains; ++i) {
        const std::uint32_t id = (_steal_cursor + i) % domains;
        SyncDomain &domain = _core->domain(id);
        if (!domain.stealable_by(_id) || !domain.try_hold(_id)) {
            continue;
        }
        // Holding the domain, nobody drains it: its queue and routing change hands together. The
        // owner was another worker (only a holder writes it); this worker may still list the
        // domain from an earlier time it owned it.
        domain.owner.store(_id, std::memory_order_seq_cst);
        if (std::find(_domains.begin(), _domains.end(), id) == _domains.end()) {
            _domains.push_back(id);
        }
        bump(_shared.stolen_domains);
        domain.release();
#if MX_TRACING
        if (_tracing) [[unlikely]] {
            const std::uint64_t now = system::cycles();
            record(TraceEvent{.start = now,
                              .end = now,
                              .other = static_cast<std::uint16_t>(id),
                              .kind = TraceEventKind::steal_domain});
        }
#endif
        _steal_cursor = id + 1;
        return true;
    }
    return false;
}

bool Worker::work_to_steal() const noexcept {
    for (std::uint16_t w = 0; w < _core->worker_count(); ++w) {
        if (w != _id && _core->worker(w).pool().has_stealable()) {
            return true;
        }
    }
    for (std::uint32_t id = 0; id < _core->domain_count(); ++id) {
        if (_core->domain(id).stealable_by(_id)) {
            return true;
        }
    }
    return false;
}

void RuntimeCore::wake_thief(const Worker *self) noexcept {
    for (const auto &worker : _workers) {
        if (worker.get() != self && worker->sleeping()) {
            worker->wake();
            return;
        }
    }
}

} // namespace mx::tasking::detail
