// Database::cancel: a long query cancelled from another thread fails with SqlError carrying the
// reason, and the database keeps working afterwards.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
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

/// t(a, k) with `rows` rows, k = a % `keys`: a self-join on k yields rows^2 / keys pairs, far more
/// than the tests let run.
void make_table(mx::sql::Database &database, int rows, int keys = 40) {
    database.execute("CREATE TABLE t (a INTEGER NOT NULL, k INTEGER NOT NULL)");
    std::string insert{"INSERT INTO t VALUES "};
    for (int i = 0; i < rows; ++i) {
        insert.append(i == 0 ? "(" : ", (")
            .append(std::to_string(i))
            .append(", ")
            .append(std::to_string(i % keys))
            .append(")");
    }
    database.execute(insert);
}

constexpr const char *long_query = "SELECT count(*), sum(x.a + y.a) FROM t x JOIN t y ON x.k = y.k";

} // namespace

TEST(SqlCancel, CancelFromAnotherThreadFailsTheQueryWithTheReason) {
    mx::tasking::Runtime runtime{two_workers()};
    // Many small probe tasks: cancellation between tasks (the next test covers a cancel inside
    // one long task).
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

TEST(SqlCancel, CancelStopsALongProbeTaskWithinItsRun) {
    mx::tasking::Runtime runtime{two_workers()};
    // Default morsels (16 k rows): with k = a % 2 every probe row meets 10'000 build rows, so one
    // probe task walks 1.6e8 pairs and the whole join 2e8 (each through the residual), minutes
    // in a debug build. The residual keeps no pair, so the run holds no output in memory.
    // Without polling inside the probe loop, cancel would take effect only when a probe task
    // ends; with it, within one round of the chain walk.
    mx::sql::Database database{runtime};
    constexpr int rows = 20'000;
    make_table(database, rows, 2);

    std::atomic<bool> done{false};
    std::optional<std::string> error;
    bool finished_normally = false;
    std::thread runner{[&] {
        try {
            database.execute("SELECT count(*) FROM t x JOIN t y ON x.k = y.k AND x.a + y.a < 0");
            finished_normally = true;
        } catch (const mx::sql::SqlError &e) {
            error = e.message();
        }
        done.store(true);
    }};
    // Wait until the query runs (its progress total is set when the run starts), then give the
    // probe tasks time to be deep inside their batches.
    const auto patience = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done.load() && database.progress().total == 0 && std::chrono::steady_clock::now() < patience) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(database.progress().total, std::uint64_t{2 * rows}) << "both scans count";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto cancelled_at = std::chrono::steady_clock::now();
    database.cancel("stopped by the test");
    while (!done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const auto seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
    runner.join();

    EXPECT_FALSE(finished_normally);
    ASSERT_TRUE(error.has_value());
    EXPECT_NE(error->find("stopped by the test"), std::string::npos) << *error;
    EXPECT_LT(seconds, 2.0) << "cancel waited for the probe task to end";
    EXPECT_EQ(database.progress().total, 0U) << "no query runs any more";

    // Still usable.
    EXPECT_EQ(database.query("SELECT count(*) FROM t").at(0, 0).i64, rows);
    const auto joined =
        database.query("SELECT count(*) FROM t x JOIN t y ON x.k = y.k WHERE x.a < 8 AND y.a < 8");
    EXPECT_EQ(joined.at(0, 0).i64, 32); // a < 8: four rows per key, 2 keys -> 2 * 4 * 4
}

TEST(SqlCancel, ProgressOfTheRunningQuery) {
    mx::tasking::Runtime runtime{two_workers()};
    mx::sql::DatabaseOptions options;
    options.execution.morsel_rows = 256;
    mx::sql::Database database{runtime, options};
    constexpr int rows = 20'000;
    make_table(database, rows);
    EXPECT_EQ(database.progress().total, 0U);

    std::atomic<bool> done{false};
    std::thread runner{[&] {
        try {
            database.execute(long_query);
        } catch (const mx::sql::SqlError &) {
        }
        done.store(true);
    }};
    // Watch the progress until the probe side has been scanned a bit, then cancel.
    std::uint64_t last = 0;
    bool moved = false;
    while (!done.load()) {
        const auto progress = database.progress();
        if (progress.total > 0) {
            EXPECT_EQ(progress.total, std::uint64_t{2 * rows});
            EXPECT_GE(progress.done, last);
            EXPECT_LE(progress.done, progress.total);
            moved = moved || progress.done > 0;
            last = progress.done;
            if (progress.done > rows) { // the build scan is done, the probe scan has started
                database.cancel();
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    runner.join();
    EXPECT_TRUE(moved);
    EXPECT_EQ(database.progress().total, 0U);
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
