// Work stealing: an idle worker takes tasks from other workers' deques, or takes over a
// synchronization domain whose tasks wait; spawners wake a sleeping worker to steal. Domain
// balancing: a worker that drains clearly less than the others takes over a busy owner's domain.

#include "mx/tasking/runtime.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>

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
        take_over_domain(id);
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

void Worker::take_over_domain(std::uint32_t id) noexcept {
    // Holding the domain, nobody drains it: its queue and routing change hands together. The
    // owner was another worker (only a holder writes it); this worker may still list the
    // domain from an earlier time it owned it.
    _core->domain(id).owner.store(_id, std::memory_order_seq_cst);
    if (std::find(_domains.begin(), _domains.end(), id) == _domains.end()) {
        _domains.push_back(id);
    }
}

void Worker::balance_domains() noexcept {
    const std::uint16_t workers = _core->worker_count();
    const std::uint32_t domains = _core->domain_count();
    const auto now = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    std::chrono::steady_clock::now().time_since_epoch())
                                                    .count());
    if (workers < 2 || now < _next_balance) {
        return;
    }
    const bool first_look = _next_balance == 0;
    _next_balance = now + _balance_ns;
    _drained_seen.resize(domains, 0);
    _domain_load.resize(domains);
    _owner_load.assign(workers, 0);
    // Each domain's load is the tasks drained from it since this worker's last look, counted
    // for its current owner. The snapshot is this worker's own: every worker judges the same
    // kind of interval, and no shared state is written to measure.
    std::uint64_t total = 0;
    for (std::uint32_t d = 0; d < domains; ++d) {
        const std::uint64_t drained = _core->domain(d).drained.load(std::memory_order_relaxed);
        const std::uint64_t load = drained - _drained_seen[d];
        _drained_seen[d] = drained;
        _domain_load[d] = load;
        _owner_load[_core->domain(d).owner.load(std::memory_order_relaxed)] += load;
        total += load;
    }
    if (first_look || total < min_balance_tasks * workers) {
        return; // nothing measured yet, or too little to judge
    }
    // Act only on a clear imbalance (this worker below 3/4 of the mean, the busiest above 5/4),
    // so domains do not move back and forth between workers with nearly equal loads.
    const std::uint64_t mine = _owner_load[_id] * workers;
    if (mine * 4 >= total * 3) {
        return;
    }
    const auto busiest = static_cast<std::uint16_t>(std::max_element(_owner_load.begin(), _owner_load.end()) -
                                                    _owner_load.begin());
    if (_owner_load[busiest] * workers * 4 <= total * 5) {
        return;
    }
    // The busiest owner's domain whose load closes most of the gap without reversing it.
    const std::uint64_t gap = (_owner_load[busiest] - _owner_load[_id]) / 2;
    std::optional<std::uint32_t> chosen;
    std::uint64_t chosen_load = 0;
    for (std::uint32_t d = 0; d < domains; ++d) {
        SyncDomain &domain = _core->domain(d);
        if (domain.owner.load(std::memory_order_relaxed) != busiest) {
            continue;
        }
        const std::uint64_t load = _domain_load[d];
        if (load > chosen_load && load <= gap) {
            chosen = d;
            chosen_load = load;
        }
    }
    if (chosen && _core->domain(*chosen).try_hold(_id)) {
        take_over_domain(*chosen);
        bump(_shared.balanced_domains);
        _core->domain(*chosen).release();
    }
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
