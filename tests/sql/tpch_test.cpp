// The 22 TPC-H query texts (tests/db/queries) through the SQL front end: every text parses, the
// supported ones bind and plan against the TPC-H schema (empty tables), and, when
// MX_SQL_TPCH_DATA and MX_SQL_TPCH_ANSWERS name a data set and DuckDB's answers
// (scripts/tpch.py gen / answers), the queries run and their rows are compared with DuckDB's.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <mx/sql/database.h>
#include <mx/tasking/runtime.h>

#include "sql/tpch_schema.h"

namespace {

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

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

/// Splits CSV text into rows of fields (quoted fields with doubled quotes, as DuckDB and
/// QueryResult::to_csv write them).
std::vector<std::vector<std::string>> parse_csv(const std::string &text) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> row;
    std::string field;
    bool quoted = false;
    bool any = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
                field.push_back('"');
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field.push_back(c);
            }
            continue;
        }
        if (c == '"') {
            quoted = true;
            any = true;
        } else if (c == ',') {
            row.push_back(field);
            field.clear();
            any = true;
        } else if (c == '\n') {
            row.push_back(field);
            rows.push_back(row);
            row.clear();
            field.clear();
            any = false;
        } else if (c != '\r') {
            field.push_back(c);
            any = true;
        }
    }
    if (any) {
        row.push_back(field);
        rows.push_back(row);
    }
    return rows;
}

bool same_value(const std::string &a, const std::string &b) {
    if (a == b) {
        return true;
    }
    char *end_a = nullptr;
    char *end_b = nullptr;
    const double x = std::strtod(a.c_str(), &end_a);
    const double y = std::strtod(b.c_str(), &end_b);
    if (a.empty() || b.empty() || *end_a != '\0' || *end_b != '\0') {
        return false;
    }
    return std::fabs(x - y) <= 1e-9 * std::max({1.0, std::fabs(x), std::fabs(y)});
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
    const char *data = std::getenv("MX_SQL_TPCH_DATA");
    const char *answers = std::getenv("MX_SQL_TPCH_ANSWERS");
    if (data == nullptr || answers == nullptr) {
        data = MX_TPCH_DATA_DIR;
        answers = MX_TPCH_DATA_DIR "-answers";
    }
    ASSERT_TRUE(std::filesystem::exists(std::string(answers) + "/q1.csv"))
        << "no TPC-H data/answers in " << data << ": run `make deps`, then ctest (fixture tpch_data)";
    for (const char *table :
         {"region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"}) {
        db.execute(std::string("COPY ") + table + " FROM '" + data + "/" + table + ".tbl' (DELIMITER '|')");
    }
    int matched = 0;
    const auto files = query_files();
    for (const auto &[q, file] : files) {
        SCOPED_TRACE("q" + q);
        const auto expected = parse_csv(read_file(std::string(answers) + "/q" + q + ".csv"));
        mx::db::QueryResult result;
        try {
            result = db.query(read_file(file));
        } catch (const mx::sql::SqlError &error) {
            ADD_FAILURE() << "q" << q << " failed: " << error.what();
            continue;
        }
        const auto actual = parse_csv(result.to_csv());
        ASSERT_FALSE(expected.empty());
        ASSERT_EQ(actual.size(), expected.size()) << result.to_csv();
        bool same = true;
        for (std::size_t r = 1; r < expected.size() && same; ++r) {
            // One-column NULL rows are empty lines in DuckDB's file.
            if (expected[r].size() == 1 && expected[r][0].empty() && actual[r].size() == 1) {
                same = actual[r][0].empty() || actual[r][0] == "NULL";
                continue;
            }
            if (actual[r].size() != expected[r].size()) {
                same = false;
                break;
            }
            for (std::size_t c = 0; c < expected[r].size(); ++c) {
                if (!same_value(actual[r][c], expected[r][c])) {
                    ADD_FAILURE() << "q" << q << " row " << r << " column " << c << ": got " << actual[r][c]
                                  << ", DuckDB " << expected[r][c];
                    same = false;
                    break;
                }
            }
        }
        matched += same ? 1 : 0;
    }
    std::printf("TPC-H: %d of %zu queries match DuckDB\n", matched, files.size());
}
