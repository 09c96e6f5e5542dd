// Right outer joins (optimizer + hash join): a left outer join whose preserved side is much
// smaller than its nullable side hashes the preserved side, marks the rows the nullable side's
// rows meet and emits the others with NULLs. Each query runs with the choice on and off; both
// must give the answer computed by hand, and the swap must show in EXPLAIN where the test says
// so, on data where it matters: NULL keys on both sides, duplicate preserved keys, several
// nullable rows per key, residual conditions on one and on both sides, an empty preserved side.

#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

DatabaseOptions with_right_outer_joins(bool on) {
    DatabaseOptions options = tiny_batches();
    options.optimizer.right_outer_joins = on;
    return options;
}

// c: seven preserved rows: a duplicate key (2), a NULL key, a key without partner (999).
// o: 400 rows, k = r % 200 and q = r (two rows per key: q = k and k + 200), and two rows with a
// NULL key. ec: an empty preserved table.
constexpr const char *tables = R"sql(
CREATE TABLE c (k INTEGER, x INTEGER NOT NULL, s VARCHAR);
INSERT INTO c VALUES (1, 10, 'a'), (2, 0, 'b'), (2, 5, 'c'), (NULL, 7, 'd'), (999, 1, 'e'), (3, 100, 'f'),
  (4, 3, 'g');
CREATE TABLE o (k INTEGER, q INTEGER NOT NULL);
CREATE TABLE ec (k INTEGER, x INTEGER NOT NULL, s VARCHAR);
)sql";

} // namespace

class RightOuterJoinTest : public OnOffSuite<RightOuterJoinTest> {
protected:
    static void SetUpTestSuite() {
        open(with_right_outer_joins(true), with_right_outer_joins(false), tables, "o");
    }

    /// The rows of `sql` with right outer joins on, after checking that off gives the same rows
    /// as a left outer join, and that the plan with them on has a right outer join exactly when
    /// `swapped`.
    std::vector<std::string> rows(const std::string &sql, bool swapped) {
        const std::string explained = _on->explain(sql);
        EXPECT_EQ(explained.find("HashJoin right outer") != std::string::npos, swapped) << explained;
        EXPECT_EQ(explained.find("HashJoin left outer") != std::string::npos, !swapped) << explained;
        const std::string off = _off->explain(sql);
        EXPECT_EQ(off.find("HashJoin right outer"), std::string::npos) << off;
        EXPECT_NE(off.find("HashJoin left outer"), std::string::npos) << off;
        const auto on_rows = rows_of(_on->query(sql));
        EXPECT_EQ(on_rows, rows_of(_off->query(sql))) << sql;
        return on_rows;
    }
};

using Rows = std::vector<std::string>;

TEST_F(RightOuterJoinTest, UnmatchedAndNullKeyPreservedRowsGetNulls) {
    EXPECT_EQ(rows("SELECT s, count(q) FROM c LEFT JOIN o ON c.k = o.k GROUP BY s ORDER BY s", true),
              (Rows{"a|2", "b|2", "c|2", "d|0", "e|0", "f|2", "g|2"}));
    // Columns of both sides in the order the query asks for, NULLs where nothing matched.
    EXPECT_EQ(rows("SELECT c.s, o.q, c.k, o.k FROM c LEFT JOIN o ON c.k = o.k WHERE c.x > 50 OR c.k IS NULL "
                   "OR c.k = 999 ORDER BY c.s, o.q",
                   true),
              (Rows{"d|NULL|NULL|NULL", "e|NULL|999|NULL", "f|3|3|3", "f|203|3|3"}));
}

TEST_F(RightOuterJoinTest, ResidualConditions) {
    // Over both sides: key 2 has q in {2, 202}: only x = 0 finds q > x + 200; key 4 (q 204)
    // with x = 3 does. A match the residual rejects leaves its preserved row unmatched.
    EXPECT_EQ(rows("SELECT s, count(q) FROM c LEFT JOIN o ON c.k = o.k AND o.q > c.x + 200 GROUP BY s "
                   "ORDER BY s",
                   true),
              (Rows{"a|0", "b|1", "c|0", "d|0", "e|0", "f|0", "g|1"}));
    // Over the preserved side alone: it cannot be pushed below the join, so it is a residual.
    EXPECT_EQ(
        rows("SELECT s, count(q) FROM c LEFT JOIN o ON c.k = o.k AND c.x < 6 GROUP BY s ORDER BY s", true),
        (Rows{"a|0", "b|2", "c|2", "d|0", "e|0", "f|0", "g|2"}));
}

TEST_F(RightOuterJoinTest, CountsOfCounts) {
    // TPC-H Q13's shape: a filter on the nullable side, then two aggregations.
    EXPECT_EQ(rows("SELECT cnt, count(*) FROM (SELECT c.k, count(o.q) AS cnt FROM c LEFT JOIN o ON c.k = o.k "
                   "AND o.q < 300 GROUP BY c.k) t GROUP BY cnt ORDER BY cnt",
                   true),
              (Rows{"0|2", "2|3", "4|1"}));
}

TEST_F(RightOuterJoinTest, EmptySides) {
    EXPECT_EQ(rows("SELECT count(*) FROM ec LEFT JOIN o ON ec.k = o.k", true), Rows{"0"});
    // Nothing on the nullable side passes (the estimate cannot see that q * 2 < 0 holds for no
    // row): every preserved row once, NULL-padded.
    EXPECT_EQ(rows("SELECT s, q FROM c LEFT JOIN o ON c.k = o.k AND o.q * 2 < 0 ORDER BY s", true),
              (Rows{"a|NULL", "b|NULL", "c|NULL", "d|NULL", "e|NULL", "f|NULL", "g|NULL"}));
}

TEST_F(RightOuterJoinTest, CountJoinsCountThePartnersOfEachPreservedRow) {
    // cc: a duplicate key (2), a NULL key, groups g over several keys. oo: 300 rows, k = r % 7,
    // v = r but NULL every fifth row (count(v) skips them), and a NULL key.
    DatabaseOptions options = with_right_outer_joins(true);
    options.optimizer.disabled_passes.insert("count_joins");
    Database plain(*_runtime, options);
    const std::string setup = "CREATE TABLE cc (k INTEGER, g INTEGER);"
                              "INSERT INTO cc VALUES (1, 1), (2, 1), (2, 2), (NULL, 2), (5, 3), (6, 3);"
                              "CREATE TABLE oo (k INTEGER, v INTEGER);"
                              "INSERT INTO oo VALUES " +
                              values_list(300,
                                          [](int r) {
                                              return std::to_string(r % 7) + ", " +
                                                     (r % 5 == 0 ? std::string("NULL") : std::to_string(r));
                                          }) +
                              ", (NULL, 1)";
    _on->execute(setup);
    plain.execute(setup);
    const auto check = [&](const std::string &sql, bool counted) {
        const std::string explained = _on->explain(sql);
        EXPECT_EQ(explained.find("counting matches") != std::string::npos, counted) << explained;
        const std::string without = plain.explain(sql);
        EXPECT_EQ(without.find("counting matches"), std::string::npos) << without;
        const auto on_rows = rows_of(_on->query(sql));
        EXPECT_EQ(on_rows, rows_of(plain.query(sql))) << sql;
        EXPECT_EQ(on_rows, rows_of(_off->query(sql))) << sql; // a left outer join
        return on_rows;
    };
    _off->execute(setup);
    EXPECT_EQ(
        check("SELECT cc.k, count(oo.v) FROM cc LEFT JOIN oo ON cc.k = oo.k GROUP BY cc.k ORDER BY cc.k",
              true),
        (Rows{"1|34", "2|70", "5|34", "6|34", "NULL|0"}));
    check("SELECT g, count(oo.v) FROM cc LEFT JOIN oo ON cc.k = oo.k AND oo.v > 100 GROUP BY g ORDER BY g",
          true);
    // A residual over both sides; the counted column is the key.
    check("SELECT g, count(oo.k) FROM cc LEFT JOIN oo ON cc.k = oo.k AND oo.v > cc.g * 90 GROUP BY g ORDER "
          "BY g",
          true);
    // TPC-H Q13's shape: the counts counted.
    check("SELECT cnt, count(*) FROM (SELECT cc.k, count(oo.v) AS cnt FROM cc LEFT JOIN oo ON cc.k = oo.k "
          "GROUP BY cc.k) t GROUP BY cnt ORDER BY cnt",
          true);
    // count(*) counts the NULL-padded row of a preserved row without a partner, a second
    // aggregate or a group over the nullable side needs the joined rows: no count join.
    check("SELECT cc.k, count(*) FROM cc LEFT JOIN oo ON cc.k = oo.k GROUP BY cc.k ORDER BY cc.k", false);
    check(
        "SELECT cc.k, count(oo.v), sum(oo.v) FROM cc LEFT JOIN oo ON cc.k = oo.k GROUP BY cc.k ORDER BY cc.k",
        false);
    check("SELECT oo.v % 3, count(oo.k) FROM cc LEFT JOIN oo ON cc.k = oo.k GROUP BY oo.v % 3 ORDER BY 1",
          false);
    check("SELECT count(oo.v) FROM cc LEFT JOIN oo ON cc.k = oo.k", false);
}

TEST_F(RightOuterJoinTest, NotWhenThePreservedSideIsLarger) {
    // o's keys 1 to 4 meet c's rows (key 2 twice); the other 394 + 2 NULL-key rows do not.
    EXPECT_EQ(rows("SELECT count(*), count(c.s) FROM o LEFT JOIN c ON o.k = c.k", false), (Rows{"404|10"}));
}

} // namespace mx::sql::test
