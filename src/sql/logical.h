#pragma once

// Logical plans: what the binder produces and the optimizer rewrites before the physical
// planner turns them into db::PlanNode trees.
//
// Every column that exists anywhere in a statement (a table column of one FROM item, a computed
// select expression, an aggregate, a subquery's result) gets a statement-wide ColumnId. Bound
// expressions are ordinary db::Expr trees whose column indices are ColumnIds, so the expression
// factories type-check and fold them at bind time; the physical planner remaps the ids to
// positions in each operator's input (db::expr::remap_columns).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <mx/db/expression.h>
#include <mx/db/plan.h>
#include <mx/db/table.h>

namespace mx::sql::detail {

using ColumnId = std::uint32_t;

struct ColumnInfo {
    std::string name;
    db::Type type{};
    bool nullable{true};
    /// Estimated distinct values (set by the optimizer; < 0 = unknown).
    double distinct{-1.0};
};

/// The columns of one statement, indexed by ColumnId.
class ColumnRegistry {
public:
    ColumnId add(std::string name, db::Type type, bool nullable) {
        _columns.push_back(ColumnInfo{std::move(name), type, nullable, -1.0});
        return static_cast<ColumnId>(_columns.size() - 1);
    }
    [[nodiscard]] ColumnInfo &operator[](ColumnId id) { return _columns[id]; }
    [[nodiscard]] const ColumnInfo &operator[](ColumnId id) const { return _columns[id]; }
    [[nodiscard]] std::size_t size() const noexcept { return _columns.size(); }
    /// A column reference expression to `id`.
    [[nodiscard]] db::ExprPtr ref(ColumnId id) const {
        return db::expr::column(id, _columns[id].type, _columns[id].name);
    }

private:
    std::vector<ColumnInfo> _columns;
};

/// union_all: the rows of every child; output[i] is children[c]->output[i] of whichever child
/// the row came from (the children agree in column count and types). repeat: every row of the
/// child expressions[0] times (INTERSECT ALL / EXCEPT ALL), output = the child's.
/// dependent_join: a correlated subquery (Neumann and Kemper's dependent join): for each row of
/// children[0], children[1] evaluated with the row's values of the columns it reads from it.
/// Scalar (join_kind inner: a row whose value is NULL may be dropped, the value is an operand of
/// a WHERE comparison; left_outer: every row is kept): one row or none per left row, output = the
/// left's columns, then the right's. EXISTS, IN, ANY/ALL (semi, anti, mark; conjuncts compare the
/// left's and right's columns, mark is the BOOLEAN column): output = the left's (and the mark).
/// Only the binder creates it and the optimizer pass decorrelate replaces it by ordinary joins;
/// no later pass and no physical plan sees one.
/// shared_scan: the rows of a shared subplan (LogicalNode::shared), which every shared_scan of it
/// reads and which runs once; output[i] is the subplan's output[i]. Only the optimizer pass
/// shared_subplans creates it, for a CTE that is referenced more than once.
enum class LogicalKind : std::uint8_t {
    get,
    filter,
    project,
    join,
    aggregate,
    sort,
    limit,
    union_all,
    repeat,
    window,
    dependent_join,
    shared_scan
};

/// One window function of a window node (all share the node's PARTITION BY / ORDER BY).
struct LogicalWindowFunction {
    db::WindowFunction function{db::WindowFunction::row_number};
    std::optional<ColumnId> argument;
    std::optional<ColumnId> default_value; // lag/lead
    std::int64_t offset{1};                // lag/lead
    bool rows{false};
    db::FrameBound start{db::FrameBoundKind::unbounded_preceding, 0};
    db::FrameBound end{db::FrameBoundKind::current_row, 0};
    ColumnId output{0};
};

struct LogicalAggregate {
    db::AggregateFunction function{db::AggregateFunction::count_star};
    db::ExprPtr argument; // null for count_star
    ColumnId output{0};
    double fraction{0.5};       // quantile_cont
    std::string separator{","}; // string_agg
    int order{0};               // string_agg: 1 ascending, -1 descending, 0 unordered
};

struct LogicalSortKey {
    ColumnId column{0};
    bool descending{false};
    std::optional<bool> nulls_first;
};

struct LogicalNode;
using LogicalPtr = std::unique_ptr<LogicalNode>;

/// A subplan several shared_scan nodes read. It is no child of any of them: the optimizer
/// rewrites, estimates and decides it once, when it first meets one of its readers (the flags),
/// and column pruning keeps the union of the columns its readers read.
struct SharedPlan {
    LogicalPtr plan;
    /// Numbered from 1 in the order the pass shared_subplans created them.
    std::uint32_t id{0};
    std::string name; // the CTE's
    bool registered{false};
    bool rewritten{false};
    bool decided{false};
};

struct LogicalNode {
    LogicalKind kind{LogicalKind::get};
    std::vector<LogicalPtr> children;
    /// The columns this node produces, in order.
    std::vector<ColumnId> output;

    /// The binder: this projection is a reference to the CTE definition with this number (its
    /// name in `alias`); 0 for every other node. The pass shared_subplans reads it.
    std::uint32_t cte{0};
    /// shared_scan: the subplan it reads.
    std::shared_ptr<SharedPlan> shared;

    // get: a table (one FROM item); `predicate_conjuncts` are pushed-down filters.
    std::shared_ptr<const db::Table> table;
    std::vector<ColumnId> table_columns; // one id per table column
    std::string alias;

    /// filter: the predicate; get: pushed-down predicate; join: the join condition (ON, WHERE
    /// conjuncts placed here, correlation of a subquery). All are conjuncts (ANDed).
    std::vector<db::ExprPtr> conjuncts;

    // project: output[i] is expressions[i]; repeat: expressions[0] is the count
    std::vector<db::ExprPtr> expressions;

    // join: children[0] is the left (preserved, probe) input, children[1] the right (build).
    db::JoinKind join_kind{db::JoinKind::inner};
    /// Chosen by the optimizer: equality keys (left over children[0], right over children[1])
    /// and the rest of the condition as residual.
    std::vector<db::ExprPtr> left_keys;
    std::vector<db::ExprPtr> right_keys;
    /// mark join: the BOOLEAN column it appends (output = the left's columns, then this).
    ColumnId mark{0};
    bool bloom_filter{true};
    /// semi/anti/left outer: hash children[0] and probe with children[1] (db::JoinKind::right_semi,
    /// right_anti or right_outer); the output is still the logical join's. Chosen by the optimizer.
    bool build_left{false};
    /// A semi join the optimizer's magic sets added (its right side copies another input).
    bool magic_set{false};
    bool optimized{false};

    // aggregate: output = group ids, then aggregate ids
    std::vector<db::ExprPtr> groups;
    std::vector<LogicalAggregate> aggregates;
    /// The physical planner may turn a right outer join below into a count join (pass
    /// count_joins, docs/design/sql.md). Set by the optimizer.
    bool count_join{false};

    // sort (optional limit makes it a top-N) and limit
    std::vector<LogicalSortKey> sort_keys;
    std::optional<std::uint64_t> limit;
    std::uint64_t offset{0};

    // window: output = the child's output, then one column per function; sort_keys are the
    // window's ORDER BY
    std::vector<ColumnId> partition;
    std::vector<LogicalWindowFunction> windows;

    // optimizer annotations
    double rows{-1.0};
    /// get: the scan's prefetch decision (dissertation 7.3): these columns are prefetched
    /// entirely per morsel (a highly selective predicate reads all of them), every other
    /// scanned column only its first cache lines. Ascending.
    std::vector<ColumnId> prefetch_whole;
};

[[nodiscard]] LogicalPtr make_get(std::shared_ptr<const db::Table> table, std::vector<ColumnId> columns,
                                  std::string alias);
[[nodiscard]] LogicalPtr make_filter(LogicalPtr child, std::vector<db::ExprPtr> conjuncts);
[[nodiscard]] LogicalPtr make_project(LogicalPtr child, std::vector<db::ExprPtr> expressions,
                                      std::vector<ColumnId> output);
[[nodiscard]] LogicalPtr make_join(db::JoinKind kind, LogicalPtr left, LogicalPtr right,
                                   std::vector<db::ExprPtr> conjuncts);
/// A dependent join of `right` (a correlated subquery) onto `left` (see LogicalKind::dependent_
/// join; a mark's column and the conjuncts are set by the caller). `left` may be null: the binder
/// fills it in when it assembles the block (attach_dependent).
[[nodiscard]] LogicalPtr make_dependent_join(db::JoinKind kind, LogicalPtr left, LogicalPtr right);
/// Makes `tree` the left input of the dependent join `join` that has none yet and returns it.
[[nodiscard]] LogicalPtr attach_dependent(LogicalPtr tree, LogicalPtr join);
/// A mark join: every left row, plus `mark` (whether some right row satisfies `conjuncts`).
[[nodiscard]] LogicalPtr make_mark_join(LogicalPtr left, LogicalPtr right, std::vector<db::ExprPtr> conjuncts,
                                        ColumnId mark);
[[nodiscard]] LogicalPtr make_aggregate(LogicalPtr child, std::vector<db::ExprPtr> groups,
                                        std::vector<ColumnId> group_ids,
                                        std::vector<LogicalAggregate> aggregates);
[[nodiscard]] LogicalPtr make_sort(LogicalPtr child, std::vector<LogicalSortKey> keys);
[[nodiscard]] LogicalPtr make_union_all(std::vector<LogicalPtr> children, std::vector<ColumnId> output);
[[nodiscard]] LogicalPtr make_repeat(LogicalPtr child, db::ExprPtr count);
[[nodiscard]] LogicalPtr make_window(LogicalPtr child, std::vector<ColumnId> partition,
                                     std::vector<LogicalSortKey> order,
                                     std::vector<LogicalWindowFunction> functions);
[[nodiscard]] LogicalPtr make_limit(LogicalPtr child, std::optional<std::uint64_t> limit,
                                    std::uint64_t offset);

/// A reader of `shared` whose columns are `output` (in the order of the subplan's output).
[[nodiscard]] LogicalPtr make_shared_scan(std::shared_ptr<SharedPlan> shared, std::vector<ColumnId> output);
/// A deep copy of a plan (same column ids: a copy is only put where the original's columns are
/// not visible, as a magic set or a decorrelation's copy of the outer relation). A shared_scan's
/// copy reads the same shared subplan.
[[nodiscard]] LogicalPtr clone_plan(const LogicalNode &node);
/// The ColumnIds an expression references (without repetitions, ascending).
[[nodiscard]] std::vector<ColumnId> columns_of(const db::Expr &expression);
/// Splits nested ANDs into their operands.
void split_conjuncts(const db::ExprPtr &expression, std::vector<db::ExprPtr> &out);
/// Structural equality (same operators, constants, column ids and types).
[[nodiscard]] bool same_expression(const db::Expr &a, const db::Expr &b);
/// Calls `test` on the columns the node itself (not its children) reads: in its conditions,
/// expressions, group keys, join keys, aggregate arguments and window columns; stops at and
/// returns true for the first column `test` accepts.
bool any_column_read(const LogicalNode &node, const std::function<bool(ColumnId)> &test);
/// Whether the node itself (not its children) reads one of `ids`.
[[nodiscard]] bool node_reads_any(const LogicalNode &node, const std::set<ColumnId> &ids);
/// Whether the node or a node below it reads one of `ids` (a shared subplan is no child).
[[nodiscard]] bool plan_reads_any(const LogicalNode &node, const std::set<ColumnId> &ids);
/// Whether some node of the plan is a dependent join.
[[nodiscard]] bool contains_dependent_join(const LogicalNode &node) noexcept;
/// Whether the expression is the constant TRUE.
[[nodiscard]] bool is_true(const db::Expr &expression) noexcept;
/// Whether the expression is the constant FALSE or NULL (a filter that keeps nothing).
[[nodiscard]] bool is_false_or_null(const db::Expr &expression) noexcept;

} // namespace mx::sql::detail
