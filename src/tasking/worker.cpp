// The worker: its loop over the task buffer (prefetching ahead), task execution, completion and
// the scheduler bypass. Where tasks come from and go to is in dispatch.cpp, synchronized
// execution in synchronized.cpp, coroutine groups in coroutine_group.cpp.

#include "mx/tasking/runtime.h"

#include "mx/system/memory_latency.h"
#include "mx/tasking/detail/prefetch.h"
#include "reclamation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <typeinfo>

namespace mx::tasking::detail {

namespace {

thread_local Worker *tls_worker = nullptr;

} // namespace

Worker *current_worker() noexcept { return tls_worker; }

void out_of_task_memory() noexcept {
    std::fputs("mxtasking: out of memory while allocating a task descriptor\n", stderr);
    std::abort();
}

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
      _steal_state((std::uint32_t{id} + 1U) * 2654435761U | 1U), _reclaim_task(make_reclaim_task(*this)) {}

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

} // namespace mx::tasking::detail
