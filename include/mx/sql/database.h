#pragma once

// TunaDB's SQL front end: a Database runs SQL text against a catalog of tables on a runtime.
//
//   mx::tasking::Runtime runtime{};
//   mx::sql::Database db{runtime};
//   db.execute("CREATE TABLE t (a INTEGER NOT NULL, b VARCHAR(10)); INSERT INTO t VALUES (1, 'x')");
//   auto result = db.query("SELECT b, count(*) FROM t GROUP BY b ORDER BY 2 DESC");
//
// The grammar is PostgreSQL's (libpg_query); semantics follow DuckDB where the two differ (integer
// `/` is DOUBLE, CHAR(n) is VARCHAR without padding, string literals adapt to the type they are
// compared with). Statements: CREATE TABLE, DROP TABLE, COPY ... FROM, INSERT INTO ... VALUES,
// SELECT, EXPLAIN [ANALYZE] SELECT. See docs/design/sql.md for the pipeline parse -> bind -> logical plan
// -> optimize -> physical plan and for what is not supported.
//
// Every user error (syntax, unknown names, type mismatches, unsupported features, failed loads,
// runtime errors of a query) is thrown as SqlError naming the problem and, where there is one,
// the position in the text passed to execute. An error never leaves the database in a broken
// state: statements before the failing one keep their effect, the failing one has none.
//
// Thread safety: execute, query, explain and plan may be called from several threads at once
// (the catalog publishes table versions atomically; everything else is per call). Call them from
// outside the runtime's workers.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mx/dataflow/graph.h>
#include <mx/db/catalog.h>
#include <mx/db/executor.h>
#include <mx/db/plan.h>
#include <mx/db/table.h>

namespace mx::tasking {
class Runtime;
}

namespace mx::sql {

/// A statement that cannot be run: the message names the problem; position() is the 1-based
/// character (not byte) in the SQL text at which it was found, 0 when it concerns no particular
/// place (e.g. a runtime error of a query). what() is the message followed by
/// " (line L, column C)" when there is a position.
class SqlError : public std::runtime_error {
public:
    SqlError(std::string message, std::uint32_t position, std::uint32_t line, std::uint32_t column);
    explicit SqlError(std::string message) : SqlError(std::move(message), 0, 0, 0) {}

    [[nodiscard]] const std::string &message() const noexcept { return _message; }
    [[nodiscard]] std::uint32_t position() const noexcept { return _position; }
    [[nodiscard]] std::uint32_t line() const noexcept { return _line; }
    [[nodiscard]] std::uint32_t column() const noexcept { return _column; }

private:
    std::string _message;
    std::uint32_t _position{0};
    std::uint32_t _line{0};
    std::uint32_t _column{0};
};

enum class StatementKind : std::uint8_t {
    query,   ///< SELECT: rows
    explain, ///< EXPLAIN: text
    command, ///< DDL, INSERT, COPY: a tag
};

/// What one statement produced.
struct StatementResult {
    StatementKind kind{StatementKind::command};
    /// PostgreSQL's command tag: "SELECT 4", "CREATE TABLE", "DROP TABLE", "INSERT 0 3",
    /// "COPY 60175", "EXPLAIN".
    std::string tag;
    /// EXPLAIN: the plan text; otherwise empty.
    std::string text;
    /// SELECT: the result rows; otherwise empty.
    db::QueryResult rows;
};

struct Result {
    std::vector<StatementResult> statements;

    [[nodiscard]] const StatementResult &last() const { return statements.back(); }
};

/// How the optimizer orders the inner joins of one query block (a region).
enum class JoinOrder {
    /// Repeatedly joins the connected pair of subplans with the smallest estimated result.
    greedy,
    /// Exact dynamic programming over the connected subsets of the join graph: the tree with
    /// the smallest sum of estimated intermediate results (regions of up to ten relations;
    /// larger ones are ordered greedily).
    dynamic_programming,
};

/// One step of the optimizer (optimizer_passes() lists them in the order they run).
struct OptimizerPass {
    /// Stable lowercase name: OptimizerOptions::disabled_passes and EXPLAIN use it.
    std::string_view name;
    /// False for passes that later ones need (the plan is wrong or cannot be built without them).
    bool optional{true};
    /// What the pass does, one line.
    std::string_view description;
};

/// The optimizer's passes in the order they run: decorrelate, fold, pushdown, magic_sets,
/// equivalences, join_order, estimates, right_semi_joins, right_outer_joins, bloom_filters,
/// scan_prefetch (docs/design/sql.md describes them).
[[nodiscard]] std::span<const OptimizerPass> optimizer_passes() noexcept;

/// Which optimizer passes run (for tests and comparisons: switching an optional pass off keeps
/// the answers, only plan costs change). EXPLAIN names the passes that ran and those that were
/// off, and what the optional ones did.
struct OptimizerOptions {
    /// Magic sets: an aggregation joined on its group keys (a decorrelated scalar subquery, a
    /// grouped derived table) reads only the rows whose keys the other join side supplies.
    /// False switches the pass "magic_sets" off.
    bool magic_sets{true};
    /// Right semi/anti joins: a semi or anti join whose preserved (outer) side is estimated at
    /// well under its subquery side hashes the outer side and marks the rows the subquery's
    /// rows meet, instead of hashing the larger subquery side. False switches the pass
    /// "right_semi_joins" off.
    bool right_semi_joins{true};
    /// Right outer joins: a left outer join whose preserved side is estimated at well under its
    /// nullable side hashes the preserved side, marks the rows the nullable side's rows meet and
    /// emits the others with NULLs, instead of hashing the larger nullable side. False switches
    /// the pass "right_outer_joins" off.
    bool right_outer_joins{true};
    /// How the pass "join_order" orders joins; both orders give the same answers, only plan
    /// costs differ.
    JoinOrder join_order{JoinOrder::dynamic_programming};
    /// Names of optional passes (optimizer_passes()) that do not run. validate() rejects
    /// unknown and required ones.
    std::set<std::string, std::less<>> disabled_passes;

    /// Whether the pass `name` runs: not in disabled_passes and not switched off by the fields
    /// above.
    [[nodiscard]] bool enabled(std::string_view name) const;
    /// Throws SqlError naming the first entry of disabled_passes that is no pass or a required
    /// one, with the list of optional passes.
    void validate() const;
};

struct DatabaseOptions {
    /// Passed to every query's execution (a fresh cancel token is used per query).
    db::ExecutionOptions execution{};
    /// Tables made by CREATE TABLE.
    db::TableOptions tables{};
    /// COPY shows no progress bar unless this is set (and stderr is a terminal).
    bool copy_progress{false};
    /// Passes of every SELECT's optimization (checked by the Database constructor: an
    /// unknown or required pass in disabled_passes throws SqlError).
    OptimizerOptions optimizer{};
};

class Database {
public:
    /// Uses `runtime` (which must outlive the database) for loads and queries.
    explicit Database(tasking::Runtime &runtime, DatabaseOptions options = {});
    ~Database();
    Database(const Database &) = delete;
    Database &operator=(const Database &) = delete;

    /// Runs one or more statements separated by semicolons, in order. The whole text is parsed
    /// first (a syntax error anywhere runs nothing); a statement that fails throws SqlError
    /// after the ones before it have taken effect.
    Result execute(std::string_view sql);
    /// Runs a text that is exactly one SELECT and returns its rows.
    db::QueryResult query(std::string_view sql);
    /// EXPLAIN of one SELECT (same text as the EXPLAIN statement).
    std::string explain(std::string_view sql);
    /// EXPLAIN ANALYZE of one SELECT: runs it and returns the plan with, per operator, the rows it
    /// produced, its tasks, their time and its pipelines' wall times, then the total (same text
    /// as the EXPLAIN ANALYZE statement).
    std::string explain_analyze(std::string_view sql);
    /// The optimized physical plan of one SELECT, not executed (for tests and tools).
    db::PlanPtr plan(std::string_view sql);

    /// Cancels every query running in this database right now (any thread, e.g. a Ctrl-C
    /// handler's helper thread): each fails with SqlError(reason). Loads (COPY) run to the end.
    void cancel(std::string_view reason = "cancelled") noexcept;

    /// Progress of the queries running in this database right now (any thread, e.g. the shell's
    /// progress bar): rows their scans have read out of the rows their scans read in total,
    /// summed over the running queries; {0, 0} when none runs. Loads (COPY) are not counted.
    [[nodiscard]] db::QueryProgress::Snapshot progress() const;

    /// Internal: the statement runner registers each query's cancel token and progress counter
    /// for cancel() and progress().
    class RunningQuery {
    public:
        RunningQuery(Database &database, const db::ExecutionOptions &options);
        ~RunningQuery();
        RunningQuery(const RunningQuery &) = delete;
        RunningQuery &operator=(const RunningQuery &) = delete;

    private:
        Database &_database;
        std::uint64_t _id;
    };

    [[nodiscard]] db::Catalog &catalog() noexcept { return _catalog; }
    [[nodiscard]] const db::Catalog &catalog() const noexcept { return _catalog; }
    [[nodiscard]] tasking::Runtime &runtime() noexcept { return *_runtime; }
    [[nodiscard]] const DatabaseOptions &options() const noexcept { return _options; }

private:
    tasking::Runtime *_runtime;
    DatabaseOptions _options;
    db::Catalog _catalog;
    struct Running {
        std::uint64_t id{0};
        dataflow::CancelToken cancel;
        db::QueryProgress progress;
    };
    // Guarded by _running_mutex; written by the threads running queries, read by cancel() and
    // progress().
    mutable std::mutex _running_mutex;
    std::uint64_t _next_running_id{0};
    std::vector<Running> _running;
};

/// `text` as an SQL string literal: in single quotes, each quote doubled (e.g. a file path for
/// COPY ... FROM).
[[nodiscard]] std::string quote_literal(std::string_view text);

} // namespace mx::sql
