#include "mx/tasking/runtime.h"

#include "mx/system/memory_latency.h"
#include "mx/tasking/coroutine_task.h"
#include "mx/tasking/detail/prefetch.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iterator>
#include <string>
#include <typeinfo>

namespace mx::tasking {

namespace detail {

namespace {

thread_local Worker *tls_worker = nullptr;

void futex_wait(std::atomic<std::uint32_t> &word, std::uint32_t expected, const timespec *timeout) noexcept {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(&word), FUTEX_WAIT_PRIVATE, expected, timeout,
            nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t> &word, int count) noexcept {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr,
            0);
}

std::string cpu_list(const std::vector<std::uint16_t> &cpus) {
    std::string text;
    for (const std::uint16_t cpu : cpus) {
        text += (text.empty() ? "" : ",") + std::to_string(cpu);
    }
    return text;
}

struct ResolvedCore {
    std::uint16_t cpu;
    std::uint8_t region;
    std::uint8_t memory_node;
};

/// Turns a configuration into the list of workers (cpu, region, memory node), or throws
/// ConfigError with a message a user can act on.
std::vector<ResolvedCore> resolve(const RuntimeConfig &config, system::Topology &topology) {
    std::string shape_text = config.topology;
    std::string source = "RuntimeConfig::topology";
    if (shape_text.empty()) {
        if (const char *env = std::getenv("MX_TOPOLOGY"); env != nullptr && *env != '\0') {
            shape_text = env;
            source = "MX_TOPOLOGY";
        }
    }
    if (!shape_text.empty()) {
        const system::ShapeParse parsed = system::parse_simulated_shape(shape_text);
        if (!parsed.shape) {
            throw ConfigError{source + ": " + parsed.error};
        }
        topology = system::Topology::simulated(*parsed.shape);
    } else {
        topology = system::Topology::detect();
    }
    if (topology.cache_line_size() > system::cache_line_size) {
        throw ConfigError{
            "cache line of " + std::to_string(topology.cache_line_size()) +
            " bytes is larger than the compiled-in 64; rebuild with a larger mx::system::cache_line_size"};
    }
    if (config.domains_per_worker == 0) {
        throw ConfigError{"domains_per_worker must be at least 1"};
    }
    if (config.task_buffer_size == 0) {
        throw ConfigError{"task_buffer_size must be at least 1"};
    }
    if (config.allocator_batch == 0) {
        throw ConfigError{"allocator_batch must be at least 1"};
    }

    std::vector<system::Core> cores = topology.cores();
    if (!config.cores.empty()) {
        const auto &usable = topology.usable_cpus();
        std::vector<std::uint16_t> seen;
        for (const std::uint16_t cpu : config.cores) {
            if (std::find(usable.begin(), usable.end(), cpu) == usable.end()) {
                throw ConfigError{"core " + std::to_string(cpu) +
                                  " does not exist or is outside this process's CPU affinity (usable: " +
                                  cpu_list(usable) + ")"};
            }
            if (std::find(seen.begin(), seen.end(), cpu) != seen.end()) {
                throw ConfigError{"core " + std::to_string(cpu) + " is listed twice"};
            }
            seen.push_back(cpu);
        }
        if (topology.is_simulated()) {
            for (std::size_t i = 0; i < cores.size(); ++i) {
                cores[i].cpu = config.cores[i % config.cores.size()];
            }
        } else {
            cores.clear();
            for (const std::uint16_t cpu : config.cores) {
                cores.push_back(system::Core{cpu, 0, topology.memory_node_of_cpu(cpu)});
            }
        }
    }
    const std::size_t workers = config.workers.value_or(static_cast<std::uint16_t>(cores.size()));
    if (workers == 0) {
        throw ConfigError{"a runtime needs at least one worker (workers = 0)"};
    }
    if (workers > 4096) {
        throw ConfigError{"at most 4096 workers are supported"};
    }

    std::vector<ResolvedCore> resolved;
    for (std::size_t i = 0; i < workers; ++i) {
        const system::Core &core = cores[i % cores.size()];
        // Without a simulated shape, regions follow the real node of each CPU.
        const std::uint8_t key = topology.is_simulated() ? core.numa_region : core.memory_node;
        resolved.push_back(ResolvedCore{core.cpu, key, core.memory_node});
    }
    // Number regions densely in order of first appearance, so none is empty.
    std::vector<std::uint8_t> keys;
    for (auto &core : resolved) {
        auto it = std::find(keys.begin(), keys.end(), core.region);
        if (it == keys.end()) {
            keys.push_back(core.region);
            it = keys.end() - 1;
        }
        core.region = static_cast<std::uint8_t>(it - keys.begin());
    }
    return resolved;
}

/// Xorshift: cheap, and good enough to spread thieves over victims.
std::uint32_t next_random(std::uint32_t &state) noexcept {
    state ^= state << 13U;
    state ^= state >> 17U;
    state ^= state << 5U;
    return state;
}

} // namespace

Worker *current_worker() noexcept { return tls_worker; }

void out_of_task_memory() noexcept {
    std::fputs("mxtasking: out of memory while allocating a task descriptor\n", stderr);
    std::abort();
}

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

Worker::Worker(RuntimeCore &core, std::uint16_t id, std::uint8_t region, std::uint16_t cpu,
               memory::RegionHeap &heap, const RuntimeConfig &config)
    : _core(&core), _id(id), _region(region), _cpu(cpu), _prefetch_distance(config.prefetch_distance),
      _dynamic_prefetch(config.dynamic_prefetch),
      _load_latency_cycles(config.load_latency_cycles != 0 ? config.load_latency_cycles
                           : config.dynamic_prefetch       ? system::load_latency_cycles()
                                                           : 0),
      _idle_spin_cycles(config.idle_spin_cycles), _configured_group_size(config.coroutine_group_size),
      _lifo(config.local_order == LocalOrder::lifo), _stealing(config.work_stealing),
      _optimistic_retries(config.optimistic_retries),
      _epoch_check_tasks(std::max<std::uint32_t>(1, config.epoch_check_tasks)),
      _reclamation(config.memory_reclamation), _allocator(heap, config.allocator_batch),
      _pool(core.region_count(), config.work_stealing, config.local_order == LocalOrder::lifo),
      _buffer(config.task_buffer_size, nullptr), _expected_cycles(config.task_buffer_size),
      _prefetch_cycles(config.task_buffer_size), _prefetch_slots(config.task_buffer_size),
      _steal_state((std::uint32_t{id} + 1U) * 2654435761U | 1U), _reclaim_task(std::make_unique<ReclaimTask>(*this)) {}

void Worker::run() noexcept {
    tls_worker = this;
    while (!_core->stop_requested()) {
        _buffer_size = fill();
        _buffer_position = 0;
        _local_epoch = static_cast<std::uint8_t>(_core->global_epoch() % epoch_buckets);
        if (_buffer_size == 0 && _group_size == 0 && _stealing) {
            _buffer_size = steal();
        }
        if (_buffer_size == 0) {
            if (_group_size > 0) {
                resume_group_round(); // nothing new: keep the parked coroutines going
            } else {
                idle();
            }
            continue;
        }
        if (_dynamic_prefetch) {
            run_buffer_dynamic();
        } else {
            run_buffer_static();
        }
        release_domains();
    }
    put_back_buffer();
    tls_worker = nullptr;
}

std::uint32_t Worker::fill() noexcept {
    Task **buffer = _buffer.data();
    const auto capacity = static_cast<std::uint32_t>(_buffer.size());
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
        if (!holds(id)) {
            std::uint32_t free = 0;
            // Fails only while a thief looks at the domain; the next fill tries again.
            if (!domain.holder.compare_exchange_strong(free, std::uint32_t{_id} + 1U, std::memory_order_acquire,
                                                       std::memory_order_relaxed)) {
                continue;
            }
            if (domain.owner.load(std::memory_order_relaxed) != _id) {
                // A thief took it over between the two loads: the holder is always the owner.
                domain.holder.store(0, std::memory_order_release);
                continue;
            }
            _held.push_back(id);
        }
        while (count < capacity) {
            Task *task = queue.pop();
            if (task == nullptr) {
                break;
            }
            buffer[count++] = task;
        }
    }
    return count;
}

void Worker::release_domains() noexcept {
    for (const std::uint32_t id : _held) {
        // Release: the next holder sees everything the tasks did to the domain's resources.
        _core->domain(id).holder.store(0, std::memory_order_release);
    }
    _held.clear();
}

void Worker::put_back_buffer() noexcept {
    // In reverse, each to the front: the tasks keep their order for the next start().
    IntrusiveQueue<Task> chains[priority_count];
    for (std::uint32_t i = _buffer_position; i < _buffer_size; ++i) {
        chains[static_cast<std::size_t>(_buffer[i]->priority())].push_back(*_buffer[i]);
    }
    _pool.prepend_pinned(chains);
    _buffer_size = _buffer_position = 0;
    release_domains();
}

std::uint32_t Worker::steal() noexcept {
    const std::uint16_t workers = _core->worker_count();
    if (workers == 1) {
        return 0;
    }
    // Own region first (its caches and memory are closer), then the others, each from a random
    // worker on, so thieves spread over victims.
    const auto &own = _core->workers_of_region(_region);
    const std::uint32_t start = next_random(_steal_state);
    for (std::size_t i = 0; i < own.size(); ++i) {
        Worker &victim = _core->worker(own[(start + i) % own.size()]);
        if (&victim != this) {
            if (const std::uint32_t count = steal_tasks_from(victim); count > 0) {
                return count;
            }
        }
    }
    for (std::uint16_t r = 1; r < _core->region_count(); ++r) {
        const auto &region = _core->workers_of_region(static_cast<std::uint8_t>((_region + r) % _core->region_count()));
        for (std::size_t i = 0; i < region.size(); ++i) {
            if (const std::uint32_t count = steal_tasks_from(_core->worker(region[(start + i) % region.size()]));
                count > 0) {
                return count;
            }
        }
    }
    if (steal_domain()) {
        return fill();
    }
    return 0;
}

std::uint32_t Worker::steal_tasks_from(Worker &victim) noexcept {
    for (std::size_t priority = 0; priority < priority_count; ++priority) {
        StealDeque &deque = victim.pool().deque(priority);
        const std::int64_t queued = deque.size();
        if (queued == 0) {
            continue;
        }
        // Half of what waits there (at most half a buffer): fewer trips for a long queue, and
        // the victim keeps work of its own.
        const auto wanted = static_cast<std::uint32_t>(
            std::clamp<std::int64_t>(queued / 2, 1, std::max<std::int64_t>(1, static_cast<std::int64_t>(_buffer.size() / 2))));
        std::uint32_t count = 0;
        for (std::uint32_t attempt = 0; attempt < wanted; ++attempt) {
            Task *task = deque.steal();
            if (task == nullptr) {
                break;
            }
            if ((task->target_worker() != any_worker && task->target_worker() != _id) ||
                (task->target_region() != any_region && task->target_region() != _region)) [[unlikely]] {
                // Annotated for the victim (or its region): handed back through its remote queue.
                victim.push_remote(*task, _region);
                continue;
            }
            _buffer[count++] = task;
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
        if (domain.owner.load(std::memory_order_relaxed) == _id || domain.looks_empty() ||
            domain.holder.load(std::memory_order_relaxed) != 0) {
            continue;
        }
        std::uint32_t free = 0;
        if (!domain.holder.compare_exchange_strong(free, std::uint32_t{_id} + 1U, std::memory_order_acquire,
                                                   std::memory_order_relaxed)) {
            continue;
        }
        // Holding the domain, nobody drains it: its queue and routing change hands together.
        if (domain.owner.load(std::memory_order_relaxed) != _id) {
            domain.owner.store(_id, std::memory_order_seq_cst);
            if (std::find(_domains.begin(), _domains.end(), id) == _domains.end()) {
                _domains.push_back(id);
            }
            bump(_shared.stolen_domains);
        }
        domain.holder.store(0, std::memory_order_release);
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
        const SyncDomain &domain = _core->domain(id);
        if (domain.owner.load(std::memory_order_relaxed) != _id && !domain.looks_empty() &&
            domain.holder.load(std::memory_order_relaxed) == 0) {
            return true;
        }
    }
    return false;
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
        const auto &workers = _core->workers_of_region(
            static_cast<std::uint8_t>(task.target_region() % _core->region_count()));
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

void Worker::run_buffer_static() noexcept {
    // Filling the buffer read every descriptor (the queue links), so only the annotated data
    // needs prefetching: the first `distance` tasks now, then task i + distance before task i.
    const std::uint32_t distance = _prefetch_distance;
    if (distance > 0) {
        for (std::uint32_t i = 0; i < std::min(distance, _buffer_size); ++i) {
            prefetch_task_data(*_buffer[i]);
        }
    }
    while (_buffer_position < _buffer_size) {
        if (distance > 0 && _buffer_position + distance < _buffer_size) {
            prefetch_task_data(*_buffer[_buffer_position + distance]);
        }
        execute(*_buffer[_buffer_position++]);
        if (_core->stop_requested()) [[unlikely]] {
            return;
        }
    }
}

void Worker::run_buffer_dynamic() noexcept {
    for (std::uint32_t i = 0; i < _buffer_size; ++i) {
        _expected_cycles[i] = expected_cycles(*_buffer[i]);
        _prefetch_cycles[i] = prefetch_lines(*_buffer[i]) * _load_latency_cycles;
    }
    compute_prefetch_slots(_expected_cycles.data(), _prefetch_cycles.data(), _buffer_size,
                           _prefetch_slots.data());
    std::uint32_t next_prefetch = 0;
    while (_buffer_position < _buffer_size) {
        while (next_prefetch < _buffer_size && _prefetch_slots[next_prefetch] <= _buffer_position) {
            prefetch_task_data(*_buffer[next_prefetch++]);
        }
        Task *task = _buffer[_buffer_position++];
        if (--_sample_countdown == 0) [[unlikely]] {
            execute_sampled(*task);
        } else {
            execute(*task);
        }
        if (_core->stop_requested()) [[unlikely]] {
            return;
        }
    }
}

std::uint32_t Worker::expected_cycles(const Task &task) const noexcept {
    if (task.expected_cycles() != 0) {
        return task.expected_cycles();
    }
    const void *type = &typeid(task);
    const TypeSample &sample =
        _type_samples[(reinterpret_cast<std::uintptr_t>(type) >> 4U) % _type_samples.size()];
    // Unknown types count as short tasks: prefetching a little early costs less than too late.
    return sample.type == type ? sample.cycles : 100U;
}

void Worker::execute_sampled(Task &task) noexcept {
    // One task in 32 is timed: cheap enough to leave on, enough to follow phase changes.
    constexpr std::uint32_t sample_interval = 32;
    _sample_countdown = sample_interval;
    const void *type = &typeid(task);
    const std::uint64_t start = system::cycles();
    // Only the sampled task counts: successors it hands over by bypass run after the sample
    // (they may be of another type, and a chain would inflate the estimate for this one).
    _bypass_chain = 0;
    Task *next = execute_one(task);
    const auto elapsed =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(system::cycles() - start, 1U << 24U));
    TypeSample &sample = _type_samples[(reinterpret_cast<std::uintptr_t>(type) >> 4U) % _type_samples.size()];
    if (sample.type != type) {
        sample = TypeSample{type, elapsed};
    } else {
        sample.cycles = (sample.cycles * 7U + elapsed) / 8U;
    }
    run_bypassed(next);
}

void Worker::execute(Task &task) noexcept {
    _bypass_chain = 0;
    run_bypassed(execute_one(task));
}

void Worker::run_bypassed(Task *next) noexcept {
    while (next != nullptr) {
        next = execute_one(*next);
    }
}

Task *Worker::execute_one(Task &task) noexcept {
    TaskContext context{*this};
    _running = &task; // spawns from the task (and its successor) see its epoch
    TaskResult result = TaskResult::done();
    if (const ResourcePtr resource = task.resource();
        !resource || task.access() == AccessMode::none || primitive_of(resource) == sync::Primitive::none)
        [[likely]] {
        result = task.execute(context);
    } else if (!run_synchronized(task, context, result)) {
        // (A coroutine task may not suspend inside a primitive: asserted in run_synchronized.)
        // Put back for a later attempt. The re-queue counts as a new spawn that keeps the
        // task's epoch (_running is still the task), so its resource stays protected.
        const std::uint8_t epoch = RuntimeCore::epoch_of(task);
        count_spawn(task);
        _running = nullptr;
        push_local(task);
        bump(_shared.completed[epoch], 1, std::memory_order_release);
        return nullptr;
    }
    if (result.action() == TaskResult::Action::suspend) [[unlikely]] {
        _running = nullptr;
        park(task);
        return nullptr;
    }
    return complete(task, result);
}

Task *Worker::complete(Task &task, const TaskResult &result) noexcept {
    const std::uint8_t epoch = RuntimeCore::epoch_of(task);
    Task *run_now = nullptr;
    if (Task *next = result.next(); next != nullptr) {
        if (result.bypasses() && _bypass_chain < max_bypass_chain && stays_here(*next)) {
            // Counted as a spawn (the epoch stamp included) before this task counts as completed,
            // exactly like a successor that goes through the pool.
            MX_ASSERT(next != &task || result.action() == TaskResult::Action::keep,
                      "a task cannot hand itself over and be removed");
            ++_bypass_chain;
            count_spawn(*next);
            run_now = next;
        } else {
            spawn(*next);
        }
    }
    if (result.action() == TaskResult::Action::remove) [[likely]] {
        destroy(task);
    } else if (result.action() == TaskResult::Action::commit) {
        // Only reached once the run stands: a failed optimistic read never gets here.
        TaskContext context{*this};
        task.commit(context);
        destroy(task);
    } else if (result.action() == TaskResult::Action::stop) {
        if (task.is_runtime_owned()) {
            destroy(task);
        }
        _core->request_stop();
    }
    _running = nullptr;
    // Release: a thread that sees this count also sees every spawn above (wait(), reclamation).
    bump(_shared.completed[epoch], 1, std::memory_order_release);
    if (++_tasks_since_epoch_check >= _epoch_check_tasks) [[unlikely]] {
        epoch_duties();
    }
    return run_now;
}

void Worker::park(Task &task) noexcept {
    if (_group_capacity == 0) [[unlikely]] {
        _group_capacity =
            _configured_group_size != 0 ? _configured_group_size : default_coroutine_group_size();
        _group.assign(_group_capacity, nullptr);
        _group_handles.assign(_group_capacity, {});
        _group_holes.reserve(_group_capacity);
    }
    // The newest hole is the slot resumed last (the cursor just passed it): taking it puts the
    // newcomer at the end of the round. Without holes (the group is filling up) the cursor is
    // still at slot 0 and the end of the used slots is the end of the round as well.
    std::uint32_t slot = _group_slots;
    if (!_group_holes.empty()) {
        slot = _group_holes.back();
        _group_holes.pop_back();
    } else {
        ++_group_slots;
    }
    // Only CoroutineTask returns TaskResult::suspend().
    _group_handles[slot] = static_cast<CoroutineTask &>(task).handle();
    _group[slot] = &task;
    if (++_group_size < _group_capacity) {
        return;
    }
    // Full, so no holes: resume round-robin from the cursor until one finishes. This loop is
    // the interleaving itself (one pass per load); it keeps its state in registers and leaves
    // the group's fields alone until a task is done: a coroutine body cannot park or resume
    // tasks, only spawn them.
    Task *const *const group = _group.data();
    const std::coroutine_handle<> *const handles = _group_handles.data();
    const std::uint32_t slots = _group_slots;
    std::uint32_t cursor = _group_cursor;
    while (true) {
        _running = group[cursor];
        handles[cursor].resume();
        if (handles[cursor].done()) [[unlikely]] {
            break;
        }
        cursor = cursor + 1 == slots ? 0 : cursor + 1;
    }
    _group_cursor = cursor + 1 == slots ? 0 : cursor + 1;
    retire_group_member(cursor);
}

void Worker::resume_group_next() noexcept {
    MX_ASSERT(_group_size > 0, "resuming an empty coroutine group");
    std::uint32_t slot = _group_cursor;
    while (_group[slot] == nullptr) {
        slot = slot + 1 == _group_slots ? 0 : slot + 1;
    }
    _group_cursor = slot + 1 == _group_slots ? 0 : slot + 1;
    Task &task = *_group[slot];
    _running = &task;
    _group_handles[slot].resume();
    if (!_group_handles[slot].done()) [[likely]] {
        _running = nullptr;
        return;
    }
    retire_group_member(slot);
}

void Worker::retire_group_member(std::uint32_t slot) noexcept {
    Task &task = *_group[slot];
    _group[slot] = nullptr;
    if (--_group_size == 0) {
        _group_slots = 0;
        _group_cursor = 0;
        _group_holes.clear();
    } else {
        _group_holes.push_back(slot);
    }
    // Finished: execute() releases the frame and yields the task's result.
    TaskContext context{*this};
    const TaskResult result = task.execute(context);
    if (Task *next = complete(task, result); next != nullptr) {
        execute(*next);
    }
}

void Worker::resume_group_round() noexcept {
    // Each step resumes one parked task and finishes at most that one: remaining <= _group_size.
    for (std::uint32_t remaining = _group_size; remaining > 0; --remaining) {
        resume_group_next();
    }
}

namespace {
#if defined(MX_ENABLE_ASSERTS)
std::uint64_t checksum(const void *object, std::uint32_t size) noexcept {
    const auto *bytes = static_cast<const unsigned char *>(object);
    std::uint64_t hash = 1469598103934665603ULL;
    for (std::uint32_t i = 0; i < size; ++i) {
        hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
    return hash;
}
#endif
} // namespace

[[gnu::always_inline]] inline bool Worker::run_synchronized(Task &task, TaskContext &context,
                                                            TaskResult &result) noexcept {
    const ResourcePtr resource = task.resource();
    ResourceHeader &header = header_of(resource);
    // A deleted resource stays valid until reclamation frees it: tasks dispatched before the
    // delete (or carrying a pointer read before it) may still run on it.
    MX_ASSERT(
        header.state.load(std::memory_order_relaxed) == ResourceHeader::alive ||
            header.state.load(std::memory_order_relaxed) == ResourceHeader::retired,
        "task annotated with something that is not a live resource from new_resource (or already freed)");
    const bool reader = task.access() == AccessMode::read_only;
    const bool done = run_primitive(task, context, resource, header, reader, result);
    MX_ASSERT(result.action() != TaskResult::Action::suspend,
              "a coroutine task cannot suspend while synchronized on a resource");
    return done;
}

bool Worker::run_primitive(Task &task, TaskContext &context, ResourcePtr resource, ResourceHeader &header,
                           bool reader, TaskResult &result) noexcept {
    // Runs the task where no writer can interfere. Debug builds check the read-only promise
    // there: a reader must leave the object as it found it.
#if defined(MX_ENABLE_ASSERTS)
    const auto run_exclusive_of_writers = [&] {
        const std::uint64_t before = reader ? checksum(resource.get(), header.object_size) : 0;
        result = task.execute(context);
        MX_ASSERT(!reader || checksum(resource.get(), header.object_size) == before,
                  "task annotated read_only modified its resource");
    };
#else
    const auto run_exclusive_of_writers = [&] { result = task.execute(context); };
#endif
    switch (primitive_of(resource)) {
    case sync::Primitive::none:
        result = task.execute(context);
        return true;
    case sync::Primitive::scheduling:
        MX_ASSERT(holds(domain_of(resource)), "task on a scheduled resource runs outside its domain");
        run_exclusive_of_writers();
        return true;
    case sync::Primitive::spinlock:
        header.spinlock.lock();
        run_exclusive_of_writers();
        header.spinlock.unlock();
        return true;
    case sync::Primitive::rw_latch:
        if (reader) {
            header.rw_latch.lock_shared();
            run_exclusive_of_writers();
            header.rw_latch.unlock_shared();
        } else {
            header.rw_latch.lock();
            result = task.execute(context);
            header.rw_latch.unlock();
        }
        return true;
    case sync::Primitive::optimistic_latched:
        if (reader) {
            return run_optimistic_read(task, context, header, result);
        }
        header.version.write_lock();
        result = task.execute(context);
        header.version.write_end();
        return true;
    case sync::Primitive::optimistic_scheduled:
        if (holds(domain_of(resource))) {
            // Writers only run on the domain's holder, and tasks run to completion: no writer
            // can interleave with a reader here, so it needs no validation (dissertation 4.3).
            if (reader) {
                run_exclusive_of_writers();
            } else {
                header.version.write_begin_exclusive();
                result = task.execute(context);
                header.version.write_end();
            }
            return true;
        }
        MX_ASSERT(reader, "writer of an optimistically scheduled resource runs outside its domain");
        return run_optimistic_read(task, context, header, result);
    case sync::Primitive::htm:
        // Inside a transaction the check would abort it; HTM readers are checked by the fallback.
        result = run_transaction(task, context, header);
        return true;
    }
    return true;
}

bool Worker::run_optimistic_read(Task &task, TaskContext &context, const ResourceHeader &header,
                                 TaskResult &result) noexcept {
    // A failed read is undone: the annotations (readers often re-annotate themselves to the
    // next node) and the bytes the task declares as its optimistic state.
    const Annotation annotation = task.annotation();
    const std::span<std::byte> state = task.optimistic_state();
    if (!state.empty()) {
        _optimistic_scratch.assign(state.begin(), state.end());
    }
    for (std::uint32_t attempt = 0; attempt <= _optimistic_retries; ++attempt) {
        const std::uint64_t version = header.version.read_begin();
        if ((version & 1U) == 0) {
            _in_optimistic_read = true;
            sync::detail::ignore_reads_begin();
            result = task.execute(context);
            sync::detail::ignore_reads_end();
            _in_optimistic_read = false;
            if (header.version.validate(version)) {
                return true;
            }
        }
        bump(_shared.optimistic_retries);
        Task *successor = result.next();
        if (successor != nullptr && successor != &task && successor->is_runtime_owned()) {
            destroy(*successor); // allocated by the failed run and never dispatched
        }
        result = TaskResult::done();
        task.annotate(annotation);
        if (!state.empty()) {
            std::copy(_optimistic_scratch.begin(), _optimistic_scratch.end(), state.begin());
        }
    }
    return false;
}

void Worker::idle() noexcept {
    const std::uint64_t start = system::cycles();
    epoch_duties();
    std::uint32_t polls = 0;
    while (!_core->stop_requested() && !has_work()) {
        // Every few polls, look for work to steal: back to run(), which steals it.
        if (_stealing && (++polls & 15U) == 0 && work_to_steal()) {
            break;
        }
        if (system::cycles() - start > _idle_spin_cycles) {
            sleep();
        } else {
            system::pause();
        }
    }
    bump(_shared.idle_cycles, system::cycles() - start);
}

void Worker::sleep() noexcept {
    // Dekker-style handshake with push_remote() and push_domain(): both sides use seq_cst, so
    // either the producer sees sleeping == 1 and wakes us, or we see its task here. Stealable
    // work is only a hint (its owner runs it anyway): spawners wake a sleeper when they see one.
    _shared.sleeping.store(1, std::memory_order_seq_cst);
    _core->count_sleeper(1);
    if (has_work() || _core->stop_requested() || (_stealing && work_to_steal())) {
        _shared.sleeping.store(0, std::memory_order_relaxed);
        _core->count_sleeper(-1);
        return;
    }
    bump(_shared.sleeps);
    // Threads in wait() spin a little and then sleep; going to sleep is the moment to tell them.
    _core->notify_idle();
    // Worker 0 also reclaims what outside threads retired: it must not sleep on that either.
    if (_retired.empty() && !(_id == 0 && _core->external_retired_pending())) {
        while (_shared.sleeping.load(std::memory_order_acquire) == 1) {
            futex_wait(_shared.sleeping, 1, nullptr);
        }
    } else {
        // Retired objects wait for the epoch to move on: wake up for it even without work.
        const timespec timeout{0, 10'000'000};
        futex_wait(_shared.sleeping, 1, &timeout);
        _shared.sleeping.store(0, std::memory_order_relaxed);
        epoch_duties();
    }
    _core->count_sleeper(-1);
}

void Worker::wake() noexcept {
    if (_shared.sleeping.exchange(0, std::memory_order_seq_cst) == 1) {
        futex_wake(_shared.sleeping, 1);
    }
}

void Worker::drain() noexcept {
    const auto discard = [this](Task *task) {
        const std::uint8_t epoch = RuntimeCore::epoch_of(*task);
        if (task->is_runtime_owned()) {
            destroy(*task);
        }
        bump(_shared.completed[epoch], 1, std::memory_order_release);
    };
    for (; _buffer_position < _buffer_size; ++_buffer_position) {
        discard(_buffer[_buffer_position]);
    }
    for (std::uint32_t slot = 0; slot < _group_slots; ++slot) {
        if (_group[slot] != nullptr) {
            discard(_group[slot]);
            _group[slot] = nullptr;
        }
    }
    _group_size = _group_slots = _group_cursor = 0;
    _group_holes.clear();
    _buffer_size = _buffer_position = 0;
    release_domains();
    // Nobody spawns any more (the runtime is being destroyed): this ends.
    while (true) {
        const std::uint32_t count = fill();
        release_domains();
        if (count == 0) {
            break;
        }
        for (std::uint32_t i = 0; i < count; ++i) {
            discard(_buffer[i]);
        }
    }
}

void Worker::retire(void *object, void (*deleter)(void *) noexcept) noexcept {
    bump(_shared.retired);
    if (!_reclamation) {
        deleter(object);
        bump(_shared.reclaimed);
        return;
    }
    _retired.push_back(Retired{object, deleter, _core->global_epoch()});
}

void Worker::epoch_duties() noexcept {
    _tasks_since_epoch_check = 0;
    if (!_reclamation) {
        return;
    }
    _core->try_advance_epoch();
    if (!_reclaim_pending && !_retired.empty() && _retired.front().epoch < _core->global_epoch()) {
        // Reclamation runs as a (low-priority) task of this worker.
        _reclaim_pending = true;
        spawn(*_reclaim_task);
    }
    if (_id == 0) {
        _core->reclaim_external();
    }
}

void Worker::reclaim_now() noexcept {
    _reclaim_pending = false;
    const std::uint64_t below = _core->reclaimable_below();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < _retired.size(); ++i) {
        const Retired &entry = _retired[i];
        if (entry.epoch < below) {
            entry.deleter(entry.object);
            bump(_shared.reclaimed);
        } else {
            _retired[kept++] = entry;
        }
    }
    _retired.resize(kept);
}

void Worker::reclaim_all() noexcept {
    for (const Retired &entry : _retired) {
        entry.deleter(entry.object);
        bump(_shared.reclaimed);
    }
    _retired.clear();
}

WorkerStatistics Worker::statistics() const noexcept {
    WorkerStatistics s;
    s.worker = _id;
    s.cpu = _cpu;
    s.numa_region = _region;
    for (std::uint32_t b = 0; b < epoch_buckets; ++b) {
        s.tasks_executed += _shared.completed[b].load(std::memory_order_relaxed);
    }
    s.spawned_remote = _shared.spawned_remote.load(std::memory_order_relaxed);
    std::uint64_t spawned = 0;
    for (std::uint32_t b = 0; b < epoch_buckets; ++b) {
        spawned += _shared.spawned[b].load(std::memory_order_relaxed);
    }
    s.spawned_local = spawned - s.spawned_remote;
    s.allocator_refills = _allocator.refills();
    s.idle_cycles = _shared.idle_cycles.load(std::memory_order_relaxed);
    s.sleeps = _shared.sleeps.load(std::memory_order_relaxed);
    s.optimistic_retries = _shared.optimistic_retries.load(std::memory_order_relaxed);
    s.retired = _shared.retired.load(std::memory_order_relaxed);
    s.reclaimed = _shared.reclaimed.load(std::memory_order_relaxed);
    s.stolen_tasks = _shared.stolen_tasks.load(std::memory_order_relaxed);
    s.stolen_domains = _shared.stolen_domains.load(std::memory_order_relaxed);
    return s;
}

RuntimeCore::RuntimeCore(const RuntimeConfig &config)
    : _stealing(config.work_stealing), _pin_workers(config.pin_workers), _htm(sync::htm_available()), _reclamation(config.memory_reclamation),
      _epoch_interval_ns(std::uint64_t{config.epoch_interval_ms} * 1'000'000U) {
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
    _last_advance_ns.store(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
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
    for (const Retired &entry : _external_retired) {
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

void RuntimeCore::notify_idle() noexcept {
    if (_waiters.load(std::memory_order_seq_cst) > 0) {
        _idle_events.fetch_add(1, std::memory_order_seq_cst);
        futex_wake(_idle_events, INT_MAX);
    }
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
    std::uint64_t last = _last_advance_ns.load(std::memory_order_relaxed);
    if (now - last < _epoch_interval_ns) {
        return;
    }
    // Only one worker does the check per interval.
    if (!_last_advance_ns.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
        return;
    }
    const std::uint64_t epoch = _global_epoch.load(std::memory_order_acquire);
    // The next epoch reuses the bucket of epoch - 3: it must be empty first.
    if (drained(1U << ((epoch + 1) % epoch_buckets))) {
        _global_epoch.store(epoch + 1, std::memory_order_seq_cst);
    }
}

void RuntimeCore::retire(void *object, void (*deleter)(void *) noexcept) noexcept {
    if (!_reclamation) {
        deleter(object);
        return;
    }
    {
        std::lock_guard lock{_external_mutex};
        _external_retired.push_back(Retired{object, deleter, global_epoch()});
        _external_pending.store(true, std::memory_order_seq_cst);
    }
    // Worker 0 reclaims what outside threads retired; it may be asleep without a timeout.
    _workers[0]->wake();
}

void RuntimeCore::reclaim_external() noexcept {
    // Worker 0 comes here on every epoch check: without anything retired from outside, which is
    // the rule, it must not take the mutex (~1 % of a B-link tree run's samples when it did).
    // A retire() racing with this load is seen at the next check.
    if (!_external_pending.load(std::memory_order_acquire)) {
        return;
    }
    std::vector<Retired> ready;
    {
        std::lock_guard lock{_external_mutex};
        if (_external_retired.empty()) {
            return;
        }
        const std::uint64_t below = reclaimable_below();
        std::size_t kept = 0;
        for (const Retired &entry : _external_retired) {
            if (entry.epoch < below) {
                ready.push_back(entry);
            } else {
                _external_retired[kept++] = entry;
            }
        }
        _external_retired.resize(kept);
        _external_pending.store(kept != 0, std::memory_order_relaxed);
    }
    for (const Retired &entry : ready) {
        entry.deleter(entry.object);
    }
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

void RuntimeCore::wake_thief(const Worker *self) noexcept {
    for (const auto &worker : _workers) {
        if (worker.get() != self && worker->sleeping()) {
            worker->wake();
            return;
        }
    }
}

void RuntimeCore::wait() noexcept {
    if (current_worker() != nullptr && &current_worker()->core() == this) [[unlikely]] {
        // The calling task is in flight, so the runtime can never be quiescent: a deadlock in
        // every build. Use a TaskGroup continuation instead.
        std::fputs("mxtasking: Runtime::wait() called from a task of the same runtime would never return; "
                   "aborting (wait for tasks from inside a task with a TaskGroup continuation)\n",
                   stderr);
        std::abort();
    }
    const auto done = [this] { return stop_requested() || !running() || quiescent(); };
    // Short phases end soon: spin first (about as long as an idle worker spins), so workers do
    // not have to make a system call on every idle moment just in case somebody waits.
    const std::uint64_t spin_until = system::cycles() + 200'000;
    while (system::cycles() < spin_until) {
        if (done()) {
            return;
        }
        for (int i = 0; i < 64; ++i) {
            system::pause();
        }
    }
    _waiters.fetch_add(1, std::memory_order_seq_cst);
    // Workers wake us when they go to sleep; the timeout covers work that ends while every
    // worker is still spinning.
    const timespec timeout{0, 1'000'000};
    while (true) {
        const std::uint32_t events = _idle_events.load(std::memory_order_seq_cst);
        if (done()) {
            break;
        }
        futex_wait(_idle_events, events, &timeout);
    }
    _waiters.fetch_sub(1, std::memory_order_seq_cst);
}

/// Squads published together. Handed out one at a time, largest first, to the feeders (one per
/// worker): a worker takes its next squad when it has run out of other work, so a slower or
/// busier worker simply takes fewer squads.
struct PublishBatch {
    explicit PublishBatch(std::vector<Squad *> sorted, std::uint32_t feeder_count) noexcept
        : squads(std::move(sorted)), feeders(feeder_count) {}
    const std::vector<Squad *> squads;  // written before any feeder runs
    std::atomic<std::size_t> next{0};   // the next squad to hand out; any feeder
    std::atomic<std::uint32_t> feeders; // feeders not yet destroyed; the last one frees the batch
};

/// Takes the next squad of a publish batch and moves its tasks into the local pool of the worker
/// it runs on, then queues itself again at low priority: it runs once those tasks (and whatever
/// else the worker has queued) are done, and takes the next squad.
class SquadFeeder final : public Task {
public:
    explicit SquadFeeder(PublishBatch &batch) noexcept : _batch(&batch) {}
    SquadFeeder(const SquadFeeder &) = delete;
    SquadFeeder &operator=(const SquadFeeder &) = delete;
    ~SquadFeeder() override {
        // Also when a stopping runtime discards the feeder unrun.
        if (_batch->feeders.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            delete _batch;
        }
    }
    TaskResult execute(TaskContext &) noexcept override {
        const std::size_t next = _batch->next.fetch_add(1, std::memory_order_relaxed);
        if (next >= _batch->squads.size()) {
            return TaskResult::remove();
        }
        current_worker()->adopt(*_batch->squads[next]);
        return TaskResult::successor(this);
    }

private:
    PublishBatch *_batch;
};

template <class Push>
std::uint64_t Worker::adopt_each(Squad &squad, Push &&push) noexcept {
    std::uint64_t adopted = 0;
    while (!squad._tasks.empty()) {
        Task *task = squad._tasks.pop();
        if (task == nullptr) {
            system::pause(); // a producer is between its two stores
            continue;
        }
        // Squad tasks count as spawned from here on; they start a fresh epoch.
        task->annotate(static_cast<Squad *>(nullptr));
        count_spawn(*task);
        push(*task);
        ++adopted;
    }
    squad._queued.fetch_sub(adopted, std::memory_order_relaxed);
    return adopted;
}

void Worker::adopt(Squad &squad) noexcept {
    // Pinned: a squad's tasks run together on the worker that adopted it.
    adopt_each(squad, [this](Task &task) noexcept { _pool.push_pinned(task); });
}

void Worker::adopt_next(Squad &squad) noexcept {
    IntrusiveQueue<Task> chains[priority_count];
    adopt_each(squad, [&chains](Task &task) noexcept {
        chains[static_cast<std::size_t>(task.priority())].push_back(task);
    });
    _pool.prepend_pinned(chains);
}

void RuntimeCore::publish(Squad *const *squads, std::size_t count, Worker *caller) noexcept {
    if (count == 1 && caller != nullptr) {
        // One squad from inside a task: its data is in this core's cache (the task just made
        // it), so the squad runs here and next, ahead of the worker's queued tasks. Adopted on
        // the spot: no dispatch task, no allocation (a join publishes one squad per partition).
        caller->adopt_next(*squads[0]);
        return;
    }
    // Largest squads first (the last ones handed out are the short ones that even out the end);
    // empty ones have nothing to adopt.
    std::vector<Squad *> order;
    order.reserve(count);
    std::copy_if(squads, squads + count, std::back_inserter(order),
                 [](const Squad *squad) { return squad->queued() != 0; });
    if (order.empty()) {
        return;
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const Squad *a, const Squad *b) { return a->queued() > b->queued(); });
    const auto feeders = static_cast<std::uint16_t>(std::min(order.size(), _workers.size()));
    auto *batch = new PublishBatch{std::move(order), feeders};
    // Feeders start at a rotating worker, so single squads published from outside spread too.
    const auto first = static_cast<std::uint16_t>(
        _next_external_worker.fetch_add(1, std::memory_order_relaxed) % _workers.size());
    for (std::uint16_t i = 0; i < feeders; ++i) {
        const auto target = static_cast<std::uint16_t>((first + i) % _workers.size());
        Task *feeder =
            caller != nullptr
                ? caller->new_task<SquadFeeder>(*batch)
                : construct_task<SquadFeeder>(
                      *this,
                      [this](std::uint8_t size_class) noexcept { return allocate_external(size_class); },
                      *batch);
        feeder->annotate(Annotation{.target_worker = target, .priority = Priority::low});
        if (caller != nullptr) {
            caller->spawn(*feeder);
        } else {
            spawn_external(*feeder);
        }
    }
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
    const auto epoch = static_cast<std::uint8_t>(_reclamation ? global_epoch() % epoch_buckets : 0);
    if (routed_to_owner(task)) {
        set_epoch(task, epoch);
        _external_spawned[epoch].fetch_add(1, std::memory_order_seq_cst);
        push_domain(task, domain_of(task.resource()));
        return;
    }
    std::uint16_t target = task.target_worker();
    if (target == any_worker) {
        const std::uint32_t ticket = _next_external_worker.fetch_add(1, std::memory_order_relaxed);
        if (task.target_region() == any_region) {
            target = static_cast<std::uint16_t>(ticket % _workers.size());
        } else {
            // Out-of-range regions and workers are taken modulo the count (see Annotation).
            const auto &workers = _regions[task.target_region() % _regions.size()];
            target = workers[ticket % workers.size()];
        }
    } else if (target >= _workers.size()) [[unlikely]] {
        target = static_cast<std::uint16_t>(target % _workers.size());
    }
    set_epoch(task, epoch);
    _external_spawned[epoch].fetch_add(1, std::memory_order_seq_cst);
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

} // namespace detail

Runtime::Runtime(const RuntimeConfig &config) : _core(std::make_unique<detail::RuntimeCore>(config)) {
    _core->start();
}

Runtime::~Runtime() { _core->stop(); }

void Runtime::start() { _core->start(); }

void Runtime::stop() noexcept { _core->stop(); }

void Runtime::delete_task(Task &task) noexcept {
    detail::Worker *worker = detail::current_worker();
    if (worker != nullptr && &worker->core() == _core.get()) {
        worker->destroy(task);
    } else {
        _core->destroy_external(task);
    }
}

std::vector<WorkerStatistics> Runtime::statistics() const {
    std::vector<WorkerStatistics> result;
    for (std::uint16_t id = 0; id < _core->worker_count(); ++id) {
        result.push_back(_core->worker(id).statistics());
    }
    return result;
}

} // namespace mx::tasking
