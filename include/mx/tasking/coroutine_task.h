#pragma once

// Coroutine tasks: a task whose body is a C++20 coroutine that may suspend at a prefetch
// (mx::coro::prefetch / mx::coro::load with the Interleaved policy). The worker parks a suspended
// coroutine task in a group of up to G (RuntimeConfig::coroutine_group_size) and resumes the
// group round-robin, so the misses of G tasks overlap (Psaropoulos, ch. 3). Frames come from the
// worker thread's frame pool (mx::coro::FramePool), not from malloc.

#include <coroutine>
#include <optional>

#include "mx/coro/coroutine.h"
#include "mx/tasking/runtime.h"
#include "mx/tasking/task.h"

namespace mx::tasking {

/// Derive and implement body(); the coroutine starts when the task first runs. The same body
/// templated on mx::coro::Sequential gives the non-suspending path.
class CoroutineTask : public Task {
public:
    using Task::Task;

    TaskResult execute(TaskContext &context) noexcept final {
        if (!_coroutine.valid()) {
            // The body keeps a reference to the context across suspensions: give it one that
            // lives as long as the task (a parked task stays on its worker).
            _context.emplace(context);
            _coroutine = body(*_context); // runs to its first suspension point
        } else if (!_coroutine.done()) {
            _coroutine.resume(); // the worker may also have resumed the handle directly
        }
        if (!_coroutine.done()) {
            return TaskResult::suspend();
        }
        _coroutine.reset(); // the frame goes back to the pool now, not with the task
        return finished(context);
    }

    /// The suspended coroutine, which the worker resumes directly while the task is parked.
    [[nodiscard]] std::coroutine_handle<> handle() const noexcept { return _coroutine.handle(); }

protected:
    virtual coro::Coroutine<> body(TaskContext &context) noexcept = 0;
    /// What to do once the body returned; default: remove runtime-owned tasks.
    virtual TaskResult finished(TaskContext &) noexcept {
        return is_runtime_owned() ? TaskResult::remove() : TaskResult::done();
    }

private:
    coro::Coroutine<> _coroutine;
    std::optional<TaskContext> _context;
};

/// Group size from the interleaving model, G = ceil((T_stall - T_switch) / (T_compute +
/// T_switch)) + 1, clamped to [1, 16], with the process's measured load latency, a measured
/// coroutine switch and T_compute assumed equal to T_switch (a binary-search step). Measured once.
std::uint16_t default_coroutine_group_size() noexcept;

/// The model itself: G = ceil((stall - switch) / (compute + switch)) + 1, clamped to [1, 16].
std::uint16_t coroutine_group_size(double stall_cycles, double switch_cycles, double compute_cycles) noexcept;

} // namespace mx::tasking
