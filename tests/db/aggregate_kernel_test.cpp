// The small-group kernels of the hash aggregation (src/db/operators/aggregate.cpp): the key cache
// that finds a row's group by the raw bytes of its key cells, and the lanes that add a batch's
// exact sums and counts into local accumulators. Checked against oracles computed here: NULL
// keys, plain and dictionary-encoded string keys, more groups in a batch than there are lanes,
// a cache that switches itself off, 128-bit sums whose partial sums leave 128 bits, empty
// input. Every test runs on 1, 2 and 4 workers.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
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

const Type wide_type = Type::decimal(38, 0);
const Type price_type = Type::decimal(12, 2);

/// Columns of "k": g VARCHAR, h INTEGER, v DECIMAL(38,0), w BIGINT NOT NULL, d DECIMAL(12,2),
/// f DOUBLE.
Schema kernel_schema() {
    return Schema({
        {"g", Type::varchar(), true},
        {"h", Type::integer(), true},
        {"v", wide_type, true},
        {"w", Type::bigint(), false},
        {"d", price_type, true},
        {"f", Type::float64(), true},
    });
}

ExprPtr col(std::uint32_t index, Type type) { return expr::column(index, type, ""); }
ExprPtr g_ref() { return col(0, Type::varchar()); }
ExprPtr h_ref() { return col(1, Type::integer()); }

AggregateSpec agg(AggregateFunction function, ExprPtr argument, std::string name) {
    return AggregateSpec{function, std::move(argument), std::move(name)};
}

/// Sums and counts (the lanes' aggregates) plus a double sum (kept in row order), no DISTINCT.
std::vector<AggregateSpec> kernel_aggregates() {
    return {
        agg(AggregateFunction::count_star, nullptr, "n"),
        agg(AggregateFunction::count, col(2, wide_type), "v_count"),
        agg(AggregateFunction::sum, col(2, wide_type), "v_sum"),
        agg(AggregateFunction::sum, col(3, Type::bigint()), "w_sum"),
        agg(AggregateFunction::avg, col(4, price_type), "d_avg"),
        agg(AggregateFunction::sum, col(4, price_type), "d_sum"),
        agg(AggregateFunction::sum, col(5, Type::float64()), "f_sum"),
    };
}

struct Oracle {
    std::int64_t rows{0};
    std::int64_t v_count{0};
    Int128 v_sum{0};
    Int128 w_sum{0};
    std::int64_t d_count{0};
    Int128 d_sum{0};
    std::int64_t f_count{0};
    double f_sum{0};

    void add(const std::vector<Value> &row) {
        ++rows;
        if (!row[2].null) {
            ++v_count;
            v_sum += row[2].i128;
        }
        w_sum += row[3].i64;
        if (!row[4].null) {
            ++d_count;
            d_sum += row[4].i64;
        }
        if (!row[5].null) {
            ++f_count;
            f_sum += row[5].f64;
        }
    }

    [[nodiscard]] std::vector<Value> values() const {
        return {
            Value::bigint(rows),
            Value::bigint(v_count),
            v_count > 0 ? Value::decimal(v_sum, 38, 0) : Value::null_of(wide_type),
            rows > 0 ? Value::decimal(w_sum, 38, 0) : Value::null_of(wide_type),
            d_count > 0 ? Value::float64(static_cast<double>(d_sum) / 100.0 / static_cast<double>(d_count))
                        : Value::null_of(Type::float64()),
            d_count > 0 ? Value::decimal(d_sum, 38, 2) : Value::null_of(Type::decimal(38, 2)),
            f_count > 0 ? Value::float64(f_sum) : Value::null_of(Type::float64()),
        };
    }
};

using GroupKey = std::pair<std::optional<std::string>, std::optional<std::int64_t>>;

GroupKey key_of(const std::vector<Value> &row) {
    return {row[0].null ? std::nullopt : std::optional<std::string>(row[0].str),
            row[1].null ? std::nullopt : std::optional<std::int64_t>(row[1].i64)};
}

bool same_value(const Value &actual, const Value &expected) {
    if (actual.null || expected.null) {
        return actual.null == expected.null;
    }
    if (expected.type.physical() == PhysicalType::f64) {
        const double scale = std::max(std::abs(expected.f64), 1e-300);
        return actual.type.physical() == PhysicalType::f64 &&
               std::abs(actual.f64 - expected.f64) <= 1e-9 * scale;
    }
    return actual.to_string() == expected.to_string();
}

/// Rows of `count` with g from `strings` (index strings.size(): NULL) and h in [0, h_values]
/// (h_values: NULL), values with NULLs.
Rows make_rows(std::uint32_t count, const std::vector<std::string> &strings, std::int64_t h_values,
               std::uint64_t seed) {
    std::mt19937_64 random(seed);
    Rows rows;
    for (std::uint32_t i = 0; i < count; ++i) {
        const auto g = random() % (strings.size() + 1);
        const auto h = static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(h_values + 1));
        rows.push_back({
            g == strings.size() ? Value::null_of(Type::varchar()) : Value::varchar(strings[g]),
            h == h_values ? Value::null_of(Type::integer()) : Value::integer(h),
            random() % 10 == 0 ? Value::null_of(wide_type)
                               : Value::decimal(static_cast<Int128>(random() % 2000001) - 1000000, 38, 0),
            Value::bigint(static_cast<std::int64_t>(random() % 1000000007) - 500000000),
            random() % 10 == 0 ? Value::null_of(price_type)
                               : Value::decimal(static_cast<std::int64_t>(random() % 200001) - 100000, 12, 2),
            random() % 10 == 0 ? Value::null_of(Type::float64())
                               : Value::float64(static_cast<double>(random() % 10001) / 64.0),
        });
    }
    return rows;
}

class AggregateKernelTest : public test::RuntimeFixture {
protected:
    std::shared_ptr<const Table> make_table(const Rows &rows,
                                            StringEncoding encoding = StringEncoding::automatic) {
        TableBuilder builder("k", kernel_schema(),
                             TableOptions{.fragment_capacity = 1000, .string_encoding = encoding});
        for (const auto &row : rows) {
            EXPECT_EQ(builder.append_row(row), "");
        }
        return builder.finish(&runtime());
    }

    QueryResult run(const PlanPtr &plan, std::uint32_t morsel_rows) {
        ExecutionOptions options;
        options.morsel_rows = morsel_rows;
        return execute(runtime(), *plan, options);
    }

    QueryResult group_by_g_and_h(const std::shared_ptr<const Table> &table, std::uint32_t morsel_rows) {
        return run(plan::aggregate(plan::scan(table, {0, 1, 2, 3, 4, 5}), {g_ref(), h_ref()}, {"g", "h"},
                                   kernel_aggregates()),
                   morsel_rows);
    }

    /// The result of GROUP BY g, h holds exactly the oracle's groups and values.
    static void expect_groups(const QueryResult &result, const Rows &rows) {
        std::map<GroupKey, Oracle> groups;
        for (const auto &row : rows) {
            groups[key_of(row)].add(row);
        }
        ASSERT_EQ(result.rows.size(), groups.size());
        for (const auto &row : result.rows) {
            const auto found = groups.find(key_of(row));
            ASSERT_NE(found, groups.end())
                << "an unexpected group " << row[0].to_string() << ", " << row[1].to_string();
            const std::vector<Value> expected = found->second.values();
            for (std::size_t c = 0; c < expected.size(); ++c) {
                EXPECT_TRUE(same_value(row[2 + c], expected[c]))
                    << "group " << row[0].to_string() << ", " << row[1].to_string() << " column " << c
                    << ": got " << row[2 + c].to_string() << ", expected " << expected[c].to_string();
            }
            groups.erase(found);
        }
    }
};

TEST_P(AggregateKernelTest, FewGroupsWithNullKeysMatchTheOracle) {
    const Rows rows = make_rows(test::scaled(6000, 2), {"A", "N", "R"}, 2, test::test_seed());
    for (const StringEncoding encoding : {StringEncoding::plain, StringEncoding::dictionary}) {
        const auto table = make_table(rows, encoding);
        for (const std::uint32_t morsel_rows : {40U, 4096U}) {
            SCOPED_TRACE(std::string(encoding == StringEncoding::plain ? "plain" : "dictionary") +
                         " strings, " + std::to_string(morsel_rows) + "-row morsels");
            expect_groups(group_by_g_and_h(table, morsel_rows), rows);
            // Scalar: one group of everything.
            Oracle all;
            for (const auto &row : rows) {
                all.add(row);
            }
            const QueryResult scalar =
                run(plan::aggregate(plan::scan(table, {0, 1, 2, 3, 4, 5}), {}, {}, kernel_aggregates()),
                    morsel_rows);
            ASSERT_EQ(scalar.rows.size(), 1U);
            const std::vector<Value> expected = all.values();
            for (std::size_t c = 0; c < expected.size(); ++c) {
                EXPECT_TRUE(same_value(scalar.rows[0][c], expected[c])) << "column " << c;
            }
        }
    }
}

TEST_P(AggregateKernelTest, MoreGroupsInABatchThanLanes) {
    // 7 x 6 = 42 groups: a batch meets more than 16, and the 64 cache slots collide.
    const Rows rows = make_rows(
        test::scaled(8000, 2), {"a", "bb", "ccc", "dddd", "e", "ffffffffffffffffffff"}, 5, test::test_seed());
    for (const StringEncoding encoding : {StringEncoding::plain, StringEncoding::dictionary}) {
        SCOPED_TRACE(encoding == StringEncoding::plain ? "plain strings" : "dictionary strings");
        expect_groups(group_by_g_and_h(make_table(rows, encoding), 4096), rows);
    }
}

TEST_P(AggregateKernelTest, ManyGroupsAfterFewSwitchTheCacheOff) {
    // 3000 rows of 2 groups, then every row a new group (h unique): the batches of the second
    // part miss the cache on every row and the workers fall back to hashing.
    Rows rows = make_rows(3000, {"x"}, 2, test::test_seed());
    const Rows more = make_rows(test::scaled(5000, 2), {"y"}, 1, test::test_seed() + 1);
    for (std::size_t i = 0; i < more.size(); ++i) {
        rows.push_back(more[i]);
        rows.back()[0] = Value::varchar("y");
        rows.back()[1] = Value::integer(static_cast<std::int64_t>(100 + i));
    }
    expect_groups(group_by_g_and_h(make_table(rows, StringEncoding::dictionary), 1024), rows);
}

TEST_P(AggregateKernelTest, WideSumsLeave128BitsOnTheWay) {
    // M = 10^38 - 1 > 2^126: two of them leave the signed 128-bit range. Eight M then eight -M in
    // one group put M, M, -M, -M into each of the four lanes of a batch; the sum is exact (0),
    // and a group with one M more than -M sums to M. BIGINT extremes next to them.
    const Int128 m = decimal::pow10(38) - 1;
    Rows rows;
    auto add = [&](std::int64_t h, Int128 v, std::int64_t w) {
        rows.push_back({Value::varchar("g"), Value::integer(h), Value::decimal(v, 38, 0), Value::bigint(w),
                        Value::null_of(price_type), Value::null_of(Type::float64())});
    };
    for (int i = 0; i < 8; ++i) {
        add(1, m, std::numeric_limits<std::int64_t>::max());
    }
    for (int i = 0; i < 8; ++i) {
        add(1, -m, std::numeric_limits<std::int64_t>::max());
    }
    for (int i = 0; i < 8; ++i) {
        add(2, m, std::numeric_limits<std::int64_t>::min());
    }
    for (int i = 0; i < 7; ++i) {
        add(2, -m, std::numeric_limits<std::int64_t>::min());
    }
    const auto table = make_table(rows);
    for (const std::uint32_t morsel_rows : {3U, 4096U}) {
        SCOPED_TRACE(std::to_string(morsel_rows) + "-row morsels");
        const QueryResult result = group_by_g_and_h(table, morsel_rows);
        ASSERT_EQ(result.rows.size(), 2U);
        for (const auto &row : result.rows) {
            const bool first = row[1].i64 == 1;
            EXPECT_EQ(row[4].to_string(), Value::decimal(first ? 0 : m, 38, 0).to_string());
            const Int128 w = first ? Int128{16} * std::numeric_limits<std::int64_t>::max()
                                   : Int128{15} * std::numeric_limits<std::int64_t>::min();
            EXPECT_EQ(row[5].to_string(), Value::decimal(w, 38, 0).to_string());
        }
        // All 31 rows in one scalar sum: M in the end.
        const QueryResult scalar =
            run(plan::aggregate(plan::scan(table, {2}), {}, {},
                                {agg(AggregateFunction::sum, col(0, wide_type), "v_sum")}),
                morsel_rows);
        EXPECT_EQ(scalar.rows.at(0).at(0).to_string(), Value::decimal(m, 38, 0).to_string());
    }
    // Seventeen M in one group do not fit DECIMAL(38), though their sum modulo 2^128 does (about
    // -1.4 * 10^36): only the carries tell. Every fourth row, so all of them meet in one lane.
    Rows too_big;
    for (int i = 0; i < 4 * 17; ++i) {
        too_big.push_back({Value::varchar("g"), Value::integer(i % 4 == 0 ? 1 : 2),
                           Value::decimal(i % 4 == 0 ? m : Int128{0}, 38, 0), Value::bigint(0),
                           Value::null_of(price_type), Value::null_of(Type::float64())});
    }
    const auto too_big_table = make_table(too_big);
    EXPECT_THROW(group_by_g_and_h(too_big_table, 4096), ExecutionError);
    EXPECT_THROW(run(plan::aggregate(plan::scan(too_big_table, {2}), {}, {},
                                     {agg(AggregateFunction::sum, col(0, wide_type), "v_sum")}),
                     4096),
                 ExecutionError);
}

TEST_P(AggregateKernelTest, EmptyInput) {
    const auto table = make_table(make_rows(500, {"A"}, 1, 3));
    auto nothing = [&] {
        return plan::scan(table, {0, 1, 2, 3, 4, 5}, expr::less(h_ref(), expr::constant(Value::integer(-1))));
    };
    EXPECT_EQ(run(plan::aggregate(nothing(), {g_ref(), h_ref()}, {"g", "h"}, kernel_aggregates()), 4096)
                  .rows.size(),
              0U);
    const QueryResult scalar = run(plan::aggregate(nothing(), {}, {}, kernel_aggregates()), 4096);
    ASSERT_EQ(scalar.rows.size(), 1U);
    const std::vector<Value> expected = Oracle{}.values();
    for (std::size_t c = 0; c < expected.size(); ++c) {
        EXPECT_TRUE(same_value(scalar.rows[0][c], expected[c])) << "column " << c;
    }
}

std::vector<test::RuntimeShape> kernel_shapes() {
    return test::runtime_shapes_named({"workers1", "workers2", "workers4"});
}

INSTANTIATE_TEST_SUITE_P(Shapes, AggregateKernelTest, ::testing::ValuesIn(kernel_shapes()), test::shape_name);

} // namespace
} // namespace mx::db
