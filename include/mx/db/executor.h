#pragma once

// Query execution: a physical plan (plan.h) is compiled into a dataflow graph of task pipelines
// (dataflow/graph.h) and run on the runtime's workers; the result batches are collected into a
// QueryResult. See docs/design/query-engine.md for how operators map to tasks.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/db/plan.h>
#include <mx/db/types.h>

namespace mx::tasking {
class Runtime;
}

namespace mx::db {

/// A query that failed while running (overflow, a failed CAST, cancellation) or that cannot be
/// executed (an operator the engine lacks). The message is meant for the user.
class ExecutionError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Knobs of the hash joins, passed through to them.
struct JoinOptions {
    /// automatic: the plan node's choice (PlanNode::join_strategy); otherwise overrides it.
    JoinStrategy strategy{JoinStrategy::automatic};
    /// Radix bits of partitioned joins; 0 = chosen from the build size.
    std::uint8_t radix_bits{0};
    /// Overrides PlanNode::bloom_filter when set.
    std::optional<bool> bloom_filter{};
};

/// How far a run has got: rows its scans have read (or skipped through zone maps) out of the
/// rows of all tables its scans read. Copies share one state, so a thread that keeps a copy (the
/// shell's progress bar) watches the run another thread executes. Use a fresh one per query:
/// execute() resets it.
class QueryProgress {
public:
    struct Snapshot {
        std::uint64_t done{0};
        std::uint64_t total{0};
    };

    QueryProgress() : _state(std::make_shared<State>()) {}

    /// Consistent enough for a progress bar: done never decreases and never exceeds total once
    /// total was set (total is set before the run starts, done grows while it runs).
    [[nodiscard]] Snapshot snapshot() const noexcept {
        Snapshot snapshot;
        snapshot.total = _state->total.load(std::memory_order_acquire);
        snapshot.done = _state->done.load(std::memory_order_relaxed);
        return snapshot;
    }

    // Engine side.
    void start(std::uint64_t total) const noexcept {
        _state->done.store(0, std::memory_order_relaxed);
        _state->total.store(total, std::memory_order_release);
    }
    void advance(std::uint64_t rows) const noexcept {
        _state->done.fetch_add(rows, std::memory_order_relaxed);
    }

private:
    struct State {
        // Written by execute() before the run (total) and by the scan tasks (done, relaxed
        // adds); read by any thread watching the run.
        std::atomic<std::uint64_t> done{0};
        std::atomic<std::uint64_t> total{0};
    };
    std::shared_ptr<State> _state;
};

struct ExecutionOptions {
    static constexpr std::uint32_t default_morsel_rows = 16384;

    /// Task granularity of scans: rows per scan task (a morsel never crosses a fragment, so at
    /// most the fragment capacity). The dissertation found 1 k to 32 k rows best, depending on
    /// how much work a query does per row. Also the size of the batches operators emit from
    /// their finalize phase (aggregation results, sorted runs). 1..2^20.
    std::uint32_t morsel_rows{default_morsel_rows};
    /// Scan tasks carry a prefetch callback that brings the columns they read into the cache
    /// before they run, as each scan's PlanNode::scan_prefetch says (dissertation 7.3). Off:
    /// no scan prefetches (benchmarks, tests).
    bool prefetch{true};
    /// When set (and prefetch is on), every column of every scan uses this strategy instead of
    /// the plan's (benchmarks, tests).
    std::optional<ScanPrefetch> scan_prefetch{};
    /// Cache lines per column and morsel of ScanPrefetch::first_lines, unless the plan node says.
    std::uint8_t prefetch_lines{2};
    /// Filters and projections run inside the task of the operator that produced their input
    /// (one task per batch for a whole scan-filter-project chain) instead of as tasks of their
    /// own. Off only to test the operators separately.
    bool fuse_operators{true};
    /// Skip fragments whose zone maps prove the scan predicate false.
    bool zone_maps{true};
    /// Evaluate scan conjuncts over one dictionary-encoded column once per dictionary entry and
    /// filter rows by their codes before decoding (see docs/design/query-engine.md).
    bool dictionary_filters{true};
    JoinOptions join{};
    /// Cancels the run from another thread (execute then throws ExecutionError with the reason).
    /// Use a fresh token per query.
    dataflow::CancelToken cancel{};
    /// Counts the rows the run's scans have read; execute() resets it. Use a fresh one per query.
    QueryProgress progress{};
    /// The result comes as whole columns (QueryResult::columnar) instead of rows of Values: one
    /// contiguous array per column, copied from the result batches by parallel tasks (the Python
    /// package hands these arrays to NumPy and Arrow without a per-value step).
    bool columnar{false};
    /// EXPLAIN ANALYZE: count per plan node the rows it produced, and per dataflow node its tasks
    /// and their time (QueryResult::analysis). Costs a counter per emitted batch and two clock
    /// reads per task; off: nothing is counted.
    bool analyze{false};
};

/// What a run with ExecutionOptions::analyze measured for one plan node.
struct OperatorAnalysis {
    const PlanNode *node{nullptr};
    int depth{0};            ///< in the plan tree (root 0)
    std::string description; ///< the operator as EXPLAIN shows it
    /// Rows the operator produced (after its own filter); nullopt when it was folded into its
    /// parent (a sort compiled into the LIMIT above it).
    std::optional<std::uint64_t> rows;
    /// Tasks that ran the operator's own dataflow nodes, and their summed time inside them. An
    /// operator fused into the tasks of another one (filter, projection) has none: `fused_into`
    /// names that node.
    std::uint64_t tasks{0};
    std::chrono::nanoseconds busy{0};
    /// `tasks` by worker id: how the operator's work spread over the workers.
    std::vector<std::uint64_t> tasks_per_worker;
    /// Bytes its hash tables and row stores held at the end of the run (their peak).
    std::uint64_t memory_bytes{0};
    /// What its nodes decided during the run (a hash join's strategy), space-separated.
    std::string notes;
    std::string fused_into;
    /// The pipelines of its dataflow nodes (or of the node it is fused into) and each one's wall
    /// time from start to finish.
    std::vector<dataflow::PipelineTiming> pipelines;
};

/// One column of a columnar result, in the Arrow columnar format's value layout (so that the
/// Python package hands it to Arrow and NumPy without converting): BOOLEAN one byte per row (0 or
/// 1), INTEGER and DATE (days since 1970-01-01) std::int32_t, BIGINT std::int64_t, DECIMAL Int128
/// (the value times 10^scale, whatever the precision), DOUBLE double, VARCHAR 64-bit offsets into
/// `chars`. NULL rows hold zero bytes (an empty string).
struct ResultColumn {
    /// rows values of result_width(type) bytes; VARCHAR: rows + 1 ascending offsets
    /// (std::int64_t), the i-th string being chars[offsets[i], offsets[i + 1]).
    std::unique_ptr<std::byte[]> values;
    /// nullptr when no row is NULL; otherwise one byte per row, 1 = NULL.
    std::unique_ptr<std::uint8_t[]> nulls;
    /// VARCHAR: the bytes of all strings, back to back.
    std::unique_ptr<char[]> chars;
    std::size_t chars_size{0};

    /// Bytes per row of `values` for a column of this type.
    [[nodiscard]] static constexpr std::size_t result_width(const Type &type) noexcept {
        switch (type.id) {
        case TypeId::boolean:
            return 1;
        case TypeId::integer:
        case TypeId::date:
            return 4;
        case TypeId::decimal:
            return 16;
        default:
            return 8;
        }
    }
};

struct ColumnarResult {
    std::size_t rows{0};
    std::vector<ResultColumn> columns; // one per QueryResult::columns
};

/// The result of a query: columns, rows, and how long the run took.
struct QueryResult {
    std::vector<OutputColumn> columns;
    std::vector<std::vector<Value>> rows;
    /// The rows as columns instead, when ExecutionOptions::columnar was set (`rows` is empty).
    std::shared_ptr<ColumnarResult> columnar;
    /// Time of the dataflow run (not compiling the plan or converting the result rows).
    std::chrono::nanoseconds elapsed{0};
    /// Start and end of every pipeline relative to the run's start (indexed by pipeline id).
    std::vector<dataflow::PipelineTiming> pipelines;
    /// ExecutionOptions::analyze: the plan's operators in pre-order; otherwise empty.
    std::vector<OperatorAnalysis> analysis;

    [[nodiscard]] std::size_t row_count() const noexcept {
        return columnar != nullptr ? columnar->rows : rows.size();
    }
    [[nodiscard]] std::size_t column_count() const noexcept { return columns.size(); }
    [[nodiscard]] const Value &at(std::size_t row, std::size_t column) const {
        return rows.at(row).at(column);
    }
    /// The rows as RFC 4180 CSV with a header line (DuckDB's text for every value). NULL is
    /// `null_text` (default: an empty field); the empty string is "" and a string equal to
    /// `null_text` is quoted, so NULL and strings always differ.
    [[nodiscard]] std::string to_csv(std::string_view null_text = {}) const;
};

/// Runs `plan` on the runtime and blocks until it finished; call it from outside the runtime's
/// workers; any runtime configuration (local order, work stealing). An ORDER BY result keeps its
/// order because the sort numbers its batches and the limit and the result sink put them back in
/// that order (docs/design/query-engine.md). The plan and its tables must
/// stay alive for the call. Throws ExecutionError with the message on a runtime error, on
/// cancellation and when the plan cannot be compiled; std::invalid_argument for invalid options.
QueryResult execute(tasking::Runtime &runtime, const PlanNode &plan, const ExecutionOptions &options = {});

/// EXPLAIN ANALYZE text of a result run with ExecutionOptions::analyze: the plan tree, per
/// operator `(rows=N tasks=T time=X ms pipeline P: Y ms)`, then `Total: N rows in X ms`.
[[nodiscard]] std::string explain_analyze(const QueryResult &result);

/// The physical plan as text: the operator tree with estimated rows, then the pipelines of the
/// dataflow graph the executor would run (which nodes, in which order, what they wait for).
[[nodiscard]] std::string explain(const PlanNode &plan, const ExecutionOptions &options = {});

} // namespace mx::db
