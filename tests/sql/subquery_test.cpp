// Mark joins (EXISTS, IN, ANY/ALL as values) under every way the hash join can run: many small
// batches on several workers, the radix-partitioned strategy, with and without Bloom filters.
// The answers come from tests/sql/logic/subquery_forms.test (checked against DuckDB); here they
// must agree across the variants and with the semi/anti join forms of the same conditions.

#include <string>
#include <vector>

#include "sql/sql_test_support.h"

namespace mx::sql::test {

namespace {

/// t: 600 rows, u: 400 rows, both with NULLs in keys and values; e: empty.
void make_tables(Database &database) {
    database.execute("CREATE TABLE t (id INTEGER, a INTEGER, c INTEGER); "
                     "CREATE TABLE u (b INTEGER, c INTEGER, d INTEGER); CREATE TABLE e (b INTEGER)");
    std::string t = "INSERT INTO t VALUES ";
    for (int i = 0; i < 600; ++i) {
        const std::string a = i % 17 == 0 ? "NULL" : std::to_string((i * 7) % 130);
        const std::string c = i % 23 == 0 ? "NULL" : std::to_string(i % 40);
        t += (i == 0 ? "(" : ", (") + std::to_string(i) + ", " + a + ", " + c + ")";
    }
    database.execute(t);
    std::string u = "INSERT INTO u VALUES ";
    for (int i = 0; i < 400; ++i) {
        const std::string b = i % 31 == 0 ? "NULL" : std::to_string((i * 3) % 100);
        const std::string c = i % 19 == 0 ? "NULL" : std::to_string(i % 30);
        u += (i == 0 ? "(" : ", (") + b + ", " + c + ", " + std::to_string(i % 50) + ")";
    }
    database.execute(u);
}

const std::vector<std::string> &queries() {
    static const std::vector<std::string> list{
        // equality keys, first match decides
        "SELECT id, EXISTS (SELECT 1 FROM u WHERE u.b = t.a) FROM t ORDER BY id",
        // keys and a residual
        "SELECT id, EXISTS (SELECT 1 FROM u WHERE u.c = t.c AND u.d > t.a) FROM t ORDER BY id",
        // residual only (a constant key)
        "SELECT id, EXISTS (SELECT 1 FROM u WHERE u.d * 3 > t.a) FROM t ORDER BY id",
        // an empty build side
        "SELECT id, a IN (SELECT b FROM e), a NOT IN (SELECT b FROM u WHERE d < 0) FROM t ORDER BY id",
        // NULLs on both sides: three marks
        "SELECT id, a IN (SELECT b FROM u), a NOT IN (SELECT b FROM u WHERE u.c = t.c) FROM t ORDER BY id",
        "SELECT id, a < ALL (SELECT b FROM u WHERE u.c = t.c), a <> ANY (SELECT b FROM u) FROM t ORDER BY id",
        "SELECT id, (a, c) IN (SELECT b, c FROM u) FROM t ORDER BY id",
        "SELECT id, (SELECT count(*) FROM u WHERE u.c = t.c) FROM t ORDER BY id",
    };
    return list;
}

std::vector<std::string> answers(Database &database) {
    std::vector<std::string> out;
    for (const std::string &query : queries()) {
        out.push_back(database.query(query).to_csv("NULL"));
    }
    return out;
}

} // namespace

TEST(SqlMarkJoin, AnswersDoNotDependOnBatchesStrategyOrBloomFilter) {
    tasking::Runtime runtime{small_runtime_config(2)};
    Database reference{runtime};
    make_tables(reference);
    const std::vector<std::string> expected = answers(reference);
    for (int variant = 0; variant < 4; ++variant) {
        DatabaseOptions options;
        options.execution.morsel_rows = variant % 2 == 0 ? 7 : 64; // many batches on both workers
        if (variant >= 2) {
            options.execution.join.strategy = db::JoinStrategy::radix_partitioned;
            options.execution.join.radix_bits = 3;
        }
        options.execution.join.bloom_filter = variant == 1 || variant == 2;
        Database database{runtime, options};
        make_tables(database);
        const std::vector<std::string> actual = answers(database);
        for (std::size_t q = 0; q < queries().size(); ++q) {
            EXPECT_EQ(actual[q], expected[q]) << "variant " << variant << ": " << queries()[q];
        }
    }
}

TEST(SqlMarkJoin, MarksAgreeWithSemiAndAntiJoins) {
    tasking::Runtime runtime{small_runtime_config(2)};
    Database database{runtime};
    make_tables(database);
    const auto count = [&](const std::string &sql) { return rows_of(database.query(sql)).front(); };
    // A mark under OR with a condition that never holds keeps exactly the semi join's rows.
    const std::vector<std::pair<std::string, std::string>> pairs{
        {"EXISTS (SELECT 1 FROM u WHERE u.c = t.c AND u.d > t.a)", "id < 0"},
        {"NOT EXISTS (SELECT 1 FROM u WHERE u.b = t.a)", "id < 0"},
        {"a IN (SELECT b FROM u WHERE u.c = t.c)", "id < 0"},
        {"a NOT IN (SELECT b FROM u WHERE b IS NOT NULL AND d > 10)", "id < 0"},
    };
    for (const auto &[condition, never] : pairs) {
        const std::string semi = count("SELECT count(*) FROM t WHERE " + condition);
        const std::string mark = count("SELECT count(*) FROM t WHERE " + condition + " OR " + never);
        EXPECT_EQ(mark, semi) << condition;
        EXPECT_NE(semi, "0") << condition;
        EXPECT_NE(database.explain("SELECT count(*) FROM t WHERE " + condition + " OR " + never).find("mark"),
                  std::string::npos);
    }
}

} // namespace mx::sql::test
