#pragma once

// Internal framework of TunaDB's physical operators (not installed). The executor compiles a
// PlanNode tree into a dataflow::Graph: every plan node becomes one or more dataflow nodes, and
// batches stream between them as tokens.
//
// Conventions every operator follows:
//   - A token between operators carries a heap-allocated Batch; the consuming task takes
//     ownership (BatchNode::consume hands it over as a unique_ptr). A node's output goes to
//     exactly one consumer (no fan-out of batches; a shared subplan's result is kept by one node
//     that its readers scan). Send batches only through
//     OperatorNode::emit: it runs the fused stages. A cancelled run hands the batches of the
//     consume tasks it skips to BatchNode::discard, which frees them.
//   - A batch's vectors may be views into table fragments (the executor keeps every table of the
//     plan alive for the whole run), into memory an operator owns for the whole run (the string
//     arenas of aggregations and sorts, the graph is destroyed only after the result was
//     copied), or own their data. A batch an operator emits must not view memory of an input
//     batch that is freed after consume returns: move the vectors over or keep them alive
//     (Vector::keep_alive).
//   - Batches an operator emits are never empty (emit drops them).
//   - Operators honour Batch::selection; they may pass it through.
//   - Runtime errors (overflow, failed CAST) end the query through FlowContext::fail(message).
//   - Worker-local state is indexed by FlowContext::worker_id() and sized in prepare().

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/plan.h>
#include <mx/db/vector.h>
#include <mx/system/cpu.h>
#include <mx/util/assert.h>

namespace mx::db {
struct ExecutionOptions;
class Fragment;
} // namespace mx::db

namespace mx::db::detail {

/// A streaming transformation (filter, projection) fused into the task of the node that
/// produced the batch, so a scan-filter-project chain costs one task per batch. apply() is
/// const and thread-safe: many tasks run it at once.
class Stage {
public:
    virtual ~Stage() = default;
    /// Transforms the batch in place (narrowing its selection, replacing its columns).
    virtual EvalStatus apply(Batch &batch) const noexcept = 0;
    /// For EXPLAIN, e.g. "filter (a > 5)".
    [[nodiscard]] virtual std::string describe() const = 0;
};

/// Base of every TunaDB dataflow node: emitting batches through the fused stages.
class OperatorNode : public dataflow::Node {
public:
    using dataflow::Node::Node;

    /// Runs the fused stages on the batch and hands it to the successors as a new task on this
    /// worker (any phase). Empty batches are dropped; a stage error fails the query. Returns
    /// whether the batch was handed on.
    bool emit(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept;
    /// Same, with the successors' task on a chosen worker/region (not from consume()).
    bool emit(dataflow::FlowContext &context, std::unique_ptr<Batch> batch,
              dataflow::DispatchTarget target) noexcept;

    /// Scans only (compile time): the scan stops counting its morsels into the run's progress
    /// and leaves that to its consumer (BatchNode::count_progress), which counts a morsel's rows
    /// once it has done its work on them. Otherwise a progress bar would run ahead: every scan
    /// task runs before the probe or aggregation tasks it spawns. False for other nodes.
    virtual bool defer_progress() noexcept { return false; }

    /// Fuses a stage behind this node (compile time only).
    void append_stage(std::unique_ptr<Stage> stage) { _stages.push_back(std::move(stage)); }
    [[nodiscard]] const std::vector<std::unique_ptr<Stage>> &stages() const noexcept { return _stages; }

    /// The batch a token carries (ownership moves to the caller).
    static std::unique_ptr<Batch> take(dataflow::Token token) noexcept;

    /// EXPLAIN ANALYZE, before the run: count the rows of the batches this node emits, before
    /// its stages and after each one.
    void count_rows(std::uint16_t workers);
    /// Rows counted since count_rows(): [0] what the node itself emitted, [i] what was left after
    /// stage i. Empty when not counted. Read after the run.
    [[nodiscard]] std::vector<std::uint64_t> counted_rows() const;

private:
    /// Applies the stages; false when the batch is to be dropped (empty or failed).
    bool run_stages(dataflow::FlowContext &context, Batch &batch) noexcept;

    std::vector<std::unique_ptr<Stage>> _stages; // built before the run, read-only during it
    // Row counts of one worker, per level (stage count + 1): written only by the tasks of this
    // node on that worker, read after the run. Padded: workers count side by side.
    struct alignas(system::cache_line_size) RowCounts {
        std::vector<std::uint64_t> levels;
    };
    std::unique_ptr<RowCounts[]> _row_counts; // nullptr unless counting (set before the run)
    std::uint16_t _row_workers{0};
};

/// A dataflow node whose tokens are batches (see the conventions above).
/// Batches that consume tasks keep, one list per worker (written only by that worker's tasks, one
/// at a time; read once the node's consume phase is over), handed back in the order of their
/// sequence numbers (Batch::sequence; within one number, worker by worker).
class CollectedBatches {
public:
    void prepare(std::uint16_t workers) {
        _lists = std::make_unique<List[]>(workers);
        _workers = workers;
    }
    void add(std::uint16_t worker, std::unique_ptr<Batch> batch) {
        _lists[worker].batches.push_back(std::move(batch));
    }
    /// The batches in sequence order; they stay here.
    [[nodiscard]] std::vector<const Batch *> in_sequence() const {
        std::vector<const Batch *> batches;
        for (std::uint16_t w = 0; w < _workers; ++w) {
            for (const auto &batch : _lists[w].batches) {
                batches.push_back(batch.get());
            }
        }
        std::stable_sort(batches.begin(), batches.end(),
                         [](const Batch *a, const Batch *b) { return a->sequence < b->sequence; });
        return batches;
    }
    /// The batches in sequence order, moved out.
    [[nodiscard]] std::vector<std::unique_ptr<Batch>> take_in_sequence() {
        std::vector<std::unique_ptr<Batch>> batches;
        for (std::uint16_t w = 0; w < _workers; ++w) {
            for (auto &batch : _lists[w].batches) {
                batches.push_back(std::move(batch));
            }
            _lists[w].batches.clear();
        }
        std::stable_sort(batches.begin(), batches.end(),
                         [](const auto &a, const auto &b) { return a->sequence < b->sequence; });
        return batches;
    }

private:
    struct alignas(system::cache_line_size) List { // padded: workers append side by side
        std::vector<std::unique_ptr<Batch>> batches;
    };
    std::unique_ptr<List[]> _lists;
    std::uint16_t _workers{0};
};

class BatchNode : public OperatorNode {
public:
    using OperatorNode::OperatorNode;

    void consume(dataflow::FlowContext &context, dataflow::Token token) noexcept final {
        std::unique_ptr<Batch> batch = take(token);
        // A scan's batch still has all rows of its morsel (stages narrow the selection only).
        const std::uint32_t rows = batch->rows;
        if (!context.cancelled()) {
            consume_batch(context, std::move(batch));
        }
        if (_progress.has_value()) {
            _progress->advance(rows);
        }
    }
    virtual void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept = 0;
    /// A cancelled run hands the batches of the consume tasks it skips here, so none leaks.
    void discard(const dataflow::Token &token) noexcept final { take(token); }

    /// Compile time: this node's only input is a scan that deferred its progress to it.
    void count_progress(QueryProgress progress) { _progress = std::move(progress); }

private:
    std::optional<QueryProgress> _progress; // set at compile time, read-only during the run
};

/// Polls for cancellation inside one long task (a probe batch with a huge fan-out, the merge of
/// big aggregation partitions, a sort's k-way merge): the run's flag is checked only every
/// `interval` rows, so the loop stays cheap, yet Ctrl-C takes effect within milliseconds instead
/// of when the task ends. Local to one callback.
class CancelPoll {
public:
    static constexpr std::uint32_t default_interval = 4096;

    explicit CancelPoll(const dataflow::FlowContext &context,
                        std::uint32_t interval = default_interval) noexcept
        : _context(&context), _interval(interval) {}

    /// Counts `rows` more rows; true once the run was found cancelled (then stays true).
    bool operator()(std::uint32_t rows = 1) noexcept {
        if (_stopped) {
            return true;
        }
        _count += rows;
        if (_count >= _interval) {
            _count = 0;
            _stopped = _context->cancelled();
        }
        return _stopped;
    }
    [[nodiscard]] bool stopped() const noexcept { return _stopped; }

private:
    const dataflow::FlowContext *_context;
    std::uint32_t _interval;
    std::uint32_t _count{0};
    bool _stopped{false};
};

/// Where a plan node ended up in the graph (for EXPLAIN ANALYZE).
struct CompiledPlanNode {
    dataflow::NodeId output{0};
    std::uint32_t stage_level{0}; ///< its rows: the output node's counted_rows()[stage_level]
    dataflow::NodeId first{0};    ///< the nodes added while compiling it and its children:
    dataflow::NodeId last{0};     ///< [first, last)
};

/// State of one plan-to-graph compilation.
struct Compiler {
    dataflow::Graph &graph;
    const ExecutionOptions &options;
    /// Filled by compile() for every plan node it compiles (nullptr: not recorded).
    std::vector<std::pair<const PlanNode *, CompiledPlanNode>> *compiled{nullptr};
    /// Shared subplans compiled so far: the node that keeps each one's result, and whether its
    /// batches are numbered in order.
    std::map<const PlanNode *, std::pair<dataflow::NodeId, bool>> shared{};
};

/// The dataflow node that emits the output batches of a compiled plan node.
struct Compiled {
    dataflow::NodeId output{0};
    /// The node emits its batches numbered in the plan's order (Batch::sequence; a sort, or a
    /// stage or limit after one): consumers that care (limit, the result sink) restore it.
    bool ordered{false};
};

/// Compiles `node` (and its children) into the graph. Dispatches on PlanNode::kind.
Compiled compile(Compiler &compiler, const PlanNode &node);
/// Hash joins (src/db/operators/hash_join.cpp): compiles both children, adds the build and probe
/// nodes, connects them and makes the probe pipeline depend on the finished build.
Compiled compile_hash_join(Compiler &compiler, const PlanNode &node);

Compiled compile_scan(Compiler &compiler, const PlanNode &node);
/// The strategy the scan node `scan` applies to its `column`-th scanned column: the plan's
/// choice unless the options switch prefetching off or force one strategy.
ScanPrefetch effective_scan_prefetch(const PlanNode &scan, const ExecutionOptions &options,
                                     std::size_t column);
/// EXPLAIN text of a scan's prefetching, e.g. "prefetch=[k: whole column, v: 2 lines]".
std::string describe_prefetch(const std::vector<std::string> &names,
                              const std::vector<ScanPrefetch> &strategies, std::uint8_t lines);
/// Test hook: the cache lines (line-aligned addresses), in order, that the prefetch callback of a
/// task of scan node `scan` touches for the morsel starting at row `begin` of `fragment`.
std::vector<const void *> scan_prefetch_lines(const PlanNode &scan, const ExecutionOptions &options,
                                              const Fragment &fragment, std::uint32_t begin);
Compiled compile_filter(Compiler &compiler, const PlanNode &node);
Compiled compile_project(Compiler &compiler, const PlanNode &node);
Compiled compile_aggregate(Compiler &compiler, const PlanNode &node);
Compiled compile_sort(Compiler &compiler, const PlanNode &node);
Compiled compile_limit(Compiler &compiler, const PlanNode &node);
/// Set operations (src/db/operators/set_ops.cpp).
Compiled compile_union_all(Compiler &compiler, const PlanNode &node);
Compiled compile_repeat(Compiler &compiler, const PlanNode &node);
/// Window functions (src/db/operators/window.cpp).
Compiled compile_window(Compiler &compiler, const PlanNode &node);
/// A reader of a shared subplan (src/db/operators/shared.cpp): compiles the subplan and the node
/// that keeps its result at its first reader, and makes every reader's pipeline depend on it.
Compiled compile_shared_scan(Compiler &compiler, const PlanNode &node);
/// A sort with another limit/offset than the plan node's (LIMIT folded into the sort below it).
Compiled compile_sort_with(Compiler &compiler, const PlanNode &node, std::optional<std::uint64_t> limit,
                           std::uint64_t offset);
/// Where NULLs go when a SortKey does not say.
bool default_nulls_first(bool descending) noexcept;

/// The node a streaming operator over `input` may fuse into as a stage: the input's node when
/// fusion is on and it is an OperatorNode with no successor yet; nullptr otherwise.
OperatorNode *fusion_target(Compiler &compiler, const Compiled &input);

/// Stages for filters and projections (also used when they run as nodes of their own).
std::unique_ptr<Stage> make_filter_stage(ExprPtr predicate);
std::unique_ptr<Stage> make_project_stage(std::vector<ExprPtr> expressions);

} // namespace mx::db::detail
