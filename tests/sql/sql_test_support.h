#pragma once

// Shared set-up for the SQL tests: a database on a small runtime, with two little tables whose
// query answers are computed by hand in the tests.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>
#include <mx/sql/database.h>
#include <mx/tasking/runtime.h>

namespace mx::sql::test {

inline tasking::RuntimeConfig small_runtime_config(std::uint16_t workers = 2) {
    tasking::RuntimeConfig config;
    config.workers = workers;
    return config;
}

/// Batches of two rows, so even tiny tables run as many morsels (and on several workers).
inline DatabaseOptions tiny_batches() {
    DatabaseOptions options;
    options.execution.morsel_rows = 2;
    return options;
}

/// "(row(0)), (row(1)), ..." for an INSERT's VALUES list of `rows` rows.
inline std::string values_list(int rows, const std::function<std::string(int)> &row) {
    std::string text;
    for (int i = 0; i < rows; ++i) {
        text.append(i > 0 ? ", (" : "(").append(row(i)).push_back(')');
    }
    return text;
}

/// The rows of a result as "a|b|c" strings (Value::to_string per cell).
/// The table a plan subtree reads, when it is a scan under projections and filters ("" otherwise).
inline std::string table_under(const db::PlanNode &node) {
    const db::PlanNode *current = &node;
    while (current->kind == db::PlanKind::project || current->kind == db::PlanKind::filter) {
        current = current->children[0].get();
    }
    return current->kind == db::PlanKind::scan ? current->table->name() : std::string();
}

inline std::vector<std::string> rows_of(const db::QueryResult &result) {
    std::vector<std::string> rows;
    for (const auto &row : result.rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            if (c > 0) {
                line.push_back('|');
            }
            line.append(row[c].to_string());
        }
        rows.push_back(std::move(line));
    }
    return rows;
}

/// emp and dept: six employees (one without a department, one without a salary, one without a
/// hiring date) and three departments (one without employees).
/// A suite's two databases on one runtime: `_on` with an optimizer choice and `_off` without it,
/// for tests that compare the two. `Suite` keeps each suite's databases apart.
template <class Suite>
class OnOffSuite : public ::testing::Test {
protected:
    /// Opens both, runs `tables` in each, then fills table `filled` (k INTEGER, q INTEGER) with
    /// 400 rows, k = r % 200 and q = r (two rows per key), and two rows with a NULL key.
    static void open(const DatabaseOptions &on, const DatabaseOptions &off, const char *tables,
                     const std::string &filled) {
        _runtime = new tasking::Runtime(small_runtime_config());
        _on = new Database(*_runtime, on);
        _off = new Database(*_runtime, off);
        for (Database *db : {_on, _off}) {
            db->execute(tables);
            db->execute(
                "INSERT INTO " + filled + " VALUES " +
                values_list(400, [](int r) { return std::to_string(r % 200) + ", " + std::to_string(r); }) +
                ", (NULL, 5), (NULL, 1000)");
        }
    }
    static void TearDownTestSuite() {
        delete _on;
        delete _off;
        delete _runtime;
        _on = _off = nullptr;
        _runtime = nullptr;
    }

    static inline tasking::Runtime *_runtime = nullptr;
    static inline Database *_on = nullptr;
    static inline Database *_off = nullptr;
};

inline constexpr const char *employee_tables = R"sql(
CREATE TABLE emp (id INTEGER NOT NULL, name VARCHAR(20), dept INTEGER, salary DECIMAL(10,2), hired DATE);
INSERT INTO emp VALUES
  (1, 'alice', 10, 1000.00, '2020-01-15'),
  (2, 'bob',   10, 1500.50, '2019-03-01'),
  (3, 'carol', 20, 2000.00, '2021-07-30'),
  (4, 'dave',  20, NULL,    '2018-12-31'),
  (5, 'eve',   30, 1200.00, NULL),
  (6, 'frank', NULL, 900.00, '2022-02-28');
CREATE TABLE dept (id INTEGER NOT NULL, dname VARCHAR(20), budget BIGINT);
INSERT INTO dept VALUES (10, 'sales', 5000), (20, 'research', 8000), (40, 'empty', 100);
)sql";

class SqlTest : public ::testing::Test {
protected:
    SqlTest() : runtime(small_runtime_config()), db(runtime) {}
    SqlTest(tasking::RuntimeConfig config, DatabaseOptions options)
        : runtime(std::move(config)), db(runtime, std::move(options)) {}

    std::vector<std::string> rows(const std::string &sql) { return rows_of(db.query(sql)); }

    /// Runs `sql`, which must fail, and returns the error.
    SqlError error_of(const std::string &sql) {
        try {
            db.execute(sql);
        } catch (const SqlError &error) {
            return error;
        }
        ADD_FAILURE() << "no error for: " << sql;
        return SqlError("no error");
    }
    std::string error_text(const std::string &sql) { return error_of(sql).what(); }

    tasking::Runtime runtime;
    Database db;
};

class EmployeeTest : public SqlTest {
protected:
    EmployeeTest() { db.execute(employee_tables); }
};

using Rows = std::vector<std::string>;

} // namespace mx::sql::test
