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
    /// The run of equal tasks being recorded (count 0 and `what` nullptr: none): consecutive
    /// tasks with the same name, resource and flags share one event, up to `run_limit`. While
    /// the run is open, its `retries` holds the worker's retry counter at its start (truncated);
    /// closing it turns that into the retries of its tasks, so the tasks in between read nothing.
    TraceEvent open{};
    /// Tasks per event at most: Worker::max_traced_run with TraceConfig::merge_equal_tasks, else
    /// 1 (every task its own event).
    std::uint32_t run_limit{1};
    bool queue_times{false}; // TraceConfig::queue_times
    /// The counter at start_trace: a spawn stamp before it is stale (from an earlier trace).
    std::uint64_t origin{0};
    /// Spans in `storage` that end with the task event being recorded (trace_until_task_end).
    std::vector<std::uint32_t> pending_spans;

    /// Ends the open run at `now`; `retries` is the worker's retry counter now.
    void close(std::uint64_t now, std::uint64_t retries) noexcept { end_run(open, now, retries); }

    /// Records `run` (a copy of `open` held in a register-friendly local) if it holds tasks and
    /// leaves it empty.
    void end_run(TraceEvent &run, std::uint64_t now, std::uint64_t retries) noexcept {
        if (run.count != 0) {
            run.end = now;
            run.retries = static_cast<std::uint32_t>(retries) - run.retries;
            record_task(run);
            run.count = 0;
            run.what = nullptr;
        }
    }

    /// Records a finished task event; spans waiting for the end of its slice end with it.
    void record_task(const TraceEvent &event) noexcept {
        if (!pending_spans.empty()) [[unlikely]] {
            for (const std::uint32_t index : pending_spans) {
                storage[index].end = event.end;
            }
            pending_spans.clear();
        }
        record(event);
    }

    /// Records a span; one ending with the current task's slice waits for it.
    void record_span(const TraceEvent &span) noexcept {
        if (span.end == trace_until_task_end && size < storage.size()) {
            pending_spans.push_back(size);
        }
        record(span);
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
