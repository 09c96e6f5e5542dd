#pragma once

// Task groups: count a set of tasks and learn when all of them finished, either by blocking a
// thread outside the runtime (wait) or by a continuation task (then), with cancellation and a
// first error. Tasks of a group may spawn more tasks into it (fork/join). See
// docs/design/task-group.md.
//
// Which task forms are safe as optimistic readers (a task annotated read_only on a resource whose
// primitive is optimistic_latched or optimistic_scheduled runs again when its validation fails,
// see docs/design/synchronization.md):
//   - spawn(function, deliver, annotation) with a function that only reads and returns a value:
//     safe. The value stays in the task until the read is validated; deliver and the group's
//     count-down run once, in Task::commit().
//   - spawn(function, annotation) with a void function: the count-down is safe (it happens in
//     commit()), but whatever the function itself does (writes elsewhere, fail(), counting)
//     escapes before validation and may happen more than once, or with torn values.
//   - A plain LambdaTask (Runtime::spawn(lambda)): not safe for the same reason, and it has no
//     commit() to move the effect into.
//   - Custom Task subclasses that keep their result in the task, return TaskResult::commit() and
//     hand the result on (and call done()) in commit(): safe.
// Inside an optimistic read's function, call no group member but cancelled(): spawn() and then()
// spawn tasks, which the worker asserts against there, and fail() would report what may be a torn
// read. Report errors from the deliver callback, which sees only validated values.

#include <atomic>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "mx/system/cpu.h"
#include "mx/tasking/runtime.h"
#include "mx/tasking/task.h"
#include "mx/util/assert.h"

namespace mx::tasking {

/// How a round of a task group ended (returned by TaskGroup::wait(), handed to a continuation).
struct GroupResult {
    /// cancel() was called, or fail() cancelled the rest: tasks that had not started were skipped.
    bool cancelled{false};
    /// A task reported an error with fail(); `error` holds the first message.
    bool failed{false};
    std::string error{};

    [[nodiscard]] bool ok() const noexcept { return !cancelled && !failed; }
};

class TaskGroup;

namespace detail {

template <class F>
struct GroupValue {
    using type = std::invoke_result_t<F &>;
};
template <class F>
    requires std::invocable<F &, TaskContext &>
struct GroupValue<F> {
    using type = std::invoke_result_t<F &, TaskContext &>;
};
/// What a group function returns (void for a plain task).
template <class F>
using group_value_t = typename GroupValue<F>::type;

/// The functions a group task runs: task functions (invoked with the context or nothing) that
/// return void or a value, never a TaskResult (the group task decides its own result).
template <class F>
concept GroupFunction = TaskFunction<F> && !
std::same_as<std::remove_cvref_t<group_value_t<F>>, TaskResult>;

/// Receives the value of a group function, after validation, with or without the context.
template <class D, class R>
concept GroupDeliver = std::is_nothrow_move_constructible_v<D> &&
                       (std::invocable<D &, TaskContext &, R &&> || std::invocable<D &, R &&>);

/// Continuations: a task function, or one that also takes the group's result.
template <class F>
concept ContinuationFunction = std::is_nothrow_move_constructible_v<F> &&
                               (std::invocable<F &, TaskContext &, const GroupResult &> ||
                                std::invocable<F &, TaskContext &> || std::invocable<F &>);

/// The deliver of a void group function: there is nothing to deliver.
struct NoDeliver {};

template <class F>
decltype(auto) invoke_group_function(F &function, TaskContext &context) noexcept {
    if constexpr (std::invocable<F &, TaskContext &>) {
        return function(context);
    } else {
        static_cast<void>(context);
        return function();
    }
}

/// A task of a group: runs the function unless the group was cancelled, keeps its value, and
/// delivers the value and counts down in commit(), i.e. once the run stands.
template <class F, class Deliver>
class GroupTask final : public Task {
public:
    using Value = group_value_t<F>;

    GroupTask(TaskGroup &group, F function, Deliver deliver, const Annotation &annotation) noexcept
        : Task(annotation), _group(&group), _function(std::move(function)), _deliver(std::move(deliver)) {}
    GroupTask(const GroupTask &) = delete;
    GroupTask &operator=(const GroupTask &) = delete;
    /// A task destroyed without its commit() (a stopping runtime drops queued tasks) counts as
    /// skipped, so the group still finishes.
    ~GroupTask() override;

    TaskResult execute(TaskContext &context) noexcept override;
    void commit(TaskContext &context) noexcept override;

private:
    struct NoValue {};
    using Stored = std::conditional_t<std::is_void_v<Value>, NoValue, std::optional<Value>>;

    // All fields are touched by the one worker that runs the task (execute, then commit); the
    // creating thread writes them before the spawn, which publishes them.
    TaskGroup *_group;
    F _function;
    [[no_unique_address]] Deliver _deliver;
    // Written by every run of execute() (a failed optimistic read's value is overwritten by the
    // next run), read by commit().
    [[no_unique_address]] Stored _value{};
    bool _skipped{false}; // the group was cancelled when the (last) run started
    bool _counted{false}; // done() was called; set before it, since done() may end the group
};

/// A continuation: spawned by the group's last count-down with the round's result. Optionally a
/// task of an outer group, counted there from then() on.
class ContinuationBase : public Task {
public:
    explicit ContinuationBase(TaskGroup *outer, const Annotation &annotation) noexcept
        : Task(annotation), _outer(outer) {}
    ContinuationBase(const ContinuationBase &) = delete;
    ContinuationBase &operator=(const ContinuationBase &) = delete;
    /// Dropped unrun (stopping runtime): counts down the outer group like a skipped task.
    ~ContinuationBase() override;

    void commit(TaskContext &context) noexcept override;

protected:
    friend class mx::tasking::TaskGroup;
    // Written by the thread that ends the inner group's round (under its mutex) before the
    // spawn publishes it; read by the worker that runs the continuation.
    GroupResult _result{};
    TaskGroup *_outer; // set at creation, read by the running worker
    bool _counted{false};
};

template <class F>
class ContinuationTask final : public ContinuationBase {
public:
    ContinuationTask(TaskGroup *outer, F function, const Annotation &annotation) noexcept
        : ContinuationBase(outer, annotation), _function(std::move(function)) {}

    TaskResult execute(TaskContext &context) noexcept override {
        if constexpr (std::invocable<F &, TaskContext &, const GroupResult &>) {
            _function(context, std::as_const(_result));
        } else if constexpr (std::invocable<F &, TaskContext &>) {
            _function(context);
        } else {
            _function();
        }
        return _outer != nullptr ? TaskResult::commit() : TaskResult::remove();
    }

private:
    F _function; // run by the worker that runs the continuation
};

} // namespace detail

/// Counts tasks and reports when all of them finished.
///
/// A round starts with the first task spawned into an idle group and ends when the last one
/// counted down (tasks spawned into the group by its own tasks belong to the same round, as they
/// are counted before the spawning task counts down). At the end of a round the group wakes the
/// threads in wait() and spawns the continuation registered with then(), if any.
///
/// Outcome: cancel() and fail() are sticky. The outcome (GroupResult) of a round goes to one
/// consumer, which resets it for the next round: the continuation if one is registered, else the
/// next wait(). A round ended without a consumer keeps its outcome for the next one.
///
/// A runtime that stops with tasks of the group queued destroys them unrun: each counts down
/// as skipped (the outcome reads cancelled), and a continuation that would be spawned then is
/// deleted unrun instead (its outer group counts it down as skipped); wait() still returns.
///
/// Lifetime: the group must stay alive until wait() returned, or until its continuation started
/// running (the continuation may destroy it), and its runtime must outlive it. Destroying a group
/// with tasks outstanding or a continuation pending is a programmer error (asserts).
///
/// Threads: every member function may be called from any thread, inside or outside the runtime,
/// except wait() (outside the runtime's workers only). From inside an optimistic read only
/// cancelled() (see the comment at the top).
class TaskGroup {
public:
    explicit TaskGroup(Runtime &runtime) noexcept : _runtime(&runtime) {}
    ~TaskGroup();
    TaskGroup(const TaskGroup &) = delete;
    TaskGroup &operator=(const TaskGroup &) = delete;

    /// Spawns `function` (void, invoked with the TaskContext or nothing) as a task of the group.
    /// The group counts it before it is dispatched. On a cancelled group it does nothing (the
    /// function is dropped unrun). Any thread; from inside a task prefer the context overload.
    template <detail::GroupFunction F>
    void spawn(F function, const Annotation &annotation = {}) noexcept {
        static_assert(std::is_void_v<detail::group_value_t<F>>,
                      "a group function that returns a value needs a deliver callback: "
                      "spawn(function, deliver, annotation)");
        spawn_task(nullptr, std::move(function), detail::NoDeliver{}, annotation);
    }
    template <detail::GroupFunction F>
    void spawn(TaskContext &context, F function, const Annotation &annotation = {}) noexcept {
        static_assert(std::is_void_v<detail::group_value_t<F>>,
                      "a group function that returns a value needs a deliver callback: "
                      "spawn(context, function, deliver, annotation)");
        spawn_task(&context, std::move(function), detail::NoDeliver{}, annotation);
    }

    /// Spawns `function`, which returns a value R, as a task of the group; `deliver(R)` or
    /// `deliver(TaskContext &, R)` receives the value once the run stands (after an optimistic
    /// read was validated), on the worker that ran it, and only then does the group count the
    /// task down. The form for optimistic readers. A skipped (cancelled) task delivers nothing.
    template <detail::GroupFunction F, detail::GroupDeliver<detail::group_value_t<F>> D>
    void spawn(F function, D deliver, const Annotation &annotation = {}) noexcept {
        spawn_task(nullptr, std::move(function), std::move(deliver), annotation);
    }
    template <detail::GroupFunction F, detail::GroupDeliver<detail::group_value_t<F>> D>
    void spawn(TaskContext &context, F function, D deliver, const Annotation &annotation = {}) noexcept {
        spawn_task(&context, std::move(function), std::move(deliver), annotation);
    }

    /// Registers the continuation of the current round: `function` (invoked with the context and
    /// the round's GroupResult, with the context, or with nothing) is spawned once the round
    /// ended, by the thread that ended it; if the group has no task outstanding now, at once.
    /// Call it after spawning the round's tasks (or from one of them). One per round (asserts).
    /// A continuation always runs, also after cancel(); it receives the outcome.
    template <detail::ContinuationFunction F>
    void then(F function, const Annotation &annotation = {}) noexcept {
        register_continuation(
            _runtime->new_task<detail::ContinuationTask<F>>(nullptr, std::move(function), annotation));
    }
    /// Like then(function), but the continuation is a task of `outer`: outer counts it from now
    /// on, so outer's round cannot end before the continuation ran (nested groups). It runs even
    /// when outer is cancelled.
    template <detail::ContinuationFunction F>
    void then(TaskGroup &outer, F function, const Annotation &annotation = {}) noexcept {
        MX_ASSERT(&outer != this, "a group cannot continue into itself");
        outer.add();
        register_continuation(
            _runtime->new_task<detail::ContinuationTask<F>>(&outer, std::move(function), annotation));
    }

    /// Blocks the calling thread (outside the runtime's workers) until the group has no task
    /// outstanding, then returns and resets the outcome. Spins briefly, then sleeps on a
    /// condition variable. On a worker of the group's runtime it prints a message and aborts, in
    /// every build: it could wait on the very worker that has to run the group's tasks.
    [[nodiscard]] GroupResult wait() noexcept;

    /// Tasks of the group that have not started yet are skipped (still counted down), and later
    /// spawns are dropped, until the outcome is consumed (wait() or the continuation).
    void cancel() noexcept { _cancelled.store(true, std::memory_order_relaxed); }
    /// Reports an error: the first message is kept for the consumer, and the group is cancelled.
    /// From a task of the group (or any thread); not from an optimistic read's function.
    void fail(std::string_view message) noexcept;
    [[nodiscard]] bool cancelled() const noexcept { return _cancelled.load(std::memory_order_relaxed); }

    /// Low level, for custom Task subclasses (the form of WaitGroup::add/done): add() counts
    /// tasks before they are dispatched; each of them calls done() once, when it finished (in
    /// commit() if it is an optimistic reader). done(context) from a task (the continuation
    /// goes through the worker), done() from any thread.
    void add(std::uint32_t count = 1) noexcept {
        [[maybe_unused]] const std::uint64_t before = _state.fetch_add(count, std::memory_order_relaxed);
        MX_ASSERT((before & task_mask) + count <= task_mask, "too many tasks outstanding in one group");
    }
    void done(TaskContext &context) noexcept { count_down(&context); }
    void done() noexcept { count_down(nullptr); }

    /// Tasks counted and not yet done (a snapshot; for tests and diagnostics).
    [[nodiscard]] std::uint32_t outstanding() const noexcept {
        return static_cast<std::uint32_t>(_state.load(std::memory_order_relaxed) & task_mask);
    }
    [[nodiscard]] Runtime &runtime() const noexcept { return *_runtime; }

private:
    template <class F, class D>
    friend class detail::GroupTask;
    friend class detail::ContinuationBase;

    // _state: tasks outstanding in the low 32 bits, threads inside finish() in the high 32 bits.
    // The count-down that takes the tasks to zero also registers itself as finishing, in one
    // atomic step, so the state reads 0 only once no thread touches the group any more: that is
    // what wait() waits for, and it is only ever reached under _mutex.
    static constexpr std::uint64_t task_mask = 0xFFFF'FFFFULL;
    static constexpr std::uint64_t finisher_unit = std::uint64_t{1} << 32U;

    template <class F, class D>
    void spawn_task(TaskContext *context, F function, D deliver, const Annotation &annotation) noexcept {
        if (cancelled()) {
            return;
        }
        add();
        using TaskType = detail::GroupTask<F, D>;
        if (context != nullptr) {
            context->spawn(
                *context->new_task<TaskType>(*this, std::move(function), std::move(deliver), annotation));
        } else {
            _runtime->spawn(
                *_runtime->new_task<TaskType>(*this, std::move(function), std::move(deliver), annotation));
        }
    }

    void count_down(TaskContext *context) noexcept {
        std::uint64_t state = _state.load(std::memory_order_relaxed);
        while (true) {
            MX_ASSERT((state & task_mask) != 0, "TaskGroup::done() without a task outstanding");
            const bool last = (state & task_mask) == 1;
            const std::uint64_t next = last ? state - 1 + finisher_unit : state - 1;
            // Release: the task's effects (and a delivered value) happen before the end of the
            // round; acquire: the thread that ends it sees every other task's effects.
            if (_state.compare_exchange_weak(state, next, std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {
                if (last) {
                    finish(context);
                }
                return;
            }
        }
    }
    /// A task of the group destroyed unrun: counts as skipped.
    void drop() noexcept;
    /// Ends a round: hands the outcome to the continuation (if any), wakes the waiters and
    /// spawns the continuation. The group is not touched after the spawn.
    void finish(TaskContext *context) noexcept;
    void register_continuation(detail::ContinuationBase *continuation) noexcept;
    /// Takes the outcome and resets it for the next round. Caller holds _mutex.
    GroupResult consume_outcome() noexcept;
    /// Whether a continuation spawned from here would run: not after the runtime stopped.
    static bool can_run(Runtime &runtime, TaskContext *context) noexcept;
    static void dispatch(Runtime &runtime, TaskContext *context, Task &task, bool runnable) noexcept;

    Runtime *_runtime; // set at construction, read-only

    // Hot: counted by every spawn and every task's commit, on any worker or thread.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _state{0};
    // Written by cancel()/fail() (any thread), reset by the consumer under _mutex; read by every
    // group task before it runs (relaxed: a hint, a task that already started runs anyway). On a
    // line of its own: it rarely changes, while _state's line moves with every count.
    alignas(system::cache_line_size) std::atomic<bool> _cancelled{false};

    // Cold: touched once per round, by fail(), then(), wait() and the thread that ends a round.
    alignas(system::cache_line_size) std::mutex _mutex;
    std::condition_variable _condition;               // waiters sleep here; notified under _mutex
    detail::ContinuationBase *_continuation{nullptr}; // guarded by _mutex
    bool _failed{false};                              // guarded by _mutex
    std::string _error{};                             // guarded by _mutex
};

// ---- group tasks ------------------------------------------------------------------------------

namespace detail {

template <class F, class Deliver>
GroupTask<F, Deliver>::~GroupTask() {
    if (!_counted) {
        _group->drop();
    }
}

template <class F, class Deliver>
TaskResult GroupTask<F, Deliver>::execute(TaskContext &context) noexcept {
    // Decided afresh by every run, so a re-run of an optimistic read sees the flag as it is then.
    _skipped = _group->cancelled();
    if (!_skipped) {
        if constexpr (std::is_void_v<Value>) {
            invoke_group_function(_function, context);
        } else {
            _value.emplace(invoke_group_function(_function, context));
        }
    }
    // The count-down (and delivery) waits for commit(): only a run that stands is counted.
    return TaskResult::commit();
}

template <class F, class Deliver>
void GroupTask<F, Deliver>::commit(TaskContext &context) noexcept {
    if constexpr (!std::is_void_v<Value>) {
        if (!_skipped) {
            MX_ASSERT(_value.has_value(), "a group task committed without a value");
            if constexpr (std::invocable<Deliver &, TaskContext &, Value &&>) {
                _deliver(context, std::move(*_value));
            } else {
                _deliver(std::move(*_value));
            }
        }
    }
    _counted = true;
    _group->done(context); // may end the round: the group may be gone after this call
}

inline ContinuationBase::~ContinuationBase() {
    if (_outer != nullptr && !_counted) {
        _outer->drop();
    }
}

inline void ContinuationBase::commit(TaskContext &context) noexcept {
    _counted = true;
    _outer->done(context);
}

} // namespace detail

} // namespace mx::tasking
