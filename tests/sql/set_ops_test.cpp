// Set operations (UNION, INTERSECT, EXCEPT, each with ALL) and VALUES lists. The tables are
// small and written here; every expected answer was checked against DuckDB 1.5.5 when the test
// was written (no DuckDB at test time). Batches of 2 rows make every query many tasks on 4
// workers, so the pass-through of UNION ALL and the per-side counts run from several workers.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

/// a and b share rows, duplicates and NULLs; e is empty; d has a DECIMAL and a DATE.
constexpr const char *set_tables = R"sql(
CREATE TABLE a (x INTEGER, s VARCHAR);
INSERT INTO a VALUES (1, 'a'), (2, 'b'), (2, 'b'), (3, NULL), (NULL, 'n'), (NULL, 'n');
CREATE TABLE b (x BIGINT, s VARCHAR);
INSERT INTO b VALUES (2, 'b'), (3, NULL), (3, NULL), (NULL, 'n'), (4, 'd');
CREATE TABLE e (x INTEGER, s VARCHAR);
CREATE TABLE d (x DECIMAL(5,2), day DATE);
INSERT INTO d VALUES (1.50, DATE '2020-01-01'), (2.00, NULL);
)sql";

class SetOpTest : public SqlTest {
protected:
    SetOpTest() : SqlTest(small_runtime_config(4), tiny_batches()) { db.execute(set_tables); }
};

} // namespace

TEST_F(SetOpTest, UnionAllKeepsEveryRow) {
    EXPECT_EQ(rows("SELECT x, s FROM a UNION ALL SELECT x, s FROM b ORDER BY 1, 2"),
              (Rows{"1|a", "2|b", "2|b", "2|b", "3|NULL", "3|NULL", "3|NULL", "4|d", "NULL|n", "NULL|n",
                    "NULL|n"}));
    EXPECT_EQ(rows("SELECT x FROM a UNION ALL SELECT x FROM b UNION ALL SELECT x FROM a ORDER BY x"),
              (Rows{"1", "1", "2", "2", "2", "2", "2", "3", "3", "3", "3", "4", "NULL", "NULL", "NULL",
                    "NULL", "NULL"}));
    EXPECT_EQ(rows("SELECT x FROM e UNION ALL SELECT x FROM e"), Rows{});
    // Without ORDER BY the rows come in no particular order, but all of them.
    EXPECT_EQ(rows("SELECT count(*), count(x), count(DISTINCT s) FROM (SELECT x, s FROM a UNION ALL "
                   "SELECT x, s FROM b) t"),
              (Rows{"11|8|4"}));
}

TEST_F(SetOpTest, UnionRemovesDuplicatesAndNullsCompareEqual) {
    EXPECT_EQ(rows("SELECT x, s FROM a UNION SELECT x, s FROM b ORDER BY 1, 2"),
              (Rows{"1|a", "2|b", "3|NULL", "4|d", "NULL|n"}));
    EXPECT_EQ(rows("SELECT x FROM a UNION SELECT x FROM e ORDER BY x"), (Rows{"1", "2", "3", "NULL"}));
    EXPECT_EQ(rows("SELECT count(*) FROM (SELECT x FROM a UNION SELECT x FROM b) t"), (Rows{"5"}));
    EXPECT_EQ(rows("SELECT NULL UNION SELECT NULL"), (Rows{"NULL"}));
}

TEST_F(SetOpTest, IntersectAndExcept) {
    EXPECT_EQ(rows("SELECT x, s FROM a INTERSECT SELECT x, s FROM b ORDER BY 1, 2"),
              (Rows{"2|b", "3|NULL", "NULL|n"}));
    EXPECT_EQ(rows("SELECT x, s FROM a EXCEPT SELECT x, s FROM b ORDER BY 1, 2"), (Rows{"1|a"}));
    EXPECT_EQ(rows("SELECT x FROM a INTERSECT SELECT x FROM e"), Rows{});
    EXPECT_EQ(rows("SELECT x FROM a EXCEPT SELECT x FROM e ORDER BY x"), (Rows{"1", "2", "3", "NULL"}));
    EXPECT_EQ(rows("SELECT x FROM e EXCEPT SELECT x FROM a"), Rows{});
}

TEST_F(SetOpTest, IntersectAllAndExceptAllCountDuplicates) {
    // a has (2,b) twice and (NULL,n) twice, b once each; b has (3,NULL) twice, a once.
    EXPECT_EQ(rows("SELECT x, s FROM a INTERSECT ALL SELECT x, s FROM b ORDER BY 1, 2"),
              (Rows{"2|b", "3|NULL", "NULL|n"}));
    EXPECT_EQ(rows("SELECT x, s FROM a EXCEPT ALL SELECT x, s FROM b ORDER BY 1, 2"),
              (Rows{"1|a", "2|b", "NULL|n"}));
    EXPECT_EQ(rows("SELECT x, s FROM b EXCEPT ALL SELECT x, s FROM a ORDER BY 1, 2"),
              (Rows{"3|NULL", "4|d"}));
    EXPECT_EQ(rows("SELECT x FROM a EXCEPT ALL SELECT x FROM e ORDER BY x"),
              (Rows{"1", "2", "2", "3", "NULL", "NULL"}));
    EXPECT_EQ(rows("(SELECT x FROM a UNION ALL SELECT x FROM b) INTERSECT ALL "
                   "(SELECT x FROM b UNION ALL SELECT x FROM b) ORDER BY x"),
              (Rows{"2", "2", "3", "3", "3", "4", "NULL", "NULL"}));
    EXPECT_EQ(rows("SELECT x FROM (VALUES (1), (1), (NULL)) v(x) INTERSECT ALL SELECT x FROM a ORDER BY x"),
              (Rows{"1", "NULL"}));
}

TEST_F(SetOpTest, ManyCopiesOfOneRowSpanSeveralBatches) {
    // 2^10 and 2^11 copies of 7 (cross products of two-row VALUES lists); the repeat node emits
    // them in batches of 2 rows.
    auto copies = [](int factors) {
        std::string sql = "SELECT 7 AS v FROM ";
        for (int i = 0; i < factors; ++i) {
            sql.append(i > 0 ? ", " : "")
                .append("(VALUES (1), (2)) t")
                .append(std::to_string(i))
                .append("(k)");
        }
        return sql;
    };
    EXPECT_EQ(rows("SELECT count(*), min(v), max(v) FROM (" + copies(10) + " EXCEPT ALL SELECT 7) t"),
              (Rows{"1023|7|7"}));
    EXPECT_EQ(rows("SELECT count(*) FROM (" + copies(10) + " INTERSECT ALL " + copies(11) + ") t"),
              (Rows{"1024"}));
    EXPECT_EQ(rows("SELECT count(*) FROM (" + copies(11) + " EXCEPT ALL " + copies(10) + ") t"),
              (Rows{"1024"}));
    EXPECT_EQ(rows("SELECT count(*) FROM (" + copies(11) + " EXCEPT " + copies(10) + ") t"), (Rows{"0"}));
}

TEST_F(SetOpTest, NestingAndPrecedence) {
    EXPECT_EQ(rows("SELECT x FROM a EXCEPT (SELECT x FROM b EXCEPT SELECT 3) ORDER BY x"), (Rows{"1", "3"}));
    EXPECT_EQ(rows("SELECT x FROM a UNION SELECT x FROM b EXCEPT SELECT x FROM a ORDER BY x"), (Rows{"4"}));
    // INTERSECT binds tighter than UNION.
    EXPECT_EQ(rows("SELECT x FROM a UNION ALL SELECT x FROM b INTERSECT SELECT x FROM a ORDER BY x"),
              (Rows{"1", "2", "2", "2", "3", "3", "NULL", "NULL", "NULL"}));
    // UNION ALL after UNION keeps the duplicates of its own side only.
    EXPECT_EQ(rows("SELECT x FROM a UNION SELECT x FROM a UNION ALL SELECT x FROM a ORDER BY x"),
              (Rows{"1", "1", "2", "2", "2", "3", "3", "NULL", "NULL", "NULL"}));
    EXPECT_EQ(rows("SELECT x FROM b WHERE x IN (SELECT x FROM a INTERSECT SELECT 3) ORDER BY x"),
              (Rows{"3", "3"}));
    EXPECT_EQ(rows("WITH w AS (SELECT x FROM a) SELECT x FROM w UNION SELECT x + 10 FROM w ORDER BY 1"),
              (Rows{"1", "2", "3", "11", "12", "13", "NULL"}));
    // A parenthesized branch keeps its own ORDER BY ... LIMIT.
    EXPECT_EQ(rows("(SELECT x FROM a ORDER BY x LIMIT 1) UNION ALL (SELECT x FROM b ORDER BY x DESC LIMIT 1) "
                   "ORDER BY 1"),
              (Rows{"1", "4"}));
}

TEST_F(SetOpTest, OrderByLimitOffsetOverTheResultUseTheLeftNames) {
    const auto result =
        db.query("SELECT x AS k FROM a UNION SELECT x AS other FROM b ORDER BY k DESC LIMIT 2");
    ASSERT_EQ(result.columns.size(), 1U);
    EXPECT_EQ(result.columns[0].name, "k");
    EXPECT_EQ(rows_of(result), (Rows{"4", "3"}));
    EXPECT_EQ(rows("SELECT x AS k FROM a UNION SELECT x FROM b ORDER BY k NULLS FIRST LIMIT 2 OFFSET 1"),
              (Rows{"1", "2"}));
    EXPECT_EQ(rows("SELECT s FROM a UNION ALL SELECT s FROM b LIMIT 100 OFFSET 9").size(), 2U);
    EXPECT_EQ(rows("SELECT x FROM a UNION ALL SELECT x FROM b LIMIT 3").size(), 3U);
}

TEST_F(SetOpTest, TypesCombineAsInDuckDb) {
    auto type_of = [&](const std::string &sql) { return db.query(sql).columns.at(0).type; };
    EXPECT_EQ(type_of("SELECT x FROM a UNION ALL SELECT x FROM b"), db::Type::bigint());
    EXPECT_EQ(rows("SELECT x FROM a UNION ALL SELECT 2.5 ORDER BY 1"),
              (Rows{"1.0", "2.0", "2.0", "2.5", "3.0", "NULL", "NULL"}));
    EXPECT_EQ(type_of("SELECT x FROM a UNION ALL SELECT 2.5"), db::Type::decimal(11, 1));
    EXPECT_EQ(rows("SELECT x FROM d UNION ALL SELECT x FROM b ORDER BY 1"),
              (Rows{"1.50", "2.00", "2.00", "3.00", "3.00", "4.00", "NULL"}));
    EXPECT_EQ(type_of("SELECT x FROM d UNION ALL SELECT x FROM b"), db::Type::decimal(21, 2));
    EXPECT_EQ(rows("SELECT x + 0.5 FROM a UNION SELECT x FROM b ORDER BY 1"),
              (Rows{"1.5", "2.0", "2.5", "3.0", "3.5", "4.0", "NULL"}));
    // VARCHAR absorbs the other type.
    EXPECT_EQ(rows("SELECT x FROM a UNION SELECT s FROM b ORDER BY 1"),
              (Rows{"1", "2", "3", "b", "d", "n", "NULL"}));
    EXPECT_EQ(rows("SELECT 1 UNION ALL SELECT 'a' ORDER BY 1"), (Rows{"1", "a"}));
    // An untyped NULL takes the other side's type; BOOLEAN becomes the number beside it.
    EXPECT_EQ(rows("SELECT day FROM d UNION ALL SELECT NULL ORDER BY 1"),
              (Rows{"2020-01-01", "NULL", "NULL"}));
    EXPECT_EQ(rows("SELECT NULL UNION ALL SELECT day FROM d ORDER BY 1"),
              (Rows{"2020-01-01", "NULL", "NULL"}));
    EXPECT_EQ(type_of("SELECT NULL UNION ALL SELECT day FROM d"), db::Type::date());
    EXPECT_EQ(rows("SELECT true UNION ALL SELECT 2 ORDER BY 1"), (Rows{"1", "2"}));
}

TEST_F(SetOpTest, ErrorsNameTheProblem) {
    EXPECT_NE(
        error_text("SELECT x, s FROM a UNION SELECT x FROM b")
            .find("each UNION query must have the same number of columns (2 on the left, 1 on the right)"),
        std::string::npos);
    EXPECT_NE(error_text("SELECT x FROM a INTERSECT SELECT x, s FROM b").find("each INTERSECT query"),
              std::string::npos);
    const std::string types = error_text("SELECT x FROM a UNION SELECT day FROM d");
    EXPECT_NE(types.find("UNION types INTEGER and DATE cannot be matched (column 1)"), std::string::npos)
        << types;
    EXPECT_NE(types.find("column 30"), std::string::npos) << types; // at `day`
    EXPECT_NE(
        error_text("SELECT x FROM a EXCEPT SELECT true UNION SELECT day FROM d").find("cannot be matched"),
        std::string::npos);
    EXPECT_NE(error_text("SELECT x FROM a UNION SELECT x FROM b ORDER BY nothing").find("nothing"),
              std::string::npos);
}

TEST_F(SetOpTest, ValuesLists) {
    EXPECT_EQ(rows("SELECT * FROM (VALUES (1, 'a'), (2, NULL), (NULL, 'c')) t(x, y) ORDER BY x"),
              (Rows{"1|a", "2|NULL", "NULL|c"}));
    const auto bare = db.query("VALUES (1, 'a'), (2, NULL)");
    ASSERT_EQ(bare.columns.size(), 2U);
    EXPECT_EQ(bare.columns[0].name, "col0");
    EXPECT_EQ(bare.columns[1].name, "col1");
    EXPECT_EQ(bare.columns[0].type, db::Type::integer());
    EXPECT_EQ(rows_of(bare), (Rows{"1|a", "2|NULL"}));
    EXPECT_EQ(rows("SELECT * FROM (VALUES (1), (2.5)) v"), (Rows{"1.0", "2.5"}));
    // A string literal takes the type of the other values.
    EXPECT_EQ(rows("SELECT * FROM (VALUES (DATE '2020-01-01'), ('2020-02-02')) v(d) ORDER BY d"),
              (Rows{"2020-01-01", "2020-02-02"}));
    EXPECT_EQ(rows("VALUES (2), (1) ORDER BY 1"), (Rows{"1", "2"}));
    EXPECT_EQ(
        rows(
            "SELECT a.x, v.n FROM a JOIN (VALUES (1, 'one'), (2, 'two')) v(x, n) ON a.x = v.x ORDER BY 1, 2"),
        (Rows{"1|one", "2|two", "2|two"}));
    EXPECT_NE(
        error_text("SELECT * FROM (VALUES (1, 2), (3)) v").find("VALUES lists must all be the same length"),
        std::string::npos);
    EXPECT_NE(error_text("VALUES (1), ('a')").find("'a'"), std::string::npos);
    EXPECT_NE(error_text("VALUES (1), (DATE '2020-01-01')").find("cannot be matched"), std::string::npos);
}

TEST_F(SetOpTest, ConditionsOnTheResultFilterEveryInput) {
    const std::string sql = "SELECT x FROM (SELECT x FROM a UNION ALL SELECT x FROM b) t WHERE x = 2";
    EXPECT_EQ(rows(sql), (Rows{"2", "2", "2"}));
    // Pushed below the union into both inputs: into b's scan, and over the cast of a's column.
    const std::string plan = db.explain(sql);
    EXPECT_EQ(plan.rfind("Plan:\n  UnionAll", 0), 0U) << plan;
    EXPECT_NE(plan.find("Scan b [x] where (x = 2)"), std::string::npos) << plan;
    EXPECT_NE(plan.find("Filter (x = 2)"), std::string::npos) << plan;
    EXPECT_EQ(
        rows("SELECT x FROM (SELECT x FROM a UNION SELECT x FROM b) t WHERE x > 2 OR x IS NULL ORDER BY 1"),
        (Rows{"3", "4", "NULL"}));
}

TEST_F(SetOpTest, ExplainShowsTheSetOperators) {
    const std::string plan = db.explain("SELECT x FROM a INTERSECT ALL SELECT x FROM b");
    EXPECT_NE(plan.find("UnionAll"), std::string::npos) << plan;
    EXPECT_NE(plan.find("Repeat each row"), std::string::npos) << plan;
    EXPECT_NE(plan.find("Aggregate group by"), std::string::npos) << plan;
    EXPECT_NE(db.explain("SELECT x FROM a UNION ALL SELECT x FROM b").find("union all"), std::string::npos);
}

TEST_F(SetOpTest, LongChainsAreNoDeepNesting) {
    // 300 branches: deeper than the 64 nested query blocks allowed, but a left-deep chain is
    // bound in a loop, and consecutive UNION ALLs are one node. The last UNION deduplicates
    // everything before it (0..99); the two UNION ALLs after it add 98 and 99 again.
    std::string sql = "SELECT 0 AS v";
    for (int i = 1; i < 300; ++i) {
        sql.append(i % 3 == 0 ? " UNION SELECT " : " UNION ALL SELECT ").append(std::to_string(i % 100));
    }
    EXPECT_EQ(rows("SELECT count(*), count(DISTINCT v), sum(v) FROM (" + sql + ") t"),
              (Rows{"102|100|5147"}));
    std::string all = "SELECT 1 AS v";
    for (int i = 1; i < 300; ++i) {
        all.append(" UNION ALL SELECT 1");
    }
    EXPECT_EQ(rows("SELECT count(*) FROM (" + all + ") t"), (Rows{"300"}));
    EXPECT_EQ(db.explain(all).find("UnionAll", db.explain(all).find("UnionAll") + 1), std::string::npos);
}

TEST(SetOpsCancel, CancelStopsASetOperationAndTheDatabaseStaysUsable) {
    tasking::Runtime runtime{small_runtime_config(4)};
    DatabaseOptions options;
    options.execution.morsel_rows = 256;
    Database database{runtime, options};
    database.execute("CREATE TABLE t (a INTEGER NOT NULL)");
    std::string insert = "INSERT INTO t VALUES ";
    for (int i = 0; i < 4'000; ++i) {
        insert.append(i == 0 ? "(" : ", (").append(std::to_string(i % 50)).append(")");
    }
    database.execute(insert);
    // 16 M rows into the union and the per-side counts: far longer than the test waits.
    constexpr const char *long_query = "SELECT count(*) FROM (SELECT x.a FROM t x, t y UNION ALL SELECT a "
                                       "FROM t EXCEPT ALL SELECT a FROM t) q";
    std::atomic<bool> done{false};
    std::optional<std::string> error;
    std::thread runner{[&] {
        try {
            database.execute(long_query);
        } catch (const SqlError &e) {
            error = e.message();
        }
        done.store(true);
    }};
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    while (!done.load()) {
        database.cancel("stopped by the test");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    runner.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(error.has_value());
    EXPECT_NE(error->find("stopped by the test"), std::string::npos) << *error;
    EXPECT_LT(seconds, 10.0);
    EXPECT_EQ(rows_of(database.query("SELECT count(*) FROM (SELECT a FROM t UNION SELECT a FROM t) q")),
              (Rows{"50"}));
}

TEST(SetOpsLarge, UnionAllAndExceptOverManyMorsels) {
    tasking::Runtime runtime{small_runtime_config(4)};
    DatabaseOptions options;
    options.execution.morsel_rows = 512;
    Database database{runtime, options};
    database.execute("CREATE TABLE n (v INTEGER NOT NULL)");
    std::string insert = "INSERT INTO n VALUES ";
    constexpr int count = 20'000;
    for (int i = 0; i < count; ++i) {
        insert.append(i == 0 ? "(" : ", (").append(std::to_string(i)).append(")");
    }
    database.execute(insert);
    // 40'000 rows through the union; every even value twice on the left, 5'000 values removed.
    EXPECT_EQ(
        rows_of(database.query("SELECT count(*), sum(v) FROM (SELECT v FROM n UNION ALL SELECT v FROM n) t")),
        (Rows{"40000|399980000"}));
    EXPECT_EQ(
        rows_of(database.query("SELECT count(*), sum(v) FROM (SELECT v FROM n UNION ALL SELECT v FROM n "
                               "WHERE v % 2 = 0 EXCEPT ALL SELECT v FROM n WHERE v < 5000) t")),
        (Rows{"25000|287482500"}));
    EXPECT_EQ(
        rows_of(database.query("SELECT count(*) FROM (SELECT v % 7 FROM n UNION SELECT v % 5 FROM n) t")),
        (Rows{"7"}));
}

} // namespace mx::sql::test
