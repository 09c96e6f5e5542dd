// Right semi and anti joins (optimizer + hash join): a semi or anti join whose outer side is much
// smaller than its subquery side hashes the outer side and marks the rows the subquery's rows
// meet. Each query runs with the choice on and off; both must give the answer computed by hand,
// and the swap must show in EXPLAIN where the test says so, on data where it matters: NULL keys
// on both sides, duplicate outer keys, several subquery rows per key, residual conditions, empty
// and filtered-away outer sides, strings in the outer rows.

#include <functional>
#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

DatabaseOptions with_right_joins(bool on) {
    DatabaseOptions options = tiny_batches();
    options.optimizer.right_semi_joins = on;
    return options;
}

// o: seven outer rows: a duplicate key (2), a NULL key, a key without partner (999).
// i: 400 rows, k = r % 200 and q = r (two rows per key: q = k and k + 200), and two rows with a
// NULL key. eo: an empty outer table.
constexpr const char *tables = R"sql(
CREATE TABLE o (k INTEGER, x INTEGER NOT NULL, s VARCHAR);
INSERT INTO o VALUES (1, 10, 'a'), (2, 0, 'b'), (2, 5, 'c'), (NULL, 7, 'd'), (999, 1, 'e'), (3, 100, 'f'),
  (4, 3, 'g');
CREATE TABLE i (k INTEGER, q INTEGER NOT NULL);
CREATE TABLE eo (k INTEGER, x INTEGER NOT NULL, s VARCHAR);
CREATE TABLE t (k INTEGER, y VARCHAR);
INSERT INTO t VALUES (1, 'p'), (2, 'q'), (3, 'r'), (999, 'z');
)sql";

} // namespace

class RightSemiJoinTest : public OnOffSuite<RightSemiJoinTest> {
protected:
    static void SetUpTestSuite() { open(with_right_joins(true), with_right_joins(false), tables, "i"); }

    /// The rows of `sql` with right joins on, after checking that off gives the same rows and
    /// that the plan with them on has `kind` ("right semi", "right anti"; empty: neither).
    std::vector<std::string> rows(const std::string &sql, const std::string &kind) {
        const std::string explained = _on->explain(sql);
        if (kind.empty()) {
            EXPECT_EQ(explained.find("HashJoin right"), std::string::npos) << explained;
        } else {
            EXPECT_NE(explained.find("HashJoin " + kind), std::string::npos) << explained;
        }
        const std::string off = _off->explain(sql);
        EXPECT_EQ(off.find("HashJoin right"), std::string::npos) << off;
        const auto on_rows = rows_of(_on->query(sql));
        EXPECT_EQ(on_rows, rows_of(_off->query(sql))) << sql;
        return on_rows;
    }
};

using Rows = std::vector<std::string>;

TEST_F(RightSemiJoinTest, ExistsAndNotExists) {
    EXPECT_EQ(
        rows("SELECT k, x, s FROM o WHERE EXISTS (SELECT * FROM i WHERE i.k = o.k) ORDER BY s", "right semi"),
        (Rows{"1|10|a", "2|0|b", "2|5|c", "3|100|f", "4|3|g"}));
    // The NULL key has no partner, so NOT EXISTS keeps it.
    EXPECT_EQ(rows("SELECT k, s FROM o WHERE NOT EXISTS (SELECT * FROM i WHERE i.k = o.k) ORDER BY s",
                   "right anti"),
              (Rows{"NULL|d", "999|e"}));
}

TEST_F(RightSemiJoinTest, ResidualConditions) {
    // Key 2 has q in {2, 202}: only x = 0 finds q > x + 200; key 4 (q 204) with x = 3 does.
    EXPECT_EQ(
        rows("SELECT s FROM o WHERE EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q > o.x + 200) ORDER BY s",
             "right semi"),
        (Rows{"b", "g"}));
    EXPECT_EQ(rows("SELECT s FROM o WHERE NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q > o.x + 200) "
                   "ORDER BY s",
                   "right anti"),
              (Rows{"a", "c", "d", "e", "f"}));
}

TEST_F(RightSemiJoinTest, InAndNotIn) {
    EXPECT_EQ(rows("SELECT s FROM o WHERE k IN (SELECT k FROM i) ORDER BY s", "right semi"),
              (Rows{"a", "b", "c", "f", "g"}));
    // NOT IN's NULL rule joins the subquery's counts to the outer side; the anti join waits for
    // that join and hashes its few rows (no magic set restricts the subquery side then). i.k has
    // NULLs: never true.
    EXPECT_EQ(rows("SELECT s FROM o WHERE k NOT IN (SELECT k FROM i) ORDER BY s", "right anti"), Rows{});
    // Without them, a NULL outer key still gives NULL (dropped); 999 is not in the list.
    EXPECT_EQ(
        rows("SELECT s FROM o WHERE k NOT IN (SELECT k FROM i WHERE k IS NOT NULL) ORDER BY s", "right anti"),
        (Rows{"e"}));
}

TEST_F(RightSemiJoinTest, EmptyAndFilteredOuterSides) {
    EXPECT_EQ(rows("SELECT s FROM eo WHERE EXISTS (SELECT * FROM i WHERE i.k = eo.k)", "right semi"), Rows{});
    EXPECT_EQ(rows("SELECT s FROM eo WHERE NOT EXISTS (SELECT * FROM i WHERE i.k = eo.k)", "right anti"),
              Rows{});
    // Estimated at a few rows, nothing at run time.
    EXPECT_EQ(
        rows("SELECT s FROM o WHERE x > 1000 AND EXISTS (SELECT * FROM i WHERE i.k = o.k)", "right semi"),
        Rows{});
    EXPECT_EQ(
        rows("SELECT s FROM o WHERE x > 1000 AND NOT EXISTS (SELECT * FROM i WHERE i.k = o.k)", "right anti"),
        Rows{});
}

TEST_F(RightSemiJoinTest, EmptySubquerySide) {
    // Nothing to meet: every outer row is kept by NOT EXISTS, none by EXISTS. (The estimate
    // cannot see that q * 2 < 0 holds for no row, so the subquery side stays the larger one.)
    EXPECT_EQ(
        rows("SELECT s FROM o WHERE EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q * 2 < 0) ORDER BY s",
             "right semi"),
        Rows{});
    EXPECT_EQ(
        rows("SELECT s FROM o WHERE NOT EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q * 2 < 0) ORDER BY s",
             "right anti"),
        (Rows{"a", "b", "c", "d", "e", "f", "g"}));
}

TEST_F(RightSemiJoinTest, NotWhenTheOuterSideIsLarger) {
    EXPECT_EQ(rows("SELECT count(*) FROM i WHERE EXISTS (SELECT * FROM o WHERE o.k = i.k)", ""), Rows{"8"});
    EXPECT_EQ(rows("SELECT count(*) FROM i WHERE NOT EXISTS (SELECT * FROM o WHERE o.k = i.k)", ""),
              Rows{"394"});
}

TEST_F(RightSemiJoinTest, InsteadOfAMagicSetAboveTheJoins) {
    // A semi/anti join with a large subquery side waits for the joins of its query block (TPC-H
    // Q21). With right joins on, their few result rows are hashed and no magic set restricts the
    // subquery side; with them off the magic set does, and both give the same rows.
    const std::string exists = "SELECT o.s, t.y FROM o, t WHERE o.k = t.k AND EXISTS (SELECT * FROM i WHERE "
                               "i.k = o.k AND i.q <> o.x) ORDER BY o.s";
    const std::string not_exists =
        "SELECT o.s, t.y FROM o, t WHERE o.k = t.k AND NOT EXISTS (SELECT * FROM i "
        "WHERE i.k = o.k AND i.q > o.x + 150) ORDER BY o.s";
    EXPECT_EQ(rows(exists, "right semi"), (Rows{"a|p", "b|q", "c|q", "f|r"}));
    EXPECT_EQ(rows(not_exists, "right anti"), (Rows{"e|z", "f|r"}));
    for (const std::string &sql : {exists, not_exists}) {
        const std::string on = _on->explain(sql);
        EXPECT_EQ(on.find("magic set"), std::string::npos) << on;
        const std::string off = _off->explain(sql);
        EXPECT_NE(off.find("magic set: the build side of the"), std::string::npos) << off;
    }
}

TEST_F(RightSemiJoinTest, AggregatesOverTheOuterRows) {
    EXPECT_EQ(
        rows("SELECT k, count(*), sum(x) FROM o WHERE EXISTS (SELECT * FROM i WHERE i.k = o.k) GROUP BY k "
             "ORDER BY k",
             "right semi"),
        (Rows{"1|1|10", "2|2|5", "3|1|100", "4|1|3"}));
}

} // namespace mx::sql::test
