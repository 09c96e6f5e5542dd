// Coroutine groups (interleaved execution): a worker parks suspended coroutine tasks and resumes
// them round-robin, so one task's prefetch overlaps with the others' work.

#include "mx/tasking/runtime.h"

#include "mx/tasking/coroutine_task.h"

namespace mx::tasking::detail {

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

} // namespace mx::tasking::detail
