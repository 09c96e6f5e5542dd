#pragma once

// The task: an intrusive, run-to-completion unit of work with a one-cache-line header that holds
// its annotations and the runtime's bookkeeping.

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "mx/system/cpu.h"
#include "mx/tasking/annotation.h"
#include "mx/util/assert.h"

namespace mx::tasking {

class TaskContext;

/// What a task asks the runtime to do once its execute() returned.
class TaskResult {
public:
    enum class Action : std::uint8_t { keep, remove, stop, suspend, commit };

    /// The task is finished; its memory belongs to whoever created it (not the runtime).
    static constexpr TaskResult done() noexcept { return {nullptr, Action::keep}; }
    /// The task is finished; the runtime destroys it and returns its memory.
    static constexpr TaskResult remove() noexcept { return {nullptr, Action::remove}; }
    /// Dispatch `next` as if spawned by this task; the task itself is kept.
    static constexpr TaskResult successor(Task *next) noexcept { return {next, Action::keep}; }
    /// Dispatch `next`, then destroy this task.
    static constexpr TaskResult successor_and_remove(Task *next) noexcept { return {next, Action::remove}; }
    /// Runs `next` on this worker right after this task (scheduler bypass): no trip through the
    /// task pool, so no queueing and no prefetch; the task itself is kept. Meant for successors
    /// whose data is in cache anyway (the few nodes of a tree's upper levels) or that have none
    /// (delivering the result of a validated read): a dispatch costs more than it hides there.
    /// `next` still runs under its resource's primitive, and only after this task's optimistic
    /// read was validated. A successor that must run elsewhere (target worker or region, squad,
    /// a scheduled resource of another worker) is spawned as usual, and a worker bypasses at most
    /// a few tasks in a row before it spawns one, so a bypass chain cannot starve the pool.
    static constexpr TaskResult bypass(Task *next) noexcept { return {next, Action::keep, true}; }
    /// bypass(next), then destroy this task.
    static constexpr TaskResult bypass_and_remove(Task *next) noexcept {
        return {next, Action::remove, true};
    }
    /// The task is finished: the runtime calls its commit() and then destroys it. commit() runs
    /// only once the run stands: after an optimistic read was validated (a failed validation
    /// runs execute() again, not commit()), after a hardware transaction committed, or right
    /// away under any other primitive. For what a repeated read must not do twice, such as
    /// handing a lookup's result to its caller; it costs no extra dispatch.
    static constexpr TaskResult commit() noexcept { return {nullptr, Action::commit}; }
    /// Ask the runtime to stop: workers leave their loops; Runtime::wait() returns.
    static constexpr TaskResult stop() noexcept { return {nullptr, Action::stop}; }
    /// Coroutine tasks only (CoroutineTask): the body suspended; the worker parks the task in
    /// its group and runs it again later. Not finished, so not counted as completed.
    static constexpr TaskResult suspend() noexcept { return {nullptr, Action::suspend}; }

    [[nodiscard]] Task *next() const noexcept { return _successor; }
    [[nodiscard]] Action action() const noexcept { return _action; }
    /// Whether next() asks for the scheduler bypass (bypass()).
    [[nodiscard]] bool bypasses() const noexcept { return _bypass; }

private:
    constexpr TaskResult(Task *successor, Action action, bool bypass = false) noexcept
        : _successor(successor), _action(action), _bypass(bypass) {}
    Task *_successor;
    Action _action;
    bool _bypass;
};

namespace detail {
class Worker;
class TaskPool;
template <class T>
class IntrusiveQueue;
template <class T>
class MpscQueue;
class RuntimeCore;
} // namespace detail

/// Base class of every task. Subclasses implement execute(); the header holds the annotations.
/// A task is spawned at most once at a time: it is linked into exactly one queue until it runs.
class alignas(system::cache_line_size) Task {
public:
    Task() noexcept = default;
    explicit Task(const Annotation &annotation) noexcept { annotate(annotation); }
    Task(const Task &) = delete;
    Task &operator=(const Task &) = delete;
    virtual ~Task() = default;

    virtual TaskResult execute(TaskContext &context) noexcept = 0;

    /// The bytes of this task an optimistic re-execution must restore. A task that reads a
    /// resource optimistically may run more than once: the worker copies these bytes before the
    /// run and puts them back when validation fails. The default (nothing) fits tasks whose
    /// execute() only reads members it never writes. Use state_bytes(member) to return a member.
    virtual std::span<std::byte> optimistic_state() noexcept { return {}; }

    /// Called by the runtime for a run that returned TaskResult::commit(), once that run stands
    /// (see there), on the worker that ran it; the task is destroyed right after. Runtime-owned
    /// tasks only.
    virtual void commit(TaskContext &context) noexcept { static_cast<void>(context); }

    /// The name of this task in a trace (mx/tasking/trace.h): a string that lives as long as the
    /// trace, e.g. a literal. nullptr (the default) = the task's demangled type name. Called only
    /// while tracing, before each run.
    [[nodiscard]] virtual const char *trace_label() const noexcept { return nullptr; }

    void annotate(const Annotation &annotation) noexcept {
        _h.target_worker = annotation.target_worker;
        _h.target_region = annotation.target_region;
        _h.priority = annotation.priority;
        _h.resource = annotation.resource;
        _h.access = annotation.access;
        _h.prefetch = annotation.prefetch;
        _h.squad = annotation.squad;
        _h.expected_cycles = annotation.expected_cycles;
    }
    [[nodiscard]] Annotation annotation() const noexcept {
        return Annotation{.target_worker = _h.target_worker,
                          .target_region = _h.target_region,
                          .priority = _h.priority,
                          .resource = _h.resource,
                          .access = _h.access,
                          .prefetch = _h.prefetch,
                          .squad = _h.squad,
                          .expected_cycles = _h.expected_cycles};
    }

    void annotate(std::uint16_t target_worker) noexcept { _h.target_worker = target_worker; }
    void annotate(Priority priority) noexcept { _h.priority = priority; }
    void annotate(ResourcePtr resource, AccessMode access) noexcept {
        _h.resource = resource;
        _h.access = access;
    }
    void annotate(PrefetchHint prefetch) noexcept { _h.prefetch = prefetch; }
    void annotate_region(std::uint8_t region) noexcept { _h.target_region = region; }
    void annotate(Squad *squad) noexcept { _h.squad = squad; }

    [[nodiscard]] std::uint16_t target_worker() const noexcept { return _h.target_worker; }
    [[nodiscard]] std::uint8_t target_region() const noexcept { return _h.target_region; }
    [[nodiscard]] Priority priority() const noexcept { return _h.priority; }
    [[nodiscard]] ResourcePtr resource() const noexcept { return _h.resource; }
    [[nodiscard]] AccessMode access() const noexcept { return _h.access; }
    [[nodiscard]] PrefetchHint prefetch_hint() const noexcept { return _h.prefetch; }
    [[nodiscard]] Squad *squad() const noexcept { return _h.squad; }
    [[nodiscard]] std::uint32_t expected_cycles() const noexcept { return _h.expected_cycles; }

    template <class T>
    static std::span<std::byte> state_bytes(T &member) noexcept {
        static_assert(std::is_trivially_copyable_v<T>, "optimistic state is restored by copying bytes");
        return std::as_writable_bytes(std::span<T, 1>{&member, 1});
    }

    /// True when the runtime allocated this task (new_task) and may destroy it.
    [[nodiscard]] bool is_runtime_owned() const noexcept { return _h.size_class != not_runtime_owned; }

private:
    template <class T>
    friend class detail::IntrusiveQueue;
    template <class T>
    friend class detail::MpscQueue;
    friend class detail::Worker;
    friend class detail::RuntimeCore;

    static constexpr std::uint8_t not_runtime_owned = 0xFF;

    // Queue link. Written by the producer that enqueues the task and read by the consumer
    // worker; atomic because the multi-producer queue publishes through it.
    std::atomic<Task *> _next{nullptr};

    /// Everything after the queue link, in one trivially copyable block: an optimistic read saves
    /// the annotations before the run and puts them back after a failed validation with a few
    /// moves (the runtime's fields in the block do not change while the task runs).
    struct Header {
        // The annotations, owned by whoever holds the task (its spawner, then the worker running
        // it).
        ResourcePtr resource{};
        PrefetchHint prefetch{};
        Squad *squad{nullptr};
        std::uint32_t expected_cycles{0};
        // Low 32 bits of the time-stamp counter at the last spawn while a trace recorded (high 8
        // bits in spawn_tsc_high, the header's last byte): the queue time of a traced task.
        // Written by the spawning thread before the task is queued, read by the worker that runs
        // it; left alone while no trace records, so spawns cost nothing extra then.
        std::uint32_t spawn_tsc{0};
        std::uint16_t target_worker{any_worker};
        std::uint8_t target_region{any_region};
        Priority priority{Priority::normal};
        AccessMode access{AccessMode::none};
        // Runtime bookkeeping, written by the allocating thread before the first spawn:
        // not_runtime_owned, or the allocation's size class (memory::TaskAllocator; bits 0-2,
        // 7 for oversized) and the cache lines the task object spans beyond its first, at most 3
        // (bits 3-4), which the worker prefetches with the task's data.
        std::uint8_t size_class{not_runtime_owned};
        // Epoch stamp for memory reclamation, written by the dispatching thread at spawn and read
        // by the executing worker.
        std::uint8_t epoch{0};
        std::uint8_t spawn_tsc_high{0};
    };
    static_assert(std::is_trivially_copyable_v<Header>);
    Header _h{};
};

static_assert(sizeof(Task) == system::cache_line_size, "the task header must stay one cache line");

/// Callables that can become tasks: invoked with the context or with nothing; may return a
/// TaskResult, otherwise the lambda task removes itself after running.
template <class F>
concept TaskFunction = std::is_nothrow_move_constructible_v<F> &&
                       (std::invocable<F &, TaskContext &> || std::invocable<F &>);

template <TaskFunction F>
class LambdaTask final : public Task {
public:
    explicit LambdaTask(F function, const Annotation &annotation = {}) noexcept
        : Task(annotation), _function(std::move(function)) {}

    TaskResult execute(TaskContext &context) noexcept override {
        if constexpr (std::invocable<F &, TaskContext &>) {
            if constexpr (std::is_same_v<std::invoke_result_t<F &, TaskContext &>, TaskResult>) {
                return _function(context);
            } else {
                _function(context);
                return is_runtime_owned() ? TaskResult::remove() : TaskResult::done();
            }
        } else {
            static_cast<void>(context);
            if constexpr (std::is_same_v<std::invoke_result_t<F &>, TaskResult>) {
                return _function();
            } else {
                _function();
                return is_runtime_owned() ? TaskResult::remove() : TaskResult::done();
            }
        }
    }

private:
    F _function;
};

} // namespace mx::tasking
