#pragma once

// Coroutine groups (interleaved execution): the suspended coroutine tasks of one worker. Not API:
// see docs/design/coroutines.md.

#include <coroutine>
#include <cstdint>
#include <vector>

#include "mx/tasking/task.h"
#include "mx/util/assert.h"

namespace mx::tasking::detail {

/// A worker's coroutine group: suspended coroutine tasks, resumed round-robin from a cursor. A
/// task that finishes leaves a hole (nullptr) that the next parked task fills, so the newcomer
/// is resumed after all the others, as the stand-alone interleave() does: every coroutine then
/// gets G - 1 other resumes between its prefetch and its load. (Moving the last member into the
/// hole and restarting the round at slot 0 resumed some members only a few steps after their
/// prefetch.)
///
/// Owner-private: only the worker thread touches it (and Worker::drain() after the thread ended).
/// The worker parks, resumes and completes the tasks (coroutine_group.cpp); the group keeps the
/// slots.
class CoroutineGroup {
public:
    explicit CoroutineGroup(std::uint16_t configured_capacity) noexcept : _configured(configured_capacity) {}

    /// RuntimeConfig::coroutine_group_size (0: from the cost model).
    [[nodiscard]] std::uint16_t configured_capacity() const noexcept { return _configured; }
    /// 0 until the first suspension sized the group.
    [[nodiscard]] std::uint32_t capacity() const noexcept { return _capacity; }
    /// Parked tasks.
    [[nodiscard]] std::uint32_t size() const noexcept { return _size; }

    /// Sizes the group at the first suspension.
    void allocate(std::uint32_t capacity) {
        _capacity = capacity;
        _tasks.assign(_capacity, nullptr);
        _handles.assign(_capacity, {});
        _holes.reserve(_capacity);
    }

    /// Parks `task`, suspended at `handle`. Returns whether the group is full now.
    bool park(Task &task, std::coroutine_handle<> handle) noexcept {
        // The newest hole is the slot resumed last (the cursor just passed it): taking it puts
        // the newcomer at the end of the round. Without holes (the group is filling up) the
        // cursor is still at slot 0 and the end of the used slots is the end of the round too.
        std::uint32_t slot = _slots;
        if (!_holes.empty()) {
            slot = _holes.back();
            _holes.pop_back();
        } else {
            ++_slots;
        }
        _handles[slot] = handle;
        _tasks[slot] = &task;
        return ++_size >= _capacity;
    }

    /// Full group, so no holes: resumes round-robin from the cursor until one task finishes and
    /// returns its slot (still occupied). `before_resume(task)` runs before each resume. This
    /// loop is the interleaving itself (one pass per load); it keeps its state in registers and
    /// leaves the group's fields alone until a task is done: a coroutine body cannot park or
    /// resume tasks, only spawn them.
    template <class BeforeResume>
    std::uint32_t resume_until_done(BeforeResume &&before_resume) noexcept {
        Task *const *const tasks = _tasks.data();
        const std::coroutine_handle<> *const handles = _handles.data();
        const std::uint32_t slots = _slots;
        std::uint32_t cursor = _cursor;
        while (true) {
            before_resume(*tasks[cursor]);
            handles[cursor].resume();
            if (handles[cursor].done()) [[unlikely]] {
                break;
            }
            cursor = cursor + 1 == slots ? 0 : cursor + 1;
        }
        _cursor = cursor + 1 == slots ? 0 : cursor + 1;
        return cursor;
    }

    /// The occupied slot at or after the cursor; the cursor moves past it.
    std::uint32_t next_slot() noexcept {
        MX_ASSERT(_size > 0, "resuming an empty coroutine group");
        std::uint32_t slot = _cursor;
        while (_tasks[slot] == nullptr) {
            slot = slot + 1 == _slots ? 0 : slot + 1;
        }
        _cursor = slot + 1 == _slots ? 0 : slot + 1;
        return slot;
    }
    [[nodiscard]] Task &task(std::uint32_t slot) const noexcept { return *_tasks[slot]; }
    [[nodiscard]] std::coroutine_handle<> handle(std::uint32_t slot) const noexcept { return _handles[slot]; }

    /// Takes the task in `slot` out of the group: the slot becomes a hole.
    Task &remove(std::uint32_t slot) noexcept {
        Task &task = *_tasks[slot];
        _tasks[slot] = nullptr;
        if (--_size == 0) {
            _slots = 0;
            _cursor = 0;
            _holes.clear();
        } else {
            _holes.push_back(slot);
        }
        return task;
    }

    /// Hands every parked task to `discard` and empties the group.
    template <class Discard>
    void clear(Discard &&discard) noexcept {
        for (std::uint32_t slot = 0; slot < _slots; ++slot) {
            if (_tasks[slot] != nullptr) {
                discard(_tasks[slot]);
                _tasks[slot] = nullptr;
            }
        }
        _size = _slots = _cursor = 0;
        _holes.clear();
    }

private:
    std::uint16_t _configured;
    std::vector<Task *> _tasks;
    std::vector<std::coroutine_handle<>> _handles; // resumed directly: no virtual call per step
    std::vector<std::uint32_t> _holes;             // free slots below _slots, newest last
    std::uint32_t _capacity{0};                    // 0 until the first suspension (then config or model)
    std::uint32_t _size{0};                        // parked tasks
    std::uint32_t _slots{0};                       // slots in use, parked tasks and holes
    std::uint32_t _cursor{0};                      // slot resumed next
};

} // namespace mx::tasking::detail
