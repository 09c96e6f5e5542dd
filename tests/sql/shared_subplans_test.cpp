// The optimizer pass shared_subplans: a CTE referenced more than once runs once and its readers
// scan the kept result. EXPLAIN shows the shared subplan once; the answers (tests/sql/logic/
// cte_shared.test has them from DuckDB) are the same with the pass off and in many small batches
// on several workers; the subplan delivers the union of the columns its readers read.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

using Rows = std::vector<std::string>;

constexpr const char *tables = R"sql(
CREATE TABLE t (k INTEGER, g INTEGER, v DECIMAL(8,2), s VARCHAR);
INSERT INTO t VALUES (1, 1, 10.00, 'a'), (2, 1, 20.50, 'bb'), (3, 2, 5.25, NULL), (4, 2, NULL, 'dd'),
  (5, 3, 7.00, 'e'), (6, 3, 7.00, 'ff'), (7, NULL, 1.00, 'g'), (8, 4, 30.00, 'hh'), (9, 4, -2.00, 'i'),
  (10, 5, 0.00, '');
CREATE TABLE u (g INTEGER, name VARCHAR);
INSERT INTO u VALUES (1, 'one'), (2, 'two'), (3, 'three'), (4, 'four'), (6, 'six');
)sql";

const char *const q15_like =
    "WITH r AS (SELECT g, sum(v) AS total FROM t GROUP BY g) SELECT u.g, u.name, r.total "
    "FROM u, r WHERE u.g = r.g AND r.total = (SELECT max(total) FROM r) ORDER BY u.g";

/// Queries whose CTEs are read more than once (ORDER BY makes every answer one row order).
const std::vector<std::string> &queries() {
    static const std::vector<std::string> list{
        q15_like,
        "WITH r AS (SELECT g, sum(v) AS total, count(*) AS n FROM t GROUP BY g) SELECT a.g, a.total, (SELECT "
        "count(*) FROM r WHERE n = 2) FROM r a WHERE a.total > (SELECT avg(total) FROM r) AND a.g IN (SELECT "
        "g "
        "FROM r WHERE n = 2) ORDER BY a.g",
        "WITH big AS (SELECT k, s FROM t WHERE v > 5) SELECT k, s FROM big WHERE EXISTS (SELECT 1 FROM big "
        "b2 "
        "WHERE b2.k = big.k + 1) ORDER BY k",
        "WITH a AS (SELECT g, sum(v) AS total FROM t WHERE g IS NOT NULL GROUP BY g), b AS (SELECT x.g, "
        "x.total, "
        "y.total AS next_total FROM a x, a y WHERE y.g = x.g + 1) SELECT b1.g, b1.total, b2.next_total FROM "
        "b b1 "
        "LEFT JOIN b b2 ON b2.g = b1.g + 1 ORDER BY b1.g",
        "WITH r AS (SELECT g, v FROM t WHERE v IS NOT NULL) SELECT x.g, sum(x.v), (SELECT count(DISTINCT g) "
        "FROM "
        "r) FROM r x JOIN u ON u.g = x.g GROUP BY x.g ORDER BY x.g",
        "WITH e AS (SELECT k, g FROM t WHERE k > 100) SELECT count(*), (SELECT count(*) FROM e) FROM e",
        "WITH c AS (SELECT k, g, s FROM t) SELECT c1.k, c1.s, c2.k, c2.s FROM c c1, c c2 WHERE c1.k = 2 AND "
        "c2.g = c1.g AND c2.k <> c1.k ORDER BY c2.k",
        "WITH c AS (SELECT k, s FROM t WHERE k <= 3) SELECT k, s FROM c UNION ALL SELECT k + 100, s FROM c "
        "ORDER "
        "BY 1",
        "WITH top AS (SELECT k, s FROM t WHERE v IS NOT NULL ORDER BY v DESC, k LIMIT 3) SELECT a.k, a.s "
        "FROM top "
        "a WHERE a.k IN (SELECT k FROM top) ORDER BY a.k",
        "WITH r AS (SELECT k, g, v FROM t) SELECT r.k, r.v FROM r WHERE r.v > (SELECT avg(v) FROM r r2 WHERE "
        "r2.g = r.g) ORDER BY r.k",
        "WITH c AS (SELECT g, s FROM t WHERE k < 9) SELECT g, s FROM c EXCEPT SELECT g, s FROM c WHERE g = 1 "
        "ORDER BY 1, 2",
        "WITH c AS (SELECT k, g, v FROM t WHERE v IS NOT NULL) SELECT k, rank() OVER (PARTITION BY g ORDER "
        "BY v "
        "DESC), (SELECT sum(v) FROM c) FROM c WHERE g < 3 ORDER BY k",
        "WITH c AS (WITH inner_c AS (SELECT k, g FROM t) SELECT i1.k, i2.g FROM inner_c i1, inner_c i2 WHERE "
        "i1.k = i2.k) SELECT count(*), (SELECT max(k) FROM c) FROM c",
    };
    return list;
}

DatabaseOptions with_pass(bool on) {
    DatabaseOptions options = tiny_batches();
    if (!on) {
        options.optimizer.disabled_passes.insert("shared_subplans");
    }
    return options;
}

std::size_t occurrences(const std::string &text, const std::string &what) {
    std::size_t count = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
        ++count;
    }
    return count;
}

/// The shared_scan nodes of a plan (the shared subplans are no children, so not searched).
void shared_scans(const db::PlanNode &node, std::vector<const db::PlanNode *> &out) {
    if (node.kind == db::PlanKind::shared_scan) {
        out.push_back(&node);
    }
    for (const auto &child : node.children) {
        shared_scans(*child, out);
    }
}

class SharedSubplansTest : public ::testing::Test {
protected:
    SharedSubplansTest()
        : _runtime(small_runtime_config(3)), _on(_runtime, with_pass(true)),
          _off(_runtime, with_pass(false)) {
        _on.execute(tables);
        _off.execute(tables);
    }

    tasking::Runtime _runtime;
    Database _on;
    Database _off;
};

} // namespace

TEST_F(SharedSubplansTest, ExplainShowsTheSharedSubplanOnce) {
    const std::string on = _on.explain(q15_like);
    EXPECT_EQ(occurrences(on, "Aggregate group by"), 1U) << on;
    EXPECT_EQ(occurrences(on, "Scan t "), 1U) << on;
    EXPECT_EQ(occurrences(on, "SharedScan #1"), 2U) << on;
    EXPECT_EQ(occurrences(on, "(below, computed once)"), 1U) << on;
    EXPECT_NE(on.find("shared subplan #1: CTE r is computed once for all its references"), std::string::npos)
        << on;
    EXPECT_NE(on.find("materialize"), std::string::npos) << on;
    const std::string off = _off.explain(q15_like);
    EXPECT_EQ(occurrences(off, "Aggregate group by"), 2U) << off;
    EXPECT_EQ(off.find("SharedScan"), std::string::npos) << off;
    EXPECT_NE(off.find("(off: shared_subplans)"), std::string::npos) << off;
}

TEST_F(SharedSubplansTest, ACteReferencedOnceStaysInlined) {
    const std::string sql = "WITH once AS (SELECT k, v FROM t) SELECT count(*) FROM once WHERE v > 1";
    const std::string text = _on.explain(sql);
    EXPECT_EQ(text.find("SharedScan"), std::string::npos) << text;
    // The condition reached the scan.
    EXPECT_NE(text.find("where (v > 1.00)"), std::string::npos) << text;
    EXPECT_EQ(rows_of(_on.query(sql)), (Rows{"6"}));
}

TEST_F(SharedSubplansTest, TheAnswersAreThoseWithoutSharing) {
    EXPECT_EQ(rows_of(_on.query(q15_like)), (Rows{"1|one|30.50"}));
    for (const std::string &sql : queries()) {
        SCOPED_TRACE(sql);
        EXPECT_NE(_on.explain(sql).find("SharedScan #1"), std::string::npos);
        const Rows expected = rows_of(_off.query(sql));
        EXPECT_EQ(rows_of(_on.query(sql)), expected);
        // Again: a second run of the same statement starts from a fresh graph.
        EXPECT_EQ(rows_of(_on.query(sql)), expected);
    }
}

// Each reader filters on its own and reads its own columns: the subplan delivers the union of
// the columns, and no reader's filter went into it.
TEST_F(SharedSubplansTest, TheSubplanDeliversTheUnionOfTheReadersColumns) {
    const std::string sql =
        "WITH c AS (SELECT k, g, v, s FROM t) SELECT c1.k, c2.s FROM c c1, c c2 WHERE c1.k = "
        "2 AND c2.g = c1.g AND c2.k <> c1.k";
    const db::PlanPtr plan = _on.plan(sql);
    std::vector<const db::PlanNode *> scans;
    shared_scans(*plan, scans);
    ASSERT_EQ(scans.size(), 2U);
    ASSERT_EQ(scans[0]->shared, scans[1]->shared);
    const db::PlanNode &subplan = *scans[0]->shared;
    std::vector<std::string> names;
    for (const auto &column : subplan.output) {
        names.push_back(column.name);
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (Rows{"g", "k", "s"})); // v is read by nobody
    const std::string text = _on.explain(sql);
    EXPECT_EQ(text.find("where"), std::string::npos) << text; // the scan of t keeps every row
    EXPECT_EQ(rows_of(_on.query(sql)), (Rows{"2|a"}));
}

TEST_F(SharedSubplansTest, ExplainAnalyzeCountsTheSubplanOnce) {
    const std::string text = _on.explain_analyze(q15_like);
    EXPECT_EQ(occurrences(text, "Aggregate group by"), 1U) << text;
    EXPECT_EQ(occurrences(text, "SharedScan #1"), 2U) << text;
    EXPECT_NE(text.find("Total: 1 rows"), std::string::npos) << text;
}

} // namespace mx::sql::test
