#pragma once

// The state of one run of a graph and the tasks that drive it. Private to the dataflow layer.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mx/dataflow/graph.h"
#include "mx/system/cpu.h"
#include "mx/tasking/runtime.h"

namespace mx::dataflow::detail {

using Clock = std::chrono::steady_clock;

/// The cancel flag and first error of a run, shared by the run, its CancelToken copies and
/// RunHandles.
struct CancelState {
    // Set once by the first fail()/cancel() (any thread, under `mutex`); read by every task.
    std::atomic<bool> cancelled{false};
    std::mutex mutex;
    std::string message; // written once under `mutex` before `cancelled` is set

    void cancel(std::string_view reason) noexcept {
        const std::lock_guard lock{mutex};
        if (!cancelled.load(std::memory_order_relaxed)) {
            message.assign(reason);
            cancelled.store(true, std::memory_order_release);
        }
    }
};

/// Where the finishing worker leaves the result for RunHandle::wait(). Shared by pointer so the
/// waiter may return (and drop its reference) while the worker still unlocks.
struct Completion {
    std::mutex mutex;
    std::condition_variable finished;
    bool done{false}; // guarded by mutex
    RunResult result; // guarded by mutex
};

class RunState;

/// A profiled run's counters of one node on one worker (RunOptions::profile): written only by
/// the tasks of the node that run on that worker, one at a time; read by finish() once every
/// task of the run is over (ordered by the run's counters). Padded: workers count side by side.
struct alignas(system::cache_line_size) NodeCounters {
    std::uint64_t tasks{0};
    std::uint64_t nanoseconds{0};
};

/// Trace labels of a node's tasks, one per phase (interned: they outlive the run).
struct NodeLabels {
    const char *start{nullptr};
    const char *consume{nullptr};
    const char *part{nullptr};
    const char *merge{nullptr};
    const char *finalize{nullptr};
};

/// One node during one run.
struct alignas(system::cache_line_size) NodeState {
    // Set up by the RunState constructor on the starting thread, read-only afterwards.
    RunState *run{nullptr};
    Node *node{nullptr};
    std::uint32_t pipeline{0};
    bool prefetch{false};
    NodeLabels labels;
    std::unique_ptr<NodeCounters[]> counters; // one per worker when profiled, else nullptr
    std::vector<NodeState *> successors;
    std::vector<std::uint32_t> dependents; // pipelines waiting for this node

    // What keeps the consume phase open: the consume tasks of this node spawned and not finished,
    // plus one share per data predecessor not complete yet (a source: one share for its start
    // task). Set by the constructor. Raised (relaxed) by the tasks that emit/dispatch to this
    // node, once per batch and before the batch's tasks are spawned, while the emitting task
    // holds a share itself (its node's share of this one, or the start task's); lowered
    // (acq_rel) by every finishing consume task, by each completing predecessor and by the start
    // task. The decrement that reaches zero ends the consume phase: it happens once, because
    // nothing can raise the count once the last share is gone (see docs/design/dataflow.md).
    alignas(system::cache_line_size) std::atomic<std::uint64_t> outstanding{0};
    // Finalize parts not finished yet (one decrement per part).
    std::atomic<std::uint32_t> outstanding_parts{0};
    // Merge tree: inputs and levels, written before the first merge task is spawned; per
    // (level, into) the inputs of that merge that are final (incremented by finishing merges).
    std::uint32_t merge_count{0};
    std::uint32_t merge_levels{0};
    std::unique_ptr<std::atomic<std::uint8_t>[]> merge_arrivals;
};

/// One pipeline during one run.
struct alignas(system::cache_line_size) PipelineState {
    // Set up by the constructor, read-only afterwards.
    std::vector<NodeState *> sources;
    // Nodes (of other pipelines) that have not completed yet; the last one starts this pipeline.
    std::atomic<std::uint32_t> pending_dependencies{0};
    // Nodes of this pipeline not completed yet.
    std::atomic<std::uint32_t> remaining_nodes{0};
    // Written by the task that starts / completes the pipeline, read by finish() (ordered by
    // the run's remaining-node counter).
    Clock::time_point started{};
    Clock::time_point finished{};
    // Traced runs: the pipeline's span in the trace ("pipeline N: nodes"; interned, set up by the
    // constructor, nullptr when the run began without a trace) and its start on the time-stamp
    // counter (written and read like `started`).
    const char *trace_label{nullptr};
    std::uint64_t started_tsc{0};
};

/// A run: owns itself from start() until finish() deletes it.
class RunState {
public:
    RunState(tasking::Runtime &runtime, Graph &graph, std::vector<Pipeline> pipelines,
             std::function<void(RunResult)> on_done, CancelToken cancel,
             std::shared_ptr<Completion> completion, RunOptions options);
    RunState(const RunState &) = delete;
    RunState &operator=(const RunState &) = delete;
    ~RunState() = default;

    /// Marks the graph as running; false if it already was.
    static bool claim(Graph &graph) noexcept {
        return !graph._running.exchange(true, std::memory_order_acq_rel);
    }
    static void release(Graph &graph) noexcept { graph._running.store(false, std::memory_order_release); }

    /// The first task of the run: starts the pipelines without dependencies.
    void kickoff(tasking::TaskContext &context) noexcept;

    /// Runs a source's start() (unless cancelled), then gives up the start task's share of the
    /// source's count.
    void start_source(NodeState &node, tasking::TaskContext &context) noexcept;
    /// One consume task: consume() (or discard() once cancelled), then its share of the count.
    void consume(NodeState &node, Token token, tasking::TaskContext &context) noexcept;
    /// The node's count reached zero: finalize parts, merge tree, finalize, completion.
    void consume_phase_done(NodeState &node, tasking::TaskContext &context) noexcept;
    void run_part(NodeState &node, std::uint32_t part, tasking::TaskContext &context) noexcept;
    void run_merge(NodeState &node, std::uint32_t into, std::uint32_t from, std::uint32_t level,
                   tasking::TaskContext &context) noexcept;

    /// Creates (does not spawn) a consume task of `node` for `token`: without a target, or at
    /// `target` (worker or region; DispatchTarget::any resolved by the caller).
    static ConsumeTask &make_consume(NodeState &node, Token token, const DispatchTarget *target,
                                     tasking::TaskContext &context) noexcept;

    /// A profiled run: counts a task of `node` on this worker (at its start, while the node's
    /// state is certainly alive).
    static void count_task(NodeState &node, const tasking::TaskContext &context) noexcept {
        if (node.counters != nullptr) [[unlikely]] {
            ++node.counters[context.worker_id()].tasks;
        }
    }
    /// A profiled run: the time of a callback that began at `begin` (nullopt when not profiled).
    static std::optional<Clock::time_point> callback_begin(const NodeState &node) noexcept {
        if (node.counters != nullptr) [[unlikely]] {
            return Clock::now();
        }
        return std::nullopt;
    }
    static void callback_end(NodeState &node, const tasking::TaskContext &context,
                             const std::optional<Clock::time_point> &begin) noexcept {
        if (begin.has_value()) [[unlikely]] {
            node.counters[context.worker_id()].nanoseconds += static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - *begin).count());
        }
    }

    [[nodiscard]] bool cancelled() const noexcept {
        return _cancel->cancelled.load(std::memory_order_acquire);
    }
    void fail(std::string_view message) noexcept { _cancel->cancel(message); }

private:
    void start_pipeline(std::uint32_t pipeline, tasking::TaskContext &context) noexcept;
    /// Gives up one share of the node's count (a finished consume task, a completed predecessor,
    /// a source's start task). Returns whether it was the last: then the caller ends the consume
    /// phase; otherwise it must not touch the run any more (it may have ended).
    [[nodiscard]] static bool release_share(NodeState &node) noexcept {
        return node.outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1;
    }
    void start_merges(NodeState &node, tasking::TaskContext &context) noexcept;
    void spawn_merge(NodeState &node, std::uint32_t into, std::uint32_t level,
                     tasking::TaskContext &context) noexcept;
    void run_finalize(NodeState &node, tasking::TaskContext &context) noexcept;
    void complete_node(NodeState &node, tasking::TaskContext &context) noexcept;
    /// Last step of the run: result, graph no longer running, on_done, wake waiters, delete this.
    void finish() noexcept;
    [[nodiscard]] std::uint16_t checked_worker(std::uint32_t worker) const noexcept;

    // Set up by the constructor, read-only while the run is in flight.
    Graph *_graph;
    std::uint16_t _workers;
    std::vector<Pipeline> _plan;
    std::unique_ptr<NodeState[]> _nodes;
    std::unique_ptr<PipelineState[]> _pipelines;
    std::function<void(RunResult)> _on_done;
    std::shared_ptr<CancelState> _cancel;
    std::shared_ptr<Completion> _completion;
    Clock::time_point _started;
    bool _profile; // RunOptions::profile: every node has counters

    // Nodes not completed yet; the task that completes the last one finishes the run.
    alignas(system::cache_line_size) std::atomic<std::uint32_t> _remaining_nodes{0};
    // Round-robin placement of source start tasks (any task of the run).
    std::atomic<std::uint32_t> _next_start{0};
};

} // namespace mx::dataflow::detail
