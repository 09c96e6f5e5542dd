// Decorrelated scalar subqueries and the magic sets (optimizer): an aggregation joined on its
// group keys reads only the keys the other join side supplies; a correlated count() is
// left-joined so that a missing group counts 0. Each query runs with the magic sets on and off;
// both must give the answer computed by hand, and the pass must have fired where the test says
// so (EXPLAIN's notes), on data where it matters: NULL correlation keys on both sides, duplicate
// outer keys, outer keys without a group, empty outer and inner sides.

#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

DatabaseOptions with_magic_sets(bool on) {
    DatabaseOptions options;
    options.optimizer.magic_sets = on;
    // A semi/anti join whose few outer rows a right semi/anti join hashes gets no magic set
    // (right_semi_join_test.cpp); without them, the build sides here are restricted.
    options.optimizer.right_semi_joins = false;
    return options;
}

// o: the outer side, six rows: a duplicate key (2), a NULL key, a key without a group (999).
// i: 400 rows, k = r % 200 (two rows per key, q = r and r + 200), and two rows with a NULL key.
// e: empty. f and g: small tables that the outer side joins (they shrink it before the semi
// joins: TPC-H Q21's shape).
constexpr const char *tables = R"sql(
CREATE TABLE o (k INTEGER, x INTEGER NOT NULL);
INSERT INTO o VALUES (1, 10), (2, 0), (2, 5), (NULL, 7), (999, 1), (3, 100);
CREATE TABLE i (k INTEGER, q INTEGER NOT NULL);
CREATE TABLE e (k INTEGER, q INTEGER NOT NULL);
CREATE TABLE f (k INTEGER);
INSERT INTO f VALUES (1), (2), (NULL);
CREATE TABLE g (x INTEGER NOT NULL);
INSERT INTO g VALUES (7), (1), (10);
)sql";

} // namespace

class MagicSetTest : public OnOffSuite<MagicSetTest> {
protected:
    static void SetUpTestSuite() { open(with_magic_sets(true), with_magic_sets(false), tables, "i"); }

    /// The rows of `sql` with the pass on, after checking that the pass off gives the same rows
    /// and that the pass fired (`fires`) or not.
    std::vector<std::string> rows(const std::string &sql, bool fires = true) {
        const std::string explained = _on->explain(sql);
        EXPECT_EQ(explained.find("magic set:") != std::string::npos, fires) << explained;
        const std::string off = _off->explain(sql);
        EXPECT_NE(off.find("(off: magic_sets, right_semi_joins)"), std::string::npos) << off;
        EXPECT_EQ(off.find("magic set:"), std::string::npos) << off;
        const auto on_rows = rows_of(_on->query(sql));
        EXPECT_EQ(on_rows, rows_of(_off->query(sql))) << sql;
        return on_rows;
    }
};

using Rows = std::vector<std::string>;

TEST_F(MagicSetTest, CorrelatedScalarSubqueryWithNullAndDuplicateKeys) {
    // Groups: k=1 avg 101, k=2 avg 102, k=3 avg 103; NULL and 999 find no group and drop out.
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o WHERE o.x < (SELECT avg(q) FROM i WHERE i.k = o.k) ORDER BY 1, 2"),
              (Rows{"1|10", "2|0", "2|5", "3|100"}));
    // The same with the subquery on the left of the comparison and min().
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o WHERE (SELECT min(q) FROM i WHERE o.k = i.k) = o.k ORDER BY 1, 2"),
              (Rows{"1|10", "2|0", "2|5", "3|100"}));
}

TEST_F(MagicSetTest, OuterSideIsAJoin) {
    // TPC-H Q17's shape: the outer side joins the subquery's table; the duplicate outer key 2
    // counts its lineitem twice.
    EXPECT_EQ(rows("SELECT count(*), sum(i.q) FROM o, i WHERE o.k = i.k AND i.q < (SELECT avg(q) FROM i i2 "
                   "WHERE i2.k = o.k)"),
              (Rows{"4|8"}));
}

TEST_F(MagicSetTest, OnlyThePlainColumnKeysRestrict) {
    // Grouped by (k, q % 2): only k is a plain column; groups (1,1), (2,0), (3,1) exist for the
    // outer keys, so only (2, 0) has a partner with x % 2 = 0.
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o WHERE o.x <= (SELECT max(q) FROM i WHERE i.k = o.k AND "
                   "i.q % 2 = o.x % 2) ORDER BY 1, 2"),
              (Rows{"2|0"}));
}

TEST_F(MagicSetTest, EmptySides) {
    // Empty outer side.
    EXPECT_EQ(rows("SELECT o.k FROM o WHERE o.x > 1000 AND o.x < (SELECT avg(q) FROM i WHERE i.k = o.k)"),
              (Rows{}));
    // The subquery's input is empty after its own filter (q + 1 < 0 is estimated, not known).
    EXPECT_EQ(rows("SELECT o.k FROM o WHERE o.x < (SELECT avg(q) FROM i WHERE i.k = o.k AND i.q + 1 < 0)"),
              (Rows{}));
    // An empty table: no groups, nothing to restrict (not worth a second scan of o).
    EXPECT_EQ(rows("SELECT o.k FROM o WHERE o.x < (SELECT avg(q) FROM e WHERE e.k = o.k)", false), (Rows{}));
}

TEST_F(MagicSetTest, GroupedDerivedTable) {
    EXPECT_EQ(rows("SELECT o.k, t.s FROM o JOIN (SELECT k, sum(q) AS s FROM i GROUP BY k) t ON t.k = o.k "
                   "ORDER BY 1, 2"),
              (Rows{"1|202", "2|204", "2|204", "3|206"}));
    // A HAVING filter above the aggregation keeps the groups intact.
    EXPECT_EQ(rows("SELECT o.k, t.s FROM o, (SELECT k, sum(q) AS s FROM i GROUP BY k HAVING sum(q) > 203) t "
                   "WHERE t.k = o.k ORDER BY 1, 2"),
              (Rows{"2|204", "2|204", "3|206"}));
}

TEST_F(MagicSetTest, NotWhenTheOtherSideIsLarge) {
    // The outer side (all of i) has more rows than the aggregation has groups: no second scan.
    EXPECT_EQ(rows("SELECT count(*) FROM i WHERE i.q <= (SELECT min(q) FROM i i2 WHERE i2.k = i.k)", false),
              (Rows{"200"}));
    // Few rows on the other side, but it scans more table rows than the aggregation's input.
    EXPECT_EQ(rows("SELECT t.k, t.s FROM i, (SELECT k, sum(x) AS s FROM o GROUP BY k) t WHERE i.q = 1 AND "
                   "t.k = i.k",
                   false),
              (Rows{"1|10"}));
}

TEST_F(MagicSetTest, SemiAndAntiJoinBuildSides) {
    // o joined with f keeps keys 1, 2, 2; i's rows of other keys cannot match and are dropped
    // before the build. The residual (q <> x, q > 201) applies only to rows with equal keys.
    EXPECT_EQ(
        rows("SELECT o.k, o.x FROM o, f WHERE o.k = f.k AND EXISTS (SELECT * FROM i WHERE i.k = o.k AND "
             "i.q <> o.x) ORDER BY 1, 2"),
        (Rows{"1|10", "2|0", "2|5"}));
    EXPECT_EQ(
        rows("SELECT o.k, o.x FROM o, f WHERE o.k = f.k AND NOT EXISTS (SELECT * FROM i WHERE i.k = o.k "
             "AND i.q > 201) ORDER BY 1, 2"),
        (Rows{"1|10"}));
    // o joined with g keeps the NULL key and 999: NOT EXISTS keeps both (nothing matches them).
    EXPECT_EQ(
        rows("SELECT o.k, o.x FROM o, g WHERE o.x = g.x AND NOT EXISTS (SELECT * FROM i WHERE i.k = o.k) "
             "ORDER BY 1, 2"),
        (Rows{"999|1", "NULL|7"}));
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o, g WHERE o.x = g.x AND EXISTS (SELECT * FROM i WHERE i.k = o.k) "
                   "ORDER BY 1, 2"),
              (Rows{"1|10"}));
    // Empty probe side; a build side that is empty after its own filter.
    EXPECT_EQ(rows("SELECT o.k FROM o, g WHERE o.x = g.x AND g.x > 100 AND EXISTS (SELECT * FROM i WHERE i.k "
                   "= o.k)"),
              (Rows{}));
    EXPECT_EQ(rows("SELECT o.k FROM o, g WHERE o.x = g.x AND EXISTS (SELECT * FROM i WHERE i.k = o.k AND i.q "
                   "+ 1 < 0)"),
              (Rows{}));
    EXPECT_EQ(
        rows("SELECT o.k, o.x FROM o, g WHERE o.x = g.x AND NOT EXISTS (SELECT * FROM i WHERE i.k = o.k "
             "AND i.q + 1 < 0) ORDER BY 1, 2"),
        (Rows{"1|10", "999|1", "NULL|7"}));
    // NOT IN: an anti join plus a check of the subquery's NULLs (i has NULL keys: never true),
    // which the restriction must not change.
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o, g WHERE o.x = g.x AND o.k NOT IN (SELECT k FROM i)"), (Rows{}));
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o, g WHERE o.x = g.x AND o.k NOT IN (SELECT k FROM i WHERE k IS NOT "
                   "NULL) ORDER BY 1, 2"),
              (Rows{"999|1"}));
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o, g WHERE o.x = g.x AND o.k IN (SELECT k FROM i) ORDER BY 1, 2"),
              (Rows{"1|10"}));
    // A build side smaller than the outer leaf filters it directly (no rescan).
    EXPECT_EQ(
        rows("SELECT count(*) FROM i, f WHERE i.k = f.k AND EXISTS (SELECT * FROM g WHERE g.x = i.q)", false),
        (Rows{"1"}));
}

TEST_F(MagicSetTest, CorrelatedCountWithoutTheCountBug) {
    // An outer row without a group counts 0 (it is not dropped): the NULL key and 999.
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o WHERE (SELECT count(*) FROM i WHERE i.k = o.k) = 0 ORDER BY 1, 2",
                   false),
              (Rows{"999|1", "NULL|7"}));
    EXPECT_EQ(
        rows("SELECT o.k, o.x FROM o WHERE o.x < (SELECT count(*) FROM i WHERE i.k = o.k) ORDER BY 1, 2",
             false),
        (Rows{"2|0"}));
    EXPECT_EQ(rows("SELECT o.k, o.x FROM o WHERE (SELECT count(q) FROM i WHERE i.k = o.k AND i.q > 150) = 1 "
                   "ORDER BY 1, 2",
                   false),
              (Rows{"1|10", "2|0", "2|5", "3|100"}));
    // Empty inner side: every outer row counts 0; empty outer side: nothing to count.
    EXPECT_EQ(rows("SELECT count(*) FROM o WHERE (SELECT count(q) FROM e WHERE e.k = o.k) = 0", false),
              (Rows{"6"}));
    EXPECT_EQ(rows("SELECT count(*) FROM o WHERE o.x > 1000 AND (SELECT count(*) FROM i WHERE i.k = o.k) = 0",
                   false),
              (Rows{"0"}));
    // Other expressions over count() read the expression over no rows (count(*) + 10 is 10).
    EXPECT_EQ(
        rows("SELECT o.k, o.x FROM o WHERE o.x < (SELECT count(*) + 10 FROM i WHERE i.k = o.k) ORDER BY "
             "1, 2",
             false),
        (Rows{"1|10", "2|0", "2|5", "999|1", "NULL|7"}));
    // Outside a WHERE comparison a missing group reads count() 0 as well.
    EXPECT_EQ(rows("SELECT o.k, (SELECT count(*) FROM i WHERE i.k = o.k) FROM o ORDER BY 1, 2", false),
              (Rows{"1|2", "2|2", "2|2", "3|2", "999|0", "NULL|0"}));
}

} // namespace mx::sql::test
