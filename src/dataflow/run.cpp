// Running a graph: the tasks of a run and the barrier protocol (docs/design/dataflow.md).
//
// Life of a node N in a run:
//   1. Its inputs complete: every data predecessor completed (a source: its start() returned).
//      The task that completed the last predecessor spawns the predecessors' deferred targeted
//      tokens for N, then one barrier task for N per worker (targeted).
//   2. A barrier task arriving at worker w re-spawns itself locally, behind every consume task of
//      N already queued at w; when it runs again it decrements N's outstanding-worker count.
//   3. The last worker's barrier runs the finalize parts as tasks, then the merge tree, then
//      finalize(); then N is complete: successors whose inputs are now complete go to 1, pipelines
//      whose dependencies are now complete start their sources.

#include <bit>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mx/dataflow/graph.h"
#include "mx/util/assert.h"
#include "run_state.h"

namespace mx::dataflow {

namespace detail {

namespace {

using tasking::Task;
using tasking::TaskContext;
using tasking::TaskResult;

class ConsumeTask final : public Task {
public:
    ConsumeTask(NodeState &node, Token token) noexcept : _node(&node), _token(token) {
        if (node.prefetch) {
            annotate(tasking::PrefetchHint::callback(&ConsumeTask::prefetch_token));
        }
    }

    TaskResult execute(TaskContext &context) noexcept override {
        _node->run->consume(*_node, _token, context);
        return TaskResult::remove();
    }

private:
    /// The node's prefetch callback, called by the worker's prefetch buffer before the task runs.
    static void prefetch_token(const Task &task) noexcept {
        const auto &self = static_cast<const ConsumeTask &>(task);
        self._node->node->prefetch(self._token);
    }

    NodeState *_node;
    Token _token;
};

/// One per (node, worker). First run (arrived from the spawning worker, possibly through a remote
/// queue): re-spawn at the back of this worker's local FIFO queue. Second run: every consume task
/// of the node for this worker has run; count the worker as passed.
class BarrierTask final : public Task {
public:
    explicit BarrierTask(NodeState &node) noexcept : _node(&node) {}

    TaskResult execute(TaskContext &context) noexcept override {
        if (!_arrived) {
            _arrived = true;
            // Still annotated with this worker: the successor spawn pushes it to the local queue.
            return TaskResult::successor(this);
        }
        _node->run->barrier_passed(*_node, context);
        return TaskResult::remove();
    }

private:
    NodeState *_node;
    bool _arrived{false};
};

class SourceStartTask final : public Task {
public:
    explicit SourceStartTask(NodeState &node) noexcept : _node(&node) {}
    TaskResult execute(TaskContext &context) noexcept override {
        _node->run->start_source(*_node, context);
        return TaskResult::remove();
    }

private:
    NodeState *_node;
};

class PartTask final : public Task {
public:
    PartTask(NodeState &node, std::uint32_t part) noexcept : _node(&node), _part(part) {}
    TaskResult execute(TaskContext &context) noexcept override {
        _node->run->run_part(*_node, _part, context);
        return TaskResult::remove();
    }

private:
    NodeState *_node;
    std::uint32_t _part;
};

class MergeTask final : public Task {
public:
    MergeTask(NodeState &node, std::uint32_t into, std::uint32_t from, std::uint32_t level) noexcept
        : _node(&node), _into(into), _from(from), _level(level) {}
    TaskResult execute(TaskContext &context) noexcept override {
        _node->run->run_merge(*_node, _into, _from, _level, context);
        return TaskResult::remove();
    }

private:
    NodeState *_node;
    std::uint32_t _into;
    std::uint32_t _from;
    std::uint32_t _level;
};

/// Kickoff in two hops on one worker, with a marker in between: under FIFO the marker runs
/// before the second hop; under LIFO after it. The runtime has no accessor for its local order,
/// so the layer looks (two tiny tasks per run).
class KickoffTask final : public Task {
public:
    explicit KickoffTask(RunState &run) noexcept : _run(&run) {}
    TaskResult execute(TaskContext &context) noexcept override {
        if (!_checked) {
            _checked = true;
            RunState *run = _run;
            context.spawn([run] { run->fifo_marker(); });
            return TaskResult::successor(this);
        }
        _run->kickoff_checked(context);
        return TaskResult::remove();
    }

private:
    RunState *_run;
    bool _checked{false};
};

tasking::Annotation on_worker(std::uint16_t worker) noexcept {
    return tasking::Annotation{.target_worker = worker};
}

} // namespace

RunState::RunState(tasking::Runtime &runtime, Graph &graph, std::vector<Pipeline> pipelines,
                   std::function<void(RunResult)> on_done, CancelToken cancel,
                   std::shared_ptr<Completion> completion)
    : _graph(&graph), _workers(runtime.worker_count()), _plan(std::move(pipelines)),
      _nodes(std::make_unique<NodeState[]>(graph.size())),
      _pipelines(std::make_unique<PipelineState[]>(_plan.size())), _on_done(std::move(on_done)),
      _cancel(std::move(cancel._state)), _completion(std::move(completion)), _started(Clock::now()) {
    const auto size = static_cast<NodeId>(graph.size());
    for (NodeId id = 0; id < size; ++id) {
        NodeState &state = _nodes[id];
        state.run = this;
        state.node = &graph.node(id);
        state.prefetch = state.node->has_prefetch();
        for (const NodeId next : graph.successors(id)) {
            state.successors.push_back(&_nodes[next]);
        }
        for (const NodeId previous : graph.predecessors(id)) {
            state.predecessors.push_back(&_nodes[previous]);
        }
        state.deferred = std::make_unique<DeferredSlot[]>(_workers);
        state.pending_predecessors.store(static_cast<std::uint32_t>(state.predecessors.size()),
                                         std::memory_order_relaxed);
        state.outstanding_workers.store(_workers, std::memory_order_relaxed);
    }
    for (const Pipeline &pipeline : _plan) {
        PipelineState &state = _pipelines[pipeline.id];
        for (const NodeId id : pipeline.nodes) {
            _nodes[id].pipeline = pipeline.id;
        }
        for (const NodeId id : pipeline.sources) {
            state.sources.push_back(&_nodes[id]);
        }
        for (const NodeId before : pipeline.depends_on) {
            _nodes[before].dependents.push_back(pipeline.id);
        }
        state.pending_dependencies.store(static_cast<std::uint32_t>(pipeline.depends_on.size()),
                                         std::memory_order_relaxed);
        state.remaining_nodes.store(static_cast<std::uint32_t>(pipeline.nodes.size()),
                                    std::memory_order_relaxed);
    }
    _remaining_nodes.store(size + 1U, std::memory_order_relaxed); // + 1: the kickoff's share
}

void RunState::fifo_marker() noexcept {
    if (_probe.load(std::memory_order_relaxed) == Probe::kickoff_first) {
        // LIFO: the kickoff ran first and left the run to this task, the last one of it.
        fail("dataflow: the runtime must run with RuntimeConfig::local_order = LocalOrder::fifo (the barrier "
             "tasks rely on FIFO task pools)");
        finish(true);
        return;
    }
    _probe.store(Probe::marker_first, std::memory_order_relaxed);
}

void RunState::kickoff_checked(TaskContext &context) noexcept {
    if (_probe.load(std::memory_order_relaxed) != Probe::marker_first) {
        _probe.store(Probe::kickoff_first, std::memory_order_relaxed);
        return;
    }
    for (const Pipeline &pipeline : _plan) {
        if (pipeline.depends_on.empty()) {
            start_pipeline(pipeline.id, context);
        }
    }
    // The kickoff's own share of the remaining count: the run cannot end (and free this state)
    // while the loop above still walks the plan.
    if (_remaining_nodes.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        finish(false);
    }
}

void RunState::start_pipeline(std::uint32_t pipeline, TaskContext &context) noexcept {
    PipelineState &state = _pipelines[pipeline];
    state.started = Clock::now();
    for (NodeState *source : state.sources) {
        // Spread the start() calls: sources of many pipelines ready at once start in parallel.
        const auto worker =
            static_cast<std::uint16_t>(_next_start.fetch_add(1, std::memory_order_relaxed) % _workers);
        auto *task = context.new_task<SourceStartTask>(*source);
        task->annotate(on_worker(worker));
        context.spawn(*task);
    }
}

void RunState::start_source(NodeState &node, TaskContext &context) noexcept {
    if (!cancelled()) {
        FlowContext flow{context, *this, node, Phase::start};
        node.node->start(flow);
    }
    // Same task, so the barriers travel behind every token start() dispatched (same queues).
    open_barrier_round(node, context);
}

void RunState::consume(NodeState &node, Token token, TaskContext &context) noexcept {
    if (!cancelled()) [[likely]] {
        FlowContext flow{context, *this, node, Phase::consume};
        node.node->consume(flow, token);
    } else {
        node.node->discard(token);
    }
}

void RunState::spawn_consume(NodeState &node, Token token, const DispatchTarget *target,
                             TaskContext &context) noexcept {
    auto *task = context.new_task<ConsumeTask>(node, token);
    if (target != nullptr) {
        switch (target->kind()) {
        case DispatchTarget::Kind::any:
            break;
        case DispatchTarget::Kind::worker:
            MX_ASSERT(target->id() < context.worker_count(),
                      "dataflow token sent to a worker the runtime lacks");
            task->annotate(target->id());
            break;
        case DispatchTarget::Kind::region:
            MX_ASSERT(target->id() < context.region_count(),
                      "dataflow token sent to a region the runtime lacks");
            task->annotate_region(static_cast<std::uint8_t>(target->id()));
            break;
        }
    }
    context.spawn(*task);
}

void RunState::open_barrier_round(NodeState &node, TaskContext &context) noexcept {
    // Targeted tokens the predecessors emitted in their start/finalize phases go out from this
    // task, so each travels the same (producer region -> worker) queue as the barrier for its
    // worker, ahead of it.
    for (NodeState *previous : node.predecessors) {
        for (std::uint16_t w = 0; w < _workers; ++w) {
            for (const Deferred &deferred : previous->deferred[w].tokens) {
                spawn_consume(node, deferred.token, &deferred.target, context);
            }
        }
    }
    // Once the last barrier is out the node may complete and the run end on another worker:
    // nothing of the run may be touched after it (hence the local copy of the worker count).
    const std::uint16_t workers = _workers;
    for (std::uint16_t w = 0; w < workers; ++w) {
        auto *barrier = context.new_task<BarrierTask>(node);
        barrier->annotate(on_worker(w));
        context.spawn(*barrier);
    }
}

void RunState::barrier_passed(NodeState &node, TaskContext &context) noexcept {
    if (node.outstanding_workers.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        consume_phase_done(node, context);
    }
}

std::uint16_t RunState::checked_worker(std::uint32_t worker) const noexcept {
    MX_ASSERT(worker < _workers, "Node::finalize_worker() named a worker the runtime does not have");
    return static_cast<std::uint16_t>(worker % _workers);
}

void RunState::consume_phase_done(NodeState &node, TaskContext &context) noexcept {
    const std::uint32_t parts = cancelled() ? 0U : node.node->finalize_parts(_workers);
    if (parts == 0) {
        start_merges(node, context);
        return;
    }
    node.outstanding_parts.store(parts, std::memory_order_relaxed); // published by the spawns
    for (std::uint32_t part = 0; part < parts; ++part) {
        auto *task = context.new_task<PartTask>(node, part);
        task->annotate(on_worker(checked_worker(node.node->finalize_worker(part, _workers))));
        context.spawn(*task);
    }
}

void RunState::run_part(NodeState &node, std::uint32_t part, TaskContext &context) noexcept {
    if (!cancelled()) {
        FlowContext flow{context, *this, node, Phase::finalize_part};
        node.node->finalize_part(flow, part);
    }
    if (node.outstanding_parts.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        start_merges(node, context);
    }
}

// Merge tree over n inputs, L = ceil(log2 n) levels. Merge (i, l) folds input i + 2^(l-1) into
// input i, for i a multiple of 2^l with i + 2^(l-1) < n. Its left input is final after merge
// (i, l-1) (for l >= 2), its right input after merge (i + 2^(l-1), l-1) if that one exists
// (i + 2^(l-1) + 1 < n), otherwise at once. Level-1 merges have final inputs from the start.

void RunState::start_merges(NodeState &node, TaskContext &context) noexcept {
    const std::uint32_t inputs = cancelled() ? 0U : node.node->merge_inputs(_workers);
    if (inputs < 2) {
        run_finalize(node, context);
        return;
    }
    // Written before the first merge task is spawned (the spawn publishes them).
    node.merge_count = inputs;
    node.merge_levels = static_cast<std::uint32_t>(std::bit_width(inputs - 1U));
    node.merge_arrivals =
        std::make_unique<std::atomic<std::uint8_t>[]>(std::size_t{node.merge_levels + 1U} * inputs);
    for (std::uint32_t into = 0; into + 1 < inputs; into += 2) {
        spawn_merge(node, into, 1, context);
    }
}

void RunState::spawn_merge(NodeState &node, std::uint32_t into, std::uint32_t level,
                           TaskContext &context) noexcept {
    const std::uint32_t from = into + (1U << (level - 1U));
    auto *task = context.new_task<MergeTask>(node, into, from, level);
    task->annotate(on_worker(checked_worker(node.node->finalize_worker(into, _workers))));
    context.spawn(*task);
}

void RunState::run_merge(NodeState &node, std::uint32_t into, std::uint32_t from, std::uint32_t level,
                         TaskContext &context) noexcept {
    if (!cancelled()) {
        FlowContext flow{context, *this, node, Phase::merge};
        node.node->merge(flow, into, from);
    }
    // Find the merge this one's result feeds: the lowest level above with a merge at the parent
    // position (a left input without a right partner moves up unchanged).
    const std::uint32_t inputs = node.merge_count;
    for (std::uint32_t parent_level = level + 1; parent_level <= node.merge_levels; ++parent_level) {
        const std::uint32_t parent = into & ~((1U << parent_level) - 1U);
        const std::uint32_t right = parent + (1U << (parent_level - 1U));
        if (right >= inputs) {
            continue;
        }
        const std::uint32_t expected = right + 1 < inputs ? 2U : 1U;
        auto &arrivals = node.merge_arrivals[std::size_t{parent_level} * inputs + parent];
        if (arrivals.fetch_add(1, std::memory_order_acq_rel) + 1U == expected) {
            spawn_merge(node, parent, parent_level, context);
        }
        return;
    }
    run_finalize(node, context); // the root merge
}

void RunState::run_finalize(NodeState &node, TaskContext &context) noexcept {
    if (!cancelled()) {
        FlowContext flow{context, *this, node, Phase::finalize};
        node.node->finalize(flow);
    }
    complete_node(node, context);
}

void RunState::complete_node(NodeState &node, TaskContext &context) noexcept {
    // Timing first, so a pipeline counts as finished before the ones waiting for it start.
    PipelineState &own = _pipelines[node.pipeline];
    if (own.remaining_nodes.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        own.finished = Clock::now();
    }
    for (NodeState *next : node.successors) {
        if (next->pending_predecessors.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            open_barrier_round(*next, context);
        }
    }
    for (const std::uint32_t pipeline : node.dependents) {
        if (_pipelines[pipeline].pending_dependencies.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            start_pipeline(pipeline, context);
        }
    }
    // Last: the decrement that reaches zero ends the run, and nothing may touch it afterwards.
    if (_remaining_nodes.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        finish(false);
    }
}

void RunState::finish(bool config_error) noexcept {
    RunResult result;
    {
        const std::lock_guard lock{_cancel->mutex};
        result.ok = !_cancel->cancelled.load(std::memory_order_relaxed);
        if (!result.ok) {
            result.error = _cancel->message;
        }
    }
    result.elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - _started);
    result.pipelines.reserve(_plan.size());
    for (const Pipeline &pipeline : _plan) {
        const PipelineState &state = _pipelines[pipeline.id];
        PipelineTiming timing{.pipeline = pipeline.id};
        if (state.started != Clock::time_point{}) {
            timing.started = std::chrono::duration_cast<std::chrono::nanoseconds>(state.started - _started);
            timing.finished = std::chrono::duration_cast<std::chrono::nanoseconds>(state.finished - _started);
        }
        result.pipelines.push_back(timing);
    }
    std::function<void(RunResult)> on_done = std::move(_on_done);
    std::shared_ptr<Completion> completion = std::move(_completion);
    // The graph may be started again from here on (even from on_done); this run touches it no more.
    release(*_graph);
    delete this;
    if (on_done) {
        on_done(result);
    }
    const std::lock_guard lock{completion->mutex};
    completion->result = std::move(result);
    completion->config_error = config_error;
    completion->done = true;
    completion->finished.notify_all();
}

} // namespace detail

// ---- FlowContext ------------------------------------------------------------------------------

Node &FlowContext::node() const noexcept { return *_node->node; }

std::uint16_t FlowContext::resolve_any() noexcept {
    return static_cast<std::uint16_t>(_next_any++ % _task->worker_count());
}

void FlowContext::emit(Token token) noexcept {
    for (detail::NodeState *next : _node->successors) {
        detail::RunState::spawn_consume(*next, token, nullptr, *_task);
    }
}

void FlowContext::emit(Token token, DispatchTarget target) noexcept {
    MX_ASSERT(_phase != Phase::consume,
              "emit(token, target) from consume(): a remote task could overtake the successor's barrier");
    if (_node->successors.empty()) {
        return;
    }
    if (target.kind() == DispatchTarget::Kind::any) {
        target = DispatchTarget::worker(resolve_any());
    }
    if (target.kind() == DispatchTarget::Kind::worker && target.id() == worker_id()) {
        // This worker's local queue: the successors' barriers arrive here later and line up behind.
        emit(token);
        return;
    }
    _node->deferred[worker_id()].tokens.push_back(detail::Deferred{token, target});
}

void FlowContext::dispatch(Token token, DispatchTarget target) noexcept {
    MX_ASSERT(_phase == Phase::start, "dispatch() is for a source's start()");
    if (target.kind() == DispatchTarget::Kind::any) {
        target = DispatchTarget::worker(resolve_any());
    }
    detail::RunState::spawn_consume(*_node, token, &target, *_task);
}

void FlowContext::fail(std::string_view message) noexcept { _run->fail(message); }

bool FlowContext::cancelled() const noexcept { return _run->cancelled(); }

// ---- cancellation, handles, entry points ---------------------------------------------------

CancelToken::CancelToken() : _state(std::make_shared<detail::CancelState>()) {}

void CancelToken::cancel(std::string_view reason) const noexcept {
    if (_state) {
        _state->cancel(reason);
    }
}

bool CancelToken::cancelled() const noexcept {
    return _state && _state->cancelled.load(std::memory_order_acquire);
}

bool RunHandle::done() const noexcept {
    if (!_completion) {
        return true;
    }
    const std::lock_guard lock{_completion->mutex};
    return _completion->done;
}

RunResult RunHandle::wait() const {
    if (!_completion) {
        throw std::logic_error("dataflow: wait() on a RunHandle that belongs to no run");
    }
    if (tasking::detail::current_worker() != nullptr) {
        throw std::logic_error(
            "dataflow: a run cannot be waited for from inside a worker (it could deadlock); "
            "use start() with on_done");
    }
    std::unique_lock lock{_completion->mutex};
    _completion->finished.wait(lock, [this] { return _completion->done; });
    if (_completion->config_error) {
        throw tasking::ConfigError(_completion->result.error);
    }
    return _completion->result;
}

RunHandle start(tasking::Runtime &runtime, Graph &graph, std::function<void(RunResult)> on_done,
                CancelToken cancel) {
    std::vector<Pipeline> plan = graph.pipelines(); // validates
    if (!runtime.running()) {
        throw std::logic_error("dataflow: the runtime is stopped; start it before running a graph");
    }
    if (!detail::RunState::claim(graph)) {
        throw std::logic_error("dataflow: the graph is already running (one run of a graph at a time)");
    }
    RunHandle handle;
    handle._cancel = cancel;
    handle._completion = std::make_shared<detail::Completion>();
    detail::RunState *state = nullptr;
    try {
        for (std::size_t id = 0; id < graph.size(); ++id) {
            graph.node(static_cast<NodeId>(id)).prepare(runtime.worker_count(), runtime.region_count());
        }
        state = new detail::RunState(runtime, graph, std::move(plan), std::move(on_done), std::move(cancel),
                                     handle._completion);
    } catch (...) {
        detail::RunState::release(graph);
        throw;
    }
    runtime.spawn(*runtime.new_task<detail::KickoffTask>(*state));
    return handle;
}

RunResult run(tasking::Runtime &runtime, Graph &graph, CancelToken cancel) {
    if (tasking::detail::current_worker() != nullptr) {
        throw std::logic_error(
            "dataflow: run() blocks and cannot be called from inside a worker; use start()");
    }
    return start(runtime, graph, {}, std::move(cancel)).wait();
}

} // namespace mx::dataflow
