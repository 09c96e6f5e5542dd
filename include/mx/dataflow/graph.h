#pragma once

// MxTaskFlow (dissertation ch. 7): an application describes an operator graph, the layer turns it
// into tasks. Nodes are operators (code run by tasks on one data item each), data edges stream
// every item a node emits to its successors as new tasks, and marked dependencies (build before
// probe) hold whole pipelines back until a node completed. The end of an operator is detected
// by counting: per node the consume tasks in flight plus the predecessors still producing, one
// decrement per consume task and one increment per batch of emits, never per tuple. It relies neither on the
// order in which workers run tasks nor on where they run; see docs/design/dataflow.md for the protocol and
// why it is correct.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "mx/tasking/runtime.h"

namespace mx::dataflow {

/// Identifies a node inside its graph: the position in which it was added.
using NodeId = std::uint32_t;

/// The opaque payload of one data item (a fragment, a tuple batch, a partition, a number).
/// The layer never looks inside; what it means is agreed between a node and its successors.
struct Token {
    void *data{nullptr};
    std::uint64_t value{0};
};

/// Where a task for a token runs: any worker (round-robin), one worker, or a NUMA region (a worker
/// of that region, round-robin).
class DispatchTarget {
public:
    enum class Kind : std::uint8_t { any, worker, region };

    static constexpr DispatchTarget any() noexcept { return DispatchTarget{Kind::any, 0}; }
    static constexpr DispatchTarget worker(std::uint16_t id) noexcept {
        return DispatchTarget{Kind::worker, id};
    }
    static constexpr DispatchTarget region(std::uint8_t region) noexcept {
        return DispatchTarget{Kind::region, region};
    }

    [[nodiscard]] constexpr Kind kind() const noexcept { return _kind; }
    /// The worker id or the region id; 0 for any.
    [[nodiscard]] constexpr std::uint16_t id() const noexcept { return _id; }

private:
    constexpr DispatchTarget(Kind kind, std::uint16_t id) noexcept : _kind(kind), _id(id) {}
    Kind _kind;
    std::uint16_t _id;
};

class Node;
class Graph;

namespace detail {
class RunState;
struct NodeState;
class ConsumeTask;
} // namespace detail

/// Which callback of a node a FlowContext was handed to.
enum class Phase : std::uint8_t { start, consume, finalize_part, merge, finalize };

/// Handed to node callbacks: the worker they run on and the ways to pass data on. Valid only for
/// the duration of the callback.
class FlowContext {
public:
    /// Constructed by the layer for each callback.
    FlowContext(tasking::TaskContext &task, detail::RunState &run, detail::NodeState &node,
                Phase phase) noexcept
        : _task(&task), _run(&run), _node(&node), _phase(phase), _next_any(task.worker_id()) {}
    FlowContext(const FlowContext &) = delete;
    FlowContext &operator=(const FlowContext &) = delete;
    /// The layer flushes the batch of pending consume tasks before the context goes away.
    ~FlowContext();

    /// The runtime's context, e.g. to allocate resources. Tasks spawned through it directly are
    /// not tracked by the layer: the node may complete before they ran.
    [[nodiscard]] tasking::TaskContext &task() const noexcept { return *_task; }
    [[nodiscard]] std::uint16_t worker_id() const noexcept { return _task->worker_id(); }
    [[nodiscard]] std::uint16_t worker_count() const noexcept { return _task->worker_count(); }
    [[nodiscard]] std::uint8_t numa_region() const noexcept { return _task->numa_region(); }
    [[nodiscard]] std::uint16_t region_count() const noexcept { return _task->region_count(); }
    [[nodiscard]] Phase phase() const noexcept { return _phase; }
    [[nodiscard]] Node &node() const noexcept;

    /// Streams a token to every data successor as one new consume task each, without a target:
    /// spawned on this worker (the data the token names is likely in its cache), where the
    /// runtime may still move it to another worker. Any phase.
    void emit(Token token) noexcept;
    /// Streams a token to every data successor on a chosen worker or region (e.g. result
    /// partitions); the tasks are pinned there. DispatchTarget::any() picks workers round-robin.
    /// Any phase.
    void emit(Token token, DispatchTarget target) noexcept;
    /// start() of a source only: one consume task of this node for the token, on the chosen
    /// worker/region/any (NUMA-aware placement of fragments).
    void dispatch(Token token, DispatchTarget target) noexcept;

    /// Records the first error of the run and cancels it: consume, start, finalize callbacks
    /// not yet begun are skipped, the run still ends (every node still completes, without its
    /// callbacks); run() returns ok=false with the first message.
    void fail(std::string_view message) noexcept;
    /// Whether the run was cancelled (fail() or CancelToken::cancel()). Long callbacks may poll.
    [[nodiscard]] bool cancelled() const noexcept;

private:
    friend class detail::RunState;

    /// Consume tasks are collected and spawned in batches: the counters of the nodes they feed
    /// go up once per batch (before any task of it can run), not once per token.
    static constexpr std::uint32_t batch_tokens = 64;

    [[nodiscard]] std::uint16_t resolve_any() noexcept;
    /// Appends a consume task to the batch (emission order).
    void batch(detail::ConsumeTask &task) noexcept;
    /// Adds the batch to the counters of the nodes it feeds, then spawns its tasks in the order
    /// they were emitted. Called by the layer after every callback, before the task that ran it
    /// gives up its own share of a counter.
    void flush() noexcept;

    // Everything below is private to the one callback (one thread).
    tasking::TaskContext *_task;
    detail::RunState *_run;
    detail::NodeState *_node;
    Phase _phase;
    std::uint32_t _next_any; // round-robin cursor for DispatchTarget::any
    // The batch: consume tasks not spawned yet, linked in emission order.
    detail::ConsumeTask *_batch_first{nullptr};
    detail::ConsumeTask *_batch_last{nullptr};
    std::uint32_t _batch_emitted{0};    // tokens for every successor (one task per successor each)
    std::uint32_t _batch_dispatched{0}; // tokens for this node (dispatch())
};

/// An operator. Subclasses implement consume() and whichever phases they need. A node object
/// belongs to one graph; its callbacks run on the runtime's workers, consume() concurrently on
/// several workers (keep worker-local state indexed by FlowContext::worker_id()).
class Node {
public:
    explicit Node(std::string name) : _name(std::move(name)) {}
    virtual ~Node() = default;
    Node(const Node &) = delete;
    Node &operator=(const Node &) = delete;

    /// Called on the thread that starts a run, before any task of it: size worker-local state,
    /// reset results of an earlier run. May throw (the run is then not started).
    virtual void prepare(std::uint16_t /*worker_count*/, std::uint16_t /*region_count*/) {}

    /// Sources (nodes without data predecessors) only: dispatch the initial tokens (and/or emit
    /// to successors). Runs once per run in a task, when the node's pipeline may start.
    virtual void start(FlowContext & /*context*/) noexcept {}

    /// One task per token.
    virtual void consume(FlowContext &context, Token token) noexcept = 0;
    /// Called instead of consume() for a token of a run that was cancelled (fail() or a
    /// CancelToken), so a node whose tokens own memory can free it. Every token handed to a node
    /// reaches exactly one of consume() and discard().
    virtual void discard(const Token & /*token*/) noexcept {}

    /// Parallel finalize: after every consume task, parts 0..n-1 run as tasks (part i on worker
    /// finalize_worker(i, workers)), concurrently.
    [[nodiscard]] virtual std::uint32_t finalize_parts(std::uint16_t /*worker_count*/) const noexcept {
        return 0;
    }
    virtual void finalize_part(FlowContext & /*context*/, std::uint32_t /*part*/) noexcept {}

    /// Merge tree: after the parts, n partial results (e.g. one per worker) are merged pairwise
    /// by tasks, merge(into, from) with `from` folded into `into`, log2(n) levels deep; a merge
    /// runs as soon as both of its inputs are final. The result ends up in partial 0.
    [[nodiscard]] virtual std::uint32_t merge_inputs(std::uint16_t /*worker_count*/) const noexcept {
        return 0;
    }
    virtual void merge(FlowContext & /*context*/, std::uint32_t /*into*/, std::uint32_t /*from*/) noexcept {}

    /// The worker that runs finalize part `index` and the merges into partial `index`.
    [[nodiscard]] virtual std::uint16_t finalize_worker(std::uint32_t index,
                                                        std::uint16_t worker_count) const noexcept {
        return static_cast<std::uint16_t>(index % worker_count);
    }

    /// Once, after every consume task, finalize part and merge finished; may emit. When it
    /// returns the node is complete: successors whose other inputs are complete may end their
    /// consume phase, dependent pipelines may start.
    virtual void finalize(FlowContext & /*context*/) noexcept {}

    /// Per-node prefetch callback: called by the worker's prefetch buffer a few tasks before the
    /// consume task of `token` runs, to bring the data it reads into the cache.
    virtual void prefetch(const Token & /*token*/) const noexcept {}
    /// Whether consume tasks carry the prefetch callback (asked once per run).
    [[nodiscard]] virtual bool has_prefetch() const noexcept { return false; }

    /// Extra words for describe() / EXPLAIN (e.g. "key=a, sum(b)").
    [[nodiscard]] virtual std::string details() const { return {}; }
    /// Bytes its own data structures (hash tables, row stores) hold after a run, for EXPLAIN
    /// ANALYZE: they only grow during a run, so this is the run's peak. Called between runs only.
    [[nodiscard]] virtual std::uint64_t memory_bytes() const { return 0; }
    /// What the node decided during the last run, for EXPLAIN ANALYZE (e.g. "strategy=radix-
    /// partitioned" where EXPLAIN can only state the rule); empty for most nodes. Called between
    /// runs only.
    [[nodiscard]] virtual std::string run_notes() const { return {}; }

    /// Shown by describe() and EXPLAIN, and the label of the node's tasks in traces
    /// (Task::trace_label): consume tasks the name alone, the other callbacks with the phase
    /// appended ("aggregate (merge)"), interned per run into a table that lives as long as the
    /// program, so a trace outlives the graph.
    [[nodiscard]] const std::string &name() const noexcept { return _name; }
    /// The id the graph assigned in add().
    [[nodiscard]] NodeId id() const noexcept { return _id; }

private:
    friend class Graph;
    std::string _name;
    NodeId _id{0};
    const Graph *_graph{nullptr};
};

/// One pipeline: the nodes connected by data edges (a connected component), started together
/// once the nodes it depends on completed.
struct Pipeline {
    std::uint32_t id{0};
    std::vector<NodeId> nodes;        ///< topological order over data edges
    std::vector<NodeId> sources;      ///< nodes without data predecessors (start() runs)
    std::vector<NodeId> sinks;        ///< nodes without data successors
    std::vector<NodeId> depends_on;   ///< nodes of other pipelines that must complete first
    std::vector<std::uint32_t> after; ///< the pipelines of those nodes (sorted, unique)
};

/// The operator graph. Build it on one thread; then run it (not concurrently with itself).
class Graph {
public:
    Graph() = default;
    ~Graph();
    Graph(const Graph &) = delete;
    Graph &operator=(const Graph &) = delete;
    Graph(Graph &&other) noexcept;
    Graph &operator=(Graph &&other) noexcept;

    /// Constructs a node in the graph; the reference stays valid as long as the graph.
    template <class T, class... Args>
    T &add(Args &&...args) {
        static_assert(std::is_base_of_v<Node, T>, "graph nodes derive from mx::dataflow::Node");
        auto node = std::make_unique<T>(std::forward<Args>(args)...);
        T &reference = *node;
        add(std::move(node));
        return reference;
    }
    /// Takes a node; throws std::invalid_argument for null or a node already in a graph.
    NodeId add(std::unique_ptr<Node> node);

    /// Data edge: every token `from` emits becomes a consume task of `to`. Throws
    /// std::invalid_argument for unknown ids, self-loops and duplicate edges.
    void connect(NodeId from, NodeId to);
    void connect(const Node &from, const Node &to) { connect(from.id(), to.id()); }
    /// Dependency: the pipeline of `after` starts only once `before` completed (finalize done).
    /// Throws std::invalid_argument for unknown ids.
    void depend(NodeId before, NodeId after);
    void depend(const Node &before, const Node &after) { depend(before.id(), after.id()); }

    [[nodiscard]] std::size_t size() const noexcept { return _nodes.size(); }
    [[nodiscard]] Node &node(NodeId id) const;
    [[nodiscard]] const std::vector<NodeId> &successors(NodeId id) const { return _successors.at(id); }
    [[nodiscard]] const std::vector<NodeId> &predecessors(NodeId id) const { return _predecessors.at(id); }
    /// The (before, after) pairs given to depend().
    [[nodiscard]] const std::vector<std::pair<NodeId, NodeId>> &dependencies() const noexcept {
        return _dependencies;
    }

    /// Pipelines numbered by their smallest node id; nodes in topological order. Calls validate().
    [[nodiscard]] std::vector<Pipeline> pipelines() const;
    /// Human-readable plan: pipelines, their nodes and edges, what they wait for (EXPLAIN).
    [[nodiscard]] std::string describe() const;
    /// Throws std::invalid_argument naming the problem: a data cycle, a dependency cycle between
    /// pipelines, or a dependency inside one pipeline (it could never start).
    void validate() const;

    /// Whether a run of this graph is in flight.
    [[nodiscard]] bool running() const noexcept { return _running.load(std::memory_order_acquire); }

private:
    friend class detail::RunState;
    std::vector<std::unique_ptr<Node>> _nodes;
    std::vector<std::vector<NodeId>> _successors;
    std::vector<std::vector<NodeId>> _predecessors;
    std::vector<std::pair<NodeId, NodeId>> _dependencies;
    // Set by start() on the starting thread, cleared by the worker that finishes the run (before
    // on_done), read by anyone.
    std::atomic<bool> _running{false};
};

/// Timing of one pipeline, relative to the start of the run.
struct PipelineTiming {
    std::uint32_t pipeline{0};
    std::chrono::nanoseconds started{0};  ///< its sources were started (dependencies done)
    std::chrono::nanoseconds finished{0}; ///< its last node completed
};

/// What the tasks of one node did in a profiled run (RunOptions::profile).
struct NodeProfile {
    /// The node's tasks: its start task, consume tasks (also those that only discard), finalize
    /// parts and merges, and the task that ends its consume phase when its last predecessor
    /// completes (finalize runs in one of these).
    std::uint64_t tasks{0};
    /// Their time inside those callbacks (emitting included), summed over all workers.
    std::chrono::nanoseconds busy{0};
    /// `tasks` by the worker that ran them (indexed by worker id).
    std::vector<std::uint64_t> tasks_per_worker;
};

/// How to run a graph.
struct RunOptions {
    /// Count tasks and time per node (RunResult::nodes): two clock reads per task. Off: nothing
    /// is counted.
    bool profile{false};
};

struct RunResult {
    bool ok{true};
    std::string error; ///< the first fail() message or the cancel reason when !ok
    std::chrono::nanoseconds elapsed{0};
    std::vector<PipelineTiming> pipelines; ///< indexed by pipeline id
    std::vector<NodeProfile> nodes;        ///< indexed by node id; empty unless RunOptions::profile
};

namespace detail {
struct CancelState;
struct Completion;
} // namespace detail

/// Cancels a run from another thread (Ctrl-C in a shell). Copies share one state. Use one token
/// per run: once cancelled it stays cancelled, and fail() inside the run cancels it, too.
class CancelToken {
public:
    CancelToken();
    /// Cancels the run (if it did not fail already); `reason` becomes RunResult::error.
    void cancel(std::string_view reason = "cancelled") const noexcept;
    [[nodiscard]] bool cancelled() const noexcept;

private:
    friend class detail::RunState;
    std::shared_ptr<detail::CancelState> _state;
};

/// A run in flight, returned by start().
class RunHandle {
public:
    RunHandle() = default;
    void cancel(std::string_view reason = "cancelled") const noexcept { _cancel.cancel(reason); }
    [[nodiscard]] bool done() const noexcept;
    /// Blocks until the run finished and returns its result (errors of the run, cancellation
    /// included, come back as ok = false). Throws std::logic_error only for misuse: a handle that
    /// belongs to no run, or a call from inside a worker (it could deadlock).
    RunResult wait() const;

private:
    friend class detail::RunState;
    friend RunHandle start(tasking::Runtime &, Graph &, std::function<void(RunResult)>, CancelToken,
                           RunOptions);
    CancelToken _cancel;
    std::shared_ptr<detail::Completion> _completion;
};

/// Runs the graph and blocks until it finished. Call from a thread outside the runtime's
/// workers; several graphs may run at once from different threads. Works with any runtime
/// configuration (FIFO or LIFO local order, with or without work stealing). Throws
/// std::invalid_argument for an invalid graph (validate()), std::logic_error when the graph is
/// already running, the runtime is stopped or the caller is a worker; errors inside the run come
/// back as ok = false.
RunResult run(tasking::Runtime &runtime, Graph &graph, CancelToken cancel = {}, RunOptions options = {});

/// Starts the graph without blocking; `on_done` (may be empty) runs on a worker once the run
/// finished, after the graph is marked as not running (it may start the graph again). Throws like
/// run() for invalid graphs, a running graph or a stopped runtime.
RunHandle start(tasking::Runtime &runtime, Graph &graph, std::function<void(RunResult)> on_done = {},
                CancelToken cancel = {}, RunOptions options = {});

} // namespace mx::dataflow
