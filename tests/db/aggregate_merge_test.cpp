// Grouped aggregation with many groups over several workers (src/db/operators/aggregate.cpp):
// each worker's groups land in hash partitions, and one finalize part per partition merges the
// workers' rows of a group and emits the partition. Checked against oracles computed here for
// every aggregate function, with NULL keys, keys in random order (each group in many workers) and
// in runs (most groups in one worker only), group estimates that are missing, right, far too low
// and far too high (they size the tables' indexes), empty input and a HAVING filter on top. Every
// test runs on 1, 2, 4 and 8 workers.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

const Type price_type = Type::decimal(12, 2);

/// Columns of "m": k BIGINT, d DECIMAL(12,2), f DOUBLE, s VARCHAR (all nullable).
Schema merge_schema() {
    return Schema({
        {"k", Type::bigint(), true},
        {"d", price_type, true},
        {"f", Type::float64(), true},
        {"s", Type::varchar(), true},
    });
}

ExprPtr col(std::uint32_t index, Type type) { return expr::column(index, type, ""); }
ExprPtr k_ref() { return col(0, Type::bigint()); }
ExprPtr d_ref() { return col(1, price_type); }
ExprPtr f_ref() { return col(2, Type::float64()); }
ExprPtr s_ref() { return col(3, Type::varchar()); }

AggregateSpec agg(AggregateFunction function, ExprPtr argument, std::string name) {
    return AggregateSpec{function, std::move(argument), std::move(name)};
}

/// Every aggregate function; string_agg sorted, so its result does not depend on the merge order.
std::vector<AggregateSpec> every_aggregate() {
    AggregateSpec joined = agg(AggregateFunction::string_agg, s_ref(), "s_joined");
    joined.separator = "|";
    joined.order = 1;
    AggregateSpec median = agg(AggregateFunction::quantile_cont, f_ref(), "f_median");
    median.fraction = 0.5;
    return {
        agg(AggregateFunction::count_star, nullptr, "n"),
        agg(AggregateFunction::count, d_ref(), "d_count"),
        agg(AggregateFunction::sum, d_ref(), "d_sum"),
        agg(AggregateFunction::avg, d_ref(), "d_avg"),
        agg(AggregateFunction::min, d_ref(), "d_min"),
        agg(AggregateFunction::max, d_ref(), "d_max"),
        agg(AggregateFunction::min, s_ref(), "s_min"),
        agg(AggregateFunction::max, s_ref(), "s_max"),
        agg(AggregateFunction::sum, f_ref(), "f_sum"),
        agg(AggregateFunction::var_samp, f_ref(), "f_var_samp"),
        agg(AggregateFunction::var_pop, f_ref(), "f_var_pop"),
        agg(AggregateFunction::stddev_samp, f_ref(), "f_stddev_samp"),
        agg(AggregateFunction::stddev_pop, f_ref(), "f_stddev_pop"),
        agg(AggregateFunction::count_distinct, d_ref(), "d_distinct"),
        agg(AggregateFunction::sum_distinct, d_ref(), "d_sum_distinct"),
        agg(AggregateFunction::avg_distinct, d_ref(), "d_avg_distinct"),
        median,
        joined,
    };
}

/// One group's input values (non-NULL ones), from which the oracle computes every aggregate.
struct Group {
    std::int64_t rows{0};
    std::vector<std::int64_t> d;
    std::vector<double> f;
    std::vector<std::string> s;
};

Value decimal_sum(const std::vector<std::int64_t> &values) {
    Int128 sum = 0;
    for (const std::int64_t value : values) {
        sum += value;
    }
    return Value::decimal(sum, 38, 2);
}

Value average(const std::vector<std::int64_t> &values) {
    Int128 sum = 0;
    for (const std::int64_t value : values) {
        sum += value;
    }
    return Value::float64(static_cast<double>(sum) / 100.0 / static_cast<double>(values.size()));
}

std::vector<Value> expected_aggregates(const Group &group) {
    const Value null_double = Value::null_of(Type::float64());
    std::vector<Value> out;
    out.push_back(Value::bigint(group.rows));
    out.push_back(Value::bigint(static_cast<std::int64_t>(group.d.size())));
    const bool has_d = !group.d.empty();
    out.push_back(has_d ? decimal_sum(group.d) : Value::null_of(Type::decimal(38, 2)));
    out.push_back(has_d ? average(group.d) : null_double);
    out.push_back(has_d ? Value::decimal(*std::min_element(group.d.begin(), group.d.end()), 12, 2)
                        : Value::null_of(price_type));
    out.push_back(has_d ? Value::decimal(*std::max_element(group.d.begin(), group.d.end()), 12, 2)
                        : Value::null_of(price_type));
    const bool has_s = !group.s.empty();
    out.push_back(has_s ? Value::varchar(*std::min_element(group.s.begin(), group.s.end()))
                        : Value::null_of(Type::varchar()));
    out.push_back(has_s ? Value::varchar(*std::max_element(group.s.begin(), group.s.end()))
                        : Value::null_of(Type::varchar()));
    const auto n = static_cast<double>(group.f.size());
    double f_sum = 0;
    for (const double value : group.f) {
        f_sum += value;
    }
    out.push_back(group.f.empty() ? null_double : Value::float64(f_sum));
    double m2 = 0;
    for (const double value : group.f) {
        m2 += (value - f_sum / n) * (value - f_sum / n);
    }
    out.push_back(group.f.size() < 2 ? null_double : Value::float64(m2 / (n - 1)));
    out.push_back(group.f.empty() ? null_double : Value::float64(m2 / n));
    out.push_back(group.f.size() < 2 ? null_double : Value::float64(std::sqrt(m2 / (n - 1))));
    out.push_back(group.f.empty() ? null_double : Value::float64(std::sqrt(m2 / n)));
    std::vector<std::int64_t> distinct = group.d;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    out.push_back(Value::bigint(static_cast<std::int64_t>(distinct.size())));
    out.push_back(has_d ? decimal_sum(distinct) : Value::null_of(Type::decimal(38, 2)));
    out.push_back(has_d ? average(distinct) : null_double);
    if (group.f.empty()) {
        out.push_back(null_double);
    } else {
        std::vector<double> sorted = group.f;
        std::sort(sorted.begin(), sorted.end());
        const double position = 0.5 * (n - 1);
        const double low = sorted[static_cast<std::size_t>(std::floor(position))];
        const double high = sorted[static_cast<std::size_t>(std::ceil(position))];
        out.push_back(Value::float64(low + (position - std::floor(position)) * (high - low)));
    }
    if (!has_s) {
        out.push_back(Value::null_of(Type::varchar()));
    } else {
        std::vector<std::string> sorted = group.s;
        std::sort(sorted.begin(), sorted.end());
        std::string joined;
        for (std::size_t i = 0; i < sorted.size(); ++i) {
            joined.append(i == 0 ? "" : "|").append(sorted[i]);
        }
        out.push_back(Value::varchar(joined));
    }
    return out;
}

bool same_value(const Value &actual, const Value &expected) {
    if (actual.null || expected.null) {
        return actual.null == expected.null;
    }
    if (expected.type.physical() == PhysicalType::f64) {
        const double scale = std::max(std::abs(expected.f64), 1.0);
        return actual.type.physical() == PhysicalType::f64 &&
               std::abs(actual.f64 - expected.f64) <= 1e-9 * scale;
    }
    return actual.to_string() == expected.to_string();
}

/// `count` rows whose keys take `groups` values (and NULL), in random order or sorted into runs.
Rows make_rows(std::uint32_t count, std::uint32_t groups, bool in_runs, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    Rows rows;
    for (std::uint32_t i = 0; i < count; ++i) {
        const auto key = random() % (groups + 1);
        rows.push_back({
            key == groups ? Value::null_of(Type::bigint())
                          : Value::bigint(static_cast<std::int64_t>(key) * 7919),
            random() % 8 == 0 ? Value::null_of(price_type)
                              : Value::decimal(static_cast<std::int64_t>(random() % 2001) - 1000, 12, 2),
            random() % 8 == 0 ? Value::null_of(Type::float64())
                              : Value::float64(static_cast<double>(random() % 4001) / 16.0 - 100.0),
            random() % 8 == 0 ? Value::null_of(Type::varchar())
                              : Value::varchar("v" + std::to_string(random() % 50)),
        });
    }
    if (in_runs) {
        std::stable_sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
            // NULL keys last, in a run of their own
            return a[0].null != b[0].null ? b[0].null : !a[0].null && a[0].i64 < b[0].i64;
        });
    }
    return rows;
}

std::map<std::optional<std::int64_t>, Group> oracle_groups(const Rows &rows) {
    std::map<std::optional<std::int64_t>, Group> groups;
    for (const auto &row : rows) {
        Group &group = groups[row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64)];
        ++group.rows;
        if (!row[1].null) {
            group.d.push_back(row[1].i64);
        }
        if (!row[2].null) {
            group.f.push_back(row[2].f64);
        }
        if (!row[3].null) {
            group.s.push_back(row[3].str);
        }
    }
    return groups;
}

class AggregateMergeTest : public test::RuntimeFixture {
protected:
    std::shared_ptr<const Table> make_table(const Rows &rows) {
        TableBuilder builder("m", merge_schema(), TableOptions{.fragment_capacity = 256});
        for (const auto &row : rows) {
            EXPECT_EQ(builder.append_row(row), "");
        }
        return builder.finish(&runtime());
    }

    /// GROUP BY k with every aggregate; `estimate` (when set) as the optimizer's group estimate.
    QueryResult group_by_k(const std::shared_ptr<const Table> &table, std::optional<double> estimate,
                           ExprPtr having = nullptr) {
        PlanPtr plan = plan::aggregate(plan::scan(table, {0, 1, 2, 3}), {k_ref()}, {"k"}, every_aggregate());
        if (estimate) {
            plan->estimated_rows = *estimate;
        }
        if (having != nullptr) {
            plan = plan::filter(std::move(plan), std::move(having));
        }
        ExecutionOptions options;
        options.morsel_rows = 128; // many tasks, so every worker sees groups
        return execute(runtime(), *plan, options);
    }

    /// The result holds exactly the oracle's groups (those `keep` accepts) and their values.
    static void expect_groups(
        const QueryResult &result, const Rows &rows,
        bool (*keep)(const Group &) = [](const Group &) { return true; }) {
        auto groups = oracle_groups(rows);
        std::erase_if(groups, [&](const auto &entry) { return !keep(entry.second); });
        ASSERT_EQ(result.rows.size(), groups.size());
        for (const auto &row : result.rows) {
            const auto found =
                groups.find(row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64));
            ASSERT_NE(found, groups.end()) << "an unexpected or repeated group " << row[0].to_string();
            const std::vector<Value> expected = expected_aggregates(found->second);
            ASSERT_EQ(row.size(), expected.size() + 1);
            for (std::size_t c = 0; c < expected.size(); ++c) {
                EXPECT_TRUE(same_value(row[1 + c], expected[c]))
                    << "group " << row[0].to_string() << " column " << result.columns[1 + c].name << ": got "
                    << row[1 + c].to_string() << ", expected " << expected[c].to_string();
            }
            groups.erase(found);
        }
    }
};

TEST_P(AggregateMergeTest, ManyGroupsWithEveryAggregateAndEveryEstimate) {
    constexpr std::uint32_t groups = 1500;
    for (const bool in_runs : {false, true}) {
        const Rows rows = make_rows(test::scaled(6000, 2), groups, in_runs, test::test_seed());
        const auto table = make_table(rows);
        for (const std::optional<double> estimate :
             {std::optional<double>{}, std::optional<double>{groups}, std::optional<double>{1.0},
              std::optional<double>{1e15}}) {
            SCOPED_TRACE(std::string(in_runs ? "keys in runs" : "keys in random order") + ", estimate " +
                         (estimate ? std::to_string(*estimate) : "none"));
            expect_groups(group_by_k(table, estimate), rows);
        }
    }
}

TEST_P(AggregateMergeTest, TablesOfThousandsOfGroupsGrowToTheEstimate) {
    // More than 4 k groups per partition table on 1 and 2 workers (1 and 8 partitions; keys in
    // random order give every worker every group), so those indexes grow to the estimate's size
    // in one step: right, far too low, far too high.
    const std::uint32_t groups = test::scaled(40000, 2);
    for (const bool in_runs : {true, false}) {
        Rows rows = make_rows(groups + groups / 4, groups, in_runs, test::test_seed() + 2);
        const auto table = make_table(rows);
        std::map<std::optional<std::int64_t>, std::pair<std::int64_t, Int128>> expected;
        for (const auto &row : rows) {
            auto &group = expected[row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64)];
            ++group.first;
            group.second += row[1].null ? 0 : row[1].i64;
        }
        for (const double estimate : {static_cast<double>(groups), 1.0, 1e15}) {
            SCOPED_TRACE(std::string(in_runs ? "keys in runs" : "keys in random order") + ", estimate " +
                         std::to_string(estimate));
            PlanPtr plan = plan::aggregate(plan::scan(table, {0, 1}), {k_ref()}, {"k"},
                                           {agg(AggregateFunction::count_star, nullptr, "n"),
                                            agg(AggregateFunction::count, d_ref(), "d_count"),
                                            agg(AggregateFunction::sum, d_ref(), "d_sum")});
            plan->estimated_rows = estimate;
            const QueryResult result = execute(runtime(), *plan);
            ASSERT_EQ(result.rows.size(), expected.size());
            auto remaining = expected;
            for (const auto &row : result.rows) {
                const auto found =
                    remaining.find(row[0].null ? std::nullopt : std::optional<std::int64_t>(row[0].i64));
                ASSERT_NE(found, remaining.end()) << "an unexpected or repeated group " << row[0].to_string();
                EXPECT_EQ(row[1].i64, found->second.first);
                if (!row[3].null) {
                    EXPECT_EQ(row[3].to_string(), Value::decimal(found->second.second, 38, 2).to_string());
                }
                remaining.erase(found);
            }
        }
    }
}

TEST_P(AggregateMergeTest, OnlyNullKeysFormOneGroup) {
    Rows rows = make_rows(2000, 100, false, 11);
    for (auto &row : rows) {
        row[0] = Value::null_of(Type::bigint());
    }
    const QueryResult result = group_by_k(make_table(rows), 2000.0);
    ASSERT_EQ(result.rows.size(), 1U);
    expect_groups(result, rows);
}

TEST_P(AggregateMergeTest, EmptyInputEmitsNoGroups) {
    EXPECT_EQ(group_by_k(make_table({}), 1e6).rows.size(), 0U);
    const auto table = make_table(make_rows(500, 100, false, 3));
    PlanPtr nothing = plan::aggregate(
        plan::scan(table, {0, 1, 2, 3}, expr::less(k_ref(), expr::constant(Value::bigint(-1)))), {k_ref()},
        {"k"}, every_aggregate());
    nothing->estimated_rows = 100;
    EXPECT_EQ(execute(runtime(), *nothing).rows.size(), 0U);
}

TEST_P(AggregateMergeTest, HavingKeepsTheGroupsItAccepts) {
    const Rows rows = make_rows(test::scaled(8000, 2), 2000, true, test::test_seed() + 1);
    // HAVING count(*) > 4: column 1 of the aggregation's output.
    const QueryResult result = group_by_k(
        make_table(rows), 2000.0, expr::greater(col(1, Type::bigint()), expr::constant(Value::bigint(4))));
    EXPECT_GT(result.rows.size(), 0U);
    expect_groups(result, rows, [](const Group &group) { return group.rows > 4; });
}

std::vector<test::RuntimeShape> merge_shapes() {
    return test::runtime_shapes_named({"workers1", "workers2", "workers4", "workers8"});
}

INSTANTIATE_TEST_SUITE_P(Shapes, AggregateMergeTest, ::testing::ValuesIn(merge_shapes()), test::shape_name);

} // namespace
} // namespace mx::db
