// User errors: each names the problem and its place in the text (1-based character, line and
// column), and leaves the database usable (every check is followed by a successful query).

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

bool contains(const std::string &text, const std::string &part) {
    return text.find(part) != std::string::npos;
}

} // namespace

class ErrorTest : public EmployeeTest {
protected:
    /// The error of `sql` must contain `message` and point at `position`; afterwards the
    /// database still answers queries.
    void expect_error(const std::string &sql, const std::string &message, std::uint32_t position) {
        SCOPED_TRACE(sql);
        const SqlError error = error_of(sql);
        EXPECT_TRUE(contains(error.message(), message)) << error.what();
        EXPECT_EQ(error.position(), position) << error.what();
        EXPECT_EQ(rows("SELECT count(*) FROM emp"), (Rows{"6"}));
    }
};

TEST_F(ErrorTest, UnknownNames) {
    expect_error("SELECT * FROM nope", "table \"nope\" does not exist", 15);
    expect_error("SELECT nme FROM emp", "column \"nme\" does not exist", 8);
    expect_error("SELECT e.nme FROM emp e", "column \"e.nme\" does not exist", 8);
    expect_error("SELECT x.id FROM emp e", "missing FROM-clause entry for table \"x\"", 8);
    expect_error("SELECT id FROM emp, dept", "column reference \"id\" is ambiguous", 8);
    expect_error("SELECT * FROM emp e, dept e", "specified more than once", 22);
}

TEST_F(ErrorTest, TypeMismatches) {
    expect_error("SELECT * FROM emp WHERE name > 5", "VARCHAR", 30);
    expect_error("SELECT name + 1 FROM emp", "VARCHAR", 13);
    expect_error("SELECT * FROM emp WHERE salary", "argument of WHERE must be type BOOLEAN", 25);
    expect_error("SELECT sum(name) FROM emp", "sum(VARCHAR(20))", 8);
    expect_error("SELECT date '2020-13-01'", "2020-13-01", 13);
    expect_error("SELECT * FROM emp WHERE hired > 'yesterday'", "yesterday", 33);
    expect_error("SELECT * FROM emp WHERE name LIKE name", "LIKE pattern", 35);
}

TEST_F(ErrorTest, SyntaxErrorsHaveExactPositions) {
    expect_error("SELECT * FORM emp", "syntax error at or near \"FORM\"", 10);
    expect_error("SELECT 1 +", "syntax error at end of input", 11);
    // Line and column are computed from the position; characters, not bytes, are counted.
    const SqlError error = error_of("SELECT 'äöü',\n  id\nFROM emp\nWHERE nope = 1");
    EXPECT_EQ(error.line(), 4U);
    EXPECT_EQ(error.column(), 7U);
    EXPECT_EQ(error.position(), 35U);
    EXPECT_TRUE(contains(error.what(), "(line 4, column 7)")) << error.what();
    EXPECT_EQ(rows("SELECT count(*) FROM emp"), (Rows{"6"}));
}

TEST_F(ErrorTest, UnsupportedFeaturesAreNamed) {
    expect_error("SELECT nosuchfn(id) FROM emp", "function nosuchfn() is not supported", 8);
    expect_error("SELECT id FROM emp WHERE name SIMILAR TO 'a%'", "SIMILAR TO is not supported", 31);
    expect_error("SELECT percent_rank() OVER (ORDER BY id) FROM emp",
                 "window function percent_rank is not supported", 8);
    expect_error("UPDATE emp SET id = 1", "statement not supported: Update", 1);
    expect_error("SELECT ARRAY(SELECT id FROM dept)", "ARRAY subqueries are not supported", 8);
    expect_error("SELECT (id, dept) IN (SELECT id, id FROM dept WHERE dept.id = emp.id) FROM emp",
                 "correlated IN subqueries with several columns are not supported", 19);
    expect_error("SELECT CAST(hired AS TIMESTAMP) FROM emp", "type \"timestamp\" is not supported", 22);
    expect_error("SELECT (SELECT id FROM dept) FROM emp", "scalar subqueries must be aggregates", 8);
}

TEST_F(ErrorTest, AggregationErrors) {
    expect_error("SELECT name, count(*) FROM emp GROUP BY dept",
                 "column \"name\" must appear in the GROUP BY clause or be used in an aggregate function", 8);
    expect_error("SELECT id FROM emp WHERE count(*) > 1", "aggregate functions are not allowed in WHERE", 26);
    expect_error("SELECT sum(count(*)) FROM emp", "aggregate functions are not allowed in the argument", 12);
    expect_error("SELECT dept FROM emp GROUP BY 3", "GROUP BY position 3 is not in select list", 31);
    expect_error("SELECT dept FROM emp ORDER BY 2", "ORDER BY position 2 is not in select list", 31);
}

TEST_F(ErrorTest, StatementErrors) {
    expect_error("CREATE TABLE emp (a INTEGER)", "table \"emp\" already exists", 14);
    expect_error("DROP TABLE nope", "table \"nope\" does not exist", 1);
    expect_error("CREATE TABLE t (a DECIMAL(50, 2))", "DECIMAL precision 50 must be between 1 and 38", 19);
    expect_error("CREATE TABLE t (a INTEGER, a BIGINT)", "a", 14);
    expect_error("INSERT INTO emp VALUES (7, 'x', 10, 'abc', NULL)", "row 1", 25);
    expect_error("INSERT INTO emp (name) VALUES ('x')", "row 1", 32);
    expect_error("INSERT INTO emp (id) VALUES (1, 2)", "more expressions than target columns", 30);
    expect_error("INSERT INTO emp (nope) VALUES (1)", "column \"nope\" of table \"emp\" does not exist", 18);
    expect_error("COPY emp FROM '/nonexistent/file.tbl'", "/nonexistent/file.tbl", 1);
    expect_error("COPY emp FROM '/tmp/x' (FORMAT parquet)", "COPY format \"parquet\" is not supported", 25);
    expect_error("COPY emp TO '/tmp/x'", "COPY ... TO is not supported", 1);
    expect_error("EXPLAIN (VERBOSE) SELECT 1", "EXPLAIN option not supported: verbose (supported: ANALYZE)",
                 10);
    // The failed statements changed nothing.
    EXPECT_EQ(rows("SELECT count(*) FROM dept"), (Rows{"3"}));
    EXPECT_EQ(db.catalog().find("t"), nullptr);
}

TEST_F(ErrorTest, ScriptsStopAtTheFailingStatement) {
    // A runtime or binding error: the statements before it took effect, the rest did not run.
    const SqlError error = error_of("INSERT INTO dept VALUES (50, 'x', 1);\nSELECT nope FROM dept;\nINSERT "
                                    "INTO dept VALUES (60, 'y', 2)");
    EXPECT_EQ(error.line(), 2U);
    EXPECT_EQ(error.column(), 8U);
    EXPECT_EQ(rows("SELECT id FROM dept ORDER BY id"), (Rows{"10", "20", "40", "50"}));
    // A syntax error anywhere: nothing runs.
    const SqlError syntax = error_of("INSERT INTO dept VALUES (70, 'z', 3); SELEC 1");
    EXPECT_EQ(syntax.position(), 39U);
    EXPECT_EQ(rows("SELECT count(*) FROM dept"), (Rows{"4"}));
}

TEST_F(ErrorTest, GarbageNeverCrashes) {
    const auto seed = static_cast<std::uint32_t>(std::random_device{}());
    std::printf("GarbageNeverCrashes seed %u\n", seed);
    std::mt19937 random(seed);
    // Random bytes, and random sequences of SQL tokens (which get past the parser more often).
    static const char *const tokens[] = {
        "SELECT",   "FROM", "WHERE", "emp",    "dept", "id",       "name",
        "(",        ")",    ",",     "*",      "+",    "=",        "'x'",
        "1",        "2.5",  "AND",   "OR",     "NOT",  "GROUP BY", "ORDER BY",
        "count(*)", "sum(", "IN",    "EXISTS", "JOIN", "ON",       "LIMIT",
        "NULL",     "CASE", "WHEN",  "THEN",   "END",  "date",     "interval '1' day",
        ";",        "e.",   "AS",    "HAVING", "LIKE"};
    int statements = 0;
    for (int i = 0; i < 300; ++i) {
        std::string text;
        if (i % 2 == 0) {
            const auto length = random() % 60;
            for (std::uint32_t k = 0; k < length; ++k) {
                text.push_back(static_cast<char>(1 + random() % 255));
            }
        } else {
            text = "SELECT ";
            const auto length = 1 + random() % 12;
            for (std::uint32_t k = 0; k < length; ++k) {
                text.append(tokens[random() % std::size(tokens)]).push_back(' ');
            }
        }
        try {
            db.execute(text);
            ++statements;
        } catch (const SqlError &error) {
            EXPECT_FALSE(error.message().empty());
            EXPECT_EQ(error.message().find("internal error"), std::string::npos)
                << text << " -> " << error.what();
        }
    }
    std::printf("GarbageNeverCrashes: %d of 300 texts ran\n", statements);
    EXPECT_EQ(rows("SELECT count(*) FROM emp"), (Rows{"6"}));
}

TEST_F(ErrorTest, DeepNestingIsAnErrorNotACrash) {
    const std::string parentheses = "SELECT " + std::string(20000, '(') + "1" + std::string(20000, ')');
    EXPECT_TRUE(contains(error_of(parentheses).message(), "nested too deeply"));
    std::string chain = "SELECT 1";
    for (int i = 0; i < 5000; ++i) {
        chain.append("+1");
    }
    EXPECT_TRUE(contains(error_of(chain).message(), "nested too deeply"));
    std::string nots = "SELECT ";
    for (int i = 0; i < 3000; ++i) {
        nots.append("NOT ");
    }
    nots.append("true");
    EXPECT_TRUE(contains(error_of(nots).message(), "nested too deeply"));
    std::string subqueries = "SELECT * FROM ";
    for (int i = 0; i < 100; ++i) {
        subqueries.append("(SELECT * FROM ");
    }
    subqueries.append("emp");
    for (int i = 0; i < 100; ++i) {
        subqueries.append(") AS t").append(std::to_string(i));
    }
    EXPECT_TRUE(contains(error_of(subqueries).message(), "nested too deeply"));
    // Below the limits nesting works.
    std::string shallow =
        "SELECT " + std::string(200, '(') + "id" + std::string(200, ')') + " FROM emp WHERE id = 1";
    EXPECT_EQ(rows(shallow), (Rows{"1"}));
    std::string sum = "SELECT 0";
    for (int i = 0; i < 200; ++i) {
        sum.append("+id");
    }
    EXPECT_EQ(rows(sum + " FROM emp WHERE id = 2"), (Rows{"400"}));
    EXPECT_EQ(rows("SELECT count(*) FROM emp"), (Rows{"6"}));
}

TEST_F(ErrorTest, LongInputs) {
    // A long IN list is fine.
    std::string in_list = "SELECT count(*) FROM emp WHERE id IN (";
    for (int i = 0; i < 20000; ++i) {
        in_list.append(std::to_string(i * 2)).append(i + 1 < 20000 ? "," : ")");
    }
    EXPECT_EQ(rows(in_list), (Rows{"3"}));
    // Over the limit: a clear error without parsing.
    const std::string huge = "SELECT '" + std::string(5U << 20U, 'x') + "'";
    EXPECT_TRUE(contains(error_of(huge).message(), "SQL text too long"));
    EXPECT_TRUE(contains(error_of(std::string("SELECT 1\0", 9) + "garbage").message(), "NUL byte"));
    EXPECT_EQ(rows("SELECT count(*) FROM emp"), (Rows{"6"}));
}

TEST_F(ErrorTest, ParsingAndPlanningFromSeveralThreads) {
    // libpg_query keeps per-thread state; Database calls are safe from several threads.
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([this, t, &failures] {
            for (int i = 0; i < 10; ++i) {
                try {
                    const auto result = db.query("SELECT count(*) FROM emp WHERE id > " + std::to_string(t));
                    failures[static_cast<std::size_t>(t)] += result.rows.at(0).at(0).i64 == 6 - t ? 0 : 1;
                } catch (...) {
                    ++failures[static_cast<std::size_t>(t)];
                }
                try {
                    db.execute("SELECT FROM WHERE");
                    ++failures[static_cast<std::size_t>(t)];
                } catch (const SqlError &) {
                }
                failures[static_cast<std::size_t>(t)] +=
                    db.plan("SELECT name FROM emp e JOIN dept d ON e.dept = d.id") != nullptr ? 0 : 1;
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    EXPECT_EQ(failures, (std::vector<int>{0, 0, 0, 0}));
}

} // namespace mx::sql::test
