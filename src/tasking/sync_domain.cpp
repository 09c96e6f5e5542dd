// Synchronization domains: the queues of the resources serialized by scheduling, which resource
// maps to which domain, and how a worker holds the domains it drains.

#include "mx/tasking/runtime.h"

#include <algorithm>
#include <mutex>

namespace mx::tasking::detail {

std::uint32_t Worker::take_domains(std::size_t priority, Task **buffer, std::uint32_t capacity) noexcept {
    std::uint32_t count = 0;
    for (std::size_t i = 0; i < _domains.size() && count < capacity;) {
        const std::uint32_t id = _domains[i];
        SyncDomain &domain = _core->domain(id);
        if (domain.owner.load(std::memory_order_relaxed) != _id) {
            // Stolen: its new owner drains it now.
            _domains[i] = _domains.back();
            _domains.pop_back();
            continue;
        }
        ++i;
        MpscQueue<Task> &queue = domain.queues[priority];
        if (queue.looks_empty()) {
            continue;
        }
        if (!domain.held_by(_id)) {
            // Fails only while a thief looks at the domain; the next fill tries again.
            if (!domain.try_hold(_id)) {
                continue;
            }
            if (domain.owner.load(std::memory_order_relaxed) != _id) {
                // A thief took it over between the two loads: the holder is always the owner.
                domain.release();
                continue;
            }
            _held.push_back(id);
        }
        const std::uint32_t popped = queue.pop_into(buffer + count, capacity - count);
        bump(domain.drained, popped);
        count += popped;
    }
    return count;
}

void Worker::release_domains() noexcept {
    for (const std::uint32_t id : _held) {
        _core->domain(id).release();
    }
    _held.clear();
}

std::uint16_t RuntimeCore::assign_domain(std::optional<std::uint16_t> forced, std::uint8_t weight) noexcept {
    std::lock_guard lock{_mapping_mutex};
    const auto workers = static_cast<std::uint32_t>(_workers.size());
    std::uint32_t chosen = 0;
    if (forced) {
        // The worker's domains are w, w + workers, ...: the lightest of them.
        const std::uint32_t worker = *forced % workers;
        chosen = worker;
        for (std::uint32_t d = worker + workers; d < _domain_count; d += workers) {
            if (_domains[d].weight < _domains[chosen].weight) {
                chosen = d;
            }
        }
    } else {
        // Weighted round-robin: the domain with the least accumulated access weight; ties go to
        // the first one after the last choice, so equal weights rotate over domains and workers.
        chosen = _next_domain % _domain_count;
        for (std::uint32_t i = 1; i < _domain_count; ++i) {
            const std::uint32_t d = (_next_domain + i) % _domain_count;
            if (_domains[d].weight < _domains[chosen].weight) {
                chosen = d;
            }
        }
        _next_domain = chosen + 1;
    }
    _domains[chosen].weight += std::max<std::uint8_t>(weight, 1);
    return static_cast<std::uint16_t>(chosen);
}

void RuntimeCore::release_domain(std::uint16_t domain, std::uint8_t weight) noexcept {
    std::lock_guard lock{_mapping_mutex};
    const std::uint64_t amount = std::max<std::uint8_t>(weight, 1);
    _domains[domain].weight -= std::min(_domains[domain].weight, amount);
}

void RuntimeCore::push_domain(Task &task, std::uint32_t domain) noexcept {
    SyncDomain &target = _domains[domain];
    target.queues[static_cast<std::size_t>(task.priority())].push(task);
    // After the push (seq_cst): either this load sees a thief's new ownership, or the thief
    // (awake, holding the domain) sees the task when it drains the domain.
    Worker &owner = *_workers[target.owner.load(std::memory_order_seq_cst)];
    if (owner.sleeping()) [[unlikely]] {
        owner.wake();
    }
}

} // namespace mx::tasking::detail
