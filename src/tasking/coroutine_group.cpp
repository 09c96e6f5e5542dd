// Coroutine groups (interleaved execution): a worker parks suspended coroutine tasks and resumes
// them round-robin, so one task's prefetch overlaps with the others' work. The slots are kept by
// CoroutineGroup (mx/tasking/detail/coroutine_group.h).

#include "mx/tasking/runtime.h"

#include "mx/tasking/coroutine_task.h"

namespace mx::tasking::detail {

void Worker::park(Task &task) noexcept {
    if (_group.capacity() == 0) [[unlikely]] {
        _group.allocate(_group.configured_capacity() != 0 ? _group.configured_capacity()
                                                          : default_coroutine_group_size());
    }
    // Only CoroutineTask returns TaskResult::suspend().
    if (!_group.park(task, static_cast<CoroutineTask &>(task).handle())) {
        return;
    }
    // Full: resume round-robin until one finishes.
    const std::uint32_t slot =
        _group.resume_until_done([this](Task &member) noexcept { _running = &member; });
    retire_group_member(slot);
}

void Worker::resume_group_next() noexcept {
    const std::uint32_t slot = _group.next_slot();
    _running = &_group.task(slot);
    const std::coroutine_handle<> handle = _group.handle(slot);
    handle.resume();
    if (!handle.done()) [[likely]] {
        _running = nullptr;
        return;
    }
    retire_group_member(slot);
}

void Worker::retire_group_member(std::uint32_t slot) noexcept {
    Task &task = _group.remove(slot);
    // Finished: execute() releases the frame and yields the task's result.
    TaskContext context{*this};
    const TaskResult result = task.execute(context);
    if (Task *next = complete(task, result); next != nullptr) {
        execute(*next);
    }
}

void Worker::resume_group_round() noexcept {
    // Each step resumes one parked task and finishes at most that one: remaining <= size().
    for (std::uint32_t remaining = _group.size(); remaining > 0; --remaining) {
        resume_group_next();
    }
}

} // namespace mx::tasking::detail
