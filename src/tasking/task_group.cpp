// Task groups: the parts that run once per round (ending it, waiting, continuations, errors).

#include "mx/tasking/task_group.h"

#include <cstdlib>

#include <cstdio>

#include <mutex>
#include <string>
#include <utility>

namespace mx::tasking {

namespace {
// Pause iterations wait() spends looking at the count before it sleeps: a round that is about to
// end then costs no futex sleep and wake-up, and the bound keeps a long wait from burning a core.
constexpr std::uint32_t wait_spins = 512;
} // namespace

TaskGroup::~TaskGroup() {
    // Taking the mutex orders the destruction after the last finish(), which releases it last.
    const std::lock_guard lock{_mutex};
    MX_ASSERT(_state.load(std::memory_order_acquire) == 0,
              "TaskGroup destroyed with tasks outstanding: wait() or let the continuation run first");
    MX_ASSERT(_continuation == nullptr, "TaskGroup destroyed with a continuation that never ran");
}

GroupResult TaskGroup::wait() noexcept {
    if (_runtime->on_worker()) [[unlikely]] {
        // A deadlock or a dangling group otherwise (callers' state would go out of scope while
        // the group's tasks still use it), so in every build, like Runtime::wait().
        std::fputs(
            "mxtasking: TaskGroup::wait() called on a worker of its runtime: it would block the worker "
            "that may have to run the group's tasks; aborting (register a continuation with then())\n",
            stderr);
        std::abort();
    }
    for (std::uint32_t spin = 0; spin < wait_spins && _state.load(std::memory_order_acquire) != 0; ++spin) {
        system::pause();
    }
    std::unique_lock lock{_mutex};
    // The state reaches 0 only under the mutex (finish() drops its finisher mark there), so the
    // check cannot miss the notification; and once it reads 0 no other thread is inside the group.
    _condition.wait(lock, [this] { return _state.load(std::memory_order_acquire) == 0; });
    return consume_outcome();
}

void TaskGroup::fail(std::string_view message) noexcept {
    {
        const std::lock_guard lock{_mutex};
        if (!_failed) {
            _failed = true;
            _error.assign(message);
        }
    }
    cancel();
}

void TaskGroup::drop() noexcept {
    cancel();
    count_down(nullptr);
}

GroupResult TaskGroup::consume_outcome() noexcept {
    GroupResult result;
    result.cancelled = _cancelled.exchange(false, std::memory_order_relaxed);
    result.failed = std::exchange(_failed, false);
    result.error = std::move(_error);
    _error.clear();
    return result;
}

void TaskGroup::finish(TaskContext *context) noexcept {
    Runtime &runtime = *_runtime;
    const bool runnable = can_run(runtime, context);
    detail::ContinuationBase *continuation = nullptr;
    {
        const std::lock_guard lock{_mutex};
        continuation = std::exchange(_continuation, nullptr);
        if (continuation != nullptr && runnable) {
            continuation->_result = consume_outcome();
        }
        _state.fetch_sub(finisher_unit, std::memory_order_release);
        _condition.notify_all();
    }
    // From here on the group may be gone (a waiter returned); only locals are used.
    if (continuation != nullptr) {
        dispatch(runtime, context, *continuation, runnable);
    }
}

void TaskGroup::register_continuation(detail::ContinuationBase *continuation) noexcept {
    const bool runnable = can_run(*_runtime, nullptr);
    bool now = false;
    {
        const std::lock_guard lock{_mutex};
        MX_ASSERT(_continuation == nullptr, "a task group takes one continuation per round");
        // Nothing outstanding and no thread ending a round: the round ended (or never started),
        // so the continuation runs now. While a finisher holds its mark it has yet to take the
        // mutex, and it takes the continuation then: dispatching it here could let it destroy the
        // group under that finisher.
        now = _state.load(std::memory_order_acquire) == 0;
        if (!now) {
            _continuation = continuation;
        } else if (runnable) {
            continuation->_result = consume_outcome();
        }
    }
    if (now) {
        dispatch(*_runtime, nullptr, *continuation, runnable);
    }
}

bool TaskGroup::can_run(Runtime &runtime, TaskContext *context) noexcept {
    return context != nullptr || runtime.on_worker() || runtime.running();
}

void TaskGroup::dispatch(Runtime &runtime, TaskContext *context, Task &task, bool runnable) noexcept {
    if (!runnable) {
        // The runtime stopped and dropped the group's last tasks: nothing would run the
        // continuation. It is deleted unrun (which counts it down in its outer group, as if
        // skipped), and the outcome stays with the group for wait().
        runtime.delete_task(task);
    } else if (context != nullptr) {
        context->spawn(task);
    } else {
        runtime.spawn(task);
    }
}

} // namespace mx::tasking
