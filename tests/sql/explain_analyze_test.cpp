// EXPLAIN ANALYZE (Database::explain_analyze, the EXPLAIN ANALYZE statement): its text parses,
// and the rows it reports per operator are the rows the operators really produced, checked
// against the answers of separate queries. Also: a trace of a query names the operators' tasks.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <mx/tasking/trace.h>

#include "sql/sql_test_support.h"

namespace mx::sql::test {
namespace {

/// One operator line of EXPLAIN ANALYZE.
struct AnalyzedOperator {
    std::size_t depth{0};
    std::string description;
    std::optional<std::uint64_t> rows; // nullopt: folded into its parent
    std::uint64_t tasks{0};
    std::vector<std::uint64_t> per_worker; // tasks by worker (empty when not printed)
    double memory_kib{0.0};                // hash tables and row stores
    bool fused{false};
    std::size_t pipelines{0};
};

struct Analyzed {
    std::vector<AnalyzedOperator> operators;
    std::uint64_t total_rows{0};
};

/// Parses the whole text; a line that does not fit the format fails the test.
Analyzed parse(const std::string &text) {
    static const std::regex operator_line{
        R"(^((?:  )+)(\S.*?)  \(rows=(?:(\d+)((?: tasks=(\d+)(?: per worker=([\d/]+))? time=\d+\.\d{3} ms(?: memory=(\d+\.\d) (KiB|MiB))?(?: strategy=[a-z-]+)?)|(?: fused into [^()]+?))((?: pipeline \d+: \d+\.\d{3} ms)+)|\? folded into its parent)\)$)"};
    static const std::regex pipeline{R"( pipeline \d+:)"};
    static const std::regex total_line{R"(^Total: (\d+) rows in \d+\.\d{3} ms$)"};
    Analyzed analyzed;
    std::istringstream lines{text};
    std::string line;
    std::getline(lines, line);
    EXPECT_EQ(line, "Plan:") << text;
    bool total = false;
    while (std::getline(lines, line)) {
        std::smatch match;
        if (std::regex_match(line, match, total_line)) {
            EXPECT_FALSE(total) << text;
            analyzed.total_rows = std::stoull(match[1].str());
            total = true;
            continue;
        }
        EXPECT_FALSE(total) << "a line after the total:\n" << text;
        if (!std::regex_match(line, match, operator_line)) {
            ADD_FAILURE() << "line does not parse: '" << line << "' in\n" << text;
            continue;
        }
        AnalyzedOperator op;
        op.depth = static_cast<std::size_t>(match[1].length()) / 2 - 1;
        op.description = match[2].str();
        if (match[3].matched) {
            op.rows = std::stoull(match[3].str());
            op.fused = !match[5].matched;
            op.tasks = match[5].matched ? std::stoull(match[5].str()) : 0;
            if (match[6].matched) {
                std::istringstream spread{match[6].str()};
                std::string count;
                std::uint64_t sum = 0;
                while (std::getline(spread, count, '/')) {
                    op.per_worker.push_back(std::stoull(count));
                    sum += op.per_worker.back();
                }
                EXPECT_EQ(sum, op.tasks) << "the spread over the workers adds up to the tasks: " << line;
            }
            if (match[7].matched) {
                op.memory_kib = std::stod(match[7].str()) * (match[8].str() == "MiB" ? 1024.0 : 1.0);
            }
            const std::string pipelines = match[9].str();
            op.pipelines = static_cast<std::size_t>(std::distance(
                std::sregex_iterator(pipelines.begin(), pipelines.end(), pipeline), std::sregex_iterator()));
        }
        analyzed.operators.push_back(op);
    }
    EXPECT_TRUE(total) << "no total line in\n" << text;
    EXPECT_FALSE(analyzed.operators.empty()) << text;
    return analyzed;
}

/// The first operator whose description starts with `prefix`.
const AnalyzedOperator *find(const Analyzed &analyzed, const std::string &prefix) {
    for (const auto &op : analyzed.operators) {
        if (op.description.rfind(prefix, 0) == 0) {
            return &op;
        }
    }
    return nullptr;
}

/// t: 300 rows (a = 0..299, b = a % 7, c = a % 10); u: 5 rows (b = 0, 2, 4, 6, 8). Morsels of 16
/// rows, so every scan runs as many tasks on both workers.
class ExplainAnalyzeTest : public SqlTest {
protected:
    ExplainAnalyzeTest() : SqlTest(small_runtime_config(), options()) {
        std::string sql = "CREATE TABLE t (a INTEGER NOT NULL, b INTEGER NOT NULL, c INTEGER NOT NULL);"
                          "INSERT INTO t VALUES ";
        for (int a = 0; a < 300; ++a) {
            sql.append(a > 0 ? ", (" : "(").append(std::to_string(a)).append(", ");
            sql.append(std::to_string(a % 7)).append(", ").append(std::to_string(a % 10)).append(")");
        }
        sql.append(";CREATE TABLE u (b INTEGER NOT NULL, name VARCHAR(10));"
                   "INSERT INTO u VALUES (0, 'zero'), (2, 'two'), (4, 'four'), (6, 'six'), (8, 'eight');");
        db.execute(sql);
    }

    static DatabaseOptions options() {
        DatabaseOptions options;
        options.execution.morsel_rows = 16;
        return options;
    }

    std::uint64_t count(const std::string &sql) { return std::stoull(rows(sql).at(0)); }

    /// EXPLAIN ANALYZE through the API; the statement gives the same shape (times differ).
    Analyzed analyze(const std::string &select) {
        const Analyzed analyzed = parse(db.explain_analyze(select));
        const Result statement = db.execute("EXPLAIN ANALYZE " + select);
        EXPECT_EQ(statement.last().kind, StatementKind::explain);
        const Analyzed again = parse(statement.last().text);
        EXPECT_EQ(again.operators.size(), analyzed.operators.size());
        for (std::size_t i = 0; i < again.operators.size() && i < analyzed.operators.size(); ++i) {
            EXPECT_EQ(again.operators[i].description, analyzed.operators[i].description);
            EXPECT_EQ(again.operators[i].rows, analyzed.operators[i].rows);
        }
        // The root's rows are the query's rows.
        const std::uint64_t real = db.query(select).row_count();
        EXPECT_EQ(analyzed.total_rows, real);
        EXPECT_EQ(analyzed.operators.front().rows.value_or(0), real) << select;
        EXPECT_EQ(analyzed.operators.front().depth, 0U);
        return analyzed;
    }
};

TEST_F(ExplainAnalyzeTest, ScanCountsEveryRowInManyTasks) {
    const Analyzed analyzed = analyze("SELECT a, c FROM t");
    // A scan holds no tables; its tasks are spread over both workers (printed per worker).
    for (const AnalyzedOperator &op : analyzed.operators) {
        if (op.description.rfind("Scan t", 0) == 0) {
            EXPECT_EQ(op.memory_kib, 0.0);
            EXPECT_EQ(op.per_worker.size(), 2U);
        }
    }
    const AnalyzedOperator *scan = find(analyzed, "Scan t");
    ASSERT_NE(scan, nullptr);
    EXPECT_EQ(scan->rows, 300U);
    EXPECT_GE(scan->tasks, 300U / 16U); // one task per morsel at least
    EXPECT_EQ(scan->pipelines, 1U);
}

TEST_F(ExplainAnalyzeTest, FilterCountsTheRowsThatPass) {
    const Analyzed analyzed = analyze("SELECT a FROM t WHERE c = 3 OR a > 280");
    const std::uint64_t passing = count("SELECT count(*) FROM t WHERE c = 3 OR a > 280");
    ASSERT_EQ(passing, 30U + 19U - 2U); // c = 3: 30 rows; a > 280: 19, of them 283 and 293 have c = 3
    // Whether the filter runs in the scan or as a stage of its own, the plan's leaf (the scan)
    // and everything above it report the filtered rows only where the filter is.
    const AnalyzedOperator *scan = find(analyzed, "Scan t");
    ASSERT_NE(scan, nullptr);
    const AnalyzedOperator *filter = find(analyzed, "Filter");
    if (filter != nullptr) {
        EXPECT_EQ(filter->rows, passing);
        EXPECT_EQ(scan->rows, 300U);
    } else {
        EXPECT_EQ(scan->rows, passing);
    }
}

TEST_F(ExplainAnalyzeTest, JoinCountsBothInputsAndItsOutput) {
    const std::string select = "SELECT t.a, u.name FROM t JOIN u ON t.b = u.b";
    const Analyzed analyzed = analyze(select);
    const AnalyzedOperator *join = find(analyzed, "HashJoin");
    ASSERT_NE(join, nullptr);
    EXPECT_EQ(join->rows, count("SELECT count(*) FROM t WHERE b IN (0, 2, 4, 6)"));
    EXPECT_GE(join->tasks, 2U); // build and probe
    EXPECT_EQ(join->pipelines, 2U);
    EXPECT_EQ(join->per_worker.size(), 2U) << "two workers";
    EXPECT_GT(join->memory_kib, 0.0) << "the hash table's memory";
    const AnalyzedOperator *scan_u = find(analyzed, "Scan u");
    ASSERT_NE(scan_u, nullptr);
    EXPECT_EQ(scan_u->rows, 5U);
    const AnalyzedOperator *scan_t = find(analyzed, "Scan t");
    ASSERT_NE(scan_t, nullptr);
    EXPECT_EQ(scan_t->rows, 300U);
    // The strategy the build took: EXPLAIN states the rule, EXPLAIN ANALYZE what happened (a
    // five-row build stays non-partitioned; forced radix is radix).
    const std::string text = db.explain_analyze(select);
    const std::string join_line =
        text.substr(text.find("HashJoin"), text.find('\n', text.find("HashJoin")) - text.find("HashJoin"));
    EXPECT_NE(join_line.find("strategy=non-partitioned"), std::string::npos) << join_line;
    DatabaseOptions radix = options();
    radix.execution.join.strategy = db::JoinStrategy::radix_partitioned;
    Database forced(runtime, radix);
    forced.execute(
        "CREATE TABLE t (a INTEGER NOT NULL, b INTEGER NOT NULL); INSERT INTO t VALUES (1, 2), (2, 4);"
        "CREATE TABLE u (b INTEGER NOT NULL, name VARCHAR(10)); INSERT INTO u VALUES (2, 'two');");
    const std::string forced_text = forced.explain_analyze(select);
    EXPECT_NE(forced_text.find("strategy=radix-partitioned"), std::string::npos) << forced_text;
}

TEST_F(ExplainAnalyzeTest, AggregateCountsItsGroups) {
    const Analyzed analyzed = analyze("SELECT b, count(*), sum(a) FROM t GROUP BY b");
    const AnalyzedOperator *aggregate = find(analyzed, "Aggregate");
    ASSERT_NE(aggregate, nullptr);
    EXPECT_EQ(aggregate->rows, 7U);
    EXPECT_GT(aggregate->tasks, 0U);
    EXPECT_GT(aggregate->memory_kib, 0.0) << "the group tables' memory";
    const AnalyzedOperator *scan = find(analyzed, "Scan t");
    ASSERT_NE(scan, nullptr);
    EXPECT_EQ(scan->rows, 300U);
}

TEST_F(ExplainAnalyzeTest, SortAndLimit) {
    const Analyzed sorted = analyze("SELECT a, b FROM t WHERE a < 100 ORDER BY b DESC, a");
    const AnalyzedOperator *sort = find(sorted, "Sort");
    ASSERT_NE(sort, nullptr);
    EXPECT_EQ(sort->rows, 100U);

    const Analyzed limited = analyze("SELECT a FROM t ORDER BY a DESC LIMIT 7 OFFSET 2");
    EXPECT_EQ(limited.total_rows, 7U);
    const AnalyzedOperator *limit = find(limited, "Limit");
    const AnalyzedOperator *top = find(limited, "Sort");
    ASSERT_TRUE(limit != nullptr || top != nullptr);
    if (limit != nullptr) {
        EXPECT_EQ(limit->rows, 7U);
    }

    const Analyzed plain_limit = analyze("SELECT a FROM t LIMIT 12");
    const AnalyzedOperator *only_limit = find(plain_limit, "Limit");
    ASSERT_NE(only_limit, nullptr);
    EXPECT_EQ(only_limit->rows, 12U);
}

TEST_F(ExplainAnalyzeTest, OtherExplainOptionsAreRejected) {
    EXPECT_NE(error_text("EXPLAIN (VERBOSE) SELECT a FROM t").find("EXPLAIN option not supported: verbose"),
              std::string::npos);
    EXPECT_NE(error_text("EXPLAIN ANALYZE INSERT INTO u VALUES (1, 'x')").find("SELECT statements only"),
              std::string::npos);
}

TEST_F(ExplainAnalyzeTest, PlainRunsCountNothing) {
    const db::QueryResult result = db.query("SELECT b, count(*) FROM t GROUP BY b");
    EXPECT_TRUE(result.analysis.empty());
}

TEST_F(ExplainAnalyzeTest, TraceNamesTheOperatorsTasks) {
    if (const std::string error = runtime.start_trace(); !error.empty()) {
        GTEST_SKIP() << "tracing is compiled out: " << error;
    }
    const db::QueryResult result =
        db.query("SELECT u.name, count(*) FROM t JOIN u ON t.b = u.b GROUP BY u.name ORDER BY 1");
    const std::optional<tasking::Trace> trace = runtime.stop_trace();
    ASSERT_TRUE(trace.has_value());
    EXPECT_EQ(result.row_count(), 4U);
    std::set<std::string> names;
    for (const auto &worker : trace->workers) {
        for (const auto &event : worker.events) {
            if (event.kind == tasking::TraceEventKind::task) {
                names.insert(trace->name(event));
            }
        }
    }
    for (const char *label :
         {"scan t", "scan u", "hash join build", "hash join probe", "group by", "sort", "result"}) {
        EXPECT_TRUE(names.count(label) == 1) << "no slice named " << label;
    }
    // Finalize phases are named apart from the consume tasks.
    EXPECT_TRUE(names.count("group by (finalize)") == 1 || names.count("group by (merge)") == 1 ||
                names.count("group by (finalize part)") == 1);
    const std::string json = trace->to_json();
    EXPECT_NE(json.find("\"scan t\""), std::string::npos);
}

} // namespace
} // namespace mx::sql::test
