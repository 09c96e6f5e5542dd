// Running a graph: the tasks of a run and the counting protocol (docs/design/dataflow.md).
//
// Life of a node N in a run:
//   1. N's count holds one share per consume task of N spawned and not finished, plus one share
//      per data predecessor not complete yet (a source: one share for its start task). Tasks that
//      emit to N (or a source's start() dispatching to N) add their batch of consume tasks to the
//      count before spawning it, while they still hold a share of N themselves (their node's, or
//      the start task's), so the count cannot touch zero while anyone may still produce for N.
//   2. Whoever takes the count to zero (the last consume task, the completing last predecessor,
//      or the source's start task) ends N's consume phase: the finalize parts run as tasks, then
//      the merge tree, then finalize(); then N is complete: it gives up its share of every
//      successor's count (a successor whose count reaches zero goes on in a task of its own) and
//      starts the pipelines whose dependencies are now complete.
// Neither the order in which a worker runs its tasks nor the worker a task runs on matters.

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
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

using tasking::Task;
using tasking::TaskContext;
using tasking::TaskResult;

/// One per token and node (emit() makes one per successor).
class ConsumeTask final : public Task {
public:
    ConsumeTask(NodeState &node, Token token) noexcept : _node(&node), _token(token) {
        if (node.prefetch) {
            annotate(tasking::PrefetchHint::callback(&ConsumeTask::prefetch_token));
        }
    }

    TaskResult execute(TaskContext &context) noexcept override {
        RunState::count_task(*_node, context);
        _node->run->consume(*_node, _token, context);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return _node->labels.consume; }

    // The next task of the emitting callback's batch (FlowContext::flush); written and read only
    // by that callback, before the task is spawned.
    ConsumeTask *next_in_batch{nullptr};

private:
    /// The node's prefetch callback, called by the worker's prefetch buffer before the task runs.
    static void prefetch_token(const Task &task) noexcept {
        const auto &self = static_cast<const ConsumeTask &>(task);
        self._node->node->prefetch(self._token);
    }

    NodeState *_node;
    Token _token;
};

namespace {

/// Ends the consume phase of a node whose count reached zero when its last data predecessor
/// completed. A task of its own (instead of a call) keeps a chain of such nodes from nesting
/// their finalizations on one stack.
class ConsumeEndTask final : public Task {
public:
    explicit ConsumeEndTask(NodeState &node) noexcept : _node(&node) {}
    TaskResult execute(TaskContext &context) noexcept override {
        RunState::count_task(*_node, context);
        _node->run->consume_phase_done(*_node, context);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return _node->labels.finalize; }

private:
    NodeState *_node;
};

class SourceStartTask final : public Task {
public:
    explicit SourceStartTask(NodeState &node) noexcept : _node(&node) {}
    TaskResult execute(TaskContext &context) noexcept override {
        RunState::count_task(*_node, context);
        _node->run->start_source(*_node, context);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return _node->labels.start; }

private:
    NodeState *_node;
};

class PartTask final : public Task {
public:
    PartTask(NodeState &node, std::uint32_t part) noexcept : _node(&node), _part(part) {}
    TaskResult execute(TaskContext &context) noexcept override {
        RunState::count_task(*_node, context);
        _node->run->run_part(*_node, _part, context);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return _node->labels.part; }

private:
    NodeState *_node;
    std::uint32_t _part;
};

class MergeTask final : public Task {
public:
    MergeTask(NodeState &node, std::uint32_t into, std::uint32_t from, std::uint32_t level) noexcept
        : _node(&node), _into(into), _from(from), _level(level) {}
    TaskResult execute(TaskContext &context) noexcept override {
        RunState::count_task(*_node, context);
        _node->run->run_merge(*_node, _into, _from, _level, context);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return _node->labels.merge; }

private:
    NodeState *_node;
    std::uint32_t _into;
    std::uint32_t _from;
    std::uint32_t _level;
};

class KickoffTask final : public Task {
public:
    explicit KickoffTask(RunState &run) noexcept : _run(&run) {}
    TaskResult execute(TaskContext &context) noexcept override {
        _run->kickoff(context);
        return TaskResult::remove();
    }
    [[nodiscard]] const char *trace_label() const noexcept override { return "dataflow kickoff"; }

private:
    RunState *_run;
};

tasking::Annotation on_worker(std::uint16_t worker) noexcept {
    return tasking::Annotation{.target_worker = worker};
}

/// A trace label for `name`: the same pointer for the same text, alive until the program ends
/// (a trace may be written long after the graph is gone). Only a few names per node and run.
const char *intern_label(std::string name) {
    static std::mutex mutex;
    // Never destroyed: a trace written while the program exits may still point into it.
    static auto *labels = new std::set<std::string, std::less<>>(); // NOLINT(cppcoreguidelines-owning-memory)
    const std::lock_guard lock{mutex};
    return labels->insert(std::move(name)).first->c_str();
}

NodeLabels labels_of(const Node &node) {
    const std::string &name = node.name();
    return NodeLabels{.start = intern_label(name + " (start)"),
                      .consume = intern_label(name),
                      .part = intern_label(name + " (finalize part)"),
                      .merge = intern_label(name + " (merge)"),
                      .finalize = intern_label(name + " (finalize)")};
}

/// A pipeline's span in a trace: named as EXPLAIN names it, with its nodes in topological order.
const char *pipeline_label(const Graph &graph, const Pipeline &pipeline) {
    std::string label = "pipeline " + std::to_string(pipeline.id) + ":";
    const char *separator = " ";
    for (const NodeId id : pipeline.nodes) {
        label.append(separator).append(graph.node(id).name());
        separator = ", ";
    }
    return intern_label(std::move(label));
}

} // namespace

RunState::RunState(tasking::Runtime &runtime, Graph &graph, std::vector<Pipeline> pipelines,
                   std::function<void(RunResult)> on_done, CancelToken cancel,
                   std::shared_ptr<Completion> completion, RunOptions options)
    : _graph(&graph), _workers(runtime.worker_count()), _plan(std::move(pipelines)),
      _nodes(std::make_unique<NodeState[]>(graph.size())),
      _pipelines(std::make_unique<PipelineState[]>(_plan.size())), _on_done(std::move(on_done)),
      _cancel(std::move(cancel._state)), _completion(std::move(completion)), _started(Clock::now()),
      _profile(options.profile) {
    const auto size = static_cast<NodeId>(graph.size());
    for (NodeId id = 0; id < size; ++id) {
        NodeState &state = _nodes[id];
        state.run = this;
        state.node = &graph.node(id);
        state.prefetch = state.node->has_prefetch();
        state.labels = labels_of(*state.node);
        if (options.profile) {
            state.counters = std::make_unique<NodeCounters[]>(_workers);
        }
        for (const NodeId next : graph.successors(id)) {
            state.successors.push_back(&_nodes[next]);
        }
        // One share per data predecessor; a source's start task holds the one share of a source.
        state.outstanding.store(std::max<std::uint64_t>(graph.predecessors(id).size(), 1U),
                                std::memory_order_relaxed);
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
        if (runtime.tracing()) {
            state.trace_label = pipeline_label(graph, pipeline);
        }
    }
    _remaining_nodes.store(size + 1U, std::memory_order_relaxed); // + 1: the kickoff's share
}

void RunState::kickoff(TaskContext &context) noexcept {
    for (const Pipeline &pipeline : _plan) {
        if (pipeline.depends_on.empty()) {
            start_pipeline(pipeline.id, context);
        }
    }
    // The kickoff's own share of the remaining count: the run cannot end (and free this state)
    // while the loop above still walks the plan.
    if (_remaining_nodes.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        finish();
    }
}

void RunState::start_pipeline(std::uint32_t pipeline, TaskContext &context) noexcept {
    PipelineState &state = _pipelines[pipeline];
    state.started = Clock::now();
    if (state.trace_label != nullptr) [[unlikely]] {
        state.started_tsc = system::cycles();
    }
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
        const auto begin = callback_begin(node);
        FlowContext flow{context, *this, node, Phase::start};
        node.node->start(flow);
        flow.flush(); // counted while the start task still holds its share
        callback_end(node, context, begin);
    }
    if (release_share(node)) {
        consume_phase_done(node, context);
    }
}

void RunState::consume(NodeState &node, Token token, TaskContext &context) noexcept {
    const auto begin = callback_begin(node);
    if (!cancelled()) [[likely]] {
        FlowContext flow{context, *this, node, Phase::consume};
        node.node->consume(flow, token);
        flow.flush(); // counted at the successors while this task holds its node's share of them
    } else {
        node.node->discard(token);
    }
    callback_end(node, context, begin); // before the share: the run may end with it
    if (release_share(node)) {
        consume_phase_done(node, context);
    }
}

ConsumeTask &RunState::make_consume(NodeState &node, Token token, const DispatchTarget *target,
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
    return *task;
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
        const auto begin = callback_begin(node);
        FlowContext flow{context, *this, node, Phase::finalize_part};
        node.node->finalize_part(flow, part);
        flow.flush();
        callback_end(node, context, begin);
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
        const auto begin = callback_begin(node);
        FlowContext flow{context, *this, node, Phase::merge};
        node.node->merge(flow, into, from);
        flow.flush();
        callback_end(node, context, begin);
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
        const auto begin = callback_begin(node);
        FlowContext flow{context, *this, node, Phase::finalize};
        node.node->finalize(flow);
        flow.flush(); // counted at the successors before this node gives up its shares below
        callback_end(node, context, begin);
    }
    complete_node(node, context);
}

void RunState::complete_node(NodeState &node, TaskContext &context) noexcept {
    // Timing first, so a pipeline counts as finished before the ones waiting for it start.
    PipelineState &own = _pipelines[node.pipeline];
    if (own.remaining_nodes.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        own.finished = Clock::now();
        if (own.trace_label != nullptr) [[unlikely]] {
            // Ends with this task's slice: the pipeline's span encloses its last task.
            context.trace_span(own.trace_label, own.started_tsc);
        }
    }
    for (NodeState *next : node.successors) {
        if (release_share(*next)) {
            context.spawn(*context.new_task<ConsumeEndTask>(*next));
        }
    }
    for (const std::uint32_t pipeline : node.dependents) {
        if (_pipelines[pipeline].pending_dependencies.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            start_pipeline(pipeline, context);
        }
    }
    // Last: the decrement that reaches zero ends the run, and nothing may touch it afterwards.
    if (_remaining_nodes.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        finish();
    }
}

void RunState::finish() noexcept {
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
    if (_profile) {
        result.nodes.resize(_graph->size());
        for (std::size_t id = 0; id < result.nodes.size(); ++id) {
            result.nodes[id].tasks_per_worker.assign(_workers, 0);
            for (std::uint16_t worker = 0; worker < _workers; ++worker) {
                const NodeCounters &counters = _nodes[id].counters[worker];
                result.nodes[id].tasks_per_worker[worker] = counters.tasks;
                result.nodes[id].tasks += counters.tasks;
                result.nodes[id].busy += std::chrono::nanoseconds(counters.nanoseconds);
            }
        }
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
    completion->done = true;
    completion->finished.notify_all();
}

} // namespace detail

// ---- FlowContext ------------------------------------------------------------------------------

Node &FlowContext::node() const noexcept { return *_node->node; }

std::uint16_t FlowContext::resolve_any() noexcept {
    return static_cast<std::uint16_t>(_next_any++ % _task->worker_count());
}

FlowContext::~FlowContext() {
    MX_ASSERT(_batch_first == nullptr, "a FlowContext went away with consume tasks not spawned");
}

void FlowContext::batch(detail::ConsumeTask &task) noexcept {
    if (_batch_last == nullptr) {
        _batch_first = &task;
    } else {
        _batch_last->next_in_batch = &task;
    }
    _batch_last = &task;
}

void FlowContext::flush() noexcept {
    if (_batch_first == nullptr) {
        return;
    }
    // Counted before any task of the batch can run (and decrement); relaxed: the spawns below
    // publish the tasks, and the caller still holds a share of every count it raises here, so no
    // count is at zero (see NodeState::outstanding).
    if (_batch_emitted > 0) {
        for (detail::NodeState *next : _node->successors) {
            next->outstanding.fetch_add(_batch_emitted, std::memory_order_relaxed);
        }
    }
    if (_batch_dispatched > 0) {
        _node->outstanding.fetch_add(_batch_dispatched, std::memory_order_relaxed);
    }
    detail::ConsumeTask *task = _batch_first;
    _batch_first = nullptr;
    _batch_last = nullptr;
    _batch_emitted = 0;
    _batch_dispatched = 0;
    while (task != nullptr) {
        detail::ConsumeTask *next = task->next_in_batch; // the task may be gone once spawned
        _task->spawn(*task);
        task = next;
    }
}

void FlowContext::emit(Token token) noexcept {
    if (_node->successors.empty()) {
        return;
    }
    for (detail::NodeState *next : _node->successors) {
        batch(detail::RunState::make_consume(*next, token, nullptr, *_task));
    }
    if (++_batch_emitted + _batch_dispatched >= batch_tokens) {
        flush();
    }
}

void FlowContext::emit(Token token, DispatchTarget target) noexcept {
    if (_node->successors.empty()) {
        return;
    }
    if (target.kind() == DispatchTarget::Kind::any) {
        target = DispatchTarget::worker(resolve_any());
    }
    for (detail::NodeState *next : _node->successors) {
        batch(detail::RunState::make_consume(*next, token, &target, *_task));
    }
    if (++_batch_emitted + _batch_dispatched >= batch_tokens) {
        flush();
    }
}

void FlowContext::dispatch(Token token, DispatchTarget target) noexcept {
    MX_ASSERT(_phase == Phase::start, "dispatch() is for a source's start()");
    if (target.kind() == DispatchTarget::Kind::any) {
        target = DispatchTarget::worker(resolve_any());
    }
    batch(detail::RunState::make_consume(*_node, token, &target, *_task));
    if (_batch_emitted + ++_batch_dispatched >= batch_tokens) {
        flush();
    }
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
    return _completion->result;
}

RunHandle start(tasking::Runtime &runtime, Graph &graph, std::function<void(RunResult)> on_done,
                CancelToken cancel, RunOptions options) {
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
                                     handle._completion, options);
    } catch (...) {
        detail::RunState::release(graph);
        throw;
    }
    runtime.spawn(*runtime.new_task<detail::KickoffTask>(*state));
    return handle;
}

RunResult run(tasking::Runtime &runtime, Graph &graph, CancelToken cancel, RunOptions options) {
    if (tasking::detail::current_worker() != nullptr) {
        throw std::logic_error(
            "dataflow: run() blocks and cannot be called from inside a worker; use start()");
    }
    return start(runtime, graph, {}, std::move(cancel), options).wait();
}

} // namespace mx::dataflow
