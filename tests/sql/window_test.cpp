// Window functions beyond the answers of tests/sql/logic/window.test: EXPLAIN shows the window
// operator, a long window evaluation stops when cancelled, and the answers do not depend on the
// task granularity or on operator fusion.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

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
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto cancelled_at = std::chrono::steady_clock::now();
    while (!done.load()) {
        database.cancel("stopped by the test");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    runner.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
    ASSERT_TRUE(error.has_value()) << "the query finished before the cancel";
    EXPECT_NE(error->find("stopped by the test"), std::string::npos) << *error;
    EXPECT_LT(seconds, 5.0) << "cancel waited for the frame evaluation to end";
    EXPECT_EQ(database.query("SELECT count(*) FROM t").at(0, 0).i64, 100000);
}
