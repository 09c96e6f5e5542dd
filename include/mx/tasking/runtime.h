#pragma once

// The public face of the runtime: start workers, spawn tasks from anywhere, wait, stop.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mx/system/topology.h"
#include "mx/tasking/annotation.h"
#include "mx/tasking/config.h"
#include "mx/tasking/detail/prefetch.h"
#include "mx/tasking/detail/worker.h"
#include "mx/tasking/resource.h"
#include "mx/tasking/squad.h"
#include "mx/tasking/task.h"
#include "mx/tasking/trace.h"

namespace mx::tasking {

class Runtime;

namespace detail {
std::uint8_t frequency_weight(AccessFrequency frequency) noexcept;
/// Frees a resource (object and header) once reclamation says no task can reach it.
void free_resource(void *header) noexcept;

template <class T, class... Args>
ResourcePtr make_resource(RuntimeCore &core, const ResourceAnnotation &annotation, std::uint16_t domain,
                          Args &&...args) {
    static_assert(alignof(T) <= system::cache_line_size, "over-aligned resources are not supported");
    const sync::Primitive primitive = choose_primitive(annotation, core.htm());
    void *memory =
        ::operator new(sizeof(ResourceHeader) + sizeof(T), std::align_val_t{system::cache_line_size});
    auto *header = new (memory) ResourceHeader{};
    header->object_size = static_cast<std::uint32_t>(sizeof(T));
    header->destroy = [](void *object) noexcept { static_cast<T *>(object)->~T(); };
    header->domain = domain;
    header->weight = frequency_weight(annotation.frequency);
    T *object = new (header + 1) T(std::forward<Args>(args)...);
    return ResourcePtr{object, make_tag(primitive, domain)};
}

inline void retire_resource(RuntimeCore &core, Worker *worker, ResourcePtr resource) noexcept {
    ResourceHeader &header = header_of(resource);
    [[maybe_unused]] const std::uint32_t previous =
        header.state.exchange(ResourceHeader::retired, std::memory_order_acq_rel);
    MX_ASSERT(previous == ResourceHeader::alive, "resource deleted twice (or never created by new_resource)");
    core.release_domain(header.domain, header.weight);
    if (worker != nullptr) {
        worker->retire(&header, free_resource);
    } else {
        core.retire(&header, free_resource);
    }
}
} // namespace detail

/// Handed to Task::execute: the worker the task runs on, and spawning from inside a task
/// without any global lookup.
class TaskContext {
public:
    explicit TaskContext(detail::Worker &worker) noexcept : _worker(&worker) {}

    [[nodiscard]] std::uint16_t worker_id() const noexcept { return _worker->id(); }
    [[nodiscard]] std::uint8_t numa_region() const noexcept { return _worker->region(); }
    [[nodiscard]] std::uint16_t worker_count() const noexcept { return _worker->core().worker_count(); }
    [[nodiscard]] std::uint16_t region_count() const noexcept { return _worker->core().region_count(); }

    /// Dispatches a task by its annotations (local by default). The task must not be queued.
    void spawn(Task &task) noexcept { _worker->spawn(task); }
    /// Like spawn, but runs the task right away, before returning, when it could run on this
    /// worker without overtaking tasks of its resource that wait in a synchronization domain
    /// (it is not routed to the domain's owner) and the calling task is not annotated with a
    /// resource: a task whose first steps touch data that is in cache anyway (the root of an
    /// index) saves its round through the pool. It runs under its resource's primitive and
    /// hands on successors as if dispatched here; tasks it spawns and successors it queues go out
    /// as usual. Falls back to spawn() otherwise, and inside a task that itself runs inline.
    /// Traces show the inline run as part of the calling task.
    void run_inline(Task &task) noexcept { _worker->run_inline(task); }

    /// Runs `read()` as a reader of `resource` under the resource's primitive and returns its
    /// result once the read stands: validated against the resource's version (optimistic
    /// primitives; a read that a writer interfered with runs again), under the shared latch
    /// (rw_latch) or the lock (spinlock, and HTM's fallback lock), or directly where nothing
    /// synchronizes. For a task that reads more resources than the one it is annotated with, such
    /// as a coroutine that walks an index and suspends between the nodes it reads. `read` must
    /// not write shared state, spawn or suspend, and may run more than once (only the last run's
    /// result is returned). A resource synchronized by scheduling is read while this worker
    /// holds its domain, which it takes for the read when nobody drains it; nullopt when another
    /// worker drains it right now (send a task there instead).
    template <class F>
    [[nodiscard]] std::optional<std::invoke_result_t<F &>> read(ResourcePtr resource, F &&read) noexcept {
        return _worker->read_resource(resource, read);
    }

    /// Prefetches what a reader of `resource` touches first: the line with its latch or version
    /// (synchronized resources) and, in `mode`, the object's lines that `line_mask` names (bit i:
    /// line i). For a task that reads resources besides its annotated one (see read()), before it
    /// suspends.
    [[gnu::always_inline]] static void prefetch_for_read(ResourcePtr resource, std::uint64_t line_mask,
                                                         system::PrefetchMode mode) noexcept {
        if (primitive_of(resource) != sync::Primitive::none) {
            system::prefetch_line<system::PrefetchMode::temporal>(&detail::header_of(resource));
        }
        system::with_prefetch_mode(
            mode, [base = static_cast<const std::byte *>(resource.get()), line_mask](auto fixed) noexcept {
                detail::for_each_masked_line(base, line_mask, [](const std::byte *line) noexcept {
                    system::prefetch_line<decltype(fixed)::value>(line);
                });
            });
    }

    /// Creates a runtime-owned task from the worker-local allocator.
    template <class T, class... Args>
    T *new_task(Args &&...args) noexcept {
        return _worker->new_task<T>(std::forward<Args>(args)...);
    }
    template <TaskFunction F>
    Task *new_task(F function, const Annotation &annotation = {}) noexcept {
        return _worker->new_task<LambdaTask<F>>(std::move(function), annotation);
    }
    template <TaskFunction F>
    void spawn(F function, const Annotation &annotation = {}) noexcept {
        spawn(*new_task(std::move(function), annotation));
    }
    /// Whether this worker records a trace now (mx/tasking/trace.h).
    [[nodiscard]] bool tracing() const noexcept { return _worker->tracing(); }
    /// Adds a named span to the trace being recorded (nothing when none is): `label` must outlive
    /// the trace (a literal or an interned string), times are system::cycles() values. The
    /// default end is the end of this task's slice, so the span encloses the task that records
    /// it. Recorded into this worker's buffer, without locks.
    void trace_span(const char *label, std::uint64_t start_tsc,
                    std::uint64_t end_tsc = trace_until_task_end) noexcept {
        _worker->trace_span(label, start_tsc, end_tsc);
    }

    /// Destroys a runtime-owned task that is not queued (e.g. one that returned done()).
    void delete_task(Task &task) noexcept { _worker->destroy(task); }

    /// Creates a resource (see Runtime::new_resource). A forced worker out of range is taken
    /// modulo the worker count (a task has no way to report the error).
    template <class T, class... Args>
    ResourcePtr new_resource(const ResourceAnnotation &annotation, Args &&...args) noexcept {
        auto &core = _worker->core();
        const std::uint16_t domain =
            core.assign_domain(annotation.worker, detail::frequency_weight(annotation.frequency));
        return detail::make_resource<T>(core, annotation, domain, std::forward<Args>(args)...);
    }
    /// Logically deletes a resource; its memory is reclaimed once no task can reach it.
    void delete_resource(ResourcePtr resource) noexcept {
        detail::retire_resource(_worker->core(), _worker, resource);
    }
    /// Defers `deleter(object)` until no task that may have seen `object` is in flight.
    void retire(void *object, void (*deleter)(void *) noexcept) noexcept { _worker->retire(object, deleter); }

    /// Publishes squads (see Squad): their queued tasks move to workers and run.
    void publish(std::span<Squad *const> squads) noexcept {
        _worker->core().publish(squads.data(), squads.size(), _worker);
    }
    void publish(Squad &squad) noexcept {
        Squad *one = &squad;
        publish(std::span<Squad *const>{&one, 1});
    }

private:
    detail::Worker *_worker;
};

class Runtime {
public:
    /// Starts the workers. Throws ConfigError naming the problem on a bad configuration.
    explicit Runtime(const RuntimeConfig &config = {});
    ~Runtime();
    Runtime(const Runtime &) = delete;
    Runtime &operator=(const Runtime &) = delete;

    /// Starts the workers again after stop() (or after a task returned TaskResult::stop()).
    /// No-op when running.
    void start();
    /// Stops and joins the workers. Tasks still queued are destroyed if runtime-owned (user-owned
    /// ones are unlinked and may be spawned again). From the moment stop() begins until start(),
    /// spawns from threads outside the workers are refused: a runtime-owned task is destroyed at
    /// once, a user-owned one is not queued (a spawn racing with the start of stop() may instead
    /// stay queued for the next start()). So stop() returns even while others keep spawning.
    void stop() noexcept;
    /// False after stop() and as soon as a task returned TaskResult::stop().
    [[nodiscard]] bool running() const noexcept { return _core->running(); }

    /// Whether the calling thread is one of this runtime's workers (i.e. code running in a task
    /// of this runtime). Blocking calls such as wait() are only allowed where this is false.
    [[nodiscard]] bool on_worker() const noexcept {
        const detail::Worker *worker = detail::current_worker();
        return worker != nullptr && &worker->core() == _core.get();
    }

    /// Blocks until every spawned task has run (and every task they spawned), or until a task
    /// returned TaskResult::stop(). Call from outside the workers.
    void wait() noexcept { _core->wait(); }

    /// Any thread: from a worker of this runtime it dispatches like TaskContext::spawn; from
    /// elsewhere it goes to the annotated worker/region or round-robin over all workers.
    void spawn(Task &task) noexcept {
        detail::Worker *worker = detail::current_worker();
        if (worker != nullptr && &worker->core() == _core.get()) {
            worker->spawn(task);
        } else {
            _core->spawn_external(task);
        }
    }
    template <TaskFunction F>
    void spawn(F function, const Annotation &annotation = {}) noexcept {
        spawn(*new_task(std::move(function), annotation));
    }

    template <class T, class... Args>
    T *new_task(Args &&...args) noexcept;
    template <TaskFunction F>
    Task *new_task(F function, const Annotation &annotation = {}) noexcept {
        return new_task<LambdaTask<F>>(std::move(function), annotation);
    }
    void delete_task(Task &task) noexcept;

    /// Creates a data object managed by the runtime. The annotation decides the synchronization
    /// primitive (cost model, or forced) and the synchronization domain; both are tagged into
    /// the returned pointer. Tasks name it with Annotation::resource and ::access. Throws ConfigError
    /// for a forced worker the runtime does not have.
    template <class T, class... Args>
    ResourcePtr new_resource(const ResourceAnnotation &annotation, Args &&...args) {
        if (annotation.worker && *annotation.worker >= worker_count()) {
            throw ConfigError{"resource annotated with worker " + std::to_string(*annotation.worker) +
                              " but the runtime has " + std::to_string(worker_count())};
        }
        const std::uint16_t domain =
            _core->assign_domain(annotation.worker, detail::frequency_weight(annotation.frequency));
        return detail::make_resource<T>(*_core, annotation, domain, std::forward<Args>(args)...);
    }
    /// The worker that runs the scheduled tasks of `resource` now: its domain's owner (which
    /// changes when an idle worker steals the domain).
    [[nodiscard]] std::uint16_t owner_of(ResourcePtr resource) const noexcept {
        return _core->owner_of_domain(domain_of(resource));
    }
    /// Logically deletes a resource; the object is destroyed and freed once no task can reach it
    /// (epoch-based reclamation). Deleting twice is a programmer error (asserts).
    void delete_resource(ResourcePtr resource) noexcept {
        detail::Worker *worker = detail::current_worker();
        detail::retire_resource(
            *_core, worker != nullptr && &worker->core() == _core.get() ? worker : nullptr, resource);
    }
    /// Defers `deleter(object)` until no task that may have seen `object` is in flight.
    void retire(void *object, void (*deleter)(void *) noexcept) noexcept {
        detail::Worker *worker = detail::current_worker();
        if (worker != nullptr && &worker->core() == _core.get()) {
            worker->retire(object, deleter);
        } else {
            _core->retire(object, deleter);
        }
    }
    /// Publishes squads from any thread (see Squad): their queued tasks move to workers and run.
    void publish(std::span<Squad *const> squads) noexcept {
        detail::Worker *worker = detail::current_worker();
        _core->publish(squads.data(), squads.size(),
                       worker != nullptr && &worker->core() == _core.get() ? worker : nullptr);
    }
    void publish(Squad &squad) noexcept {
        Squad *one = &squad;
        publish(std::span<Squad *const>{&one, 1});
    }

    /// The global reclamation epoch (advances every RuntimeConfig::epoch_interval_ms).
    [[nodiscard]] std::uint64_t epoch() const noexcept { return _core->global_epoch(); }
    /// Whether hardware transactions are used (RTM present and working).
    [[nodiscard]] bool htm_available() const noexcept { return _core->htm(); }

    [[nodiscard]] std::uint16_t worker_count() const noexcept { return _core->worker_count(); }
    [[nodiscard]] std::uint16_t region_count() const noexcept { return _core->region_count(); }
    /// Synchronization domains (workers x RuntimeConfig::domains_per_worker, at most 8192).
    [[nodiscard]] std::uint32_t domain_count() const noexcept { return _core->domain_count(); }
    [[nodiscard]] const system::Topology &topology() const noexcept { return _core->topology(); }
    [[nodiscard]] std::vector<WorkerStatistics> statistics() const;
    /// Runtime-owned tasks allocated and not yet freed (0 after wait() unless a task leaked).
    [[nodiscard]] std::uint64_t live_tasks() const noexcept { return _core->live_tasks(); }

    /// Starts recording a task timeline (mx/tasking/trace.h) while tasks run: each worker starts
    /// at its next round, and start_trace returns once all did (so every task spawned after it
    /// returns is recorded). Returns "" on success, else why not (already recording, compiled out
    /// with MX_TRACING=OFF, a bad $MX_TRACE_EVENTS, called from a task). Not concurrently with
    /// start() or stop(). With $MX_TRACE=path set, the constructor starts a trace and the
    /// destructor writes it there; with $MX_TRACE_PROFILE=1 the destructor prints its profile.
    [[nodiscard]] std::string start_trace(const TraceConfig &config = {});
    /// Stops recording and writes the trace to `path`: Chrome Trace Event JSON, or CSV when the
    /// path ends in ".csv". Waits until every worker finished the task it runs now. An
    /// unwritable path or no trace being recorded is an error in the result; the runtime goes on.
    [[nodiscard]] TraceWriteResult stop_trace(const std::string &path);
    /// Adds a named span (`label` outlives the trace; times are system::cycles() values) to the
    /// trace being recorded, shown on a track of its own; nothing when none is recorded. From a
    /// task, TaskContext::trace_span records without locks; from other threads it takes a mutex.
    void trace_span(const char *label, std::uint64_t start_tsc, std::uint64_t end_tsc);
    /// Stops recording and hands the trace over in memory; nullopt when none was recorded.
    [[nodiscard]] std::optional<Trace> stop_trace();
    [[nodiscard]] bool tracing() const noexcept;

private:
    void start_env_trace();
    void stop_env_trace() noexcept;

    std::unique_ptr<detail::RuntimeCore> _core;
};

template <class T, class... Args>
T *Runtime::new_task(Args &&...args) noexcept {
    detail::Worker *worker = detail::current_worker();
    if (worker != nullptr && &worker->core() == _core.get()) {
        return worker->new_task<T>(std::forward<Args>(args)...);
    }
    return detail::construct_task<T>(
        *_core, [this](std::uint8_t size_class) noexcept { return _core->allocate_external(size_class); },
        std::forward<Args>(args)...);
}

} // namespace mx::tasking
