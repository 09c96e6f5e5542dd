// The optimizer pass decorrelate: correlated scalar subqueries (dependent joins) in WHERE, under
// OR, in SELECT and HAVING, with equality and other correlation, the count bug (an outer row
// without inner rows reads count() 0, not NULL), correlated EXISTS / IN / ANY / ALL whose
// subquery aggregates (dependent semi, anti and mark joins), subqueries that read columns two or
// more query levels up (the domain of the outer values joined in where they are read), what it
// does not unnest (clear errors), and the pass switched off (a clear error, EXPLAIN names it). The
// expected answers are DuckDB's for the same tables and queries.

#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

using Rows = std::vector<std::string>;

// t.id 1..4, t.g 10, 10, 20, NULL; u.k 1, 1, 3, NULL (no row for t.id 2 and 4).
void make_tables(Database &db) {
    db.execute("CREATE TABLE t (id INTEGER, g INTEGER); CREATE TABLE u (k INTEGER, v INTEGER);"
               "INSERT INTO t VALUES (1, 10), (2, 10), (3, 20), (4, NULL);"
               "INSERT INTO u VALUES (1, 5), (1, 7), (3, 2), (NULL, 4)");
}

// w.k 1, 3, 3, NULL, 5; w.g 10, 10, 20, 20, NULL: the third level.
void make_third_table(Database &db) {
    db.execute("CREATE TABLE w (k INTEGER, g INTEGER);"
               "INSERT INTO w VALUES (1, 10), (3, 10), (3, 20), (NULL, 20), (5, NULL)");
}

constexpr const char *nested_exists =
    "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id AND EXISTS "
    "(SELECT 1 FROM w WHERE w.k = u.k AND w.g = t.g)) ORDER BY id";

DatabaseOptions without_decorrelate() {
    DatabaseOptions options;
    options.optimizer.disabled_passes.emplace("decorrelate");
    return options;
}

class SqlDecorrelate : public ::testing::Test {
protected:
    SqlDecorrelate() : _runtime(small_runtime_config()), _db(_runtime) { make_tables(_db); }

    Rows rows(const std::string &sql) { return rows_of(_db.query(sql)); }
    std::string error(const std::string &sql) {
        try {
            _db.query(sql);
        } catch (const SqlError &e) {
            return e.message();
        }
        return "(no error)";
    }

    tasking::Runtime _runtime;
    Database _db;
};

} // namespace

TEST_F(SqlDecorrelate, CountOverNoRowsIsZero) {
    EXPECT_EQ(rows("SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id) FROM t ORDER BY id"),
              (Rows{"1|2", "2|0", "3|1", "4|0"}));
    EXPECT_EQ(rows("SELECT id, (SELECT count(v) + 10 FROM u WHERE u.k = t.id) FROM t ORDER BY id"),
              (Rows{"1|12", "2|10", "3|11", "4|10"}));
    // A WHERE comparison keeps the rows without inner rows when their count() compares true.
    EXPECT_EQ(rows("SELECT id FROM t WHERE (SELECT count(*) FROM u WHERE u.k = t.id) = 0 ORDER BY id"),
              (Rows{"2", "4"}));
    // Other aggregates read NULL there.
    EXPECT_EQ(rows("SELECT id, (SELECT sum(v) FROM u WHERE u.k = t.id) FROM t ORDER BY id"),
              (Rows{"1|12", "2|NULL", "3|2", "4|NULL"}));
    // HAVING that fails over no rows: NULL, not the count.
    EXPECT_EQ(
        rows("SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id HAVING count(*) > 1) FROM t ORDER BY id"),
        (Rows{"1|2", "2|NULL", "3|NULL", "4|NULL"}));
}

TEST_F(SqlDecorrelate, WhereOrSelectAndHaving) {
    EXPECT_EQ(rows("SELECT id FROM t WHERE 3 < (SELECT max(v) FROM u WHERE u.k = t.id) ORDER BY id"),
              (Rows{"1"}));
    EXPECT_EQ(
        rows("SELECT id FROM t WHERE id = 4 OR (SELECT count(*) FROM u WHERE u.k = t.id) = 2 ORDER BY id"),
        (Rows{"1", "4"}));
    // Above an aggregation the correlation reads the GROUP BY keys; an expression as the key.
    EXPECT_EQ(rows("SELECT g, (SELECT count(*) FROM u WHERE u.k * 10 = t.g) FROM t GROUP BY g ORDER BY g"),
              (Rows{"10|2", "20|0", "NULL|0"}));
    EXPECT_EQ(
        rows("SELECT g, count(*) FROM t GROUP BY g HAVING count(*) > (SELECT count(*) FROM u WHERE u.k * "
             "10 = t.g) ORDER BY g"),
        (Rows{"20|1", "NULL|1"}));
    // GROUP BY the correlation column: at most one row per outer row.
    EXPECT_EQ(rows("SELECT id, (SELECT sum(v) FROM u WHERE u.k = t.id GROUP BY u.k) FROM t ORDER BY id"),
              (Rows{"1|12", "2|NULL", "3|2", "4|NULL"}));
}

TEST_F(SqlDecorrelate, OtherConditionsUseTheDomainOfTheOuterValues) {
    EXPECT_EQ(rows("SELECT id, (SELECT count(*) FROM u WHERE u.k < t.id) FROM t ORDER BY id"),
              (Rows{"1|0", "2|2", "3|2", "4|3"}));
    // A NULL outer value still has rows (v = 4).
    EXPECT_EQ(rows("SELECT id, (SELECT count(*) FROM u WHERE u.k < t.g OR u.v = 4) FROM t ORDER BY id"),
              (Rows{"1|4", "2|4", "3|4", "4|1"}));
    const std::string text = _db.explain("SELECT id, (SELECT count(*) FROM u WHERE u.k < t.id) FROM t");
    EXPECT_NE(text.find("decorrelate: unnested 1 dependent join\n"), std::string::npos) << text;
}

TEST_F(SqlDecorrelate, ExplainNamesThePass) {
    const std::string sql = "SELECT id FROM t WHERE 3 < (SELECT max(v) FROM u WHERE u.k = t.id)";
    const std::string text = _db.explain(sql);
    EXPECT_NE(text.find("optimizer passes: decorrelate, shared_subplans, fold,"), std::string::npos) << text;
    EXPECT_NE(text.find("decorrelate: unnested 1 dependent join\n"), std::string::npos) << text;
    // Two subqueries, one nested in the other's select list.
    const std::string nested =
        _db.explain("SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id), (SELECT max(v) "
                    "FROM u WHERE u.k = t.g) FROM t");
    EXPECT_NE(nested.find("decorrelate: unnested 2 dependent joins\n"), std::string::npos) << nested;
    // Uncorrelated: nothing to unnest, no line.
    EXPECT_EQ(_db.explain("SELECT id FROM t WHERE id < (SELECT max(k) FROM u)").find("decorrelate:"),
              std::string::npos);
}

TEST_F(SqlDecorrelate, ExistsOverAnAggregation) {
    // Grouped or with a HAVING that fails over no rows: the groups of the correlation values.
    EXPECT_EQ(rows("SELECT id FROM t WHERE EXISTS (SELECT u.k FROM u WHERE u.k = t.id GROUP BY u.k HAVING "
                   "count(*) > 1) ORDER BY id"),
              (Rows{"1"}));
    EXPECT_EQ(rows("SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k <= t.id HAVING sum(v) > 10) "
                   "ORDER BY id"),
              (Rows{}));
    EXPECT_EQ(
        rows("SELECT id, EXISTS (SELECT 1 FROM u WHERE u.k < t.id HAVING max(v) > 5) FROM t ORDER BY id"),
        (Rows{"1|false", "2|true", "3|true", "4|true"}));
    // An aggregate without GROUP BY and HAVING has a row for every outer row.
    EXPECT_EQ(rows("SELECT id FROM t WHERE EXISTS (SELECT count(*) FROM u WHERE u.k = t.id) ORDER BY id"),
              (Rows{"1", "2", "3", "4"}));
    EXPECT_EQ(rows("SELECT id, NOT EXISTS (SELECT sum(v) FROM u WHERE u.k = t.id) FROM t ORDER BY id"),
              (Rows{"1|false", "2|false", "3|false", "4|false"}));
    // Above the aggregation the correlation reads the GROUP BY key.
    EXPECT_EQ(rows("SELECT g, count(*) FROM t GROUP BY g HAVING EXISTS (SELECT 1 FROM u WHERE u.k * 10 < t.g "
                   "HAVING count(*) >= 2) ORDER BY g"),
              (Rows{"20|1"}));
    // DISTINCT and ORDER BY do not change whether rows exist: a plain semi join, no dependent join.
    const std::string distinct = "SELECT id FROM t WHERE EXISTS (SELECT DISTINCT v FROM u WHERE u.k < t.id)";
    EXPECT_EQ(rows(distinct + " ORDER BY id"), (Rows{"2", "3", "4"}));
    EXPECT_EQ(_db.explain(distinct).find("decorrelate:"), std::string::npos);
}

TEST_F(SqlDecorrelate, ExistsIgnoresLimitOfSomeRows) {
    // EXISTS asks for one row: LIMIT 1 keeps the plain semi join (no dependent join).
    const std::string sql = "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id LIMIT 1)";
    EXPECT_EQ(rows(sql + " ORDER BY id"), (Rows{"1", "3"}));
    EXPECT_EQ(_db.explain(sql).find("decorrelate:"), std::string::npos);
}

TEST_F(SqlDecorrelate, InAnyAllOverAnAggregation) {
    EXPECT_EQ(rows("SELECT id FROM t WHERE id IN (SELECT count(*) FROM u WHERE u.k <= t.id GROUP BY u.k) "
                   "ORDER BY id"),
              (Rows{"2"}));
    EXPECT_EQ(rows("SELECT id FROM t WHERE id NOT IN (SELECT count(*) FROM u WHERE u.k = t.id GROUP BY u.k) "
                   "ORDER BY id"),
              (Rows{"1", "2", "3", "4"}));
    // Three-valued: a NULL operand with rows is NULL.
    EXPECT_EQ(rows("SELECT id, g / 10 IN (SELECT count(*) FROM u WHERE u.k <= t.id GROUP BY u.k) FROM t "
                   "ORDER BY id"),
              (Rows{"1|false", "2|false", "3|true", "4|NULL"}));
    // A NULL correlation value compares NULL-safe with the domain of the outer values.
    EXPECT_EQ(rows("SELECT id, id NOT IN (SELECT max(v) - 4 FROM u WHERE u.k IS NOT DISTINCT FROM t.id OR "
                   "u.v < t.id GROUP BY u.k) FROM t ORDER BY id"),
              (Rows{"1|true", "2|true", "3|true", "4|true"}));
    EXPECT_EQ(
        rows("SELECT id, id < ALL (SELECT sum(v) FROM u WHERE u.k <> t.id GROUP BY u.k) FROM t ORDER BY id"),
        (Rows{"1|true", "2|false", "3|true", "4|false"}));
    EXPECT_EQ(rows("SELECT id, id = ANY (SELECT sum(v) - 9 FROM u WHERE u.k = t.id GROUP BY u.k) FROM t "
                   "ORDER BY id"),
              (Rows{"1|false", "2|false", "3|false", "4|false"}));
}

TEST_F(SqlDecorrelate, ExplainNamesTheDependentSemiJoins) {
    const std::string text = _db.explain("SELECT id FROM t WHERE EXISTS (SELECT u.k FROM u WHERE u.k = t.id "
                                         "GROUP BY u.k HAVING count(*) > 1)");
    EXPECT_NE(text.find("decorrelate: unnested 1 dependent join\n"), std::string::npos) << text;
    // IN as a value over a nullable subquery: matched, has NULL and has rows, three marks.
    const std::string marks =
        _db.explain("SELECT id, g IN (SELECT count(*) FROM u WHERE u.k <= t.id GROUP BY u.k) FROM t");
    EXPECT_NE(marks.find("decorrelate: unnested 2 dependent joins\n"), std::string::npos) << marks;
    // A plain correlated EXISTS stays a semi join without the pass.
    EXPECT_EQ(
        _db.explain("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k < t.id)").find("decorrelate:"),
        std::string::npos);
}

TEST_F(SqlDecorrelate, WhatItCannotUnnestIsAClearError) {
    EXPECT_NE(error("SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id LIMIT 1) FROM t")
                  .find("LIMIT or OFFSET (in a correlated subquery) is not supported"),
              std::string::npos);
    EXPECT_NE(error("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id OFFSET 1)")
                  .find("LIMIT or OFFSET (in a correlated subquery) is not supported"),
              std::string::npos);
    EXPECT_NE(error("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id HAVING count(*) < 2)")
                  .find("EXISTS, IN or ANY/ALL over an aggregate without GROUP BY whose HAVING holds for no "
                        "rows (in a correlated subquery) is not supported"),
              std::string::npos);
    EXPECT_NE(error("SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id GROUP BY u.v) FROM t")
                  .find("correlated scalar subqueries may GROUP BY only their correlation columns"),
              std::string::npos);
}

TEST_F(SqlDecorrelate, ReferencesTwoLevelsUp) {
    make_third_table(_db);
    EXPECT_EQ(rows(nested_exists), (Rows{"1", "3"}));
    // count() over an outer row without inner rows is 0 (t.id 2 and 4).
    EXPECT_EQ(rows("SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id AND EXISTS (SELECT 1 FROM w WHERE "
                   "w.k = u.k AND w.g = t.g)) FROM t ORDER BY id"),
              (Rows{"1|2", "2|0", "3|1", "4|0"}));
    // A scalar subquery that reads only the outermost query, inside the middle one: a count()
    // over no rows is 0 there too (t.g NULL).
    EXPECT_EQ(rows("SELECT id, (SELECT count(*) FROM u WHERE u.v > (SELECT count(*) FROM w WHERE w.g = t.g)) "
                   "FROM t ORDER BY id"),
              (Rows{"1|3", "2|3", "3|3", "4|4"}));
    EXPECT_EQ(rows("SELECT id, (SELECT sum(v) FROM u WHERE u.k <= (SELECT count(*) FROM w WHERE w.g = t.g)) "
                   "FROM t ORDER BY id"),
              (Rows{"1|12", "2|12", "3|12", "4|NULL"}));
    // The outer reference under OR, with a NULL outer value.
    EXPECT_EQ(rows("SELECT id, (SELECT count(*) FROM u WHERE EXISTS (SELECT 1 FROM w WHERE w.k = u.k AND "
                   "(w.g = t.g OR t.g IS NULL))) FROM t ORDER BY id"),
              (Rows{"1|3", "2|3", "3|1", "4|3"}));
}

TEST_F(SqlDecorrelate, InAnyAllTwoLevelsUp) {
    make_third_table(_db);
    EXPECT_EQ(rows("SELECT id, g IN (SELECT w.g FROM w WHERE w.k IN (SELECT u.k FROM u WHERE u.v > t.id)) "
                   "FROM t ORDER BY id"),
              (Rows{"1|true", "2|true", "3|false", "4|NULL"}));
    EXPECT_EQ(rows("SELECT id, g NOT IN (SELECT w.g FROM w WHERE EXISTS (SELECT 1 FROM u WHERE u.k = w.k AND "
                   "u.v < t.id * 3)) FROM t ORDER BY id"),
              (Rows{"1|false", "2|false", "3|false", "4|NULL"}));
    EXPECT_EQ(rows("SELECT id, g > ALL (SELECT w.g FROM w WHERE w.k = (SELECT max(u.k) FROM u WHERE u.v >= "
                   "t.id)) FROM t ORDER BY id"),
              (Rows{"1|false", "2|false", "3|true", "4|NULL"}));
}

TEST_F(SqlDecorrelate, ThreeLevels) {
    make_third_table(_db);
    const std::string sql =
        "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id AND EXISTS (SELECT "
        "1 FROM w WHERE w.k = u.k AND EXISTS (SELECT 1 FROM u AS x WHERE x.k = w.k AND x.v > "
        "t.g - 8))) ORDER BY id";
    EXPECT_EQ(rows(sql), (Rows{"1"}));
    // The innermost subquery and the middle one each become a dependent join.
    const std::string text = _db.explain(sql);
    EXPECT_NE(text.find("decorrelate: unnested 2 dependent joins\n"), std::string::npos) << text;
}

TEST_F(SqlDecorrelate, NestedFormsItCannotUnnestAreAClearError) {
    make_third_table(_db);
    EXPECT_NE(
        error("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id AND u.v > (SELECT max(w.g) "
              "FROM w WHERE w.k = u.k AND w.g > t.g LIMIT 1))")
            .find("LIMIT or OFFSET (in a correlated subquery) is not supported"),
        std::string::npos);
    EXPECT_NE(
        error("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE EXISTS (SELECT w.k FROM w WHERE w.g = "
              "t.g UNION SELECT k FROM u))")
            .find("correlated subqueries are not supported here"),
        std::string::npos);
    EXPECT_NE(
        error("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.v IN (SELECT row_number() OVER () "
              "FROM w WHERE w.g = t.g))")
            .find("window functions in correlated subqueries are not supported"),
        std::string::npos);
}

TEST(SqlDecorrelateOff, CorrelatedScalarSubqueriesAreAClearError) {
    tasking::Runtime runtime(small_runtime_config());
    Database off(runtime, without_decorrelate());
    make_tables(off);
    const std::string sql = "SELECT id, (SELECT count(*) FROM u WHERE u.k = t.id) FROM t ORDER BY id";
    try {
        off.query(sql);
        FAIL() << "a dependent join ran without decorrelate";
    } catch (const SqlError &error) {
        EXPECT_NE(error.message().find("a correlated subquery (a dependent join) needs the optimizer pass "
                                       "'decorrelate', which is switched off"),
                  std::string::npos)
            << error.message();
    }
    EXPECT_THROW(off.explain(sql), SqlError);
    // So is a correlated EXISTS over an aggregation; a plain one is a semi join and runs.
    try {
        off.query("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id HAVING count(*) > 1)");
        FAIL() << "a dependent semi join ran without decorrelate";
    } catch (const SqlError &error) {
        EXPECT_NE(error.message().find("'decorrelate', which is switched off"), std::string::npos)
            << error.message();
    }
    // Everything else runs, and EXPLAIN names the pass as off.
    EXPECT_EQ(rows_of(off.query("SELECT id FROM t WHERE id < (SELECT max(k) FROM u) ORDER BY id")),
              (Rows{"1", "2"}));
    EXPECT_EQ(
        rows_of(off.query("SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.id) ORDER BY id")),
        (Rows{"1", "3"}));
    EXPECT_NE(off.explain("SELECT id FROM t").find("(off: decorrelate)\n"), std::string::npos);
}

TEST(SqlDecorrelateOff, ReferencesTwoLevelsUpAreAClearError) {
    tasking::Runtime runtime(small_runtime_config());
    Database off(runtime, without_decorrelate());
    make_tables(off);
    make_third_table(off);
    try {
        off.query(nested_exists);
        FAIL() << "a nested correlated subquery ran without decorrelate";
    } catch (const SqlError &error) {
        EXPECT_NE(error.message().find("'decorrelate', which is switched off"), std::string::npos)
            << error.message();
    }
    // With the pass on, the same database answers it.
    Database on(runtime);
    make_tables(on);
    make_third_table(on);
    EXPECT_EQ(rows_of(on.query(nested_exists)), (Rows{"1", "3"}));
}

} // namespace mx::sql::test
