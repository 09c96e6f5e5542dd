#pragma once

// Internal framework of TunaDB's physical operators (not installed). The executor compiles a
// PlanNode tree into a dataflow::Graph: every plan node becomes one or more dataflow nodes, and
// batches stream between them as tokens.
//
// Conventions every operator follows:
//   - A token between operators carries a heap-allocated Batch; the consuming task takes
//     ownership (BatchNode::consume hands it over as a unique_ptr). Plans are trees, so a node's
//     output goes to exactly one consumer (no fan-out of batches). Send batches only through
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

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/db/expression.h>
#include <mx/db/plan.h>
#include <mx/db/vector.h>
#include <mx/system/cpu.h>
#include <mx/util/assert.h>

namespace mx::db {
struct ExecutionOptions;
}

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
    /// worker (any phase). Empty batches are dropped; a stage error fails the query.
    void emit(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept;
    /// Same, with the successors' task on a chosen worker/region (not from consume()).
    void emit(dataflow::FlowContext &context, std::unique_ptr<Batch> batch,
              dataflow::DispatchTarget target) noexcept;

    /// Fuses a stage behind this node (compile time only).
    void append_stage(std::unique_ptr<Stage> stage) { _stages.push_back(std::move(stage)); }
    [[nodiscard]] const std::vector<std::unique_ptr<Stage>> &stages() const noexcept { return _stages; }

    /// The batch a token carries (ownership moves to the caller).
    static std::unique_ptr<Batch> take(dataflow::Token token) noexcept;

private:
    /// Applies the stages; false when the batch is to be dropped (empty or failed).
    bool run_stages(dataflow::FlowContext &context, Batch &batch) noexcept;

    std::vector<std::unique_ptr<Stage>> _stages; // built before the run, read-only during it
};

/// A dataflow node whose tokens are batches (see the conventions above).
class BatchNode : public OperatorNode {
public:
    using OperatorNode::OperatorNode;

    void consume(dataflow::FlowContext &context, dataflow::Token token) noexcept final {
        std::unique_ptr<Batch> batch = take(token);
        if (!context.cancelled()) {
            consume_batch(context, std::move(batch));
        }
    }
    virtual void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept = 0;
    /// A cancelled run hands the batches of the consume tasks it skips here, so none leaks.
    void discard(const dataflow::Token &token) noexcept final { take(token); }
};

/// State of one plan-to-graph compilation.
struct Compiler {
    dataflow::Graph &graph;
    const ExecutionOptions &options;
};

/// The dataflow node that emits the output batches of a compiled plan node.
struct Compiled {
    dataflow::NodeId output{0};
    /// The node emits its batches in the plan's order, all from one task (a sort): consumers
    /// that care (limit, the result sink) see them in order because they are consumed on that
    /// worker's FIFO queue.
    bool ordered{false};
};

/// Compiles `node` (and its children) into the graph. Dispatches on PlanNode::kind.
Compiled compile(Compiler &compiler, const PlanNode &node);
/// Hash joins (src/db/operators/hash_join.cpp): compiles both children, adds the build and probe
/// nodes, connects them and makes the probe pipeline depend on the finished build.
Compiled compile_hash_join(Compiler &compiler, const PlanNode &node);

Compiled compile_scan(Compiler &compiler, const PlanNode &node);
Compiled compile_filter(Compiler &compiler, const PlanNode &node);
Compiled compile_project(Compiler &compiler, const PlanNode &node);
Compiled compile_aggregate(Compiler &compiler, const PlanNode &node);
Compiled compile_sort(Compiler &compiler, const PlanNode &node);
Compiled compile_limit(Compiler &compiler, const PlanNode &node);
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
