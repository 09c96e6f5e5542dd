#pragma once

// The optimistic read (dissertation 4.3): run the task without a latch, validate the resource's
// version afterwards, undo and repeat when a writer interfered. Inline because it is the step of
// every lookup in an optimistically synchronized index: worker.cpp runs readers through it without
// a call into the primitive switch of synchronized.cpp.

#include "mx/tasking/runtime.h"

#include <algorithm>
#include <cstring>

namespace mx::tasking::detail {

[[gnu::always_inline]] inline bool Worker::run_optimistic_read(Task &task, TaskContext &context,
                                                               const ResourceHeader &header,
                                                               TaskResult &result) noexcept {
    // A failed read is undone: the annotations (readers often re-annotate themselves to the
    // next node) and the bytes the task declares as its optimistic state.
    // A block copy into the worker, out of the registers the run needs.
    std::memcpy(&_optimistic_saved, &task._h, sizeof(Task::Header));
    const std::span<std::byte> state = task.optimistic_state();
    if (!state.empty()) [[unlikely]] {
        _optimistic_scratch.assign(state.begin(), state.end());
    }
    for (std::uint32_t attempt = 0; attempt <= _optimistic_retries; ++attempt) {
        if (try_optimistic(header, [&]() noexcept { result = task.execute(context); })) [[likely]] {
            return true;
        }
        bump(_shared.optimistic_retries);
        Task *successor = result.next();
        if (successor != nullptr && successor != &task && successor->is_runtime_owned()) {
            destroy(*successor); // allocated by the failed run and never dispatched
        }
        result = TaskResult::done();
        std::memcpy(&task._h, &_optimistic_saved, sizeof(Task::Header));
        if (!state.empty()) {
            std::copy(_optimistic_scratch.begin(), _optimistic_scratch.end(), state.begin());
        }
    }
    return false;
}

} // namespace mx::tasking::detail
