// Optimizer decisions, checked on the physical plan: predicate pushdown, constant folding,
// column pruning, join order and build sides by estimated size, join choices, estimates, the
// subquery rewrites, and what EXPLAIN shows.

#include <cstdint>
#include <string>
#include <vector>

#include <mx/db/expression.h>
#include <mx/db/table.h>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

void collect(const db::PlanNode &node, db::PlanKind kind, std::vector<const db::PlanNode *> &out) {
    if (node.kind == kind) {
        out.push_back(&node);
    }
    for (const auto &child : node.children) {
        collect(*child, kind, out);
    }
}

std::vector<const db::PlanNode *> nodes(const db::PlanNode &root, db::PlanKind kind) {
    std::vector<const db::PlanNode *> out;
    collect(root, kind, out);
    return out;
}

const db::PlanNode &scan_of(const db::PlanNode &root, const std::string &table) {
    for (const auto *scan : nodes(root, db::PlanKind::scan)) {
        if (scan->table->name() == table) {
            return *scan;
        }
    }
    throw std::runtime_error("no scan of " + table);
}

std::string values(int rows, const std::function<std::string(int)> &row) {
    std::string text;
    for (int i = 0; i < rows; ++i) {
        text.append(i > 0 ? ", (" : "(").append(row(i)).push_back(')');
    }
    return text;
}

} // namespace

/// The tables are loaded once for the suite (thousands of inserted rows are slow under ASan);
/// the tests only read them.
class OptimizerTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        _runtime = new tasking::Runtime(small_runtime_config());
        _db = new Database(*_runtime);
        // big: 2000 rows, k unique; mid: 200 rows, k unique, j in 0..19; small: 20 rows.
        _db->execute("CREATE TABLE big (k INTEGER NOT NULL, v INTEGER NOT NULL, j INTEGER NOT NULL);"
                     "CREATE TABLE mid (k INTEGER NOT NULL, j INTEGER NOT NULL);"
                     "CREATE TABLE small (j INTEGER NOT NULL, w VARCHAR(10) NOT NULL)");
        _db->execute("INSERT INTO big VALUES " + values(2000, [](int i) {
                         return std::to_string(i) + ", " + std::to_string(i % 100) + ", " +
                                std::to_string(i % 20);
                     }));
        _db->execute("INSERT INTO mid VALUES " +
                     values(200, [](int i) { return std::to_string(i) + ", " + std::to_string(i % 20); }));
        _db->execute("INSERT INTO small VALUES " +
                     values(20, [](int i) { return std::to_string(i) + ", 'w" + std::to_string(i) + "'"; }));
    }
    static void TearDownTestSuite() {
        delete _db;
        delete _runtime;
        _db = nullptr;
        _runtime = nullptr;
    }

    std::vector<std::string> rows(const std::string &sql) { return rows_of(db.query(sql)); }

    static inline tasking::Runtime *_runtime = nullptr;
    static inline Database *_db = nullptr;
    Database &db = *_db;
};

TEST_F(OptimizerTest, PredicatesArePushedIntoScans) {
    const auto plan =
        db.plan("SELECT b.v FROM big b JOIN small s ON b.j = s.j WHERE s.w = 'w3' AND b.v > 10");
    EXPECT_TRUE(nodes(*plan, db::PlanKind::filter).empty());
    const auto &big = scan_of(*plan, "big");
    ASSERT_NE(big.predicate, nullptr);
    EXPECT_EQ(db::to_string(*big.predicate), "(v > 10)");
    const auto &small = scan_of(*plan, "small");
    ASSERT_NE(small.predicate, nullptr);
    EXPECT_EQ(db::to_string(*small.predicate), "(w = 'w3')");
    // Through a derived table and below an aggregation's group key.
    const auto derived = db.plan("SELECT * FROM (SELECT k, v FROM big) AS t WHERE t.k = 5");
    ASSERT_NE(scan_of(*derived, "big").predicate, nullptr);
    const auto grouped =
        db.plan("SELECT * FROM (SELECT j, count(*) AS c FROM big GROUP BY j) AS t WHERE j < 3 AND c > 1");
    ASSERT_NE(scan_of(*grouped, "big").predicate, nullptr);
    EXPECT_EQ(db::to_string(*scan_of(*grouped, "big").predicate), "(j < 3)");
    EXPECT_EQ(nodes(*grouped, db::PlanKind::filter).size(), 1U); // c > 1 stays above the aggregation
    // Into the preserved side of an outer join, not into the nullable side.
    const auto outer =
        db.plan("SELECT * FROM mid m LEFT JOIN small s ON m.j = s.j WHERE m.k < 10 AND s.w IS NULL");
    ASSERT_NE(scan_of(*outer, "mid").predicate, nullptr);
    EXPECT_EQ(scan_of(*outer, "small").predicate, nullptr);
    EXPECT_EQ(db.query("SELECT count(*) FROM mid m LEFT JOIN small s ON m.j = s.j AND s.j < 5 WHERE m.k < 10 "
                       "AND s.w IS NULL")
                  .rows[0][0]
                  .i64,
              5);
}

TEST_F(OptimizerTest, ConstantsAreFolded) {
    const auto plan =
        db.plan("SELECT k FROM big WHERE 1 = 1 AND k > 2 + 3 AND date '2020-01-01' + interval '1' day "
                "> date '2020-01-01'");
    const auto &scan = scan_of(*plan, "big");
    ASSERT_NE(scan.predicate, nullptr);
    EXPECT_EQ(db::to_string(*scan.predicate), "(k > 5)");
    EXPECT_EQ(scan_of(*db.plan("SELECT k FROM big WHERE 1 = 1"), "big").predicate, nullptr);
    EXPECT_EQ(rows("SELECT count(*) FROM big WHERE 1 = 0"), (Rows{"0"}));
}

TEST_F(OptimizerTest, ConditionsSharedByAllBranchesOfAnOrAreFactoredOut) {
    // TPC-H Q19's shape: the join key hides in every branch of an OR.
    const std::string sql = "SELECT count(*) FROM big b, small s WHERE (b.j = s.j AND s.w = 'w1') OR "
                            "(b.j = s.j AND b.v = 3)";
    const auto plan = db.plan(sql);
    const auto joins = nodes(*plan, db::PlanKind::hash_join);
    ASSERT_EQ(joins.size(), 1U);
    ASSERT_EQ(joins[0]->probe_keys.size(), 1U);
    EXPECT_EQ(db::to_string(*joins[0]->probe_keys[0]), "j");
    ASSERT_NE(joins[0]->residual, nullptr);
    // Each table gets the part of the OR it can check alone only when every branch has one.
    EXPECT_EQ(scan_of(*plan, "big").predicate, nullptr);
    const auto implied =
        db.plan("SELECT count(*) FROM big b, small s WHERE (b.j = s.j AND s.w = 'w1' AND b.v = 1) OR "
                "(b.j = s.j AND s.w = 'w3' AND b.v = 3)");
    ASSERT_NE(scan_of(*implied, "big").predicate, nullptr);
    EXPECT_EQ(db::to_string(*scan_of(*implied, "big").predicate), "((v = 1) OR (v = 3))");
    EXPECT_EQ(rows(sql), (Rows{"120"}));
    EXPECT_EQ(rows("SELECT count(*) FROM big b, small s WHERE (b.j = s.j AND s.w = 'w1' AND b.v = 1) OR "
                   "(b.j = s.j AND s.w = 'w3' AND b.v = 3)"),
              (Rows{"40"}));
}

TEST_F(OptimizerTest, OnlyNeededColumnsAreScanned) {
    const auto plan = db.plan("SELECT v FROM big");
    EXPECT_EQ(scan_of(*plan, "big").scan_columns, (std::vector<std::uint32_t>{1}));
    const auto joined = db.plan("SELECT s.w FROM big b JOIN small s ON b.j = s.j WHERE b.v = 3");
    EXPECT_EQ(scan_of(*joined, "big").scan_columns, (std::vector<std::uint32_t>{1, 2}));
    EXPECT_EQ(scan_of(*joined, "small").scan_columns, (std::vector<std::uint32_t>{0, 1}));
    EXPECT_EQ(scan_of(*db.plan("SELECT count(*) FROM big"), "big").scan_columns.size(), 1U);
}

TEST_F(OptimizerTest, TheSmallerInputIsTheBuildSide) {
    for (const char *sql : {"SELECT count(*) FROM small s JOIN big b ON s.j = b.j",
                            "SELECT count(*) FROM big b JOIN small s ON s.j = b.j",
                            "SELECT count(*) FROM big b, small s WHERE s.j = b.j"}) {
        SCOPED_TRACE(sql);
        const auto plan = db.plan(sql);
        const auto joins = nodes(*plan, db::PlanKind::hash_join);
        ASSERT_EQ(joins.size(), 1U);
        EXPECT_EQ(table_under(*joins[0]->children[0]), "big");   // probe
        EXPECT_EQ(table_under(*joins[0]->children[1]), "small"); // build
        // Radix or not is the executor's choice from the actual build rows.
        EXPECT_EQ(joins[0]->join_strategy, db::JoinStrategy::automatic);
        EXPECT_EQ(rows(sql), (Rows{"2000"}));
    }
    // A filter can make the larger table the smaller input.
    const auto filtered = db.plan("SELECT count(*) FROM big b JOIN small s ON s.j = b.j WHERE b.k < 5");
    const auto joins = nodes(*filtered, db::PlanKind::hash_join);
    ASSERT_EQ(joins.size(), 1U);
    EXPECT_EQ(table_under(*joins[0]->children[1]), "big");
    EXPECT_LT(joins[0]->children[1]->estimated_rows, 20.0);
}

TEST_F(OptimizerTest, JoinOrderFollowsEstimatedCardinalities) {
    // mid x small (filtered to 5 rows) is the smallest join result (about 50 rows); big joins last
    // and probes, the result of the first join is built.
    const std::string sql = "SELECT count(*) FROM big, mid, small WHERE big.k = mid.k AND mid.j = small.j "
                            "AND small.j < 5";
    const auto plan = db.plan(sql);
    const auto joins = nodes(*plan, db::PlanKind::hash_join);
    ASSERT_EQ(joins.size(), 2U);
    const db::PlanNode &top = *joins[0];
    EXPECT_EQ(table_under(*top.children[0]), "big");
    const auto inner = nodes(*top.children[1], db::PlanKind::hash_join);
    ASSERT_EQ(inner.size(), 1U);
    EXPECT_EQ(table_under(*inner[0]->children[0]), "mid");
    EXPECT_EQ(table_under(*inner[0]->children[1]), "small");
    EXPECT_NEAR(inner[0]->estimated_rows, 50.0, 10.0);
    // Same plan whatever the FROM order.
    const auto reordered =
        db.plan("SELECT count(*) FROM small, big, mid WHERE mid.j = small.j AND big.k = mid.k "
                "AND small.j < 5");
    const auto reordered_joins = nodes(*reordered, db::PlanKind::hash_join);
    ASSERT_EQ(reordered_joins.size(), 2U);
    EXPECT_EQ(table_under(*reordered_joins[0]->children[0]), "big");
    EXPECT_EQ(rows(sql), (Rows{"50"}));
}

TEST_F(OptimizerTest, KeysOfSeveralColumnsIntoASmallerTableCountAsForeignKeys) {
    // Every big row (v, j = v % 20) has exactly one mid row (k = v, j): 2000 rows. Independence
    // alone makes big's (v, j) combinations as many as its rows (2000 against mid's 200) and
    // estimates 200; each of big's key columns has no more distinct values than its partner in
    // mid, so big's combinations count as a subset of mid's.
    const std::string sql = "SELECT count(*) FROM big b JOIN mid m ON b.v = m.k AND b.j = m.j";
    const auto plan = db.plan(sql);
    const auto joins = nodes(*plan, db::PlanKind::hash_join);
    ASSERT_EQ(joins.size(), 1U);
    EXPECT_NEAR(joins[0]->estimated_rows, 2000.0, 200.0);
    EXPECT_EQ(rows(sql), (Rows{"2000"}));
    // Columns with more distinct values than their partners are no foreign key: big.k (2000)
    // against mid.k (200) keeps the independent estimate.
    const auto other_plan = db.plan("SELECT count(*) FROM big b JOIN mid m ON b.k = m.k AND b.j = m.j");
    const auto other = nodes(*other_plan, db::PlanKind::hash_join);
    ASSERT_EQ(other.size(), 1U);
    EXPECT_NEAR(other[0]->estimated_rows, 200.0, 20.0);
}

TEST_F(OptimizerTest, EstimatesComeFromStatistics) {
    const auto plan = db.plan("SELECT k FROM big WHERE k < 100");
    EXPECT_NEAR(scan_of(*plan, "big").estimated_rows, 100.0, 1.0);
    EXPECT_NEAR(scan_of(*db.plan("SELECT k FROM big WHERE k BETWEEN 100 AND 299"), "big").estimated_rows,
                200.0, 1.0);
    EXPECT_NEAR(scan_of(*db.plan("SELECT k FROM big WHERE j = 7"), "big").estimated_rows, 100.0, 5.0);
    const auto grouped = db.plan("SELECT j, count(*) FROM big GROUP BY j");
    EXPECT_NEAR(nodes(*grouped, db::PlanKind::aggregate)[0]->estimated_rows, 20.0, 1.0);
    // Every node has an estimate.
    const auto query = db.plan("SELECT s.w, sum(b.v) FROM big b JOIN small s ON b.j = s.j GROUP BY s.w "
                               "ORDER BY 2 DESC LIMIT 3");
    std::vector<const db::PlanNode *> all;
    for (auto kind :
         {db::PlanKind::scan, db::PlanKind::filter, db::PlanKind::project, db::PlanKind::hash_join,
          db::PlanKind::aggregate, db::PlanKind::sort, db::PlanKind::limit}) {
        for (const auto *node : nodes(*query, kind)) {
            EXPECT_GE(node->estimated_rows, 0.0);
        }
    }
}

TEST_F(OptimizerTest, OperatorShapes) {
    // ORDER BY + LIMIT is a top-N sort, DISTINCT an aggregation, HAVING a filter above it.
    const auto top = db.plan("SELECT k FROM big ORDER BY v DESC, k LIMIT 5 OFFSET 2");
    ASSERT_EQ(nodes(*top, db::PlanKind::sort).size(), 1U);
    EXPECT_EQ(nodes(*top, db::PlanKind::sort)[0]->limit, std::optional<std::uint64_t>(5));
    EXPECT_EQ(nodes(*top, db::PlanKind::sort)[0]->offset, 2U);
    EXPECT_TRUE(nodes(*top, db::PlanKind::limit).empty());
    EXPECT_EQ(rows("SELECT k FROM big ORDER BY v DESC, k LIMIT 5 OFFSET 2"),
              (Rows{"299", "399", "499", "599", "699"}));
    const auto distinct = db.plan("SELECT DISTINCT j FROM big");
    ASSERT_EQ(nodes(*distinct, db::PlanKind::aggregate).size(), 1U);
    EXPECT_TRUE(nodes(*distinct, db::PlanKind::aggregate)[0]->aggregates.empty());
    const auto having = db.plan("SELECT j FROM big GROUP BY j HAVING sum(v) > 100");
    ASSERT_EQ(nodes(*having, db::PlanKind::filter).size(), 1U);
    EXPECT_EQ(nodes(*having, db::PlanKind::filter)[0]->children[0]->kind, db::PlanKind::aggregate);
}

TEST_F(OptimizerTest, SubqueriesBecomeJoins) {
    const auto exists =
        db.plan("SELECT count(*) FROM small s WHERE EXISTS (SELECT * FROM mid m WHERE m.j = s.j)");
    ASSERT_EQ(nodes(*exists, db::PlanKind::hash_join).size(), 1U);
    // small has far fewer rows than mid: the outer side is hashed (a right semi join).
    EXPECT_EQ(nodes(*exists, db::PlanKind::hash_join)[0]->join_kind, db::JoinKind::right_semi);
    const auto not_in =
        db.plan("SELECT count(*) FROM small WHERE j NOT IN (SELECT j FROM mid WHERE k > 100)");
    ASSERT_EQ(nodes(*not_in, db::PlanKind::hash_join).size(), 1U); // NOT NULL columns: no NULL check
    EXPECT_EQ(nodes(*not_in, db::PlanKind::hash_join)[0]->join_kind, db::JoinKind::right_anti);
    // An uncorrelated scalar subquery is a one-row build side.
    const auto scalar = db.plan("SELECT count(*) FROM big WHERE v > (SELECT avg(v) FROM big)");
    const auto joins = nodes(*scalar, db::PlanKind::hash_join);
    ASSERT_EQ(joins.size(), 1U);
    EXPECT_EQ(joins[0]->children[1]->kind == db::PlanKind::aggregate ||
                  !nodes(*joins[0]->children[1], db::PlanKind::aggregate).empty(),
              true);
    EXPECT_EQ(rows("SELECT count(*) FROM big WHERE v > (SELECT avg(v) FROM big)"), (Rows{"1000"}));
    // A correlated one joins an aggregation grouped by the correlation key.
    const auto correlated =
        db.plan("SELECT count(*) FROM mid m WHERE m.k = (SELECT max(k) FROM mid m2 WHERE m2.j = m.j)");
    EXPECT_EQ(nodes(*correlated, db::PlanKind::aggregate).size(), 2U);
    EXPECT_EQ(rows("SELECT count(*) FROM mid m WHERE m.k = (SELECT max(k) FROM mid m2 WHERE m2.j = m.j)"),
              (Rows{"20"}));
}

TEST_F(OptimizerTest, SubqueriesOutsideWhereConjunctsBecomeMarkJoins) {
    // EXISTS under OR: a mark join that keeps every probe row and adds the BOOLEAN column.
    const std::string sql =
        "SELECT count(*) FROM small s WHERE s.w = 'a' OR EXISTS (SELECT * FROM mid m WHERE m.j = s.j)";
    const auto plan = db.plan(sql);
    const auto joins = nodes(*plan, db::PlanKind::hash_join);
    ASSERT_EQ(joins.size(), 1U);
    EXPECT_EQ(joins[0]->join_kind, db::JoinKind::mark);
    EXPECT_EQ(joins[0]->output.back().type.id, db::TypeId::boolean);
    EXPECT_FALSE(joins[0]->output.back().nullable);
    const std::string explained = db.explain(sql);
    EXPECT_NE(explained.find("HashJoin mark"), std::string::npos) << explained;
    EXPECT_EQ(
        rows(sql),
        rows("SELECT count(*) FROM small s WHERE EXISTS (SELECT * FROM mid m WHERE m.j = s.j) OR s.w = 'a'"));
    // IN over NOT NULL columns in the select list: one mark join, no NULL checks.
    const auto in = db.plan("SELECT w, j IN (SELECT j FROM mid WHERE k > 100) FROM small");
    ASSERT_EQ(nodes(*in, db::PlanKind::hash_join).size(), 1U);
    EXPECT_EQ(nodes(*in, db::PlanKind::hash_join)[0]->join_kind, db::JoinKind::mark);
    // A plain WHERE conjunct keeps its semi join (hashing the smaller outer side here).
    const auto plain =
        db.plan("SELECT count(*) FROM small s WHERE EXISTS (SELECT * FROM mid m WHERE m.j = s.j)");
    EXPECT_EQ(nodes(*plain, db::PlanKind::hash_join)[0]->join_kind, db::JoinKind::right_semi);
    // x > ALL over an uncorrelated subquery compares with its min/max: an aggregate, no mark join.
    const auto all = db.plan("SELECT count(*) FROM small WHERE j > ALL (SELECT k FROM mid WHERE j = 1)");
    for (const db::PlanNode *join : nodes(*all, db::PlanKind::hash_join)) {
        EXPECT_NE(join->join_kind, db::JoinKind::mark);
    }
}

TEST_F(OptimizerTest, BloomFiltersWhereFewProbeRowsMatch) {
    const auto selective = db.plan("SELECT count(*) FROM big b JOIN small s ON b.j = s.j WHERE s.j = 1");
    EXPECT_TRUE(nodes(*selective, db::PlanKind::hash_join)[0]->bloom_filter);
    const auto all_match = db.plan("SELECT count(*) FROM big b JOIN small s ON b.j = s.j");
    EXPECT_FALSE(nodes(*all_match, db::PlanKind::hash_join)[0]->bloom_filter);
}

TEST_F(OptimizerTest, ExplainShowsPlanEstimatesAndPrefetchStrategy) {
    const auto result = db.execute("EXPLAIN SELECT v FROM big WHERE k = 7");
    ASSERT_EQ(result.statements.size(), 1U);
    EXPECT_EQ(result.last().kind, StatementKind::explain);
    const std::string &text = result.last().text;
    EXPECT_NE(text.find("big"), std::string::npos) << text;
    EXPECT_NE(text.find("rows=1"), std::string::npos) << text;
    EXPECT_NE(text.find("pipeline"), std::string::npos) << text;
    // What the scan does, from the plan's ScanPrefetch fields.
    EXPECT_NE(text.find("prefetch=[k: whole column, v: 2 lines]"), std::string::npos) << text;
    const std::string wide = db.explain("SELECT v FROM big WHERE k > 7");
    EXPECT_NE(wide.find("prefetch=[k: 2 lines, v: 2 lines]"), std::string::npos) << wide;
}

TEST_F(OptimizerTest, SelectivePredicateColumnsArePrefetchedEntirely) {
    using db::ScanPrefetch;
    // k = 7 keeps 1 of 2000 rows: highly selective, so k (read for every row) is prefetched
    // entirely; v, read for the one surviving row, only its first lines.
    const auto selective = db.plan("SELECT v FROM big WHERE k = 7");
    const db::PlanNode &scan = scan_of(*selective, "big");
    ASSERT_EQ(scan.scan_columns, (std::vector<std::uint32_t>{0, 1}));
    EXPECT_EQ(scan.scan_prefetch,
              (std::vector<ScanPrefetch>{ScanPrefetch::whole_column, ScanPrefetch::first_lines}));
    // Two predicate columns, both selective together.
    const auto both = db.plan("SELECT v FROM big WHERE k < 40 AND j = 3");
    const db::PlanNode &scan2 = scan_of(*both, "big");
    ASSERT_EQ(scan2.scan_columns, (std::vector<std::uint32_t>{0, 1, 2}));
    EXPECT_EQ(scan2.scan_prefetch,
              (std::vector<ScanPrefetch>{ScanPrefetch::whole_column, ScanPrefetch::first_lines,
                                         ScanPrefetch::whole_column}));
    // Not selective (k > 7 keeps almost every row), or no predicate: first lines everywhere.
    for (const char *sql : {"SELECT v FROM big WHERE k > 7", "SELECT k, v FROM big"}) {
        const auto plan = db.plan(sql);
        const db::PlanNode &wide = scan_of(*plan, "big");
        EXPECT_EQ(wide.scan_prefetch,
                  std::vector<ScanPrefetch>(wide.scan_columns.size(), ScanPrefetch::first_lines))
            << sql;
    }
    // The answer does not depend on the strategy.
    EXPECT_EQ(rows("SELECT v FROM big WHERE k = 7"), (Rows{"7"}));
}

} // namespace mx::sql::test
