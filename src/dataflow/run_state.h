#pragma once

// The state of one run of a graph and the tasks that drive it. Private to the dataflow layer.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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
    bool done{false};         // guarded by mutex
    bool config_error{false}; // guarded by mutex: the runtime was not FIFO (run() throws)
    RunResult result;         // guarded by mutex
};

/// A targeted emit() waiting for its successors' barrier round (see open_barrier_round).
struct Deferred {
    Token token;
    DispatchTarget target;
};

/// Per worker: written only by this node's tasks running on that worker (one at a time, so
/// no lock), read by the tasks that open the successors' barrier rounds after this node
/// completed (the completion counters order the accesses). Padded: workers write side by side.
struct alignas(system::cache_line_size) DeferredSlot {
    std::vector<Deferred> tokens;
};

class RunState;

/// One node during one run.
struct alignas(system::cache_line_size) NodeState {
    // Set up by the RunState constructor on the starting thread, read-only afterwards.
    RunState *run{nullptr};
    Node *node{nullptr};
    std::uint32_t pipeline{0};
    bool prefetch{false};
    std::vector<NodeState *> successors;
    std::vector<NodeState *> predecessors;
    std::vector<std::uint32_t> dependents; // pipelines waiting for this node
    std::unique_ptr<DeferredSlot[]> deferred;

    // Counters, decremented by the tasks of the run (acq_rel: the decrement that reaches zero
    // sees everything the other decrementers did before).
    // Data predecessors not complete yet; the last one to complete opens the barrier round.
    alignas(system::cache_line_size) std::atomic<std::uint32_t> pending_predecessors{0};
    // Workers whose barrier task has not passed yet (one decrement per worker).
    std::atomic<std::uint32_t> outstanding_workers{0};
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
};

/// A run: owns itself from start() until finish() deletes it.
class RunState {
public:
    RunState(tasking::Runtime &runtime, Graph &graph, std::vector<Pipeline> pipelines,
             std::function<void(RunResult)> on_done, CancelToken cancel,
             std::shared_ptr<Completion> completion);
    RunState(const RunState &) = delete;
    RunState &operator=(const RunState &) = delete;
    ~RunState() = default;

    /// Marks the graph as running; false if it already was.
    static bool claim(Graph &graph) noexcept {
        return !graph._running.exchange(true, std::memory_order_acq_rel);
    }
    static void release(Graph &graph) noexcept { graph._running.store(false, std::memory_order_release); }

    /// Second hop of the first task of the run (after the FIFO probe): starts the pipelines
    /// without dependencies.
    void kickoff_checked(tasking::TaskContext &context) noexcept;
    /// The probe task spawned locally before the second kickoff hop (see KickoffTask).
    void fifo_marker() noexcept;

    /// Runs a source's start() (unless cancelled), then opens its barrier round.
    void start_source(NodeState &node, tasking::TaskContext &context) noexcept;
    /// The node's inputs are complete: spawn the deferred targeted tokens of its predecessors,
    /// then one barrier task per worker.
    void open_barrier_round(NodeState &node, tasking::TaskContext &context) noexcept;
    /// A barrier task passed on its worker (second, local hop).
    void barrier_passed(NodeState &node, tasking::TaskContext &context) noexcept;
    void run_part(NodeState &node, std::uint32_t part, tasking::TaskContext &context) noexcept;
    void run_merge(NodeState &node, std::uint32_t into, std::uint32_t from, std::uint32_t level,
                   tasking::TaskContext &context) noexcept;
    void consume(NodeState &node, Token token, tasking::TaskContext &context) noexcept;

    /// Spawns a consume task of `node` for `token`: locally, or at `target` (resolved).
    static void spawn_consume(NodeState &node, Token token, const DispatchTarget *target,
                              tasking::TaskContext &context) noexcept;

    [[nodiscard]] bool cancelled() const noexcept {
        return _cancel->cancelled.load(std::memory_order_acquire);
    }
    void fail(std::string_view message) noexcept { _cancel->cancel(message); }

private:
    void start_pipeline(std::uint32_t pipeline, tasking::TaskContext &context) noexcept;
    void consume_phase_done(NodeState &node, tasking::TaskContext &context) noexcept;
    void start_merges(NodeState &node, tasking::TaskContext &context) noexcept;
    void spawn_merge(NodeState &node, std::uint32_t into, std::uint32_t level,
                     tasking::TaskContext &context) noexcept;
    void run_finalize(NodeState &node, tasking::TaskContext &context) noexcept;
    void complete_node(NodeState &node, tasking::TaskContext &context) noexcept;
    /// Last step of the run: result, graph no longer running, on_done, wake waiters, delete this.
    void finish(bool config_error) noexcept;
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

    // Nodes not completed yet; the task that completes the last one finishes the run.
    alignas(system::cache_line_size) std::atomic<std::uint32_t> _remaining_nodes{0};
    // Round-robin placement of source start tasks (any task of the run).
    std::atomic<std::uint32_t> _next_start{0};
    // Which of the FIFO marker and the second kickoff hop ran first. Written and read only by
    // those two tasks, both on the kickoff worker (relaxed: one thread).
    enum class Probe : std::uint8_t { pending, marker_first, kickoff_first };
    std::atomic<Probe> _probe{Probe::pending};
};

} // namespace mx::dataflow::detail
