// JOIN ... USING, NATURAL JOIN, RIGHT and FULL OUTER JOIN. Expected answers were checked against
// DuckDB 1.5.5 when the test was written (no DuckDB at test time). Batches of 2 rows on 4 workers
// make every probe many tasks on any worker; the larger tests check full outer joins whose
// unmatched build rows are emitted by parallel finalize parts.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

/// a(x, s, k), b(x, s, v), c(x, w): x and s shared by a and b, x by all three; e(x, z) is empty.
constexpr const char *join_tables = R"sql(
CREATE TABLE a (x INTEGER, s VARCHAR, k INTEGER);
INSERT INTO a VALUES (1, 'a', 1), (2, 'b', 2), (NULL, 'n', 3);
CREATE TABLE b (x BIGINT, s VARCHAR, v INTEGER);
INSERT INTO b VALUES (2, 'b', 20), (3, 'c', 30), (NULL, 'n', 40);
CREATE TABLE c (x INTEGER, w INTEGER);
INSERT INTO c VALUES (2, 200), (3, 300);
CREATE TABLE e (x INTEGER, z INTEGER);
)sql";

class JoinUsingTest : public SqlTest {
protected:
    JoinUsingTest() : SqlTest(small_runtime_config(4), tiny_batches()) { db.execute(join_tables); }

    std::vector<std::string> names(const std::string &sql) {
        std::vector<std::string> out;
        for (const auto &column : db.query(sql).columns) {
            out.push_back(column.name);
        }
        return out;
    }
};

} // namespace

TEST_F(JoinUsingTest, UsingShowsTheJoinColumnOnceInTheLeftPosition) {
    EXPECT_EQ(names("SELECT * FROM a JOIN b USING (x)"), (Rows{"x", "s", "k", "s", "v"}));
    EXPECT_EQ(rows("SELECT * FROM a JOIN b USING (x)"), (Rows{"2|b|2|b|20"}));
    EXPECT_EQ(rows("SELECT * FROM a LEFT JOIN b USING (x) ORDER BY 1, 2"),
              (Rows{"1|a|1|NULL|NULL", "2|b|2|b|20", "NULL|n|3|NULL|NULL"}));
    // RIGHT JOIN: the merged column is the right side's (BIGINT here).
    EXPECT_EQ(rows("SELECT * FROM a RIGHT JOIN b USING (x) ORDER BY 1, 2"),
              (Rows{"2|b|2|b|20", "3|NULL|NULL|c|30", "NULL|NULL|NULL|n|40"}));
    EXPECT_EQ(db.query("SELECT x FROM a RIGHT JOIN b USING (x)").columns[0].type, db::Type::bigint());
    EXPECT_EQ(rows("SELECT x, a.x, b.x FROM a RIGHT JOIN b USING (x) ORDER BY 2, 3"),
              (Rows{"2|2|2", "3|NULL|3", "NULL|NULL|NULL"}));
    // Qualified stars show every column of their table.
    EXPECT_EQ(names("SELECT a.*, b.* FROM a JOIN b USING (x)"), (Rows{"x", "s", "k", "x", "s", "v"}));
    EXPECT_EQ(rows("SELECT * FROM a JOIN b USING (s) ORDER BY 1, 2"),
              (Rows{"2|b|2|2|20", "NULL|n|3|NULL|40"}));
    // NULL keys never match.
    EXPECT_EQ(rows("SELECT count(*) FROM a JOIN b USING (x, s)"), (Rows{"1"}));
}

TEST_F(JoinUsingTest, ChainedUsingAndNaturalJoins) {
    EXPECT_EQ(rows("SELECT * FROM a JOIN b USING (x) JOIN c USING (x)"), (Rows{"2|b|2|b|20|200"}));
    EXPECT_EQ(rows("SELECT * FROM a RIGHT JOIN b USING (x) JOIN c USING (x) ORDER BY 1"),
              (Rows{"2|b|2|b|20|200", "3|NULL|NULL|c|30|300"}));
    EXPECT_EQ(rows("SELECT * FROM a JOIN c USING (x) JOIN b USING (x)"), (Rows{"2|b|2|200|b|20"}));
    EXPECT_EQ(names("SELECT * FROM a NATURAL JOIN b"), (Rows{"x", "s", "k", "v"}));
    EXPECT_EQ(rows("SELECT * FROM a NATURAL JOIN b"), (Rows{"2|b|2|20"}));
    EXPECT_EQ(rows("SELECT * FROM a NATURAL LEFT JOIN b ORDER BY 1, 2"),
              (Rows{"1|a|1|NULL", "2|b|2|20", "NULL|n|3|NULL"}));
    EXPECT_EQ(rows("SELECT * FROM a NATURAL JOIN c"), (Rows{"2|b|2|200"}));
    // The merged column groups and sorts like any other.
    EXPECT_EQ(rows("SELECT x, count(*) FROM a NATURAL RIGHT JOIN b GROUP BY x ORDER BY x"),
              (Rows{"2|1", "3|1", "NULL|1"}));
}

TEST_F(JoinUsingTest, ErrorsNameTheColumn) {
    EXPECT_NE(error_text("SELECT * FROM a JOIN b USING (y)")
                  .find("column \"y\" specified in USING clause does not exist in left table"),
              std::string::npos);
    EXPECT_NE(error_text("SELECT * FROM a JOIN b USING (k)")
                  .find("column \"k\" specified in USING clause does not exist in right table"),
              std::string::npos);
    EXPECT_NE(error_text("SELECT * FROM a JOIN b USING (s) JOIN c USING (x)")
                  .find("common column name \"x\" appears more than once in left table"),
              std::string::npos);
    EXPECT_NE(
        error_text("SELECT * FROM a NATURAL JOIN (SELECT 1 AS z) t").find("NATURAL JOIN found no column"),
        std::string::npos);
    EXPECT_NE(
        error_text("SELECT * FROM a JOIN b USING (x, x)").find("appears more than once in USING clause"),
        std::string::npos);
}

TEST_F(JoinUsingTest, FullOuterJoinKeepsBothSides) {
    EXPECT_EQ(rows("SELECT * FROM a FULL JOIN b ON a.x = b.x ORDER BY 1, 2, 4, 6"),
              (Rows{"1|a|1|NULL|NULL|NULL", "2|b|2|2|b|20", "NULL|n|3|NULL|NULL|NULL",
                    "NULL|NULL|NULL|3|c|30", "NULL|NULL|NULL|NULL|n|40"}));
    // A residual that rejects a key match leaves both rows unmatched.
    EXPECT_EQ(rows("SELECT * FROM a FULL JOIN b ON a.x = b.x AND b.v > 25 ORDER BY 1, 2, 4, 6"),
              (Rows{"1|a|1|NULL|NULL|NULL", "2|b|2|NULL|NULL|NULL", "NULL|n|3|NULL|NULL|NULL",
                    "NULL|NULL|NULL|2|b|20", "NULL|NULL|NULL|3|c|30", "NULL|NULL|NULL|NULL|n|40"}));
    EXPECT_EQ(rows("SELECT * FROM a FULL OUTER JOIN b ON a.s = b.s ORDER BY 1, 4"),
              (Rows{"1|a|1|NULL|NULL|NULL", "2|b|2|2|b|20", "NULL|NULL|NULL|3|c|30", "NULL|n|3|NULL|n|40"}));
    EXPECT_EQ(rows("SELECT count(*) FROM a FULL JOIN b ON true"), (Rows{"9"}));
    EXPECT_EQ(rows("SELECT count(*), count(a.k), count(b.v) FROM a FULL JOIN b ON a.k * 10 = b.v"),
              (Rows{"4|3|3"}));
    EXPECT_EQ(rows("SELECT count(*) FROM a FULL JOIN e ON a.x = e.x"), (Rows{"3"}));
    EXPECT_EQ(rows("SELECT count(*) FROM e FULL JOIN a ON a.x = e.x"), (Rows{"3"}));
    // USING: the join column is COALESCE(left, right) in the common type.
    EXPECT_EQ(rows("SELECT * FROM a FULL JOIN b USING (x) ORDER BY 1, 2, 4"),
              (Rows{"1|a|1|NULL|NULL", "2|b|2|b|20", "3|NULL|NULL|c|30", "NULL|n|3|NULL|NULL",
                    "NULL|NULL|NULL|n|40"}));
    EXPECT_EQ(db.query("SELECT x FROM a FULL JOIN b USING (x)").columns[0].type, db::Type::bigint());
    EXPECT_EQ(rows("SELECT x, a.x, b.x FROM a FULL JOIN b USING (x) ORDER BY 1, 2, 3"),
              (Rows{"1|1|NULL", "2|2|2", "3|NULL|3", "NULL|NULL|NULL", "NULL|NULL|NULL"}));
    EXPECT_EQ(rows("SELECT x, s, k, v FROM a NATURAL FULL JOIN b ORDER BY 1, 2, 3"),
              (Rows{"1|a|1|NULL", "2|b|2|20", "3|c|NULL|30", "NULL|n|3|NULL", "NULL|n|NULL|40"}));
    // Conditions above a full join stay above it.
    EXPECT_EQ(
        rows(
            "SELECT a.k, b.v FROM a FULL JOIN b ON a.x = b.x WHERE b.v IS NULL OR a.k IS NULL ORDER BY 1, 2"),
        (Rows{"1|NULL", "3|NULL", "NULL|30", "NULL|40"}));
}

namespace {

/// l(v, tag): 0..9999; r(v, tag): 5000..14999 and 10 rows with a NULL key; r2: r twice.
void make_outer_tables(Database &database) {
    database.execute(
        "CREATE TABLE l (v INTEGER NOT NULL, tag VARCHAR); CREATE TABLE r (v INTEGER, tag VARCHAR); "
        "CREATE TABLE r2 (v INTEGER, tag VARCHAR)");
    std::string left = "INSERT INTO l VALUES ";
    for (int i = 0; i < 10'000; ++i) {
        left.append(i == 0 ? "(" : ", (")
            .append(std::to_string(i))
            .append(", 'l")
            .append(std::to_string(i))
            .append("')");
    }
    database.execute(left);
    std::string right = "INSERT INTO r VALUES ";
    for (int i = 5'000; i < 15'000; ++i) {
        right.append(i == 5'000 ? "(" : ", (")
            .append(std::to_string(i))
            .append(", 'r")
            .append(std::to_string(i))
            .append("')");
    }
    for (int i = 0; i < 10; ++i) {
        right.append(", (NULL, 'null").append(std::to_string(i)).append("')");
    }
    database.execute(right);
    database.execute("INSERT INTO r2 SELECT * FROM r UNION ALL SELECT * FROM r");
}

} // namespace

TEST(FullOuterJoinLarge, UnmatchedBuildRowsComeFromParallelFinalizeParts) {
    for (const auto strategy : {db::JoinStrategy::automatic, db::JoinStrategy::radix_partitioned}) {
        SCOPED_TRACE(static_cast<int>(strategy));
        tasking::Runtime runtime{small_runtime_config(4)};
        DatabaseOptions options;
        options.execution.morsel_rows = 256;
        // A forced radix join is no option for a full outer join: it runs non-partitioned.
        options.execution.join.strategy = strategy;
        Database database{runtime, options};
        make_outer_tables(database);
        EXPECT_EQ(rows_of(database.query(
                      "SELECT count(*), count(l.v), count(r.v), count(r.tag), sum(coalesce(l.v, r.v)), "
                      "min(r.tag), max(l.tag) FROM l FULL JOIN r ON l.v = r.v")),
                  (Rows{"15010|10000|10000|10010|112492500|null0|l9999"}));
        // Duplicate build keys (gather mode), a residual, USING, RIGHT JOIN.
        EXPECT_EQ(rows_of(database.query(
                      "SELECT count(*), count(l.tag), count(r2.tag) FROM l FULL JOIN r2 ON l.v = r2.v")),
                  (Rows{"25020|15000|20020"}));
        EXPECT_EQ(rows_of(database.query("SELECT count(*), count(l.tag), count(r.tag) FROM l FULL JOIN r "
                                         "ON l.v = r.v AND r.v % 2 = 0")),
                  (Rows{"17510|10000|10010"}));
        EXPECT_EQ(rows_of(database.query("SELECT count(*) FROM l FULL JOIN r USING (v) WHERE v IS NULL")),
                  (Rows{"10"}));
        EXPECT_EQ(rows_of(database.query(
                      "SELECT count(*), count(l.v), count(r.v) FROM r RIGHT JOIN l ON l.v = r.v")),
                  (Rows{"10000|10000|5000"}));
    }
}

} // namespace mx::sql::test
