// The worker: its loop over the task buffer (prefetching ahead), task execution, completion and
// the scheduler bypass. Where tasks come from and go to is in dispatch.cpp, synchronized
// execution in synchronized.cpp, coroutine groups in coroutine_group.cpp.

#include "mx/tasking/runtime.h"

#include "mx/system/memory_latency.h"
#include "mx/tasking/detail/prefetch.h"
#include "synchronized.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <typeinfo>

namespace mx::tasking::detail {

namespace {

thread_local Worker *tls_worker = nullptr;

/// What the worker prefetches for a task `distance` tasks before it runs: the data its
/// annotations name and the task object's lines after its first (the loop has just read that one
/// for the annotations). A tree operation's key and state lie there, and with hundreds of
/// operations queued per worker the objects are no longer in the L1 cache when their turn comes.
[[gnu::always_inline]] inline void prefetch_task(const Task &task) noexcept {
    prefetch_task_data(task);
    const auto *line = reinterpret_cast<const std::byte *>(&task);
    for (std::uint32_t i = RuntimeCore::descriptor_lines_beyond_first(task); i > 0; --i) {
        line += system::cache_line_size;
        system::prefetch_line<system::PrefetchMode::temporal>(line);
    }
}

} // namespace

Worker *current_worker() noexcept { return tls_worker; }

void out_of_task_memory() noexcept {
    std::fputs("mxtasking: out of memory while allocating a task descriptor\n", stderr);
    std::abort();
}

Worker::Worker(RuntimeCore &core, std::uint16_t id, std::uint8_t region, std::uint16_t cpu,
               memory::RegionHeap &heap, const RuntimeConfig &config)
    : _core(&core), _id(id), _region(region), _cpu(cpu), _idle_spin_cycles(config.idle_spin_cycles),
      _stealing(config.work_stealing), _optimistic_retries(config.optimistic_retries),
      _allocator(heap, config.allocator_batch),
      _pool(core.region_count(), config.work_stealing, config.local_order == LocalOrder::lifo),
      _buffer(config, config.load_latency_cycles != 0 ? config.load_latency_cycles
                      : config.dynamic_prefetch       ? system::load_latency_cycles()
                                                      : 0),
      _group(config.coroutine_group_size),
      _reclamation(config.memory_reclamation, std::max<std::uint32_t>(1, config.epoch_check_tasks),
                   make_reclaim_task(*this)),
      _steal_state((std::uint32_t{id} + 1U) * 2654435761U | 1U),
      _balance_ns(std::uint64_t{config.domain_balance_us} * 1000U) {}

void Worker::run() noexcept {
    tls_worker = this;
    _shared.trace_ack.store(_trace_seen, std::memory_order_release);
    while (!_core->stop_requested()) {
#if MX_TRACING
        // Once per round, on a line the worker reads after every task anyway.
        if (_core->trace_generation() != _trace_seen) [[unlikely]] {
            sync_trace();
        }
#endif
        if (_balance_ns != 0 && --_balance_countdown == 0) [[unlikely]] {
            _balance_countdown = balance_check_rounds;
            balance_domains();
        }
        _buffer.size = fill();
        _buffer.position = 0;
        refresh_local_epoch();
        if (_buffer.size == 0 && _group.size() == 0 && _stealing) {
            _buffer.size = steal();
        }
        if (_buffer.size == 0) {
            if (_group.size() > 0) {
                resume_group_round(); // nothing new: keep the parked coroutines going
            } else {
                idle();
            }
            continue;
        }
#if MX_TRACING
        if (_tracing) [[unlikely]] {
            if (_buffer.dynamic) {
                run_buffer_dynamic<true>();
            } else {
                run_buffer_static<true>();
            }
            _trace.close(system::cycles(), _shared.optimistic_retries.load(std::memory_order_relaxed));
            _trace.stolen_until = 0;
            release_domains();
            continue;
        }
#endif
        if (_buffer.dynamic) {
            run_buffer_dynamic<false>();
        } else {
            run_buffer_static<false>();
        }
        release_domains();
    }
    // A stop ends the loop between two tasks: drain() discards what is left in the buffer and
    // lets go of the domains held for it.
    tls_worker = nullptr;
    // From here on this thread records nothing: a stop_trace waiting for it may take its buffer.
    _shared.trace_ack.store(trace_ack_exited, std::memory_order_release);
}

void Worker::sync_trace() noexcept {
    const std::uint32_t generation = _core->trace_generation();
    _tracing = (generation & 1U) != 0;
    _stamp_spawns = _tracing && _trace.queue_times;
    _trace_seen = generation;
    _shared.trace_ack.store(generation, std::memory_order_release);
}

[[gnu::always_inline]] inline void Worker::execute_traced(Task &task, bool stolen, std::uint32_t distance,
                                                          TraceEvent &open) noexcept {
    _bypass_chain = 0;
    std::uint8_t flags = stolen ? trace_stolen : 0;
    Task *current = &task;
    do {
        // Everything is read before the run: a finished task may be destroyed by complete().
        const char *label = current->trace_label();
        const void *what = label != nullptr ? static_cast<const void *>(label) : &typeid(*current);
        const ResourcePtr resource = current->resource();
        const auto address = reinterpret_cast<std::uintptr_t>(resource.get());
        auto event_flags = static_cast<std::uint8_t>(flags | (label != nullptr ? trace_label : 0U) |
                                                     (current->squad() != nullptr ? trace_squad : 0U));
        // A task spawned while recording carries its spawn time: its queue time costs a counter
        // read per task. A stamp from before start_trace (a kept task spawned earlier) is stale.
        std::uint64_t now = 0;
        std::uint64_t queue = 0; // stays 0 unless the task has a queue time
        if (_stamp_spawns && (flags & trace_bypassed) == 0) [[unlikely]] {
            if (const std::uint64_t spawned = RuntimeCore::spawn_tsc_of(*current); spawned != 0) {
                now = system::cycles();
                const std::uint64_t waited = (now - spawned) & RuntimeCore::spawn_tsc_mask;
                if (waited <= now - _trace.origin) {
                    queue = waited;
                    event_flags |= trace_queued;
                }
            }
        }
        // Without queue times, one time stamp per run of equal tasks: it ends the previous run
        // and starts this one (reading the counter costs more than a tiny task: about 13 ns on
        // this VM). With them, the read for the queue time serves here, too. No open run has a
        // null `what`, and `run_limit` is 1 without merging: both fail the first compare.
        if (open.what != what || open.resource != address || open.flags != event_flags ||
            open.count == _trace.run_limit) [[unlikely]] {
            if (now == 0) {
                now = system::cycles();
            }
            // Only this worker bumps its retry count (optimistic reads that failed validation):
            // a relaxed load sees its own last bump, and the line is this worker's anyway.
            const std::uint64_t retries = _shared.optimistic_retries.load(std::memory_order_relaxed);
            _trace.end_run(open, now, retries);
            open = TraceEvent{.start = now,
                              .what = what,
                              .resource = address,
                              .retries = static_cast<std::uint32_t>(retries),
                              .other = resource ? static_cast<std::uint16_t>(primitive_of(resource))
                                                : std::uint16_t{0},
                              .kind = TraceEventKind::task,
                              .flags = event_flags};
        }
        ++open.count;
        open.queue_cycles += queue;
        open.prefetch_distance += distance;
        current = execute_one(*current);
        flags = trace_bypassed;
        distance = 0; // a bypass successor is not prefetched
    } while (current != nullptr);
}

void Worker::trace_span(const char *label, std::uint64_t start, std::uint64_t end) noexcept {
    if (_tracing) {
        _trace.record_span(TraceEvent{
            .start = start, .end = end, .what = label, .kind = TraceEventKind::span, .flags = trace_label});
    }
}

template <bool Traced>
void Worker::run_buffer_static() noexcept {
    // Filling the buffer read no descriptor, so the first `distance` tasks are prefetched now,
    // then task i + distance before task i; top-ups keep that distance across fills.
    // The task object itself is prefetched twice as far ahead as its data, whose annotations
    // the loop reads from it.
    const std::uint32_t distance = _buffer.distance;
    if (distance > 0) {
        for (std::uint32_t i = 0; i < std::min(distance, _buffer.size); ++i) {
            prefetch_task(*_buffer.tasks[i]);
        }
        for (std::uint32_t i = distance; i < std::min(2 * distance, _buffer.size); ++i) {
            system::prefetch_line<system::PrefetchMode::temporal>(_buffer.tasks[i]);
        }
    }
    std::uint32_t top_ups = 0;
    // Traced: the open run of equal tasks lives in a local while the tasks run.
    [[maybe_unused]] TraceEvent open{};
    [[maybe_unused]] const std::uint32_t traced_distance = std::min(distance, max_traced_distance);
    if constexpr (Traced) {
        open = _trace.open;
    }
    while (_buffer.position < _buffer.size) {
        if (distance > 0) {
            if (_buffer.position + distance == _buffer.size &&
                (_held.empty() || top_ups < max_top_ups_holding_domains)) {
                [[maybe_unused]] const std::uint32_t shifted = _buffer.position;
                const bool added = top_up();
                if constexpr (Traced) {
                    _trace.stolen_until -= std::min(_trace.stolen_until, shifted);
                }
                if (added) {
                    ++top_ups;
                }
            }
            if (_buffer.position + distance < _buffer.size) {
                prefetch_task(*_buffer.tasks[_buffer.position + distance]);
                if (_buffer.position + 2 * distance < _buffer.size) {
                    system::prefetch_line<system::PrefetchMode::temporal>(
                        _buffer.tasks[_buffer.position + 2 * distance]);
                }
            }
        }
        if constexpr (Traced) {
            const std::uint32_t slot = _buffer.position++;
            execute_traced(*_buffer.tasks[slot], slot < _trace.stolen_until, traced_distance, open);
        } else {
            execute_chain(*_buffer.tasks[_buffer.position++]);
        }
        if (_core->stop_requested()) [[unlikely]] {
            break;
        }
    }
    if constexpr (Traced) {
        _trace.open = open;
    }
}

void Worker::refresh_local_epoch() noexcept {
    _reclamation.local_epoch = static_cast<std::uint8_t>(_core->global_epoch() % epoch_buckets);
}

bool Worker::top_up() noexcept {
    const std::uint32_t remaining = _buffer.size - _buffer.position;
    Task **tasks = _buffer.tasks.data();
    std::copy(tasks + _buffer.position, tasks + _buffer.size, tasks);
    _buffer.position = 0;
    _buffer.size = remaining;
    refresh_local_epoch();
    const std::uint32_t added = fill(tasks + remaining, _buffer.capacity() - remaining);
    _buffer.size += added;
    return added > 0;
}

template <bool Traced>
void Worker::run_buffer_dynamic() noexcept {
    for (std::uint32_t i = 0; i < _buffer.size; ++i) {
        _buffer.expected_cycles[i] = _buffer.expected_cycles_of(*_buffer.tasks[i]);
        _buffer.prefetch_cycles[i] = prefetch_lines(*_buffer.tasks[i]) * _buffer.load_latency_cycles;
    }
    compute_prefetch_slots(_buffer.expected_cycles.data(), _buffer.prefetch_cycles.data(), _buffer.size,
                           _buffer.prefetch_slots.data());
    std::uint32_t next_prefetch = 0;
    [[maybe_unused]] TraceEvent open{};
    if constexpr (Traced) {
        open = _trace.open;
    }
    while (_buffer.position < _buffer.size) {
        while (next_prefetch < _buffer.size && _buffer.prefetch_slots[next_prefetch] <= _buffer.position) {
            prefetch_task(*_buffer.tasks[next_prefetch++]);
        }
        Task *task = _buffer.tasks[_buffer.position++];
        if constexpr (Traced) {
            const std::uint32_t slot = _buffer.position - 1;
            const bool stolen = slot < _trace.stolen_until;
            // Its data was prefetched while the task at its prefetch slot was about to run.
            const std::uint32_t distance =
                std::min(slot - std::min(slot, _buffer.prefetch_slots[slot]), max_traced_distance);
            if (--_buffer.sample_countdown == 0) [[unlikely]] {
                // While tracing, a sample also counts the bypass successors the task hands over.
                _buffer.sample_countdown = PrefetchBuffer::sample_interval;
                const void *type = &typeid(*task);
                const std::uint64_t start = system::cycles();
                execute_traced(*task, stolen, distance, open);
                _buffer.record_sample(type, static_cast<std::uint32_t>(std::min<std::uint64_t>(
                                                system::cycles() - start, 1U << 24U)));
            } else {
                execute_traced(*task, stolen, distance, open);
            }
        } else if (--_buffer.sample_countdown == 0) [[unlikely]] {
            execute_sampled(*task);
        } else {
            execute(*task);
        }
        if (_core->stop_requested()) [[unlikely]] {
            break;
        }
    }
    if constexpr (Traced) {
        _trace.open = open;
    }
}

void Worker::execute_sampled(Task &task) noexcept {
    _buffer.sample_countdown = PrefetchBuffer::sample_interval;
    const void *type = &typeid(task);
    const std::uint64_t start = system::cycles();
    // Only the sampled task counts: successors it hands over by bypass run after the sample
    // (they may be of another type, and a chain would inflate the estimate for this one).
    _bypass_chain = 0;
    Task *next = execute_one(task);
    const auto elapsed =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(system::cycles() - start, 1U << 24U));
    _buffer.record_sample(type, elapsed);
    run_bypassed(next);
}

// Inlined into the static buffer loop, the path of every pooled task: a call there saves and
// restores the callee-saved registers per task. One call site of execute_one, so one copy of it.
[[gnu::always_inline]] inline void Worker::execute_chain(Task &task) noexcept {
    _bypass_chain = 0;
    Task *next = &task;
    do {
        next = execute_one(*next);
    } while (next != nullptr);
}

void Worker::execute(Task &task) noexcept { execute_chain(task); }

void Worker::run_inline(Task &task) noexcept {
    Task *const outer = _running;
    // The outer task runs under no primitive (no resource), so nothing it holds can conflict
    // with the inner task's synchronization, and the optimistic-read state is free. A task routed
    // to its domain's owner is queued even where this worker holds the domain: running it now
    // would overtake tasks of its resource that wait in the domain, whose order scheduling keeps.
    // One level only: an inline run inside an inline run would grow the stack with every level.
    if (outer == nullptr || _inline_run || outer->resource() || routed_to_owner(task) || !stays_here(task)) {
        spawn(task);
        return;
    }
    _inline_run = true;
    const std::uint32_t chain = _bypass_chain;
    count_spawn(task); // the outer task's epoch, as any spawn from it
    _bypass_chain = 0;
    run_bypassed(&task);
    _bypass_chain = chain;
    _running = outer;
    _inline_run = false;
}

void Worker::run_bypassed(Task *next) noexcept {
    while (next != nullptr) {
        next = execute_one(*next);
    }
}

[[gnu::always_inline]] inline Task *Worker::finish(Task &task, const TaskResult &result) noexcept {
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
        } else if (next == &task && task.resource() && goes_to_local_pool(task)) [[likely]] {
            // The task hands itself on (a lookup moving to the next node). A task on a resource
            // keeps its epoch as its own successor, so spawning it and completing this run
            // would move both counts of one bucket by one: it stays counted as one live task.
            MX_ASSERT(result.action() == TaskResult::Action::keep,
                      "a task cannot hand itself on and be removed");
            bump(_shared.handoffs);
            stamp_queue_time(task);
            _running = nullptr;
            push_local(task);
            count_run_for_epoch();
            return nullptr;
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
    count_run_for_epoch();
    return run_now;
}

Task *Worker::complete(Task &task, const TaskResult &result) noexcept { return finish(task, result); }

[[gnu::always_inline]] inline Task *Worker::execute_one(Task &task) noexcept {
    TaskContext context{*this};
    _running = &task; // spawns from the task (and its successor) see its epoch
    TaskResult result = TaskResult::done();
    const ResourcePtr resource = task.resource();
    const AccessMode access = task.access();
    const sync::Primitive primitive =
        resource && access != AccessMode::none ? primitive_of(resource) : sync::Primitive::none;
    bool ran = true; // false: an optimistic read kept failing
    if (primitive == sync::Primitive::none) {
        result = task.execute(context);
    } else {
        // A deleted resource stays valid until reclamation frees it: tasks dispatched before the
        // delete (or carrying a pointer read before it) may still run on it.
        MX_ASSERT(header_of(resource).state.load(std::memory_order_relaxed) == ResourceHeader::alive ||
                      header_of(resource).state.load(std::memory_order_relaxed) == ResourceHeader::retired,
                  "task annotated with something that is not a live resource from new_resource (or already "
                  "freed)");
        // Readers of optimistically synchronized resources, the steps of a lookup in an index,
        // validate right here; every other combination goes through the primitive switch.
        if (access == AccessMode::read_only &&
            (primitive == sync::Primitive::optimistic_latched ||
             (primitive == sync::Primitive::optimistic_scheduled && !holds(domain_of(resource))))) {
            ran = run_optimistic_read(task, context, header_of(resource), result);
        } else {
            run_primitive(task, context, resource, header_of(resource), access == AccessMode::read_only,
                          result);
        }
        MX_ASSERT(result.action() != TaskResult::Action::suspend,
                  "a coroutine task cannot suspend while synchronized on a resource");
    }
    if (!ran) [[unlikely]] {
        // An optimistic read kept failing: put back for a later attempt. The re-queue counts as
        // a new spawn that keeps the task's epoch (_running is still the task), so its resource
        // stays protected.
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
    return finish(task, result);
}

void Worker::drain() noexcept {
    const auto discard = [this](Task *task) {
        const std::uint8_t epoch = RuntimeCore::epoch_of(*task);
        if (task->is_runtime_owned()) {
            destroy(*task);
        }
        bump(_shared.completed[epoch], 1, std::memory_order_release);
    };
    for (; _buffer.position < _buffer.size; ++_buffer.position) {
        discard(_buffer.tasks[_buffer.position]);
    }
    _group.clear(discard);
    _buffer.size = _buffer.position = 0;
    release_domains();
    // Workers are joined and outside spawns are refused (stop() closed the door): this ends.
    while (true) {
        const std::uint32_t count = fill();
        release_domains();
        if (count == 0) {
            break;
        }
        for (std::uint32_t i = 0; i < count; ++i) {
            discard(_buffer.tasks[i]);
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
    // A task handing itself on counts as one more spawn and one more completion.
    const std::uint64_t handoffs = _shared.handoffs.load(std::memory_order_relaxed);
    s.tasks_executed += handoffs;
    s.spawned_local = spawned + handoffs - s.spawned_remote;
    s.allocator_refills = _allocator.refills();
    s.idle_cycles = _shared.idle_cycles.load(std::memory_order_relaxed);
    s.sleeps = _shared.sleeps.load(std::memory_order_relaxed);
    s.optimistic_retries = _shared.optimistic_retries.load(std::memory_order_relaxed);
    s.retired = _shared.retired.load(std::memory_order_relaxed);
    s.reclaimed = _shared.reclaimed.load(std::memory_order_relaxed);
    s.stolen_tasks = _shared.stolen_tasks.load(std::memory_order_relaxed);
    s.stolen_domains = _shared.stolen_domains.load(std::memory_order_relaxed);
    s.balanced_domains = _shared.balanced_domains.load(std::memory_order_relaxed);
    return s;
}

} // namespace mx::tasking::detail
