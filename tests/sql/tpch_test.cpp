// The 22 TPC-H query texts (tests/db/queries) through the SQL front end: every text parses, the
// supported ones bind and plan against the TPC-H schema (empty tables), and, when
// MX_SQL_TPCH_DATA and MX_SQL_TPCH_ANSWERS name a data set and DuckDB's answers
// (scripts/tpch.py gen / answers), the queries run and their rows are compared with DuckDB's.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <mx/sql/database.h>
#include <mx/tasking/runtime.h>

#include "sql/tpch_schema.h"
#include "tpch_check.h"

namespace {

using mx::tpch::read_file;

std::string query_text(int number) {
    return read_file(std::string(MX_TPCH_QUERY_DIR) + "/q" + std::to_string(number) + ".sql");
}

/// Query names with their files: "1".."22", then the parameter sets ("6_2": params/q6_2.sql).
std::vector<std::pair<std::string, std::string>> query_files() {
    std::vector<std::pair<std::string, std::string>> files;
    for (int q = 1; q <= 22; ++q) {
        files.emplace_back(std::to_string(q),
                           std::string(MX_TPCH_QUERY_DIR) + "/q" + std::to_string(q) + ".sql");
    }
    std::vector<std::filesystem::path> parameters;
    for (const auto &entry :
         std::filesystem::directory_iterator(std::string(MX_TPCH_QUERY_DIR) + "/params")) {
        if (entry.path().extension() == ".sql") {
            parameters.push_back(entry.path());
        }
    }
    std::sort(parameters.begin(), parameters.end());
    for (const auto &path : parameters) {
        files.emplace_back(path.stem().string().substr(1), path.string());
    }
    return files;
}

mx::tasking::RuntimeConfig small_runtime() {
    mx::tasking::RuntimeConfig config;
    config.workers = 2;
    return config;
}

mx::sql::DatabaseOptions without_magic_sets() {
    mx::sql::DatabaseOptions options;
    options.optimizer.magic_sets = false;
    return options;
}

mx::sql::DatabaseOptions with_greedy_join_order() {
    mx::sql::DatabaseOptions options;
    options.optimizer.join_order = mx::sql::JoinOrder::greedy;
    return options;
}

/// The query names whose plans the magic sets change: correlated scalar subqueries (Q2, Q17,
/// Q20) and EXISTS / NOT EXISTS over large tables (Q21, Q22).
bool has_magic_set(const std::string &name) {
    const std::string number = name.substr(0, name.find('_'));
    return number == "2" || number == "17" || number == "20" || number == "21" || number == "22";
}

/// Of those, the ones whose EXISTS / NOT EXISTS wait for the joins of their query block and then,
/// with the default options, hash the joined rows (right semi/anti joins) instead of restricting
/// the subquery side by a magic set.
bool has_right_semi_join(const std::string &name) {
    const std::string number = name.substr(0, name.find('_'));
    return number == "21" || number == "22";
}

/// The query names with a correlated scalar subquery (a dependent join the pass decorrelate
/// unnests): Q2, Q17, Q20.
bool dependent(const std::string &name) {
    const std::string number = name.substr(0, name.find('_'));
    return number == "2" || number == "17" || number == "20";
}

/// The data set (MX_SQL_TPCH_DATA, default SF 0.01) and DuckDB's answers for it.
std::pair<std::string, std::string> tpch_data() {
    const char *data = std::getenv("MX_SQL_TPCH_DATA");
    const char *answers = std::getenv("MX_SQL_TPCH_ANSWERS");
    if (data == nullptr || answers == nullptr) {
        data = MX_TPCH_DATA_DIR;
        answers = MX_TPCH_DATA_DIR "-answers";
    }
    return {data, answers};
}

/// Loads the data set into `db`.
void load_tpch(mx::sql::Database &db) {
    const auto [data, answers] = tpch_data();
    ASSERT_TRUE(std::filesystem::exists(answers + "/q1.csv"))
        << "no TPC-H data/answers in " << data << ": run `make deps`, then ctest (fixture tpch_data)";
    for (const char *table : mx::tpch::tables) {
        db.execute(std::string("COPY ") + table + " FROM '" + data + "/" + table + ".tbl' (DELIMITER '|')");
    }
}

/// Loads the data set into `db` and compares the answers of the queries `selected` accepts with
/// DuckDB's. With `magic_sets` (and the default right semi joins), the queries that
/// has_magic_set names must show the pass in their EXPLAIN, those has_right_semi_join names a
/// right semi or anti join instead.
void compare_with_duckdb(mx::sql::Database &db, const std::function<bool(const std::string &)> &selected,
                         bool magic_sets) {
    load_tpch(db);
    if (::testing::Test::HasFatalFailure()) {
        return;
    }
    const std::string answers = tpch_data().second;
    int matched = 0;
    int compared = 0;
    for (const auto &[q, file] : query_files()) {
        if (!selected(q)) {
            continue;
        }
        ++compared;
        SCOPED_TRACE("q" + q);
        const auto expected = mx::tpch::read_answer(answers, "q" + q);
        ASSERT_TRUE(expected.has_value()) << "no DuckDB answer q" << q << " in " << answers;
        if (magic_sets && has_right_semi_join(q)) {
            const std::string explained = db.explain(read_file(file));
            EXPECT_NE(explained.find("HashJoin right"), std::string::npos) << explained;
            EXPECT_EQ(explained.find("magic set:"), std::string::npos) << explained;
        } else if (magic_sets && has_magic_set(q)) {
            const std::string explained = db.explain(read_file(file));
            EXPECT_NE(explained.find("magic set:"), std::string::npos) << explained;
        }
        mx::db::QueryResult result;
        try {
            result = db.query(read_file(file));
        } catch (const mx::sql::SqlError &error) {
            ADD_FAILURE() << "q" << q << " failed: " << error.what();
            continue;
        }
        // Row by row: at the scale factors tested, every text's ORDER BY fixes the order of its
        // rows (or it has one row).
        const std::string problem = mx::tpch::compare_result(result, *expected, mx::tpch::Order::exact);
        if (problem.empty()) {
            ++matched;
        } else {
            ADD_FAILURE() << "q" << q << ": " << problem;
        }
    }
    EXPECT_GT(compared, 0);
    std::printf("TPC-H: %d of %d queries match DuckDB\n", matched, compared);
}

} // namespace

class TpchQueries : public ::testing::Test {
protected:
    TpchQueries() : runtime(small_runtime()), db(runtime) { db.execute(mx::sql::test::tpch_schema); }

    mx::tasking::Runtime runtime;
    mx::sql::Database db;
};

TEST_F(TpchQueries, AllTextsParseAndTheSupportedOnesPlan) {
    // Queries whose subqueries TunaDB rewrites (all 22).
    for (int q = 1; q <= 22; ++q) {
        SCOPED_TRACE("q" + std::to_string(q));
        const std::string text = query_text(q);
        ASSERT_FALSE(text.empty());
        mx::db::PlanPtr plan;
        try {
            plan = db.plan(text);
        } catch (const mx::sql::SqlError &error) {
            ADD_FAILURE() << "q" << q << ": " << error.what();
            continue;
        }
        ASSERT_NE(plan, nullptr);
        EXPECT_FALSE(plan->output.empty());
        const std::string explained = db.explain(text);
        EXPECT_NE(explained.find("scan"), std::string::npos) << explained;
    }
}

// By default the SF 0.01 set of the ctest fixture tpch_data (tests/db/engine); the environment
// variables point it at another set (e.g. SF 0.1).
TEST_F(TpchQueries, EndToEndAgainstDuckDb) {
    compare_with_duckdb(
        db, [](const std::string &) { return true; }, true);
}

// The queries whose plans use magic sets, with the pass off: the same answers.
TEST_F(TpchQueries, EndToEndWithoutMagicSets) {
    mx::sql::Database plain(runtime, without_magic_sets());
    plain.execute(mx::sql::test::tpch_schema);
    compare_with_duckdb(plain, has_magic_set, false);
}

// All queries with the joins ordered greedily instead of by dynamic programming: the same
// answers (at SF 1 the plans of Q8 and Q9 differ).
TEST_F(TpchQueries, EndToEndWithGreedyJoinOrder) {
    mx::sql::Database greedy(runtime, with_greedy_join_order());
    greedy.execute(mx::sql::test::tpch_schema);
    compare_with_duckdb(
        greedy, [](const std::string &) { return true; }, true);
}

// EXPLAIN ANALYZE of the 22 queries: the plan's root reports the rows the query returns, and a
// scan without a filter reports every row of its table (a scan with one at most that many).
TEST_F(TpchQueries, ExplainAnalyzeRowsMatchTheResultsAndTheTables) {
    load_tpch(db);
    ASSERT_FALSE(HasFatalFailure());
    std::map<std::string, std::uint64_t> table_rows;
    for (const char *table : mx::tpch::tables) {
        table_rows[table] = db.query(std::string("SELECT * FROM ") + table).row_count();
    }
    const std::regex line{R"(^( *)(\S.*?)  \(rows=(\d+))"};
    for (int q = 1; q <= 22; ++q) {
        SCOPED_TRACE("q" + std::to_string(q));
        const std::string text = query_text(q);
        const std::string analyzed = db.explain_analyze(text);
        const std::uint64_t returned = db.query(text).row_count();
        std::istringstream lines{analyzed};
        std::string current;
        bool root = true;
        int scans = 0;
        while (std::getline(lines, current)) {
            std::smatch match;
            if (!std::regex_search(current, match, line)) {
                continue;
            }
            const std::string description = match[2].str();
            const std::uint64_t rows = std::stoull(match[3].str());
            if (root) {
                EXPECT_EQ(rows, returned) << analyzed;
                root = false;
            }
            if (description.rfind("Scan ", 0) != 0) {
                continue;
            }
            ++scans;
            const std::string table = description.substr(5, description.find(' ', 5) - 5);
            ASSERT_EQ(table_rows.count(table), 1U) << description;
            if (description.find(" where ") == std::string::npos) {
                EXPECT_EQ(rows, table_rows[table]) << current;
            } else {
                EXPECT_LE(rows, table_rows[table]) << current;
            }
        }
        EXPECT_FALSE(root) << "no operator line in\n" << analyzed;
        EXPECT_GT(scans, 0) << analyzed;
    }
}

// Each optional optimizer pass alone off: the same answers, and EXPLAIN names the pass as off.
TEST_F(TpchQueries, EndToEndWithEachPassOff) {
    // The 22 queries (not the other parameter sets).
    const auto selected = [](const std::string &name) { return name.find('_') == std::string::npos; };
    for (const mx::sql::OptimizerPass &pass : mx::sql::optimizer_passes()) {
        if (!pass.optional) {
            continue;
        }
        SCOPED_TRACE(std::string(pass.name));
        mx::sql::DatabaseOptions options;
        options.optimizer.disabled_passes.emplace(pass.name);
        mx::sql::Database off(runtime, options);
        off.execute(mx::sql::test::tpch_schema);
        // Without decorrelate the queries with a correlated scalar subquery are errors.
        const bool decorrelate = pass.name == "decorrelate";
        const std::string explained = off.explain(query_text(decorrelate ? 1 : 2));
        EXPECT_NE(explained.find("(off: " + std::string(pass.name) + ")"), std::string::npos) << explained;
        compare_with_duckdb(
            off, [&](const std::string &name) { return selected(name) && !(decorrelate && dependent(name)); },
            false);
        if (decorrelate) {
            for (const int q : {2, 17, 20}) {
                try {
                    off.query(query_text(q));
                    ADD_FAILURE() << "Q" << q << " ran without decorrelate";
                } catch (const mx::sql::SqlError &error) {
                    EXPECT_NE(error.message().find("'decorrelate', which is switched off"), std::string::npos)
                        << error.message();
                }
            }
        }
    }
}
