// Columnar results (ExecutionOptions::columnar, what the Python package reads): every cell equals
// the row result of the same query, in Arrow's value layout, over many small batches (a morsel
// of 7 rows) with selections, NULLs, strings and both decimal widths; INSERT ... SELECT still
// inserts its rows when the database returns columns.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "sql/sql_test_support.h"

namespace mx::sql::test {
namespace {

DatabaseOptions columnar_options() {
    DatabaseOptions options;
    options.execution.columnar = true;
    options.execution.morsel_rows = 7;
    return options;
}

/// The cell of a columnar result as a Value, read in the layout ResultColumn documents.
db::Value cell(const db::QueryResult &result, std::size_t column, std::size_t row) {
    const db::Type type = result.columns[column].type;
    const db::ResultColumn &data = result.columnar->columns[column];
    if (data.nulls != nullptr && data.nulls[row] != 0) {
        return db::Value::null_of(type);
    }
    const std::byte *values = data.values.get();
    std::int32_t i32 = 0;
    std::int64_t i64 = 0;
    double f64 = 0;
    db::Int128 i128 = 0;
    switch (type.id) {
    case db::TypeId::boolean:
        return db::Value::boolean(values[row] != std::byte{0});
    case db::TypeId::integer:
        std::memcpy(&i32, values + row * 4, 4);
        return db::Value::integer(i32);
    case db::TypeId::date:
        std::memcpy(&i32, values + row * 4, 4);
        return db::Value::date(i32);
    case db::TypeId::bigint:
        std::memcpy(&i64, values + row * 8, 8);
        return db::Value::bigint(i64);
    case db::TypeId::float64:
        std::memcpy(&f64, values + row * 8, 8);
        return db::Value::float64(f64);
    case db::TypeId::decimal:
        std::memcpy(&i128, values + row * 16, 16);
        return db::Value::decimal(i128, type.precision, type.scale);
    case db::TypeId::varchar: {
        std::int64_t begin = 0;
        std::int64_t end = 0;
        std::memcpy(&begin, values + row * 8, 8);
        std::memcpy(&end, values + (row + 1) * 8, 8);
        return db::Value::varchar(
            std::string(data.chars.get() + begin, static_cast<std::size_t>(end - begin)));
    }
    }
    return db::Value::null_of(type);
}

constexpr const char *schema = R"sql(
CREATE TABLE v (id INTEGER NOT NULL, b BOOLEAN, l BIGINT, d DECIMAL(10,2), f DOUBLE, t DATE, s VARCHAR(30));
INSERT INTO v VALUES
  (1, true, 10, 1.50, 0.25, '1992-01-01', 'one'),
  (2, false, -9223372036854775808, -12.01, -1e300, '0001-01-01', ''),
  (3, NULL, NULL, NULL, NULL, NULL, NULL),
  (4, true, 9223372036854775807, 99999999.99, 2.5, '9999-12-31', 'four four'),
  (5, false, 0, 0.00, 0.0, '2000-02-29', 'ünïcødé'),
  (6, true, 6, 6.06, 6.5, '2006-06-06', 'six'),
  (7, NULL, 7, 7.07, NULL, '2007-07-07', NULL),
  (8, false, 8, 8.08, 8.5, NULL, 'eight'),
  (9, true, 9, NULL, 9.5, '2009-09-09', 'nine'),
  (10, false, 10, 10.10, 10.5, '2010-10-10', 'ten'),
  (11, true, 11, 11.11, 11.5, '2011-11-11', 'eleven'),
  (12, NULL, 12, 12.12, 12.5, '2012-12-12', 'twelve'),
  (13, true, 13, 13.13, 13.5, '2013-01-13', 'thirteen'),
  (14, false, NULL, 14.14, 14.5, '2014-02-14', 'fourteen'),
  (15, true, 15, 15.15, 15.5, '2015-03-15', 'fifteen');
)sql";

class ColumnarTest : public ::testing::Test {
protected:
    ColumnarTest() : runtime(small_runtime_config()), columnar(runtime, columnar_options()), rows(runtime) {
        columnar.execute(schema);
        rows.execute(schema);
    }

    /// The columnar result of `sql` equals its row result cell by cell (same order: ORDER BY).
    void expect_same(const std::string &sql) {
        SCOPED_TRACE(sql);
        const db::QueryResult expected = rows.query(sql);
        const db::QueryResult got = columnar.query(sql);
        ASSERT_NE(got.columnar, nullptr);
        EXPECT_TRUE(got.rows.empty());
        ASSERT_EQ(got.row_count(), expected.row_count());
        ASSERT_EQ(got.columns.size(), expected.columns.size());
        for (std::size_t c = 0; c < got.columns.size(); ++c) {
            for (std::size_t r = 0; r < got.row_count(); ++r) {
                EXPECT_EQ(cell(got, c, r).to_string(), expected.rows[r][c].to_string())
                    << "column " << c << ", row " << r;
            }
        }
    }

    tasking::Runtime runtime;
    Database columnar;
    Database rows;
};

TEST_F(ColumnarTest, EveryTypeWithNullsOverManyBatches) {
    expect_same("SELECT * FROM v ORDER BY id");
    expect_same("SELECT s, t, id FROM v WHERE id % 3 <> 0 ORDER BY id DESC");
    expect_same("SELECT * FROM v WHERE id > 100");
}

TEST_F(ColumnarTest, ComputedColumnsAndWideDecimals) {
    expect_same("SELECT b, count(*), sum(d), sum(l), min(s), max(t), avg(f) FROM v GROUP BY b ORDER BY b");
    expect_same("SELECT id, d * 3, CAST(d AS DOUBLE), id + 1 FROM v ORDER BY id");
}

TEST_F(ColumnarTest, UnorderedResultHasEveryRowOnce) {
    const db::QueryResult got = columnar.query("SELECT id FROM v WHERE b");
    std::vector<int> ids;
    for (std::size_t r = 0; r < got.row_count(); ++r) {
        ids.push_back(static_cast<int>(cell(got, 0, r).i64));
    }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<int>{1, 4, 6, 9, 11, 13, 15}));
}

TEST_F(ColumnarTest, InsertSelectInsertsItsRows) {
    const Result inserted =
        columnar.execute("CREATE TABLE w (id INTEGER); INSERT INTO w SELECT id FROM v WHERE id < 5");
    EXPECT_EQ(inserted.last().tag, "INSERT 0 4");
    EXPECT_EQ(cell(columnar.query("SELECT count(*) FROM w"), 0, 0).to_string(), "4");
    expect_same("SELECT id FROM v WHERE id IN (SELECT id FROM v WHERE id < 5) ORDER BY id");
}

} // namespace
} // namespace mx::sql::test
