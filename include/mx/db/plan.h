#pragma once

// Physical query plans: what the C++ plan API (and later the SQL planner) hands to the executor.
// A plan is a tree of operators; every node knows its output columns, so expressions of a parent
// refer to the child's output by column index. The executor turns the tree into a dataflow graph
// of task pipelines (see docs/design/query-engine.md): a pipeline breaks at hash-join builds,
// aggregations and sorts.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mx/db/types.h>

namespace mx::db {

class Expr;
class Table;
using ExprPtr = std::shared_ptr<const Expr>;

struct OutputColumn {
    std::string name;
    Type type;
    bool nullable{true};
};

/// union_all: the rows of every child (same column count and types), in no particular order.
/// repeat: every input row `count` times (the count expression's value; NULL or < 1: dropped),
/// which turns the per-side counts of INTERSECT ALL / EXCEPT ALL back into rows.
/// shared_scan: columns of the rows of a subplan (PlanNode::shared) that several shared_scan
/// nodes of one plan read: the subplan runs once, its result is kept, and every reader scans it
/// once it is complete (a plan is then a DAG; the subplan is no child of its readers).
enum class PlanKind : std::uint8_t {
    scan,
    filter,
    project,
    hash_join,
    aggregate,
    sort,
    limit,
    union_all,
    repeat,
    window,
    shared_scan
};
/// full_outer: a left outer join that also emits every build row without a partner, with NULLs
/// on the probe side. right_semi / right_anti: the build rows that have / have no probe row
/// satisfying keys and residual, build columns only (a semi or anti join with the sides swapped,
/// so that the smaller side is the one hashed; a build row with a NULL key has no partner).
/// mark: every probe row once, plus a BOOLEAN column (never NULL) that says whether some build
/// row satisfies keys and residual (EXISTS as a value; the SQL front end derives IN, ANY and ALL
/// with their NULL semantics from such marks).
/// right_outer: the inner join's rows plus every build row without a probe row satisfying keys
/// and residual, with NULLs on the probe side (a left outer join with the sides swapped, so that
/// the preserved side is the one hashed; output columns: probe, then build, as for every join).
enum class JoinKind : std::uint8_t {
    inner,
    left_outer,
    semi,
    anti,
    full_outer,
    mark,
    right_semi,
    right_anti,
    right_outer
};

/// right_semi and right_anti: the output is the build side's.
[[nodiscard]] constexpr bool outputs_build_only(JoinKind kind) noexcept {
    return kind == JoinKind::right_semi || kind == JoinKind::right_anti;
}
/// Non-partitioned: one shared hash table built by all workers. Radix-partitioned: micro
/// partitioning into per-partition tables that fit the cache (large builds).
enum class JoinStrategy : std::uint8_t { automatic, non_partitioned, radix_partitioned };
/// What a scan task prefetches of one column of its morsel before it runs (dissertation 7.3):
/// nothing, the first cache lines only (a hint that starts the hardware prefetcher on a column
/// read sequentially), or the column's whole block of the morsel (a highly selective predicate
/// column: every value is read, while the other columns are touched at few rows only).
enum class ScanPrefetch : std::uint8_t { none, first_lines, whole_column };
enum class AggregateFunction : std::uint8_t {
    count_star,
    count,
    sum,
    avg,
    min,
    max,
    count_distinct,
    sum_distinct,  // sum(DISTINCT x): the sum of the distinct values
    avg_distinct,  // avg(DISTINCT x)
    var_samp,      // sample variance (DOUBLE; NULL for fewer than two values)
    var_pop,       // population variance
    stddev_samp,   // square root of var_samp
    stddev_pop,    // square root of var_pop
    quantile_cont, // the interpolated quantile `fraction` (median: 0.5) of a DOUBLE argument
    string_agg,    // the VARCHAR values joined with `separator` (optionally sorted)
};

struct AggregateSpec {
    AggregateFunction function{AggregateFunction::count_star};
    ExprPtr argument; // over the child's output; null for count_star
    std::string name;
    double fraction{0.5};       // quantile_cont: the quantile, 0..1
    std::string separator{","}; // string_agg
    int order{0};               // string_agg: 0 in no particular order, 1 ascending, -1 descending
};

struct SortKey {
    std::uint32_t column{0}; // index into the child's output
    bool descending{false};
    /// Unset: NULLs sort last in both directions, as in DuckDB (the engine's answers are checked
    /// against DuckDB; PostgreSQL puts them first for DESC). The SQL front end sets it for
    /// explicit NULLS FIRST/LAST.
    std::optional<bool> nulls_first;
};

/// Window functions (OVER): ranking and offset functions ignore the frame; first_value,
/// last_value and the aggregates read the rows of the frame.
enum class WindowFunction : std::uint8_t {
    row_number,
    rank,
    dense_rank,
    ntile, // argument: the bucket count (INTEGER or BIGINT, > 0; NULL gives NULL)
    lag,   // argument[offset rows before] in the partition, else the default (or NULL)
    lead,
    first_value,
    last_value,
    count_star,
    count,
    sum,
    avg,
    min,
    max,
};
enum class FrameBoundKind : std::uint8_t {
    unbounded_preceding,
    preceding,
    current_row,
    following,
    unbounded_following
};
struct FrameBound {
    FrameBoundKind kind{FrameBoundKind::unbounded_preceding};
    std::uint64_t offset{0}; // preceding/following: rows (ROWS frames only)
};
/// One window function of a window node; all of a node's functions share its PARTITION BY and
/// ORDER BY. Columns index the child's output.
struct WindowSpec {
    WindowFunction function{WindowFunction::row_number};
    std::optional<std::uint32_t> argument;
    std::optional<std::uint32_t> default_value; // lag/lead: column of the argument's type
    std::int64_t offset{1};                     // lag/lead
    /// ROWS (positions) or RANGE (peers of the ORDER BY keys; offsets are not supported).
    /// Defaults: RANGE UNBOUNDED PRECEDING .. CURRENT ROW, which without ORDER BY is the partition.
    bool rows{false};
    FrameBound start{FrameBoundKind::unbounded_preceding, 0};
    FrameBound end{FrameBoundKind::current_row, 0};
    std::string name;
};

struct PlanNode;
using PlanPtr = std::unique_ptr<PlanNode>;

struct PlanNode {
    PlanKind kind{PlanKind::scan};
    std::vector<PlanPtr> children; // hash_join: children[0] = probe side, children[1] = build side
    std::vector<OutputColumn> output;
    double estimated_rows{-1.0}; // -1 = unknown (the optimizer fills it in)

    // scan
    std::shared_ptr<const Table> table;
    std::vector<std::uint32_t> scan_columns; // table column indices (shared_scan: the subplan's
                                             // output columns), in output order
    ExprPtr predicate;                       // scan: over the scanned columns; filter: over the child
    /// scan: the prefetch strategy per entry of scan_columns (the optimizer's choice); empty =
    /// first_lines for every column. ExecutionOptions may override it for a whole run.
    std::vector<ScanPrefetch> scan_prefetch;
    /// scan: cache lines per column and morsel for first_lines; 0 = ExecutionOptions::prefetch_lines.
    std::uint8_t prefetch_lines{0};

    // project; repeat: expressions[0] is the count (INTEGER or BIGINT, over the child's output)
    std::vector<ExprPtr> expressions;

    // hash_join: keys are compared pairwise for equality; NULL keys never match.
    JoinKind join_kind{JoinKind::inner};
    JoinStrategy join_strategy{JoinStrategy::automatic};
    bool bloom_filter{true};
    std::vector<ExprPtr> probe_keys; // over the probe child's output
    std::vector<ExprPtr> build_keys; // over the build child's output
    /// Optional extra join condition over (probe output ++ build output); for left_outer and
    /// full_outer a probe row without a build row satisfying keys and residual gets NULLs on the
    /// build side (for full_outer and right_outer, a build row without such a probe row NULLs on
    /// the probe side).
    ExprPtr residual;
    /// right_outer only (plan::count_join): the probe outputs nothing; every build row comes out
    /// once, its columns followed by a BIGINT (never NULL), the number of probe rows that
    /// satisfy keys and residual with it. A group join: an aggregation that counts the probe
    /// rows per build row needs no hash table of its own (TPC-H Q13).
    bool count_matches{false};

    // aggregate: output = group expressions, then aggregates
    std::vector<ExprPtr> groups;
    std::vector<AggregateSpec> aggregates;

    // sort (with an optional limit: top-N) and limit
    std::vector<SortKey> sort_keys;
    std::optional<std::uint64_t> limit;
    std::uint64_t offset{0};

    // window: output = the child's columns, then one per window function; sort_keys are the
    // ORDER BY of the window
    std::vector<std::uint32_t> partition_columns;
    std::vector<WindowSpec> windows;

    // shared_scan: the subplan, shared by all its readers
    std::shared_ptr<const PlanNode> shared;
};

/// Plan construction with output schemas computed from the children. Throw std::invalid_argument
/// on inconsistent input (unknown column index, key count mismatch).
namespace plan {
[[nodiscard]] PlanPtr scan(std::shared_ptr<const Table> table, std::vector<std::uint32_t> columns,
                           ExprPtr predicate = nullptr);
[[nodiscard]] PlanPtr filter(PlanPtr child, ExprPtr predicate);
[[nodiscard]] PlanPtr project(PlanPtr child, std::vector<ExprPtr> expressions,
                              std::vector<std::string> names);
[[nodiscard]] PlanPtr hash_join(PlanPtr probe, PlanPtr build, JoinKind kind, std::vector<ExprPtr> probe_keys,
                                std::vector<ExprPtr> build_keys, ExprPtr residual = nullptr);
/// A right outer hash join with count_matches: output = the build side's columns, then
/// `count_name` (BIGINT, never NULL), for every build row once.
[[nodiscard]] PlanPtr count_join(PlanPtr probe, PlanPtr build, std::vector<ExprPtr> probe_keys,
                                 std::vector<ExprPtr> build_keys, ExprPtr residual, std::string count_name);
[[nodiscard]] PlanPtr aggregate(PlanPtr child, std::vector<ExprPtr> groups,
                                std::vector<std::string> group_names, std::vector<AggregateSpec> aggregates);
[[nodiscard]] PlanPtr sort(PlanPtr child, std::vector<SortKey> keys, std::optional<std::uint64_t> limit = {},
                           std::uint64_t offset = 0);
[[nodiscard]] PlanPtr limit(PlanPtr child, std::uint64_t limit, std::uint64_t offset = 0);
/// The rows of all children, which must agree in column count and types; names come from the
/// first child, a column is nullable when it is in any child.
[[nodiscard]] PlanPtr union_all(std::vector<PlanPtr> children);
/// Every row of the child `count` times (INTEGER or BIGINT over the child's output; NULL and
/// values below 1 drop the row). Output: the child's columns.
[[nodiscard]] PlanPtr repeat(PlanPtr child, ExprPtr count);
/// Window functions over the child: the child's columns, then one column per function. Rows are
/// hash-partitioned by `partition` (column indices), each partition sorted by `order`.
[[nodiscard]] PlanPtr window(PlanPtr child, std::vector<std::uint32_t> partition, std::vector<SortKey> order,
                             std::vector<WindowSpec> functions);
/// Columns of a subplan that other shared_scan nodes of the same plan may read as well (pass them
/// the same pointer): it runs once. Output: the subplan's `columns` (indices into its output).
[[nodiscard]] PlanPtr shared_scan(std::shared_ptr<const PlanNode> subplan,
                                  std::vector<std::uint32_t> columns);
/// Result type of a window function over an argument type (rank/count: BIGINT, lag/lead/
/// first_value/last_value: the argument's, aggregates: aggregate_type).
[[nodiscard]] Type window_type(WindowFunction function, const Type &argument);
/// Result type of an aggregate over an argument type, following DuckDB (so answers compare
/// exactly): SUM(DECIMAL(p,s)) -> DECIMAL(38,s), SUM(INTEGER/BIGINT) -> DECIMAL(38,0) printed as
/// an integer, AVG -> DOUBLE, COUNT -> BIGINT, MIN/MAX -> the argument type.
[[nodiscard]] Type aggregate_type(AggregateFunction function, const Type &argument);
} // namespace plan

/// Names for plan descriptions (EXPLAIN, operator details): "inner", "left outer", "semi",
/// "anti", "full outer", "mark", "right semi", "right anti", "right outer"; "count(*)", "count", "sum",
/// "avg", "min", "max", "count_distinct", "sum_distinct", "avg_distinct", "var_samp", "var_pop",
/// "stddev_samp", "stddev_pop", "quantile_cont", "string_agg".
[[nodiscard]] const char *join_kind_name(JoinKind kind) noexcept;
[[nodiscard]] const char *aggregate_function_name(AggregateFunction function) noexcept;
/// "row_number", "rank", ..., "count(*)", "sum", ...
[[nodiscard]] const char *window_function_name(WindowFunction function) noexcept;

} // namespace mx::db
