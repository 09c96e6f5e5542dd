// Operators of the query engine (scan, filter, project, aggregation, sort, limit) on small
// hand-made tables, checked against oracles computed here: NULLs everywhere, empty inputs, all
// keys equal, skewed keys, many groups, string keys, top-N, errors and cancellation. Every test
// runs on 1, 2 and 4 workers and on a simulated 2-region machine, with small fragments and
// morsels so that a query is many tasks.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/plan.h>
#include <mx/db/table.h>

#include "support/runtime_fixture.h"

namespace mx::db {
namespace {

using Rows = std::vector<std::vector<Value>>;

// ---- test data --------------------------------------------------------------------------------

enum class Keys : std::uint8_t { uniform, all_equal, skewed, many };

const Type decimal_type = Type::decimal(12, 2);

/// Columns of the test table "t": k INTEGER, s VARCHAR, d DECIMAL(12,2), f DOUBLE,
/// b BIGINT NOT NULL, dt DATE.
Schema test_schema() {
    return Schema({
        {"k", Type::integer(), true},
        {"s", Type::varchar(), true},
        {"d", decimal_type, true},
        {"f", Type::float64(), true},
        {"b", Type::bigint(), false},
        {"dt", Type::date(), true},
    });
}

Rows make_rows(std::uint32_t count, Keys keys, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    auto chance = [&](int percent) { return static_cast<int>(random() % 100) < percent; };
    Rows rows;
    for (std::uint32_t i = 0; i < count; ++i) {
        std::vector<Value> row;
        std::int64_t key = 0;
        switch (keys) {
        case Keys::uniform:
            key = static_cast<std::int64_t>(random() % 37);
            break;
        case Keys::all_equal:
            key = 42;
            break;
        case Keys::skewed:
            key = chance(90) ? 7 : static_cast<std::int64_t>(random() % 1000);
            break;
        case Keys::many:
            key = static_cast<std::int64_t>(random() % (count / 2 + 1));
            break;
        }
        row.push_back(keys != Keys::all_equal && chance(8) ? Value::null_of(Type::integer())
                                                           : Value::integer(key));
        if (chance(10)) {
            row.push_back(Value::null_of(Type::varchar()));
        } else {
            const auto n = random() % 40;
            // Some strings longer than a StringRef's inline size, some empty.
            row.push_back(Value::varchar(
                n == 0 ? std::string() : (n % 3 == 0 ? "a long string value #" : "s") + std::to_string(n)));
        }
        row.push_back(chance(10)
                          ? Value::null_of(decimal_type)
                          : Value::decimal(static_cast<std::int64_t>(random() % 2000001) - 1000000, 12, 2));
        row.push_back(chance(10) ? Value::null_of(Type::float64())
                                 : Value::float64(static_cast<double>(
                                                      static_cast<std::int64_t>(random() % 100001) - 50000) /
                                                  64.0));
        row.push_back(Value::bigint(static_cast<std::int64_t>(random() % 1000000007) - 500000000));
        row.push_back(chance(5) ? Value::null_of(Type::date())
                                : Value::date(date::from_civil(1995, 1, 1) +
                                              static_cast<std::int64_t>(random() % 1000)));
        rows.push_back(std::move(row));
    }
    return rows;
}

// ---- comparing values -----------------------------------------------------------------------

/// Independent of the engine's comparator: NULLs last, doubles by value.
int compare_values(const Value &a, const Value &b) {
    if (a.null || b.null) {
        return a.null == b.null ? 0 : (a.null ? 1 : -1);
    }
    switch (a.type.physical()) {
    case PhysicalType::u8:
    case PhysicalType::i64:
        return a.i64 < b.i64 ? -1 : (a.i64 > b.i64 ? 1 : 0);
    case PhysicalType::i128:
        return a.i128 < b.i128 ? -1 : (a.i128 > b.i128 ? 1 : 0);
    case PhysicalType::f64:
        return a.f64 < b.f64 ? -1 : (a.f64 > b.f64 ? 1 : 0);
    case PhysicalType::string:
        return a.str < b.str ? -1 : (a.str > b.str ? 1 : 0);
    }
    return 0;
}

bool same_value(const Value &actual, const Value &expected) {
    if (actual.null || expected.null) {
        return actual.null == expected.null;
    }
    if (expected.type.physical() == PhysicalType::f64) {
        if (actual.type.physical() != PhysicalType::f64) {
            return false;
        }
        const double scale = std::max(std::abs(expected.f64), 1e-300);
        return std::abs(actual.f64 - expected.f64) <= 1e-9 * scale;
    }
    return actual.to_string() == expected.to_string();
}

std::string row_text(const std::vector<Value> &row) {
    std::string text = "(";
    for (std::size_t i = 0; i < row.size(); ++i) {
        text.append(i > 0 ? ", " : "").append(row[i].to_string());
    }
    return text.append(")");
}

/// Same rows in the same order.
void expect_rows(const Rows &actual, const Rows &expected) {
    ASSERT_EQ(actual.size(), expected.size());
    for (std::size_t r = 0; r < expected.size(); ++r) {
        ASSERT_EQ(actual[r].size(), expected[r].size());
        for (std::size_t c = 0; c < expected[r].size(); ++c) {
            ASSERT_TRUE(same_value(actual[r][c], expected[r][c]))
                << "row " << r << " column " << c << ": got " << row_text(actual[r]) << ", expected "
                << row_text(expected[r]);
        }
    }
}

void sort_rows(Rows &rows) {
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
        for (std::size_t c = 0; c < a.size(); ++c) {
            const int order = compare_values(a[c], b[c]);
            if (order != 0) {
                return order < 0;
            }
        }
        return false;
    });
}

/// Same rows in any order (rows contain no doubles that need a tolerance to sort equal).
void expect_same_multiset(Rows actual, Rows expected) {
    sort_rows(actual);
    sort_rows(expected);
    expect_rows(actual, expected);
}

// ---- expressions ----------------------------------------------------------------------------

ExprPtr col(std::uint32_t index, Type type, std::string name = {}) {
    return expr::column(index, type, std::move(name));
}
ExprPtr k_ref(std::uint32_t index = 0) { return col(index, Type::integer(), "k"); }
ExprPtr s_ref(std::uint32_t index = 1) { return col(index, Type::varchar(), "s"); }
ExprPtr d_ref(std::uint32_t index = 2) { return col(index, decimal_type, "d"); }
ExprPtr f_ref(std::uint32_t index = 3) { return col(index, Type::float64(), "f"); }
ExprPtr b_ref(std::uint32_t index = 4) { return col(index, Type::bigint(), "b"); }

AggregateSpec agg(AggregateFunction function, ExprPtr argument, std::string name) {
    return AggregateSpec{function, std::move(argument), std::move(name)};
}

// ---- fixture --------------------------------------------------------------------------------

std::vector<test::RuntimeShape> operator_shapes() {
    return test::runtime_shapes_named({"workers1", "workers2", "workers4", "numa2x1"});
}

class OperatorTest : public test::RuntimeFixture {
protected:
    std::shared_ptr<const Table> make_table(const Rows &rows, std::uint32_t fragment_capacity = 97,
                                            StringEncoding encoding = StringEncoding::automatic) {
        TableBuilder builder(
            "t", test_schema(),
            TableOptions{.fragment_capacity = fragment_capacity, .string_encoding = encoding});
        for (const auto &row : rows) {
            const std::string error = builder.append_row(row);
            EXPECT_EQ(error, "");
        }
        return builder.finish(&runtime());
    }

    /// Small morsels (not a divisor of the fragment capacity) so a query is many tasks.
    static ExecutionOptions small_morsels(bool fuse = true) {
        ExecutionOptions options;
        options.morsel_rows = 40;
        options.fuse_operators = fuse;
        return options;
    }

    QueryResult run(const PlanPtr &plan, const ExecutionOptions &options = small_morsels()) {
        return execute(runtime(), *plan, options);
    }

    static std::vector<std::uint32_t> all_columns() { return {0, 1, 2, 3, 4, 5}; }
};

// ---- scan, filter, project --------------------------------------------------------------------

TEST_P(OperatorTest, ScanReturnsEveryRowWithNulls) {
    const Rows rows = make_rows(1000, Keys::uniform, test::test_seed());
    const auto table = make_table(rows);
    for (const bool prefetch : {false, true}) {
        ExecutionOptions options = small_morsels();
        options.prefetch = prefetch;
        const QueryResult result = run(plan::scan(table, all_columns()), options);
        ASSERT_EQ(result.columns.size(), 6U);
        EXPECT_EQ(result.columns[2].type, decimal_type);
        expect_same_multiset(result.rows, rows);
    }
}

TEST_P(OperatorTest, ScanPredicateFilterAndProjectMatchOracle) {
    const Rows rows = make_rows(1500, Keys::uniform, test::test_seed());
    const auto table = make_table(rows, 64, StringEncoding::plain);
    // scan (k, d, b, s) where d IS NOT NULL and b % 3 <> 0
    // -> project (k, d * 2, b + 1, s) -> filter k > 10 or k IS NULL
    Rows expected;
    for (const auto &row : rows) {
        if (row[2].null || row[4].i64 % 3 == 0) {
            continue;
        }
        if (!row[0].null && row[0].i64 <= 10) {
            continue;
        }
        expected.push_back(
            {row[0], Value::decimal(row[2].i64 * 200, 15, 4), Value::bigint(row[4].i64 + 1), row[1]});
    }
    for (const bool fuse : {true, false}) {
        auto scan =
            plan::scan(table, {0, 2, 4, 1},
                       expr::logical_and(expr::is_null(col(1, decimal_type), true),
                                         expr::not_equal(expr::modulo(col(2, Type::bigint()),
                                                                      expr::constant(Value::bigint(3))),
                                                         expr::constant(Value::bigint(0)))));
        auto project = plan::project(
            std::move(scan),
            {col(0, Type::integer()),
             expr::multiply(col(1, decimal_type), expr::constant(Value::decimal(200, 3, 2))),
             expr::add(col(2, Type::bigint()), expr::constant(Value::bigint(1))), col(3, Type::varchar())},
            {"k", "d2", "b1", "s"});
        auto filter = plan::filter(
            std::move(project),
            expr::logical_or(expr::greater(col(0, Type::integer()), expr::constant(Value::integer(10))),
                             expr::is_null(col(0, Type::integer()))));
        const QueryResult result = run(filter, small_morsels(fuse));
        SCOPED_TRACE(fuse ? "fused" : "separate nodes");
        expect_same_multiset(result.rows, expected);
    }
}

TEST_P(OperatorTest, EmptyTableAndNothingQualifying) {
    const auto empty = make_table({});
    EXPECT_EQ(run(plan::scan(empty, all_columns())).rows.size(), 0U);
    const auto table = make_table(make_rows(300, Keys::uniform, 1));
    const QueryResult none =
        run(plan::scan(table, {0}, expr::less(col(0, Type::integer()), expr::constant(Value::integer(-5)))));
    EXPECT_EQ(none.rows.size(), 0U);
}

TEST_P(OperatorTest, ZoneMapsSkipFragmentsWithoutChangingTheResult) {
    // b ascending, so most fragments' zone maps exclude the range.
    Rows rows = make_rows(2000, Keys::uniform, 3);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        rows[i][4] = Value::bigint(static_cast<std::int64_t>(i));
    }
    const auto table = make_table(rows, 128);
    Rows expected;
    for (const auto &row : rows) {
        if (row[4].i64 >= 700 && row[4].i64 < 900) {
            expected.push_back({row[4], row[0]});
        }
    }
    for (const bool zone_maps : {true, false}) {
        ExecutionOptions options = small_morsels();
        options.zone_maps = zone_maps;
        // 700 <= b and 900 > b (constant on either side)
        auto scan = plan::scan(
            table, {4, 0},
            expr::logical_and(expr::less_equal(expr::constant(Value::bigint(700)), col(0, Type::bigint())),
                              expr::greater(expr::constant(Value::bigint(900)), col(0, Type::bigint()))));
        expect_same_multiset(run(scan, options).rows, expected);
    }
}

// ---- aggregation ------------------------------------------------------------------------------

struct GroupOracle {
    std::int64_t rows{0};
    std::int64_t d_count{0};
    Int128 d_sum{0};
    std::optional<std::int64_t> d_min;
    std::optional<std::int64_t> d_max;
    Int128 b_sum{0};
    std::optional<std::string> s_min;
    std::optional<std::string> s_max;
    std::set<std::string> s_distinct;
    double f_sum{0};
    std::int64_t f_count{0};
    std::set<std::int64_t> d_distinct;
};

void add_to(GroupOracle &group, const std::vector<Value> &row) {
    ++group.rows;
    if (!row[2].null) {
        ++group.d_count;
        group.d_sum += row[2].i64;
        group.d_min = std::min(group.d_min.value_or(row[2].i64), row[2].i64);
        group.d_max = std::max(group.d_max.value_or(row[2].i64), row[2].i64);
        group.d_distinct.insert(row[2].i64);
    }
    group.b_sum += row[4].i64;
    if (!row[1].null) {
        group.s_min = std::min(group.s_min.value_or(row[1].str), row[1].str);
        group.s_max = std::max(group.s_max.value_or(row[1].str), row[1].str);
        group.s_distinct.insert(row[1].str);
    }
    if (!row[3].null) {
        group.f_sum += row[3].f64;
        ++group.f_count;
    }
}

/// The aggregates of every aggregation test, over the columns of "t".
std::vector<AggregateSpec> all_aggregates() {
    return {
        agg(AggregateFunction::count_star, nullptr, "n"),
        agg(AggregateFunction::count, d_ref(), "d_count"),
        agg(AggregateFunction::sum, d_ref(), "d_sum"),
        agg(AggregateFunction::avg, d_ref(), "d_avg"),
        agg(AggregateFunction::min, d_ref(), "d_min"),
        agg(AggregateFunction::max, d_ref(), "d_max"),
        agg(AggregateFunction::sum, b_ref(), "b_sum"),
        agg(AggregateFunction::min, s_ref(), "s_min"),
        agg(AggregateFunction::max, s_ref(), "s_max"),
        agg(AggregateFunction::count_distinct, s_ref(), "s_distinct"),
        agg(AggregateFunction::sum, f_ref(), "f_sum"),
        agg(AggregateFunction::avg, f_ref(), "f_avg"),
        agg(AggregateFunction::count_distinct, d_ref(), "d_distinct"),
    };
}

std::vector<Value> expected_aggregates(const GroupOracle &group) {
    auto decimal_or_null = [](const std::optional<std::int64_t> &v) {
        return v ? Value::decimal(*v, 12, 2) : Value::null_of(decimal_type);
    };
    auto string_or_null = [](const std::optional<std::string> &v) {
        return v ? Value::varchar(*v) : Value::null_of(Type::varchar());
    };
    std::vector<Value> values;
    values.push_back(Value::bigint(group.rows));
    values.push_back(Value::bigint(group.d_count));
    values.push_back(group.d_count > 0 ? Value::decimal(group.d_sum, 38, 2)
                                       : Value::null_of(Type::decimal(38, 2)));
    values.push_back(group.d_count > 0 ? Value::float64(static_cast<double>(group.d_sum) / 100.0 /
                                                        static_cast<double>(group.d_count))
                                       : Value::null_of(Type::float64()));
    values.push_back(decimal_or_null(group.d_min));
    values.push_back(decimal_or_null(group.d_max));
    values.push_back(group.rows > 0 ? Value::decimal(group.b_sum, 38, 0)
                                    : Value::null_of(Type::decimal(38, 0)));
    values.push_back(string_or_null(group.s_min));
    values.push_back(string_or_null(group.s_max));
    values.push_back(Value::bigint(static_cast<std::int64_t>(group.s_distinct.size())));
    values.push_back(group.f_count > 0 ? Value::float64(group.f_sum) : Value::null_of(Type::float64()));
    values.push_back(group.f_count > 0 ? Value::float64(group.f_sum / static_cast<double>(group.f_count))
                                       : Value::null_of(Type::float64()));
    values.push_back(Value::bigint(static_cast<std::int64_t>(group.d_distinct.size())));
    return values;
}

void check_grouped_by_k(const QueryResult &result, const Rows &rows) {
    std::map<std::optional<std::int64_t>, GroupOracle> groups;
    for (const auto &row : rows) {
        add_to(groups[row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64)], row);
    }
    Rows expected;
    for (const auto &[key, group] : groups) {
        std::vector<Value> row{key ? Value::integer(*key) : Value::null_of(Type::integer())};
        for (Value &value : expected_aggregates(group)) {
            row.push_back(std::move(value));
        }
        expected.push_back(std::move(row));
    }
    Rows actual = result.rows;
    // Sort by the key only: doubles may differ in the last bits, so they must not decide order.
    auto by_key = [](const auto &a, const auto &b) { return compare_values(a[0], b[0]) < 0; };
    std::sort(actual.begin(), actual.end(), by_key);
    std::sort(expected.begin(), expected.end(), by_key);
    expect_rows(actual, expected);
}

TEST_P(OperatorTest, GroupedAggregationUniformKeys) {
    const Rows rows = make_rows(test::scaled(3000, 2), Keys::uniform, test::test_seed());
    const auto table = make_table(rows);
    const QueryResult result =
        run(plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates()));
    ASSERT_EQ(result.columns.size(), 14U);
    EXPECT_EQ(result.columns[3].type, Type::decimal(38, 2));
    EXPECT_EQ(result.columns[4].type, Type::float64());
    EXPECT_EQ(result.columns[7].type, Type::decimal(38, 0));
    check_grouped_by_k(result, rows);
}

TEST_P(OperatorTest, GroupedAggregationAllKeysEqual) {
    const Rows rows = make_rows(test::scaled(3000, 2), Keys::all_equal, test::test_seed());
    const auto table = make_table(rows);
    const QueryResult result =
        run(plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates()));
    ASSERT_EQ(result.rows.size(), 1U);
    check_grouped_by_k(result, rows);
}

TEST_P(OperatorTest, GroupedAggregationSkewedKeys) {
    const Rows rows = make_rows(test::scaled(4000, 2), Keys::skewed, test::test_seed());
    const auto table = make_table(rows);
    const QueryResult result =
        run(plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates()));
    check_grouped_by_k(result, rows);
}

TEST_P(OperatorTest, GroupedAggregationManyGroups) {
    Rows rows = make_rows(test::scaled(6000, 2), Keys::many, test::test_seed());
    ExecutionOptions options = small_morsels();
    options.morsel_rows = 128;
    // Keys in random order, then in runs (as lineitem comes by order key; the NULL keys in a run
    // of their own), where each row after the first of a run finds its group without a lookup.
    for (const bool in_runs : {false, true}) {
        SCOPED_TRACE(in_runs ? "keys in runs" : "keys in random order");
        if (in_runs) {
            std::stable_sort(rows.begin(), rows.end(),
                             [](const auto &a, const auto &b) { return compare_values(a[0], b[0]) < 0; });
            ASSERT_TRUE(std::any_of(rows.begin(), rows.end(), [](const auto &row) { return row[0].null; }));
        }
        const auto table = make_table(rows, 500);
        const QueryResult result = run(
            plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates()), options);
        EXPECT_GT(result.rows.size(), 1000U);
        check_grouped_by_k(result, rows);
    }
}

TEST_P(OperatorTest, GroupedByStringsAndTwoKeysWithNulls) {
    const Rows rows = make_rows(test::scaled(2000, 2), Keys::uniform, test::test_seed());
    for (const StringEncoding encoding : {StringEncoding::plain, StringEncoding::dictionary}) {
        const auto table = make_table(rows, 97, encoding);
        // group by s, k % 3: count(*), sum(b), max(s)
        auto scan = plan::scan(table, all_columns());
        auto aggregate = plan::aggregate(
            std::move(scan), {s_ref(), expr::modulo(k_ref(), expr::constant(Value::integer(3)))}, {"s", "k3"},
            {agg(AggregateFunction::count_star, nullptr, "n"), agg(AggregateFunction::sum, b_ref(), "b_sum"),
             agg(AggregateFunction::max, s_ref(), "s_max")});
        const QueryResult result = run(aggregate);
        std::map<std::pair<std::optional<std::string>, std::optional<std::int64_t>>,
                 std::pair<std::int64_t, Int128>>
            groups;
        for (const auto &row : rows) {
            auto &group = groups[{row[1].null ? std::nullopt : std::optional<std::string>(row[1].str),
                                  row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64 % 3)}];
            ++group.first;
            group.second += row[4].i64;
        }
        Rows expected;
        for (const auto &[key, group] : groups) {
            expected.push_back({key.first ? Value::varchar(*key.first) : Value::null_of(Type::varchar()),
                                key.second ? Value::integer(*key.second) : Value::null_of(Type::integer()),
                                Value::bigint(group.first), Value::decimal(group.second, 38, 0),
                                key.first ? Value::varchar(*key.first) : Value::null_of(Type::varchar())});
        }
        SCOPED_TRACE(encoding == StringEncoding::plain ? "plain strings" : "dictionary strings");
        expect_same_multiset(result.rows, expected);
    }
}

TEST_P(OperatorTest, ScalarAggregation) {
    const Rows rows = make_rows(test::scaled(2500, 2), Keys::uniform, test::test_seed());
    const auto table = make_table(rows);
    const QueryResult result =
        run(plan::aggregate(plan::scan(table, all_columns()), {}, {}, all_aggregates()));
    GroupOracle all;
    for (const auto &row : rows) {
        add_to(all, row);
    }
    expect_rows(result.rows, {expected_aggregates(all)});
}

TEST_P(OperatorTest, AggregationOverEmptyInput) {
    const auto table = make_table(make_rows(500, Keys::uniform, 5));
    auto nothing = [&] {
        return plan::scan(table, all_columns(), expr::less(k_ref(), expr::constant(Value::integer(-1))));
    };
    // Scalar: one row, COUNT 0, everything else NULL.
    const QueryResult scalar = run(plan::aggregate(nothing(), {}, {}, all_aggregates()));
    expect_rows(scalar.rows, {expected_aggregates(GroupOracle{})});
    // Grouped: no rows.
    EXPECT_EQ(run(plan::aggregate(nothing(), {k_ref()}, {"k"}, all_aggregates())).rows.size(), 0U);
    // A table without rows at all.
    const auto empty = make_table({});
    expect_rows(run(plan::aggregate(plan::scan(empty, all_columns()), {}, {}, all_aggregates())).rows,
                {expected_aggregates(GroupOracle{})});
}

TEST_P(OperatorTest, AggregatesOfOnlyNulls) {
    Rows rows = make_rows(300, Keys::uniform, 9);
    for (auto &row : rows) {
        row[2] = Value::null_of(decimal_type);
        row[1] = Value::null_of(Type::varchar());
        row[3] = Value::null_of(Type::float64());
    }
    const auto table = make_table(rows);
    GroupOracle all;
    for (const auto &row : rows) {
        add_to(all, row);
    }
    expect_rows(run(plan::aggregate(plan::scan(table, all_columns()), {}, {}, all_aggregates())).rows,
                {expected_aggregates(all)});
    check_grouped_by_k(
        run(plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates())), rows);
}

TEST_P(OperatorTest, CountStarWithoutColumns) {
    const auto table = make_table(make_rows(777, Keys::uniform, 2));
    const QueryResult result = run(
        plan::aggregate(plan::scan(table, {}), {}, {}, {agg(AggregateFunction::count_star, nullptr, "n")}));
    expect_rows(result.rows, {{Value::bigint(777)}});
}

TEST_P(OperatorTest, AggregationFeedsFromSeparateNodesToo) {
    const Rows rows = make_rows(1200, Keys::skewed, test::test_seed());
    const auto table = make_table(rows);
    auto scan = plan::scan(table, all_columns());
    auto filter = plan::filter(std::move(scan), expr::is_null(b_ref(), true));
    const QueryResult result =
        run(plan::aggregate(std::move(filter), {k_ref()}, {"k"}, all_aggregates()), small_morsels(false));
    check_grouped_by_k(result, rows);
}

// ---- sort and limit ---------------------------------------------------------------------------

/// Rows of `rows` projected on `columns`, sorted by `keys` then every column ascending (NULLs
/// last), then rows [offset, offset + limit).
Rows oracle_sort(const Rows &rows, const std::vector<std::uint32_t> &columns,
                 const std::vector<SortKey> &keys, std::optional<std::uint64_t> limit = {},
                 std::uint64_t offset = 0) {
    Rows projected;
    for (const auto &row : rows) {
        std::vector<Value> out;
        for (const std::uint32_t c : columns) {
            out.push_back(row[c]);
        }
        projected.push_back(std::move(out));
    }
    std::sort(projected.begin(), projected.end(), [&](const auto &a, const auto &b) {
        for (const SortKey &key : keys) {
            const Value &x = a[key.column];
            const Value &y = b[key.column];
            const bool nulls_first = key.nulls_first.value_or(false);
            if (x.null || y.null) {
                if (x.null != y.null) {
                    return x.null == nulls_first;
                }
                continue;
            }
            const int order = compare_values(x, y);
            if (order != 0) {
                return key.descending ? order > 0 : order < 0;
            }
        }
        for (std::size_t c = 0; c < a.size(); ++c) {
            const int order = compare_values(a[c], b[c]);
            if (order != 0) {
                return order < 0;
            }
        }
        return false;
    });
    Rows result;
    for (std::size_t i = static_cast<std::size_t>(offset); i < projected.size(); ++i) {
        if (limit && result.size() == *limit) {
            break;
        }
        result.push_back(projected[i]);
    }
    return result;
}

TEST_P(OperatorTest, SortByMixedKeysIsExactAndInOrder) {
    const Rows rows = make_rows(test::scaled(3000, 2), Keys::uniform, test::test_seed());
    const auto table = make_table(rows);
    const std::vector<std::uint32_t> columns{0, 1, 2, 4};
    const std::vector<SortKey> keys{{0, false, std::nullopt}, {2, true, std::nullopt}};
    const QueryResult result = run(plan::sort(plan::scan(table, columns), keys));
    expect_rows(result.rows, oracle_sort(rows, columns, keys));
}

TEST_P(OperatorTest, SortNullPlacementAndStrings) {
    const Rows rows = make_rows(test::scaled(1500, 2), Keys::uniform, test::test_seed());
    const auto table = make_table(rows, 97, StringEncoding::plain);
    const std::vector<std::uint32_t> columns{1, 0, 5};
    for (const auto &keys : std::vector<std::vector<SortKey>>{
             {{0, false, true}, {1, true, false}},
             {{0, true, std::nullopt}},
             {{2, false, std::nullopt}, {0, true, true}},
         }) {
        const QueryResult result = run(plan::sort(plan::scan(table, columns), keys));
        expect_rows(result.rows, oracle_sort(rows, columns, keys));
    }
}

TEST_P(OperatorTest, TopNWithLimitAndOffset) {
    const Rows rows = make_rows(test::scaled(5000, 2), Keys::skewed, test::test_seed());
    const auto table = make_table(rows);
    const std::vector<std::uint32_t> columns{0, 2, 4, 1};
    const std::vector<SortKey> keys{{1, true, std::nullopt}, {0, false, std::nullopt}};
    for (const auto &[limit, offset] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
             {10, 0}, {7, 3}, {0, 0}, {100000, 4990}, {1500, 200}}) {
        SCOPED_TRACE("limit " + std::to_string(limit) + " offset " + std::to_string(offset));
        const QueryResult result = run(plan::sort(plan::scan(table, columns), keys, limit, offset));
        expect_rows(result.rows, oracle_sort(rows, columns, keys, limit, offset));
        // The same as a LIMIT over a sort (folded into the sort).
        const QueryResult folded =
            run(plan::limit(plan::sort(plan::scan(table, columns), keys), limit, offset));
        expect_rows(folded.rows, result.rows);
    }
}

TEST_P(OperatorTest, SortOfAggregateWithProjectionOnTop) {
    const Rows rows = make_rows(test::scaled(3000, 2), Keys::many, test::test_seed());
    const auto table = make_table(rows);
    for (const bool fuse : {true, false}) {
        // select k, count(*) as n from t group by k order by n desc, k limit 50 -> project (n, k)
        auto aggregate = plan::aggregate(plan::scan(table, {0}), {k_ref()}, {"k"},
                                         {agg(AggregateFunction::count_star, nullptr, "n")});
        auto sort = plan::sort(std::move(aggregate), {{1, true, std::nullopt}, {0, false, std::nullopt}}, 50);
        auto project =
            plan::project(std::move(sort), {col(1, Type::bigint()), col(0, Type::integer())}, {"n", "k"});
        const QueryResult result = run(project, small_morsels(fuse));
        std::map<std::optional<std::int64_t>, std::int64_t> counts;
        for (const auto &row : rows) {
            ++counts[row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64)];
        }
        Rows grouped;
        for (const auto &[key, n] : counts) {
            grouped.push_back(
                {key ? Value::integer(*key) : Value::null_of(Type::integer()), Value::bigint(n)});
        }
        Rows expected = oracle_sort(grouped, {1, 0}, {{0, true, std::nullopt}, {1, false, std::nullopt}}, 50);
        expect_rows(result.rows, expected);
    }
}

TEST_P(OperatorTest, SortOfEmptyInputAndAllEqualKeys) {
    const auto empty = make_table({});
    EXPECT_EQ(run(plan::sort(plan::scan(empty, {0, 1}), {{0, false, std::nullopt}})).rows.size(), 0U);
    const Rows rows = make_rows(800, Keys::all_equal, 4);
    const auto table = make_table(rows);
    const std::vector<std::uint32_t> columns{0, 4};
    const QueryResult result = run(plan::sort(plan::scan(table, columns), {{0, false, std::nullopt}}, 25, 5));
    expect_rows(result.rows, oracle_sort(rows, columns, {{0, false, std::nullopt}}, 25, 5));
}

TEST_P(OperatorTest, LimitWithoutOrder) {
    const Rows rows = make_rows(1000, Keys::uniform, test::test_seed());
    const auto table = make_table(rows);
    std::set<std::int64_t> all_b;
    for (const auto &row : rows) {
        all_b.insert(row[4].i64);
    }
    for (const auto &[limit, offset, expected] :
         std::vector<std::tuple<std::uint64_t, std::uint64_t, std::size_t>>{
             {10, 0, 10}, {10, 995, 5}, {0, 0, 0}, {5000, 0, 1000}, {3, 2000, 0}}) {
        const QueryResult result = run(plan::limit(plan::scan(table, {4}), limit, offset));
        ASSERT_EQ(result.rows.size(), expected) << "limit " << limit << " offset " << offset;
        std::set<std::int64_t> seen;
        for (const auto &row : result.rows) {
            EXPECT_TRUE(all_b.count(row[0].i64) == 1);
            EXPECT_TRUE(seen.insert(row[0].i64).second) << "a row came out twice";
        }
    }
}

// ---- errors, cancellation, explain ------------------------------------------------------------

TEST_P(OperatorTest, RuntimeErrorsFailTheQuery) {
    // SUM over DECIMAL(38,0) values of 9 * 10^36 overflows DECIMAL(38).
    TableBuilder builder("huge", Schema({{"x", Type::decimal(38, 0), true}}),
                         TableOptions{.fragment_capacity = 8});
    for (int i = 0; i < 40; ++i) {
        ASSERT_EQ(builder.append_row(std::vector<Value>{Value::decimal(decimal::pow10(36) * 9, 38, 0)}), "");
    }
    const auto huge = builder.finish(&runtime());
    auto sum = plan::aggregate(plan::scan(huge, {0}), {}, {},
                               {agg(AggregateFunction::sum, col(0, Type::decimal(38, 0)), "total")});
    EXPECT_THROW(run(sum), ExecutionError);
    auto grouped_sum = plan::aggregate(plan::scan(huge, {0}), {expr::constant(Value::integer(1))}, {"one"},
                                       {agg(AggregateFunction::sum, col(0, Type::decimal(38, 0)), "total")});
    EXPECT_THROW(run(grouped_sum), ExecutionError);

    // A CAST that cannot convert.
    const auto table = make_table(make_rows(200, Keys::uniform, 1));
    auto cast =
        plan::project(plan::scan(table, {1}),
                      {expr::cast(expr::constant(Value::varchar("not a number")), Type::integer())}, {"x"});
    try {
        static_cast<void>(run(cast));
        // Folding may already have failed at build time; then the factory threw instead.
    } catch (const ExecutionError &error) {
        EXPECT_NE(std::string(error.what()), "");
    } catch (const std::exception &error) {
        ADD_FAILURE() << "unexpected exception type: " << error.what();
    }
    auto cast_column = plan::project(plan::scan(table, {1}), {expr::cast(s_ref(0), Type::integer())}, {"x"});
    EXPECT_THROW(run(cast_column), ExecutionError);
}

TEST_P(OperatorTest, CancelledQueriesThrowAndFreeEverything) {
    const auto table = make_table(make_rows(test::scaled(4000, 2), Keys::many, 8));
    {
        ExecutionOptions options = small_morsels();
        options.cancel.cancel("stopped by the test");
        try {
            static_cast<void>(
                run(plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates()),
                    options));
            ADD_FAILURE() << "a cancelled query returned a result";
        } catch (const ExecutionError &error) {
            EXPECT_EQ(std::string(error.what()), "stopped by the test");
        }
    }
    // Cancel while running: either it finished first or it reports the reason; no leaks either
    // way (the leak checker of the debug preset and the fixture's task count look).
    for (int round = 0; round < 3; ++round) {
        ExecutionOptions options = small_morsels(round % 2 == 0);
        options.morsel_rows = 8;
        std::thread canceller([token = options.cancel, round] {
            std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
            token.cancel("cancel during the run");
        });
        try {
            auto plan = plan::sort(
                plan::aggregate(plan::scan(table, all_columns()), {k_ref()}, {"k"}, all_aggregates()),
                {{0, false, std::nullopt}});
            static_cast<void>(run(plan, options));
        } catch (const ExecutionError &error) {
            EXPECT_EQ(std::string(error.what()), "cancel during the run");
        }
        canceller.join();
    }
}

TEST_P(OperatorTest, ExplainShowsOperatorsAndPipelines) {
    const auto table = make_table(make_rows(100, Keys::uniform, 1));
    auto plan =
        plan::sort(plan::aggregate(plan::filter(plan::scan(table, all_columns()),
                                                expr::greater(k_ref(), expr::constant(Value::integer(3)))),
                                   {k_ref()}, {"k"}, {agg(AggregateFunction::sum, d_ref(), "total")}),
                   {{1, true, std::nullopt}}, 5);
    const std::string text = explain(*plan);
    EXPECT_NE(text.find("Scan t"), std::string::npos) << text;
    EXPECT_NE(text.find("Aggregate group by [k]"), std::string::npos) << text;
    EXPECT_NE(text.find("Pipelines"), std::string::npos) << text;
    EXPECT_NE(text.find("top-n"), std::string::npos) << text;
    EXPECT_NE(text.find("filter"), std::string::npos) << text;
    EXPECT_NE(text.find("rows=100"), std::string::npos) << text;
}

// ---- shared subplans -----------------------------------------------------------------------------

// One subplan read by two shared_scan nodes (a UNION ALL of both): it runs once, each reader gets
// every row with its own columns; a sorted subplan stays in order for a limit over a reader.
TEST_P(OperatorTest, SharedSubplanRunsOnceForEveryReader) {
    const Rows rows = make_rows(1200, Keys::uniform, test::test_seed());
    const auto table = make_table(rows);
    for (const bool fuse : {true, false}) {
        SCOPED_TRACE(fuse ? "fused" : "separate nodes");
        const std::shared_ptr<const PlanNode> subplan =
            plan::scan(table, {0, 4}, expr::is_null(col(0, Type::integer()), true));
        std::vector<PlanPtr> inputs;
        inputs.push_back(plan::shared_scan(subplan, {1}));
        inputs.push_back(plan::project(plan::shared_scan(subplan, {0, 1}),
                                       {expr::add(col(1, Type::bigint()), expr::constant(Value::bigint(1)))},
                                       {"b1"}));
        const PlanPtr both = plan::union_all(std::move(inputs));
        Rows expected;
        for (const auto &row : rows) {
            if (!row[0].null) {
                expected.push_back({row[4]});
                expected.push_back({Value::bigint(row[4].i64 + 1)});
            }
        }
        expect_same_multiset(run(both, small_morsels(fuse)).rows, expected);
        const std::string text = explain(*both);
        EXPECT_NE(text.find("of shared subplan #1 (below, computed once)"), std::string::npos) << text;
        EXPECT_NE(text.find("of shared subplan #1 (above)"), std::string::npos) << text;
        EXPECT_EQ(text.find("Scan t"), text.rfind("Scan t")) << text;               // shown once
        EXPECT_EQ(text.find("'scan t'"), text.rfind("'scan t'")) << text;           // compiled once
        EXPECT_NE(text.find("(after 1 'materialize')"), std::string::npos) << text; // readers wait
    }
    // Ordered: the top 30 of a sort, read through a reader.
    const std::vector<SortKey> keys{{1, true, std::nullopt}, {0, false, std::nullopt}};
    const std::shared_ptr<const PlanNode> sorted = plan::sort(plan::scan(table, {0, 4}), keys);
    const QueryResult top = run(plan::limit(plan::shared_scan(sorted, {0, 1}), 30));
    expect_rows(top.rows, oracle_sort(rows, {0, 4}, keys, 30));
    // An empty subplan: its readers emit nothing.
    const std::shared_ptr<const PlanNode> none =
        plan::scan(table, {0}, expr::less(col(0, Type::integer()), expr::constant(Value::integer(-5))));
    std::vector<PlanPtr> empty_inputs;
    empty_inputs.push_back(plan::shared_scan(none, {0}));
    empty_inputs.push_back(plan::shared_scan(none, {0}));
    EXPECT_EQ(run(plan::union_all(std::move(empty_inputs))).rows.size(), 0U);
}

INSTANTIATE_TEST_SUITE_P(Shapes, OperatorTest, ::testing::ValuesIn(operator_shapes()), test::shape_name);

// ---- plan builders ----------------------------------------------------------------------------

TEST(PlanBuilderTest, OutputSchemasAndDuckDbAggregateTypes) {
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::sum, Type::decimal(15, 2)), Type::decimal(38, 2));
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::sum, Type::integer()), Type::decimal(38, 0));
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::sum, Type::bigint()), Type::decimal(38, 0));
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::sum, Type::float64()), Type::float64());
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::avg, Type::decimal(15, 2)), Type::float64());
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::avg, Type::integer()), Type::float64());
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::count, Type::varchar()), Type::bigint());
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::count_distinct, Type::date()), Type::bigint());
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::min, Type::decimal(15, 2)), Type::decimal(15, 2));
    EXPECT_EQ(plan::aggregate_type(AggregateFunction::max, Type::varchar(10)), Type::varchar(10));
    EXPECT_THROW(static_cast<void>(plan::aggregate_type(AggregateFunction::sum, Type::varchar())),
                 std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::aggregate_type(AggregateFunction::avg, Type::date())),
                 std::invalid_argument);

    const auto table = Table::empty("t", test_schema());
    auto scan = plan::scan(table, {4, 0});
    ASSERT_EQ(scan->output.size(), 2U);
    EXPECT_EQ(scan->output[0].name, "b");
    EXPECT_FALSE(scan->output[0].nullable);
    EXPECT_TRUE(scan->output[1].nullable);
    auto aggregate = plan::aggregate(std::move(scan), {col(1, Type::integer())}, {},
                                     {agg(AggregateFunction::sum, col(0, Type::bigint()), ""),
                                      agg(AggregateFunction::count_star, nullptr, "n")});
    ASSERT_EQ(aggregate->output.size(), 3U);
    EXPECT_EQ(aggregate->output[0].name, "k");
    EXPECT_EQ(aggregate->output[1].name, "sum(b)");
    EXPECT_EQ(aggregate->output[1].type, Type::decimal(38, 0));
    EXPECT_FALSE(aggregate->output[2].nullable);
}

TEST(PlanBuilderTest, InvalidPlansAreRejected) {
    const auto table = Table::empty("t", test_schema());
    EXPECT_THROW(static_cast<void>(plan::scan(nullptr, {0})), std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::scan(table, {6})), std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::shared_scan(nullptr, {0})), std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::shared_scan(plan::scan(table, {0, 1}), {2})), std::invalid_argument);
    // Column #1 of the scan output is k (INTEGER), not BIGINT.
    EXPECT_THROW(static_cast<void>(plan::scan(table, {4, 0}, expr::is_null(col(1, Type::bigint())))),
                 std::invalid_argument);
    // Column #2 does not exist in a two-column scan.
    EXPECT_THROW(
        static_cast<void>(plan::filter(plan::scan(table, {4, 0}), expr::is_null(col(2, Type::integer())))),
        std::invalid_argument);
    // A predicate must be BOOLEAN.
    EXPECT_THROW(static_cast<void>(plan::filter(plan::scan(table, {4, 0}), col(0, Type::bigint()))),
                 std::invalid_argument);
    EXPECT_THROW(
        static_cast<void>(plan::project(plan::scan(table, {4}), {col(0, Type::bigint())}, {"a", "b"})),
        std::invalid_argument);
    EXPECT_THROW(
        static_cast<void>(plan::aggregate(plan::scan(table, {1}), {}, {},
                                          {agg(AggregateFunction::sum, col(0, Type::varchar()), "x")})),
        std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::aggregate(plan::scan(table, {1}), {}, {},
                                                   {agg(AggregateFunction::count, nullptr, "x")})),
                 std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::sort(plan::scan(table, {1}), {{1, false, std::nullopt}})),
                 std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::hash_join(plan::scan(table, {1}), plan::scan(table, {1}),
                                                   JoinKind::inner, {col(0, Type::varchar())}, {})),
                 std::invalid_argument);
    EXPECT_THROW(static_cast<void>(plan::filter(nullptr, expr::constant(Value::boolean(true)))),
                 std::invalid_argument);
}

TEST(ExecutorOptionsTest, InvalidMorselSizeIsRejected) {
    const auto table = Table::empty("t", test_schema());
    auto plan = plan::scan(table, {0});
    ExecutionOptions options;
    options.morsel_rows = 0;
    EXPECT_THROW(static_cast<void>(explain(*plan, options)), std::invalid_argument);
}

} // namespace
} // namespace mx::db
