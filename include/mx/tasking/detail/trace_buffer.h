#pragma once

// A worker's trace buffer: fixed capacity, written by its worker only, so recording is a plain
// store and an increment. Not API: see mx/tasking/trace.h.

#include <cstdint>
#include <vector>

#include "mx/tasking/trace.h"

namespace mx::tasking::detail {

/// Who touches it: the thread in Runtime::start_trace fills `storage` and the capacity before it
/// publishes the trace generation (release); the worker writes events only after it saw that
/// generation (acquire) and stops before it acknowledges the next one; stop_trace takes the
/// events after every worker acknowledged (acquire). So no field needs to be atomic.
struct TraceBuffer {
    std::vector<TraceEvent> storage;
    std::uint32_t size{0};
    std::uint64_t dropped{0};
    /// The first `stolen_until` slots of the current task buffer came from a steal.
    std::uint32_t stolen_until{0};
    /// The run of equal tasks being recorded (count 0: none): consecutive tasks with the same
    /// name, resource and flags share one event while `merge` is on.
    TraceEvent open{};
    bool merge{true};

    /// Ends the open run at `now`.
    void close(std::uint64_t now) noexcept {
        if (open.count != 0) {
            open.end = now;
            record(open);
            open.count = 0;
        }
    }

    void record(const TraceEvent &event) noexcept {
        if (size < storage.size()) [[likely]] {
            storage[size++] = event;
        } else {
            ++dropped;
        }
    }
};

} // namespace mx::tasking::detail
