// Database::cancel: a long query cancelled from another thread fails with SqlError carrying the
// reason, and the database keeps working afterwards.

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

/// t(a, k) with `rows` rows, k = a % 40: a self-join on k yields rows^2 / 40 pairs, far more than
/// the test lets run.
void make_table(mx::sql::Database &database, int rows) {
    database.execute("CREATE TABLE t (a INTEGER NOT NULL, k INTEGER NOT NULL)");
    std::string insert{"INSERT INTO t VALUES "};
    for (int i = 0; i < rows; ++i) {
        insert.append(i == 0 ? "(" : ", (")
            .append(std::to_string(i))
            .append(", ")
            .append(std::to_string(i % 40))
            .append(")");
    }
    database.execute(insert);
}

constexpr const char *long_query = "SELECT count(*), sum(x.a + y.a) FROM t x JOIN t y ON x.k = y.k";

} // namespace

TEST(SqlCancel, CancelFromAnotherThreadFailsTheQueryWithTheReason) {
    mx::tasking::Runtime runtime{two_workers()};
    // Cancellation takes effect between tasks; small morsels keep each probe task short (a task
    // joining a whole 16 k morsel against 1000 matches per row would run for seconds).
    mx::sql::DatabaseOptions options;
    options.execution.morsel_rows = 256;
    mx::sql::Database database{runtime, options};
    constexpr int rows = 40'000; // 4e7 join pairs: far longer than the test waits
    make_table(database, rows);

    std::atomic<bool> done{false};
    std::optional<std::string> error;
    bool finished_normally = false;
    std::thread runner{[&] {
        try {
            database.execute(long_query);
            finished_normally = true;
        } catch (const mx::sql::SqlError &e) {
            error = e.message();
        }
        done.store(true);
    }};
    // The query registers its cancel token only once it runs, so keep cancelling until it ends.
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    while (!done.load()) {
        database.cancel("stopped by the test");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    runner.join();
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    EXPECT_FALSE(finished_normally);
    ASSERT_TRUE(error.has_value());
    EXPECT_NE(error->find("stopped by the test"), std::string::npos) << *error;
    EXPECT_LT(seconds, 10.0) << "cancel took effect late";

    // Still usable: the table is intact and new queries (also on the same table) run.
    const auto count = database.query("SELECT count(*) FROM t");
    ASSERT_EQ(count.row_count(), 1U);
    EXPECT_EQ(count.at(0, 0).i64, rows);
    const auto grouped = database.query("SELECT k, count(*) FROM t GROUP BY k ORDER BY k");
    ASSERT_EQ(grouped.row_count(), 40U);
    for (std::size_t i = 0; i < 40; ++i) {
        EXPECT_EQ(grouped.at(i, 0).i64, static_cast<std::int64_t>(i));
        EXPECT_EQ(grouped.at(i, 1).i64, rows / 40);
    }
    database.execute("INSERT INTO t VALUES (-1, 0)");
    EXPECT_EQ(database.query("SELECT count(*) FROM t").at(0, 0).i64, rows + 1);
}

TEST(SqlCancel, CancelWithNothingRunningIsHarmless) {
    mx::tasking::Runtime runtime{two_workers()};
    mx::sql::Database database{runtime};
    database.cancel("nothing to cancel");
    make_table(database, 100);
    // A cancel before a query starts does not reach it: every query gets a fresh token.
    database.cancel();
    EXPECT_EQ(database.query("SELECT count(*) FROM t").at(0, 0).i64, 100);
}
