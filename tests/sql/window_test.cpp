// Window functions beyond the answers of tests/sql/logic/window.test: EXPLAIN shows the window
// operator, a long window evaluation stops when cancelled, and the answers do not depend on the
// task granularity or on operator fusion.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <mx/sql/database.h>
#include <mx/tasking/config.h>
#include <mx/tasking/runtime.h>

namespace {

mx::tasking::RuntimeConfig two_workers() {
    mx::tasking::RuntimeConfig config;
    config.workers = 2;
    return config;
}

/// t(a, p) with a = 0 .. rows-1 and p = a % partitions, inserted from a ten-row table.
/// Runs `query` on a thread and, after `wait`, cancels it every `every` until it ends. Returns the
/// query's error, if any, and the seconds from the first cancel to the end.
std::pair<std::optional<std::string>, double> cancel_while_running(mx::sql::Database &database,
                                                                   const std::string &query,
                                                                   std::chrono::milliseconds wait,
                                                                   std::chrono::milliseconds every) {
    std::atomic<bool> done{false};
    std::optional<std::string> error;
    std::thread runner{[&] {
        try {
            database.execute(query);
        } catch (const mx::sql::SqlError &e) {
            error = e.message();
        }
        done.store(true);
    }};
    std::this_thread::sleep_for(wait);
    const auto cancelled_at = std::chrono::steady_clock::now();
    while (!done.load()) {
        database.cancel("stopped by the test");
        std::this_thread::sleep_for(every);
    }
    runner.join();
    return {error, std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count()};
}

void make_table(mx::sql::Database &database, int digits, int partitions) {
    database.execute("CREATE TABLE d (x INTEGER)");
    database.execute("INSERT INTO d VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)");
    std::string value = "d0.x";
    std::string from = "d d0";
    for (int i = 1; i < digits; ++i) {
        value = "(" + value + ") * 10 + d" + std::to_string(i) + ".x";
        from += ", d d" + std::to_string(i);
    }
    database.execute("CREATE TABLE t (a INTEGER, p INTEGER)");
    database.execute("INSERT INTO t SELECT " + value + ", (" + value + ") % " + std::to_string(partitions) +
                     " FROM " + from);
}

} // namespace

TEST(SqlWindow, ExplainShowsTheWindowOperator) {
    mx::tasking::Runtime runtime{two_workers()};
    mx::sql::Database database{runtime};
    make_table(database, 2, 7);
    const std::string text =
        database.explain("SELECT a, row_number() OVER (PARTITION BY p ORDER BY a), sum(a) OVER () FROM t");
    EXPECT_NE(text.find("Window partition by [p] order by [a ASC] [row_number AS"), std::string::npos)
        << text;
    EXPECT_NE(text.find("Window [sum(a) AS"), std::string::npos) << text;
}

TEST(SqlWindow, AnswersDoNotDependOnMorselsOrFusion) {
    mx::tasking::Runtime runtime{two_workers()};
    const std::string query =
        "SELECT p, a, row_number() OVER (PARTITION BY p ORDER BY a DESC), lag(a, 2) OVER (PARTITION BY p "
        "ORDER BY a), sum(a) OVER (PARTITION BY p ORDER BY a ROWS BETWEEN 3 PRECEDING AND 1 FOLLOWING), "
        "rank() OVER (ORDER BY p) FROM t WHERE a % 3 <> 0 ORDER BY a";
    mx::sql::Database reference{runtime};
    make_table(reference, 4, 97);
    const std::string expected = reference.query(query).to_csv("NULL");
    ASSERT_GT(expected.size(), 1000U);
    for (const bool fuse : {true, false}) {
        mx::sql::DatabaseOptions options;
        options.execution.morsel_rows = 40; // hundreds of consume tasks on both workers
        options.execution.fuse_operators = fuse;
        mx::sql::Database database{runtime, options};
        make_table(database, 4, 97);
        EXPECT_EQ(database.query(query).to_csv("NULL"), expected) << "fuse_operators=" << fuse;
    }
}

TEST(SqlWindow, CancelStopsALongFrameEvaluation) {
    mx::tasking::Runtime runtime{two_workers()};
    mx::sql::Database database{runtime};
    make_table(database, 5, 1);
    // One partition of 100 000 rows and DOUBLE sums over frames of up to 100 001 rows that do
    // not start at the partition's start: added frame by frame, billions of additions.
    const std::string query = "SELECT max(m) FROM (SELECT sum(a::DOUBLE) OVER (ORDER BY a ROWS BETWEEN 50000 "
                              "FOLLOWING AND 150000 FOLLOWING) AS m FROM t) s";
    const auto [error, seconds] =
        cancel_while_running(database, query, std::chrono::milliseconds(300), std::chrono::milliseconds(10));
    ASSERT_TRUE(error.has_value()) << "the query finished before the cancel";
    EXPECT_NE(error->find("stopped by the test"), std::string::npos) << *error;
    EXPECT_LT(seconds, 5.0) << "cancel waited for the frame evaluation to end";
    EXPECT_EQ(database.query("SELECT count(*) FROM t").at(0, 0).i64, 100000);
}

namespace {

/// w(a, k, v, s): a = 0 .. 10^digits - 1; k has ties of ~100 rows (so peer groups cross range
/// boundaries wherever splitters fall) and NULLs; v is a nullable DECIMAL; s a nullable string.
void make_window_table(mx::sql::Database &database, int digits) {
    make_table(database, digits, 1);
    database.execute("CREATE TABLE w (a INTEGER, k INTEGER, v DECIMAL(18,3), s VARCHAR)");
    database.execute(
        "INSERT INTO w SELECT a, CASE WHEN a % 97 = 0 THEN NULL ELSE (a * 7919) % 1000 END AS k, "
        "CASE WHEN a % 11 = 0 THEN NULL ELSE ((a * 31) % 2001 - 1000)::DECIMAL(12,2) / 8 END AS v, "
        "CASE WHEN a % 13 = 0 THEN NULL ELSE (a % 5003)::VARCHAR END AS s FROM t");
}

/// The first differing line of two CSV texts ("" when equal): gtest's diff of two huge strings
/// takes quadratic memory.
std::string first_difference(const std::string &actual, const std::string &expected) {
    std::size_t line_start = 0;
    std::size_t line = 0;
    for (std::size_t i = 0; i < std::max(actual.size(), expected.size()); ++i) {
        if (i >= actual.size() || i >= expected.size() || actual[i] != expected[i]) {
            auto line_of = [&](const std::string &text) {
                return text.substr(line_start, text.find('\n', line_start) - line_start);
            };
            return "line " + std::to_string(line) + ": " + line_of(actual) + " instead of " +
                   line_of(expected);
        }
        if (actual[i] == '\n') {
            line_start = i + 1;
            ++line;
        }
    }
    return "";
}

const char *const parallel_query =
    "SELECT a, row_number() OVER (ORDER BY k), rank() OVER (ORDER BY k DESC NULLS FIRST), "
    "ntile(7) OVER (ORDER BY k), lag(v, 3) OVER (ORDER BY k), lead(v, 2, -1.5) OVER (ORDER BY k, a), "
    "lag(s, -1) OVER (ORDER BY k), first_value(v) OVER (ORDER BY k), "
    "last_value(s) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), "
    "first_value(v) OVER (ORDER BY k ROWS BETWEEN 2 PRECEDING AND 3 FOLLOWING), "
    "last_value(v) OVER (ORDER BY k RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), "
    "count(v) OVER (ORDER BY k), count(*) OVER (ORDER BY k ROWS BETWEEN 5 PRECEDING AND 1 PRECEDING), "
    "sum(v) OVER (ORDER BY k ROWS UNBOUNDED PRECEDING), sum(v) OVER (ORDER BY k), sum(v) OVER (), "
    "avg(v) OVER (ORDER BY k ROWS BETWEEN 10 PRECEDING AND 10 FOLLOWING), "
    "sum(a) OVER (ORDER BY k RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), "
    "min(v) OVER (ORDER BY k), max(v) OVER (ORDER BY k ROWS BETWEEN 3 PRECEDING AND 3 FOLLOWING), "
    "min(s) OVER (ORDER BY k ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING), max(v) OVER (), "
    "count(*) OVER (), sum(v) OVER (ORDER BY k ROWS BETWEEN 4 FOLLOWING AND 9 FOLLOWING) FROM w ORDER BY a";

} // namespace

TEST(SqlWindow, ParallelRangesMatchOneTask) {
    // The reference: one worker, so the window without PARTITION BY runs on one task.
    mx::tasking::RuntimeConfig one;
    one.workers = 1;
    std::string expected;
    {
        mx::tasking::Runtime runtime{one};
        mx::sql::Database reference{runtime};
        make_window_table(reference, 5);
        expected = reference.query(parallel_query).to_csv("NULL");
    }
    ASSERT_GT(expected.size(), 100000U * 20);
    // Ranges of ~50 000, ~33 000 and ~25 000 rows; morsels of 64 or 1000 rows (parallel from 16
    // morsels).
    for (const auto &[workers, morsel] : {std::pair{2, 64U}, std::pair{3, 1000U}, std::pair{4, 64U}}) {
        mx::tasking::RuntimeConfig config;
        config.workers = static_cast<std::uint16_t>(workers);
        mx::tasking::Runtime runtime{config};
        mx::sql::DatabaseOptions options;
        options.execution.morsel_rows = morsel;
        mx::sql::Database database{runtime, options};
        make_window_table(database, 5);
        EXPECT_EQ(first_difference(database.query(parallel_query).to_csv("NULL"), expected), "")
            << workers << " workers, morsels of " << morsel;
        const std::string plan = database.explain(parallel_query);
        EXPECT_NE(plan.find("parallel from " + std::to_string(16 * morsel) + " rows"), std::string::npos)
            << plan;
    }
}

TEST(SqlWindow, ParallelRangesLeaveDoublesAndDenseRankOnOneTask) {
    mx::tasking::Runtime runtime{two_workers()};
    mx::sql::DatabaseOptions options;
    options.execution.morsel_rows = 64;
    mx::sql::Database database{runtime, options};
    make_window_table(database, 3);
    const std::string exact = database.explain("SELECT sum(v) OVER (ORDER BY k) FROM w");
    EXPECT_NE(exact.find("parallel from 1024 rows"), std::string::npos) << exact;
    // DOUBLE sums and dense_rank depend on every row before a range in sorted order.
    const std::string doubles = database.explain("SELECT sum(v::DOUBLE) OVER (ORDER BY k) FROM w");
    EXPECT_EQ(doubles.find("parallel from"), std::string::npos) << doubles;
    const std::string dense = database.explain("SELECT dense_rank() OVER (ORDER BY k) FROM w");
    EXPECT_EQ(dense.find("parallel from"), std::string::npos) << dense;
    const std::string partitioned = database.explain("SELECT sum(v) OVER (PARTITION BY k) FROM w");
    EXPECT_EQ(partitioned.find("parallel from"), std::string::npos) << partitioned;
}

TEST(SqlWindow, ParallelRangesStopWhenCancelled) {
    mx::tasking::Runtime runtime{two_workers()};
    mx::sql::DatabaseOptions options;
    options.execution.morsel_rows = 64;
    mx::sql::Database database{runtime, options};
    make_window_table(database, 5);
    const std::string query =
        "SELECT max(m) FROM (SELECT sum(v) OVER (ORDER BY k ROWS BETWEEN 4000 PRECEDING AND "
        "4000 FOLLOWING) AS m FROM w, (SELECT 1 UNION ALL SELECT 2) x) s";
    const auto error =
        cancel_while_running(database, query, std::chrono::milliseconds(100), std::chrono::milliseconds(5))
            .first;
    if (error.has_value()) {
        EXPECT_NE(error->find("stopped by the test"), std::string::npos) << *error;
    }
    EXPECT_EQ(database.query("SELECT count(*) FROM w").at(0, 0).i64, 100000);
}
