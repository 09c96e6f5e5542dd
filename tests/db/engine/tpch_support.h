#pragma once

// Support of the TPC-H query tests: the eight tables loaded once per test binary from the data
// scripts/tpch.py generated (ctest fixture tpch_data, see CMakeLists.txt), DuckDB's answer of a
// query, and the comparison of a QueryResult with it.
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
#include <cmath>
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

#ifndef MX_TPCH_DATA_DIR
#define MX_TPCH_DATA_DIR "build/tpch/sf0.01"
#endif

namespace mx::test::tpch {

inline constexpr const char *tables[] = {"region", "nation",   "supplier", "customer",
                                         "part",   "partsupp", "orders",   "lineitem"};

inline std::string data_dir() {
    const char *override_dir = std::getenv("MX_TPCH_DATA");
    return override_dir != nullptr && *override_dir != '\0' ? std::string(override_dir)
                                                            : std::string(MX_TPCH_DATA_DIR);
}
inline std::string answer_dir() { return data_dir().append("-answers"); }

inline std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw std::runtime_error(std::string("cannot read ").append(path));
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

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

/// DuckDB's answer of a query: column names and types, rows of fields (nullopt = NULL).
struct Answer {
    std::vector<std::string> names;
    std::vector<std::string> types;
    std::vector<std::vector<std::optional<std::string>>> rows;
};

/// One CSV line of tpch.py's answer format: ',' separated, '"' quoted with doubled quotes,
/// an empty unquoted field is NULL.
inline std::vector<std::optional<std::string>> parse_csv_line(const std::string &line, std::size_t columns) {
    std::vector<std::optional<std::string>> fields;
    std::size_t i = 0;
    while (true) {
        std::string field;
        bool quoted = false;
        if (i < line.size() && line[i] == '"') {
            quoted = true;
            ++i;
            while (i < line.size()) {
                if (line[i] == '"') {
                    if (i + 1 < line.size() && line[i + 1] == '"') {
                        field.push_back('"');
                        i += 2;
                        continue;
                    }
                    ++i;
                    break;
                }
                field.push_back(line[i++]);
            }
        } else {
            while (i < line.size() && line[i] != ',') {
                field.push_back(line[i++]);
            }
        }
        fields.push_back(!quoted && field.empty() ? std::nullopt : std::optional<std::string>(field));
        if (i >= line.size()) {
            break;
        }
        ++i; // the comma
    }
    if (columns == 1 && line.empty()) {
        fields.assign(1, std::nullopt);
    }
    return fields;
}

inline Answer read_answer(const std::string &query) {
    Answer answer;
    std::istringstream types(read_file(answer_dir().append("/").append(query).append(".types")));
    std::string line;
    while (std::getline(types, line)) {
        const std::size_t tab = line.find('\t');
        answer.names.push_back(line.substr(0, tab));
        answer.types.push_back(line.substr(tab + 1));
    }
    // Fields may hold line breaks only inside quotes; TPC-H answers have none, so split lines.
    std::istringstream csv(read_file(answer_dir().append("/").append(query).append(".csv")));
    std::getline(csv, line); // header
    while (std::getline(csv, line)) {
        answer.rows.push_back(parse_csv_line(line, answer.names.size()));
    }
    return answer;
}

enum class Order : std::uint8_t {
    exact, ///< the query's ORDER BY fixes the order of every row
    any,   ///< compare as multisets
};

/// Whether a cell of ours matches DuckDB's text of the given type. Returns "" or why not.
inline std::string compare_cell(const db::Value &ours, const std::optional<std::string> &theirs,
                                const std::string &type) {
    if (!theirs || ours.null) {
        if (!theirs && ours.null) {
            return {};
        }
        return "NULL mismatch";
    }
    if (type == "DOUBLE" || type == "FLOAT") {
        if (ours.type.id != db::TypeId::float64) {
            return std::string("DuckDB has DOUBLE, we have ").append(ours.type.to_string());
        }
        const double expected = std::strtod(theirs->c_str(), nullptr);
        const double tolerance = 1e-9 * std::max(std::abs(expected), 1e-300);
        if (!(std::abs(ours.f64 - expected) <= tolerance)) {
            return "double differs beyond 1e-9 relative";
        }
        return {};
    }
    if (type.rfind("DECIMAL", 0) == 0) {
        const std::size_t comma = type.find(',');
        const auto scale = static_cast<std::uint8_t>(std::stoul(type.substr(comma + 1)));
        if (ours.type.id != db::TypeId::decimal || ours.type.scale != scale) {
            return std::string("DuckDB has ").append(type).append(", we have ").append(ours.type.to_string());
        }
    }
    // DECIMAL (same scale: same digits), integers, HUGEINT, DATE, VARCHAR: exact text.
    const std::string text = ours.to_string();
    return text == *theirs ? std::string() : "text differs";
}

inline std::string cell_text(const db::Value &value) {
    return value.null ? std::string("NULL") : value.to_string();
}

/// Checks a result against DuckDB's answer: same columns, same row count, every cell equal
/// (doubles within 1e-9 relative), in the same order when `order` is exact.
inline void expect_answer(const db::QueryResult &result, const Answer &answer, Order order) {
    ASSERT_EQ(result.columns.size(), answer.names.size()) << "column count";
    ASSERT_EQ(result.rows.size(), answer.rows.size()) << "row count";
    std::vector<std::size_t> ours(result.rows.size());
    std::vector<std::size_t> theirs(answer.rows.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        ours[i] = i;
        theirs[i] = i;
    }
    if (order == Order::any) {
        // Sort both by their non-double columns' text (doubles may differ in the last bits).
        auto key_ours = [&](std::size_t r) {
            std::string key;
            for (std::size_t c = 0; c < answer.types.size(); ++c) {
                if (answer.types[c] != "DOUBLE") {
                    key.append(cell_text(result.rows[r][c])).push_back('\x1f');
                }
            }
            return key;
        };
        auto key_theirs = [&](std::size_t r) {
            std::string key;
            for (std::size_t c = 0; c < answer.types.size(); ++c) {
                if (answer.types[c] != "DOUBLE") {
                    key.append(answer.rows[r][c].value_or("NULL")).push_back('\x1f');
                }
            }
            return key;
        };
        std::stable_sort(ours.begin(), ours.end(), [&](auto a, auto b) { return key_ours(a) < key_ours(b); });
        std::stable_sort(theirs.begin(), theirs.end(),
                         [&](auto a, auto b) { return key_theirs(a) < key_theirs(b); });
    }
    for (std::size_t i = 0; i < ours.size(); ++i) {
        const auto &row = result.rows[ours[i]];
        const auto &expected = answer.rows[theirs[i]];
        ASSERT_EQ(row.size(), answer.names.size());
        ASSERT_EQ(expected.size(), answer.names.size()) << "malformed answer line " << theirs[i] + 2;
        for (std::size_t c = 0; c < row.size(); ++c) {
            const std::string problem = compare_cell(row[c], expected[c], answer.types[c]);
            EXPECT_EQ(problem, "") << "row " << ours[i] << " column " << answer.names[c] << ": ours "
                                   << cell_text(row[c]) << ", DuckDB " << expected[c].value_or("NULL");
        }
    }
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
    std::vector<RuntimeShape> result;
    for (const auto &shape : runtime_shapes()) {
        const std::string name = shape.name;
        if (name == "workers1" || name == "workers2" || name == "workers4" || name == "numa2x1") {
            result.push_back(shape);
        }
    }
    return result;
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
        Answer answer;
        ASSERT_NO_THROW(answer = read_answer(query)) << "DuckDB's answers missing in " << answer_dir()
                                                     << ": run `make deps`, then the ctest fixture tpch_data";
        for (const std::uint32_t morsel : {1024U, 16384U}) {
            for (const bool prefetch : {true, false}) {
                db::ExecutionOptions options;
                options.morsel_rows = morsel;
                options.prefetch = prefetch;
                SCOPED_TRACE(std::string(query)
                                 .append(" morsel ")
                                 .append(std::to_string(morsel))
                                 .append(prefetch ? " prefetch" : ""));
                const db::QueryResult result = db::execute(runtime(), plan, options);
                tpch::expect_answer(result, answer, order);
            }
        }
    }
};

} // namespace mx::test::tpch
