#pragma once

// Support of the TPC-H query tests: the eight tables loaded once per test binary from the data
// scripts/tpch.py generated (ctest fixture tpch_data, see CMakeLists.txt), DuckDB's answer of a
// query, and the comparison of a QueryResult with it (tools/tpch_check, which the SQL test and
// benchmarks/tpch use too).
//
// Data directory: $MX_TPCH_DATA if set (e.g. a larger scale factor), else the build's
// tpch/sf0.01; the answers are in the directory of the same name with "-answers" appended.
// Missing data is a test failure naming `make deps`, never a skip.
//
// Writing a query test:
//
// (tpch_shapes_test.cpp instantiates TpchTest once for the whole binary; do not instantiate it
// again.)
//
//   TEST_P(TpchTest, Q6) {
//       const tpch::Columns l(table("lineitem"), {"l_extendedprice", "l_discount"});
//       auto plan = plan::aggregate(plan::scan(l.table(), l.indices(), ...), {}, {}, {...});
//       expect_answer(run(*plan), "q6", tpch::Order::any);
//   }

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mx/db/catalog.h>
#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/loader.h>
#include <mx/db/plan.h>
#include <mx/db/table.h>
#include <mx/tasking/runtime.h>

#include "support/runtime_fixture.h"
#include "tpch_check.h"

#ifndef MX_TPCH_DATA_DIR
#define MX_TPCH_DATA_DIR "build/tpch/sf0.01"
#endif

namespace mx::test::tpch {

using mx::tpch::tables;

inline std::string data_dir() {
    const char *override_dir = std::getenv("MX_TPCH_DATA");
    return override_dir != nullptr && *override_dir != '\0' ? std::string(override_dir)
                                                            : std::string(MX_TPCH_DATA_DIR);
}
inline std::string answer_dir() { return data_dir().append("-answers"); }

using mx::tpch::read_file;

inline std::string trim(std::string_view text) {
    while (!text.empty() &&
           (text.front() == ' ' || text.front() == '\n' || text.front() == '\t' || text.front() == '\r')) {
        text.remove_prefix(1);
    }
    while (!text.empty() &&
           (text.back() == ' ' || text.back() == '\n' || text.back() == '\t' || text.back() == '\r')) {
        text.remove_suffix(1);
    }
    return std::string(text);
}

/// A column type of schema.sql: INTEGER, BIGINT, DECIMAL(p,s), DATE, CHAR(n), VARCHAR(n).
inline db::Type parse_type(const std::string &text) {
    std::string upper;
    for (const char c : text) {
        upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    auto argument = [&](std::size_t index) {
        const std::size_t open = upper.find('(');
        std::string inside = upper.substr(open + 1, upper.find(')') - open - 1);
        std::size_t comma = inside.find(',');
        return static_cast<std::uint32_t>(
            std::stoul(index == 0 ? inside.substr(0, comma) : inside.substr(comma + 1)));
    };
    if (upper == "INTEGER") {
        return db::Type::integer();
    }
    if (upper == "BIGINT") {
        return db::Type::bigint();
    }
    if (upper == "DATE") {
        return db::Type::date();
    }
    if (upper == "DOUBLE") {
        return db::Type::float64();
    }
    if (upper.rfind("DECIMAL", 0) == 0) {
        return db::Type::decimal(static_cast<std::uint8_t>(argument(0)),
                                 static_cast<std::uint8_t>(argument(1)));
    }
    if (upper.rfind("CHAR", 0) == 0 || upper.rfind("VARCHAR", 0) == 0) {
        return db::Type::varchar(upper.find('(') == std::string::npos ? 0 : argument(0));
    }
    throw std::runtime_error(std::string("schema.sql: unknown type ").append(text));
}

/// The CREATE TABLE statements of schema.sql (one column per line, as tpch.py writes them).
inline std::vector<std::pair<std::string, db::Schema>> parse_schema(const std::string &text) {
    std::vector<std::pair<std::string, db::Schema>> result;
    std::istringstream lines(text);
    std::string line;
    std::string table;
    std::vector<db::ColumnDef> columns;
    while (std::getline(lines, line)) {
        const std::string trimmed = trim(line);
        if (trimmed.rfind("CREATE TABLE ", 0) == 0) {
            table = trim(trimmed.substr(13, trimmed.find('(') - 13));
            columns.clear();
        } else if (trimmed.rfind(");", 0) == 0) {
            result.emplace_back(table, db::Schema(columns));
            table.clear();
        } else if (!table.empty() && !trimmed.empty()) {
            std::string definition = trimmed;
            if (definition.back() == ',') {
                definition.pop_back();
            }
            const std::size_t space = definition.find(' ');
            columns.push_back(db::ColumnDef{definition.substr(0, space),
                                            parse_type(trim(definition.substr(space + 1))), true});
        }
    }
    return result;
}

/// The tables of the data directory, loaded once per process.
struct Database {
    db::Catalog catalog;
    std::string error; // why the data is not usable (empty when it is)
};

inline const Database &database() {
    static const Database *loaded = [] {
        auto *result = new Database();
        const std::string dir = data_dir();
        if (!std::ifstream(std::string(dir).append("/.complete"))) {
            result->error =
                std::string("TPC-H data missing in ")
                    .append(dir)
                    .append(": run `make deps` (DuckDB in build/venv), then ctest, whose fixture tpch_data "
                            "generates it (or: build/venv/bin/python scripts/tpch.py gen --sf 0.01 --out ")
                    .append(dir)
                    .append(")");
            return result;
        }
        try {
            tasking::RuntimeConfig config;
            config.workers = 2;
            tasking::Runtime runtime(config);
            for (auto &[name, schema] : parse_schema(read_file(std::string(dir).append("/schema.sql")))) {
                static_cast<void>(result->catalog.create_table(name, schema));
                const db::LoadResult load = db::load(runtime, result->catalog, name,
                                                     std::string(dir).append("/").append(name).append(".tbl"),
                                                     db::CsvOptions{.progress = db::ProgressMode::never});
                if (!load.ok()) {
                    result->error = std::string("loading ").append(name).append(": ").append(load.error);
                    return result;
                }
            }
            for (const char *name : tables) {
                if (result->catalog.find(name) == nullptr) {
                    result->error = std::string("schema.sql lacks table ") + name;
                }
            }
        } catch (const std::exception &error) {
            result->error = error.what();
        }
        return result;
    }();
    return *loaded;
}

using mx::tpch::Answer;
using mx::tpch::Order;

/// DuckDB's answer of a query ("q6"); throws when the files are missing.
inline Answer read_answer(const std::string &query) {
    auto answer = mx::tpch::read_answer(answer_dir(), query);
    if (!answer) {
        throw std::runtime_error(
            std::string("no ").append(query).append(".csv/.types in ").append(answer_dir()));
    }
    return std::move(*answer);
}

/// Checks a result against DuckDB's answer (tools/tpch_check: same columns, same row count,
/// every cell equal, doubles within 1e-9 relative), in the same order when `order` is exact.
inline void expect_answer(const db::QueryResult &result, const Answer &answer, Order order) {
    EXPECT_EQ(mx::tpch::compare_result(result, answer, order), "");
}

/// Scan columns by name: the table column indices for plan::scan and references to the scan's
/// output columns (in the order given) for expressions.
class Columns {
public:
    Columns(std::shared_ptr<const db::Table> table, std::vector<std::string> names)
        : _table(std::move(table)), _names(std::move(names)) {
        for (const std::string &name : _names) {
            const auto index = _table->schema().find(name);
            if (!index) {
                throw std::invalid_argument(
                    std::string("table ").append(_table->name()).append(" has no column ").append(name));
            }
            _indices.push_back(static_cast<std::uint32_t>(*index));
        }
    }

    [[nodiscard]] const std::shared_ptr<const db::Table> &table() const noexcept { return _table; }
    [[nodiscard]] const std::vector<std::uint32_t> &indices() const noexcept { return _indices; }
    /// Position of a column in the scan output.
    [[nodiscard]] std::uint32_t position(const std::string &name) const {
        const auto it = std::find(_names.begin(), _names.end(), name);
        if (it == _names.end()) {
            throw std::invalid_argument(std::string("column ").append(name).append(" is not scanned"));
        }
        return static_cast<std::uint32_t>(it - _names.begin());
    }
    /// Reference to a scanned column, shifted by `offset` (columns of a join's right side).
    [[nodiscard]] db::ExprPtr operator()(const std::string &name, std::uint32_t offset = 0) const {
        const std::uint32_t index = position(name);
        return db::expr::column(index + offset, _table->schema()[_indices[index]].type, name);
    }

private:
    std::shared_ptr<const db::Table> _table;
    std::vector<std::string> _names;
    std::vector<std::uint32_t> _indices;
};

inline db::ExprPtr date(const char *text) {
    return db::expr::constant(db::Value::date(*db::date::parse(text)));
}
inline db::ExprPtr decimal(const char *text, std::uint8_t precision, std::uint8_t scale) {
    return db::expr::constant(
        db::Value::decimal(*db::decimal::parse(text, precision, scale), precision, scale));
}
inline db::ExprPtr integer(std::int64_t value) { return db::expr::constant(db::Value::integer(value)); }

/// Runtime shapes the query tests run on.
inline std::vector<RuntimeShape> shapes() {
    return runtime_shapes_named({"workers1", "workers2", "workers4", "numa2x1"});
}

/// Fixture of the query tests: the tables, a runtime of the parameter's shape, a query runner.
class TpchTest : public RuntimeFixture {
protected:
    void SetUp() override {
        RuntimeFixture::SetUp();
        ASSERT_EQ(database().error, "") << "the TPC-H tests need their data";
    }

    static std::shared_ptr<const db::Table> table(const char *name) {
        auto table = database().catalog.find(name);
        if (table == nullptr) {
            throw std::runtime_error(std::string("no TPC-H table ") + name);
        }
        return table;
    }

    /// Runs the plan with a few task granularities and prefetch settings, checking each result.
    void expect_answer(const db::PlanNode &plan, const std::string &query, Order order) {
        std::vector<std::pair<std::string, db::ExecutionOptions>> runs;
        for (const std::uint32_t morsel : {1024U, 16384U}) {
            for (const bool prefetch : {true, false}) {
                db::ExecutionOptions options;
                options.morsel_rows = morsel;
                options.prefetch = prefetch;
                runs.emplace_back(
                    std::string("morsel ").append(std::to_string(morsel)).append(prefetch ? " prefetch" : ""),
                    options);
            }
        }
        expect_answer_of_each(plan, query, order, runs);
    }

    /// Runs a plan with hash joins under every join strategy, with and without Bloom filters,
    /// checking each result.
    void expect_answer_every_join_strategy(const db::PlanNode &plan, const std::string &query, Order order) {
        std::vector<std::pair<std::string, db::ExecutionOptions>> runs;
        for (const db::JoinStrategy strategy :
             {db::JoinStrategy::non_partitioned, db::JoinStrategy::radix_partitioned,
              db::JoinStrategy::automatic}) {
            for (const bool bloom : {true, false}) {
                db::ExecutionOptions options;
                options.morsel_rows = 2048;
                options.join.strategy = strategy;
                options.join.bloom_filter = bloom;
                runs.emplace_back(std::string("strategy ")
                                      .append(std::to_string(static_cast<int>(strategy)))
                                      .append(bloom ? " bloom" : ""),
                                  options);
            }
        }
        expect_answer_of_each(plan, query, order, runs);
    }

private:
    /// Runs the plan once per (label, options) pair, comparing every result with DuckDB's answer.
    void expect_answer_of_each(const db::PlanNode &plan, const std::string &query, Order order,
                               const std::vector<std::pair<std::string, db::ExecutionOptions>> &runs) {
        Answer answer;
        ASSERT_NO_THROW(answer = read_answer(query)) << "DuckDB's answers missing in " << answer_dir()
                                                     << ": run `make deps`, then the ctest fixture tpch_data";
        for (const auto &[label, options] : runs) {
            SCOPED_TRACE(std::string(query).append(" ").append(label));
            tpch::expect_answer(db::execute(runtime(), plan, options), answer, order);
        }
    }
};

} // namespace mx::test::tpch
