#pragma once

// Task timeline traces: what each worker ran and when, its idle and sleep intervals and its
// steals, recorded into per-worker buffers and written as Chrome Trace Event JSON (opened by
// ui.perfetto.dev and chrome://tracing) or CSV. Recording: Runtime::start_trace / stop_trace, or
// MX_TRACE=path for the whole life of a Runtime. docs/tracing.md is the guide,
// docs/design/tracing.md the internals.

#include <cstdint>
#include <string>
#include <vector>

// The CMake option MX_TRACING=OFF defines this to 0: the recording code is compiled out of the
// worker loop, and start_trace reports that tracing is not available.
#ifndef MX_TRACING
#define MX_TRACING 1
#endif

namespace mx::tasking {

enum class TraceEventKind : std::uint8_t {
    task,         ///< one run of a task (its execute, under its resource's primitive)
    idle,         ///< the worker found nothing to run: from entering idle() to leaving it
    sleep,        ///< inside an idle interval: asleep on its futex
    steal_tasks,  ///< took `count` tasks from worker `other`'s deque
    steal_domain, ///< took over synchronization domain `other`
    span,         ///< a user span (Runtime::trace_span, TaskContext::trace_span), e.g. a pipeline
};

/// Flags of a task event.
inline constexpr std::uint8_t trace_stolen = 1U;   ///< taken from another worker's deque or domain
inline constexpr std::uint8_t trace_bypassed = 2U; ///< ran at once as a predecessor's bypass successor
inline constexpr std::uint8_t trace_squad = 4U;    ///< annotated with a squad
inline constexpr std::uint8_t trace_label = 8U;    ///< `what` is a label (const char *), else a type_info
/// Its tasks were spawned while the trace recorded: `queue_cycles` holds their queue times.
/// (A task spawned before start_trace or run as a bypass successor has no queue time.)
inline constexpr std::uint8_t trace_queued = 16U;

/// The end of a span that ends with the slice of the task recording it (TaskContext::trace_span):
/// the span then encloses that task's slice exactly.
inline constexpr std::uint64_t trace_until_task_end = ~std::uint64_t{0};

/// One recorded event, 56 bytes. Times are raw time-stamp counter values.
struct TraceEvent {
    std::uint64_t start{0};
    std::uint64_t end{0};
    /// task: its Task::trace_label() or its std::type_info (see trace_label); else nullptr.
    const void *what{nullptr};
    /// task: the annotated resource's object address (0 = none).
    std::uint64_t resource{0};
    /// task with trace_queued: the sum of its tasks' queue times (spawn to start), in cycles.
    std::uint64_t queue_cycles{0};
    /// task: tasks in this slice (consecutive equal tasks share one, see TraceConfig); steal_tasks:
    /// tasks taken; else 0.
    std::uint32_t count{0};
    /// task: failed validations of optimistic reads that made its tasks run again.
    std::uint32_t retries{0};
    /// task: the sum of its tasks' prefetch distances (the worker's distance when each ran, in
    /// tasks; at most 255 each, and a slice holds at most 2^24 tasks, so it cannot overflow).
    std::uint32_t prefetch_distance{0};
    /// task: sync::Primitive of its resource; steal_tasks: victim worker; steal_domain: domain.
    std::uint16_t other{0};
    TraceEventKind kind{TraceEventKind::task};
    std::uint8_t flags{0};
};
static_assert(sizeof(TraceEvent) == 56, "trace events stay small: a buffer holds many");

/// How to record.
struct TraceConfig {
    /// Events each worker keeps; later ones are dropped and counted. 56 bytes each, allocated
    /// (and touched) by start_trace. 0 = $MX_TRACE_EVENTS if set, else 262144 (14 MiB).
    std::uint32_t events_per_worker{0};
    /// Consecutive tasks of one worker with the same name, resource and flags share one event
    /// (its count says how many; the slice spans them): one time stamp per run of equal tasks
    /// instead of one per task, which keeps recording cheap for tiny tasks. Off: an event per task.
    bool merge_equal_tasks{true};
    /// Queue times (spawn to start) per task: every spawn while recording stamps the counter into
    /// the task, and every task start reads it (two counter reads per task, each about as long as
    /// an empty task). Off, a timeline costs tiny tasks a few percent; on, spawn_local records at
    /// well under half its speed. The profiles of the drivers (--profile) and of MX_TRACE_PROFILE
    /// turn it on.
    bool queue_times{false};
};

/// The outcome of writing a trace file.
struct TraceWriteResult {
    std::string error; ///< empty on success
    std::uint64_t events{0};
    std::uint64_t dropped{0};
    [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

/// One line of a per-task-type profile: the task events of one name on one worker.
struct TaskProfile {
    std::string name;
    std::uint16_t worker{0};
    std::uint64_t tasks{0};
    std::uint64_t total_cycles{0};
    std::uint64_t stolen{0};            ///< of `tasks`, taken from another worker
    std::uint64_t bypassed{0};          ///< of `tasks`, run as a bypass successor
    std::uint64_t queued{0};            ///< of `tasks`, those with a queue time (spawned while recording)
    std::uint64_t queue_cycles{0};      ///< their queue times (spawn to start), summed
    std::uint64_t retries{0};           ///< failed optimistic validations that re-ran a task
    std::uint64_t prefetch_distance{0}; ///< the prefetch distances of `tasks`, summed
    [[nodiscard]] double mean_cycles() const noexcept {
        return tasks == 0 ? 0.0 : static_cast<double>(total_cycles) / static_cast<double>(tasks);
    }
    [[nodiscard]] double mean_queue_cycles() const noexcept {
        return queued == 0 ? 0.0 : static_cast<double>(queue_cycles) / static_cast<double>(queued);
    }
    [[nodiscard]] double mean_prefetch_distance() const noexcept {
        return tasks == 0 ? 0.0 : static_cast<double>(prefetch_distance) / static_cast<double>(tasks);
    }
};

/// Thread id of the first track in the JSON: worker w is `trace_first_tid + w`, the span tracks
/// ("pipelines") follow the workers. Not 0 (viewers drop tid 0, the idle task in Linux) and not
/// the process id 1 (viewers mark that track as the main thread).
inline constexpr std::uint32_t trace_first_tid = 1000;

/// A recorded trace, handed out by Runtime::stop_trace().
class Trace {
public:
    struct Worker {
        std::vector<TraceEvent> events; ///< in the order the worker finished them
        std::uint64_t dropped{0};       ///< events that did not fit
    };

    std::vector<Worker> workers;
    /// User spans (kind span: `what` is the label, `start` and `end` the interval), by start.
    std::vector<TraceEvent> spans;
    std::uint64_t origin_tsc{0};  ///< counter value at start_trace: time 0 in the files
    double cycles_per_us{1000.0}; ///< counter rate, measured between start and stop

    [[nodiscard]] std::uint64_t events() const noexcept;
    [[nodiscard]] std::uint64_t dropped() const noexcept;
    /// The name shown for an event: the task's label or demangled type, or the event kind.
    [[nodiscard]] std::string name(const TraceEvent &event) const;
    /// Microseconds from origin_tsc.
    [[nodiscard]] double microseconds(std::uint64_t tsc) const noexcept;
    /// Whole nanoseconds from origin_tsc: the JSON writes each slice's start and end from these,
    /// so slices that meet on the counter meet exactly in the file (a viewer drops a slice that
    /// ends a nanosecond after the one around it).
    [[nodiscard]] std::int64_t nanoseconds(std::uint64_t tsc) const noexcept;
    /// Writes Chrome Trace Event JSON, or CSV when `path` ends in ".csv". An unwritable path is
    /// an error in the result, never an exception.
    [[nodiscard]] TraceWriteResult write(const std::string &path) const;
    [[nodiscard]] std::string to_json() const;
    [[nodiscard]] std::string to_csv() const;
    /// Tasks, cycles, queue times, optimistic retries and prefetch distances per task name and
    /// worker, most cycles first (dropped events missing).
    [[nodiscard]] std::vector<TaskProfile> profile() const;
    /// profile() as an aligned text table, with a line per name over all workers.
    [[nodiscard]] std::string profile_table() const;
};

} // namespace mx::tasking
