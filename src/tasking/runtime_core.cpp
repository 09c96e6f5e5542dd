// The runtime core: construction (workers, heaps, domains), start and stop, spawns and task
// memory from threads that are not workers, live task count.

#include "mx/tasking/runtime.h"

#include "config_resolution.h"
#include "futex.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <string>

namespace mx::tasking::detail {

RuntimeCore::RuntimeCore(const RuntimeConfig &config)
    : _pin_workers(config.pin_workers), _htm(sync::htm_available()),
      _epochs(config.memory_reclamation, std::uint64_t{config.epoch_interval_ms} * 1'000'000U) {
    const std::vector<ResolvedCore> cores = resolve(config, _topology);
    std::uint8_t regions = 0;
    for (const auto &core : cores) {
        regions = std::max<std::uint8_t>(regions, static_cast<std::uint8_t>(core.region + 1));
    }
    _regions.resize(regions);
    _heaps.resize(regions);
    for (const auto &core : cores) {
        if (!_heaps[core.region]) {
            _heaps[core.region] = std::make_unique<memory::RegionHeap>(core.memory_node);
        }
    }
    for (std::size_t id = 0; id < cores.size(); ++id) {
        const auto &core = cores[id];
        _regions[core.region].push_back(static_cast<std::uint16_t>(id));
        _workers.push_back(std::make_unique<Worker>(*this, static_cast<std::uint16_t>(id), core.region,
                                                    core.cpu, *_heaps[core.region], config));
    }
    _external_allocator = std::make_unique<memory::TaskAllocator>(*_heaps[0], config.allocator_batch);
    // Domain d starts on worker d mod workers, so worker w owns w, w + workers, ...
    _domain_count = static_cast<std::uint32_t>(
        std::min<std::size_t>(_workers.size() * config.domains_per_worker, max_domains));
    _domain_count = std::max<std::uint32_t>(_domain_count, static_cast<std::uint32_t>(_workers.size()));
    _domains = std::make_unique<SyncDomain[]>(_domain_count);
    for (std::uint32_t d = 0; d < _domain_count; ++d) {
        const auto owner = static_cast<std::uint16_t>(d % _workers.size());
        _domains[d].owner.store(owner, std::memory_order_relaxed);
        _workers[owner]->own_domain(d);
    }
    // The first epoch lasts a full interval from start-up (not from the clock's origin).
    _epochs.last_advance_ns.store(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count()),
        std::memory_order_relaxed);
}

RuntimeCore::~RuntimeCore() {
    stop();
    for (auto &worker : _workers) {
        worker->drain();
    }
    // No task runs any more: everything retired can go.
    for (auto &worker : _workers) {
        worker->reclaim_all();
    }
    for (const Retired &entry : _epochs.outside_retired) {
        entry.deleter(entry.object);
    }
}

void RuntimeCore::start() {
    if (!_threads.empty() && stop_requested()) {
        stop(); // a task returned TaskResult::stop(): finish that stop, then start afresh
    }
    if (!_threads.empty()) {
        return;
    }
    _stop_requested.store(false, std::memory_order_seq_cst);
    _started.store(true, std::memory_order_release);
    _closed.store(false, std::memory_order_seq_cst);
    _threads.reserve(_workers.size());
    for (auto &worker : _workers) {
        Worker *w = worker.get();
        _threads.emplace_back([w, pin = _pin_workers] {
            if (pin) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(w->cpu(), &set);
                if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
                    std::fprintf(stderr, "mxtasking: could not pin worker %u to cpu %u; running unpinned\n",
                                 unsigned{w->id()}, unsigned{w->cpu()});
                }
            }
            const std::string name = "mx-worker-" + std::to_string(w->id());
            pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
            w->run();
        });
    }
}

void RuntimeCore::stop() noexcept {
    if (_threads.empty()) {
        return;
    }
    // The door closes first: from here until start(), spawns from outside are refused (see
    // Runtime::stop), so the drain below ends even while other threads keep spawning.
    _closed.store(true, std::memory_order_seq_cst);
    request_stop();
    for (auto &thread : _threads) {
        thread.join();
    }
    _threads.clear();
    // Tasks still queued will never run: destroy those the runtime owns so nothing leaks, and
    // count them as completed so a later wait() after start() is not confused.
    for (auto &worker : _workers) {
        worker->drain();
    }
    _started.store(false, std::memory_order_release);
}

void RuntimeCore::request_stop() noexcept {
    _stop_requested.store(true, std::memory_order_seq_cst);
    for (auto &worker : _workers) {
        worker->wake();
    }
    _idle_events.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(_idle_events, INT_MAX);
}

void RuntimeCore::spawn_external(Task &task) noexcept {
    if (_closed.load(std::memory_order_seq_cst)) [[unlikely]] {
        // Stopped or stopping: refused. The runtime's own tasks are freed; the caller keeps its
        // own. A spawn that passed this check just before stop() closed the door may land after
        // the drain: it stays queued for the next start().
        if (task.is_runtime_owned()) {
            destroy_external(task);
        }
        return;
    }
    if (Squad *squad = task.squad(); squad != nullptr) {
        squad->push(task);
        return;
    }
    const auto epoch = static_cast<std::uint8_t>(_epochs.enabled ? global_epoch() % epoch_buckets : 0);
    set_epoch(task, epoch);
#if MX_TRACING
    if (stamp_external_spawns()) [[unlikely]] {
        stamp_spawn(task, system::cycles()); // its queue time in the trace
    }
#endif
    _external_spawned[epoch].fetch_add(1, std::memory_order_seq_cst);
    if (routed_to_owner(task)) {
        push_domain(task, domain_of(task.resource()));
        return;
    }
    std::uint16_t target = 0;
    if (task.target_worker() == any_worker && task.target_region() == any_region) {
        target = static_cast<std::uint16_t>(_next_external_worker.fetch_add(1, std::memory_order_relaxed) %
                                            _workers.size());
    } else {
        const bool region = task.target_worker() == any_worker;
        target = target_of(task, region ? _next_external_worker.fetch_add(1, std::memory_order_relaxed) : 0);
    }
    Worker &worker = *_workers[target];
    worker.push_remote(task, worker.region());
}

void *RuntimeCore::allocate_external(std::uint8_t size_class) noexcept {
    std::lock_guard lock{_external_mutex};
    return _external_allocator->allocate(size_class);
}

void RuntimeCore::free_external(void *memory, std::uint8_t size_class) noexcept {
    std::lock_guard lock{_external_mutex};
    _external_allocator->free(memory, size_class);
}

void RuntimeCore::destroy_external(Task &task) noexcept {
    destroy_task(*this, task, [this](void *memory, std::uint8_t size_class) noexcept {
        free_external(memory, size_class);
    });
}

std::uint64_t RuntimeCore::live_tasks() const noexcept {
    std::int64_t live = _oversized_live.load(std::memory_order_relaxed);
    const auto count = [&live](const memory::TaskAllocator &allocator) { live += allocator.held(); };
    for (const auto &worker : _workers) {
        count(worker->allocator());
    }
    count(*_external_allocator);
    return static_cast<std::uint64_t>(std::max<std::int64_t>(live, 0));
}

} // namespace mx::tasking::detail
