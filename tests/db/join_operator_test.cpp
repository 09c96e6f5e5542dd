// Hash join operators: every join kind under both strategies (and automatic) on
// 1, 2 and 4 workers and a simulated 2x1 NUMA topology, checked against a
// nested-loop oracle: empty sides, NULL keys on either side, all-duplicate and
// Zipf-skewed keys, multi-column, string, decimal, double and date keys,
// residual predicates, and inputs that span many batches and partitions.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/plan.h>
#include <mx/db/table.h>

#include "operators/bloom_filter.h"
#include "operators/hash_join.h"
#include "support/runtime_fixture.h"

namespace mx::db {
namespace {

using Row = std::vector<Value>;
using Rows = std::vector<Row>;

constexpr JoinKind all_kinds[] = {JoinKind::inner,      JoinKind::left_outer, JoinKind::semi,
                                  JoinKind::anti,       JoinKind::full_outer, JoinKind::right_semi,
                                  JoinKind::right_anti, JoinKind::right_outer};

/// The joins whose output pairs probe and build rows (the others output one side's rows).
bool outputs_pairs(JoinKind kind) {
    return kind == JoinKind::inner || kind == JoinKind::left_outer || kind == JoinKind::full_outer ||
           kind == JoinKind::right_outer;
}
/// The joins that output each build row without a partner, NULL-padded on the probe side.
bool pads_build_rows(JoinKind kind) { return kind == JoinKind::full_outer || kind == JoinKind::right_outer; }
/// The joins that output each probe row without a partner, NULL-padded on the build side.
bool pads_probe_rows(JoinKind kind) { return kind == JoinKind::left_outer || kind == JoinKind::full_outer; }
constexpr JoinStrategy all_strategies[] = {JoinStrategy::non_partitioned, JoinStrategy::radix_partitioned,
                                           JoinStrategy::automatic};
/// (strategy, Bloom filter) pairs every case runs with.
constexpr std::pair<JoinStrategy, bool> configurations[] = {{JoinStrategy::non_partitioned, true},
                                                            {JoinStrategy::radix_partitioned, true},
                                                            {JoinStrategy::radix_partitioned, false},
                                                            {JoinStrategy::automatic, false}};

const char *strategy_name(JoinStrategy strategy) {
    switch (strategy) {
    case JoinStrategy::non_partitioned:
        return "non_partitioned";
    case JoinStrategy::radix_partitioned:
        return "radix";
    case JoinStrategy::automatic:
        return "automatic";
    }
    return "?";
}

std::shared_ptr<const Table> make_table(const std::string &name, std::vector<ColumnDef> columns,
                                        const Rows &rows, std::uint32_t fragment_capacity = 700) {
    TableOptions options;
    options.fragment_capacity = fragment_capacity;
    TableBuilder builder(name, Schema(std::move(columns)), options);
    for (const Row &row : rows) {
        const std::string error = builder.append_row(row);
        EXPECT_EQ(error, "") << "test row rejected";
    }
    return builder.finish();
}

std::string row_text(const Row &row) {
    std::string text;
    for (const Value &value : row) {
        text.append(value.to_string());
        text.push_back('|');
    }
    return text;
}

using Residual = std::function<bool(const Row &probe, const Row &build)>;

/// The key of a row as bytes that are equal exactly when SQL equality holds for
/// every key column (-0.0 = 0.0, NaN = NaN as in DuckDB); nullopt when a key is
/// NULL (it matches nothing).
std::optional<std::string> key_bytes(const Row &row, const std::vector<std::size_t> &columns) {
    std::string bytes;
    for (const std::size_t column : columns) {
        const Value &value = row[column];
        if (value.null) {
            return std::nullopt;
        }
        switch (value.type.physical()) {
        case PhysicalType::u8:
        case PhysicalType::i64:
            bytes.append(reinterpret_cast<const char *>(&value.i64), sizeof(value.i64));
            break;
        case PhysicalType::i128:
            bytes.append(reinterpret_cast<const char *>(&value.i128), sizeof(value.i128));
            break;
        case PhysicalType::f64: {
            double normalized = value.f64 == 0.0 ? 0.0 : value.f64;
            if (std::isnan(normalized)) {
                normalized = std::numeric_limits<double>::quiet_NaN();
            }
            bytes.append(reinterpret_cast<const char *>(&normalized), sizeof(normalized));
            break;
        }
        case PhysicalType::string: {
            const auto size = static_cast<std::uint32_t>(value.str.size());
            bytes.append(reinterpret_cast<const char *>(&size), sizeof(size));
            bytes.append(value.str);
            break;
        }
        }
    }
    return bytes;
}

/// The oracle: a plain nested loop over both inputs finds, for every probe row,
/// the build rows it joins with; the expected result of each join kind follows
/// from that as sorted row texts.
class NestedLoop {
public:
    NestedLoop(const Rows &probe, const Rows &build, const std::vector<Type> &probe_types,
               const std::vector<Type> &build_types,
               const std::vector<std::pair<std::size_t, std::size_t>> &keys, const Residual &residual)
        : _probe(probe), _build(build), _probe_types(probe_types), _build_types(build_types),
          _matches(probe.size()), _build_matched(build.size(), false) {
        std::vector<std::size_t> probe_columns;
        std::vector<std::size_t> build_columns;
        for (const auto &[pk, bk] : keys) {
            probe_columns.push_back(pk);
            build_columns.push_back(bk);
        }
        std::vector<std::optional<std::string>> build_keys;
        build_keys.reserve(build.size());
        for (const Row &b : build) {
            build_keys.push_back(key_bytes(b, build_columns));
        }
        for (std::size_t p = 0; p < probe.size(); ++p) {
            const std::optional<std::string> key = key_bytes(probe[p], probe_columns);
            if (!key) {
                continue;
            }
            for (std::size_t b = 0; b < build.size(); ++b) {
                if (build_keys[b] && *build_keys[b] == *key && (!residual || residual(probe[p], build[b]))) {
                    _matches[p].push_back(b);
                    _build_matched[b] = true;
                }
            }
        }
    }

    [[nodiscard]] std::vector<std::string> expected(JoinKind kind) const {
        std::vector<std::string> out;
        if (outputs_build_only(kind)) {
            for (std::size_t b = 0; b < _build.size(); ++b) {
                if (_build_matched[b] == (kind == JoinKind::right_semi)) {
                    out.push_back(row_text(_build[b]));
                }
            }
            std::sort(out.begin(), out.end());
            return out;
        }
        for (std::size_t p = 0; p < _probe.size(); ++p) {
            const bool matched = !_matches[p].empty();
            if (outputs_pairs(kind)) {
                const std::string probe_text = row_text(_probe[p]);
                for (const std::size_t b : _matches[p]) {
                    out.push_back(probe_text + row_text(_build[b]));
                }
                if (pads_probe_rows(kind) && !matched) {
                    Row nulls;
                    for (const Type &type : _build_types) {
                        nulls.push_back(Value::null_of(type));
                    }
                    out.push_back(probe_text + row_text(nulls));
                }
            } else if (matched == (kind == JoinKind::semi)) {
                out.push_back(row_text(_probe[p]));
            }
        }
        if (pads_build_rows(kind)) {
            Row nulls;
            for (const Type &type : _probe_types) {
                nulls.push_back(Value::null_of(type));
            }
            for (std::size_t b = 0; b < _build.size(); ++b) {
                if (!_build_matched[b]) {
                    out.push_back(row_text(nulls) + row_text(_build[b]));
                }
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

private:
    const Rows &_probe;
    const Rows &_build;
    std::vector<Type> _probe_types;
    std::vector<Type> _build_types;
    std::vector<std::vector<std::size_t>> _matches;
    std::vector<bool> _build_matched;
};

std::vector<std::string> result_rows(const QueryResult &result) {
    std::vector<std::string> out;
    out.reserve(result.rows.size());
    for (const Row &row : result.rows) {
        out.push_back(row_text(row));
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// Reports the first difference instead of dumping thousands of rows.
::testing::AssertionResult same_rows(const std::vector<std::string> &expected,
                                     const std::vector<std::string> &actual) {
    if (expected == actual) {
        return ::testing::AssertionSuccess();
    }
    auto failure = ::testing::AssertionFailure();
    failure << "expected " << expected.size() << " rows, got " << actual.size();
    std::vector<std::string> missing;
    std::vector<std::string> extra;
    std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(),
                        std::back_inserter(missing));
    std::set_difference(actual.begin(), actual.end(), expected.begin(), expected.end(),
                        std::back_inserter(extra));
    if (!missing.empty()) {
        failure << "; " << missing.size() << " missing, e.g. " << missing.front();
    }
    if (!extra.empty()) {
        failure << "; " << extra.size() << " unexpected, e.g. " << extra.front();
    }
    return failure;
}

/// One join problem: two tables, key pairs (column indices), an optional
/// residual (as an expression for the engine and a lambda for the oracle).
struct JoinCase {
    std::vector<ColumnDef> probe_columns;
    std::vector<ColumnDef> build_columns;
    Rows probe;
    Rows build;
    std::vector<std::pair<std::size_t, std::size_t>> keys;
    std::function<ExprPtr()> residual_expr; // over probe ++ build columns
    Residual residual;
};

class HashJoinTest : public test::RuntimeFixture {
protected:
    /// Runs the case for the given kinds and strategies (bloom filter on and off)
    /// and compares each result with the oracle.
    void check(const JoinCase &c, std::vector<JoinKind> kinds = {std::begin(all_kinds), std::end(all_kinds)},
               std::uint32_t morsel_rows = 512, std::uint8_t radix_bits = 0) {
        const auto probe_table = make_table("probe", c.probe_columns, c.probe);
        const auto build_table = make_table("build", c.build_columns, c.build);
        std::vector<Type> probe_types;
        for (const ColumnDef &column : c.probe_columns) {
            probe_types.push_back(column.type);
        }
        std::vector<Type> build_types;
        for (const ColumnDef &column : c.build_columns) {
            build_types.push_back(column.type);
        }
        const NestedLoop oracle(c.probe, c.build, probe_types, build_types, c.keys, c.residual);
        for (const JoinKind kind : kinds) {
            const std::vector<std::string> expected = oracle.expected(kind);
            // The Bloom filter only exists for builds of at least 1024 rows.
            for (const auto &[strategy, bloom] : configurations) {
                {
                    SCOPED_TRACE(std::string(mx::db::join_kind_name(kind)) + " " + strategy_name(strategy) +
                                 (bloom ? " bloom" : " no-bloom"));
                    const PlanPtr plan = make_plan(c, probe_table, build_table, kind);
                    ExecutionOptions options;
                    options.morsel_rows = morsel_rows;
                    options.join.strategy = strategy;
                    options.join.bloom_filter = bloom;
                    options.join.radix_bits = radix_bits;
                    const QueryResult result = execute(runtime(), *plan, options);
                    ASSERT_TRUE(same_rows(expected, result_rows(result)));
                }
            }
        }
    }

    static PlanPtr make_plan(const JoinCase &c, const std::shared_ptr<const Table> &probe_table,
                             const std::shared_ptr<const Table> &build_table, JoinKind kind) {
        std::vector<std::uint32_t> probe_columns(c.probe_columns.size());
        std::vector<std::uint32_t> build_columns(c.build_columns.size());
        for (std::uint32_t i = 0; i < probe_columns.size(); ++i) {
            probe_columns[i] = i;
        }
        for (std::uint32_t i = 0; i < build_columns.size(); ++i) {
            build_columns[i] = i;
        }
        std::vector<ExprPtr> probe_keys;
        std::vector<ExprPtr> build_keys;
        for (const auto &[pk, bk] : c.keys) {
            probe_keys.push_back(expr::column(static_cast<std::uint32_t>(pk), c.probe_columns[pk].type));
            build_keys.push_back(expr::column(static_cast<std::uint32_t>(bk), c.build_columns[bk].type));
        }
        return plan::hash_join(plan::scan(probe_table, probe_columns), plan::scan(build_table, build_columns),
                               kind, std::move(probe_keys), std::move(build_keys),
                               c.residual_expr ? c.residual_expr() : nullptr);
    }
};

// Probe: (k BIGINT, s VARCHAR, v BIGINT); build: (k BIGINT, s VARCHAR, w
// BIGINT, t VARCHAR).
std::vector<ColumnDef> probe_schema() {
    return {{"pk", Type::bigint(), true}, {"ps", Type::varchar(), true}, {"pv", Type::bigint(), true}};
}
std::vector<ColumnDef> build_schema() {
    return {{"bk", Type::bigint(), true},
            {"bs", Type::varchar(), true},
            {"bw", Type::bigint(), true},
            {"bt", Type::varchar(), true}};
}

/// A probe and a build side over keys drawn by `draw`, with `null_every` NULL
/// keys.
JoinCase random_case(std::uint64_t seed, std::size_t probe_rows, std::size_t build_rows,
                     const std::function<std::int64_t(std::mt19937_64 &)> &draw, int null_every) {
    std::mt19937_64 random(seed);
    JoinCase c;
    c.probe_columns = probe_schema();
    c.build_columns = build_schema();
    for (std::size_t i = 0; i < probe_rows; ++i) {
        const std::int64_t key = draw(random);
        const bool null = null_every > 0 && random() % static_cast<std::uint64_t>(null_every) == 0;
        c.probe.push_back({null ? Value::null_of(Type::bigint()) : Value::bigint(key),
                           Value::varchar("s" + std::to_string(key % 7)),
                           Value::bigint(static_cast<std::int64_t>(i))});
    }
    for (std::size_t i = 0; i < build_rows; ++i) {
        const std::int64_t key = draw(random);
        const bool null = null_every > 0 && random() % static_cast<std::uint64_t>(null_every) == 0;
        c.build.push_back(
            {null ? Value::null_of(Type::bigint()) : Value::bigint(key),
             Value::varchar("s" + std::to_string(key % 5)),
             i % 11 == 0 ? Value::null_of(Type::bigint()) : Value::bigint(static_cast<std::int64_t>(i * 3)),
             i % 13 == 0 ? Value::null_of(Type::varchar())
                         : Value::varchar("payload string number " + std::to_string(i))});
    }
    c.keys = {{0, 0}};
    return c;
}

/// Gray et al.'s Zipf generator over 1..n.
class Zipf {
public:
    Zipf(std::uint64_t n, double theta) : _n(n), _theta(theta) {
        for (std::uint64_t i = 1; i <= n; ++i) {
            _zeta_n += 1.0 / std::pow(static_cast<double>(i), theta);
        }
        const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
        _alpha = 1.0 / (1.0 - theta);
        _eta = (1.0 - std::pow(2.0 / static_cast<double>(n), 1.0 - theta)) / (1.0 - zeta2 / _zeta_n);
    }
    std::int64_t operator()(std::mt19937_64 &random) const {
        const double u = std::uniform_real_distribution<double>(0.0, 1.0)(random);
        const double uz = u * _zeta_n;
        if (uz < 1.0) {
            return 1;
        }
        if (uz < 1.0 + std::pow(0.5, _theta)) {
            return 2;
        }
        return 1 +
               static_cast<std::int64_t>(static_cast<double>(_n) * std::pow(_eta * u - _eta + 1.0, _alpha));
    }

private:
    std::uint64_t _n;
    double _theta;
    double _zeta_n{0.0};
    double _alpha{0.0};
    double _eta{0.0};
};

TEST_P(HashJoinTest, EmptyBuildSide) {
    JoinCase c = random_case(
        1, 600, 0, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 100); }, 10);
    check(c);
}

TEST_P(HashJoinTest, EmptyProbeSide) {
    JoinCase c = random_case(
        2, 0, 1500, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 100); }, 10);
    check(c);
}

TEST_P(HashJoinTest, BuildWithOnlyNullKeys) {
    JoinCase c = random_case(
        3, 500, 300, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 50); }, 0);
    for (Row &row : c.build) {
        row[0] = Value::null_of(Type::bigint());
    }
    check(c);
}

TEST_P(HashJoinTest, RandomKeysWithNullsOnBothSides) {
    const std::uint64_t seed = test::test_seed();
    JoinCase c = random_case(
        seed, 2000, 1500, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 3000) - 500; }, 9);
    check(c);
}

TEST_P(HashJoinTest, KeyBitmapWithHolesNegativeAndExtremeKeys) {
    // A build of every third key in [-1000, 1000] spans 2001 values: the key bitmap is built
    // (with the filter on). Probe keys below its minimum, above its maximum, in its holes and at
    // the int64 extremes (the offset from the minimum wraps around) must all be told apart.
    const std::uint64_t seed = test::test_seed();
    JoinCase c = random_case(
        seed, 3000, 700, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 6001) - 3000; }, 13);
    for (std::size_t i = 0; i < c.build.size(); ++i) {
        if (!c.build[i][0].null) {
            c.build[i][0] = Value::bigint(-1000 + static_cast<std::int64_t>(i % 667) * 3);
        }
    }
    c.probe.push_back(
        {Value::bigint(std::numeric_limits<std::int64_t>::min()), Value::varchar("s"), Value::bigint(1)});
    c.probe.push_back(
        {Value::bigint(std::numeric_limits<std::int64_t>::max()), Value::varchar("s"), Value::bigint(2)});
    c.probe.push_back({Value::bigint(-1000), Value::varchar("s"), Value::bigint(3)});
    c.probe.push_back({Value::bigint(998), Value::varchar("s"), Value::bigint(4)});
    c.probe.push_back({Value::bigint(999), Value::varchar("s"), Value::bigint(5)});
    check(c);
}

TEST_P(HashJoinTest, AllDuplicateKeys) {
    // Every probe row matches every build row: 40 x 100 = 4,000 output rows for
    // inner and left outer joins, from chains of 100 rows, split into batches of
    // at most 512 rows.
    JoinCase c = random_case(
        4, 40, 100, [](std::mt19937_64 &) { return std::int64_t{42}; }, 0);
    check(c);
}

TEST_P(HashJoinTest, ZipfSkewedKeys) {
    const std::uint64_t seed = test::test_seed();
    const Zipf zipf(2000, 0.6);
    JoinCase c = random_case(
        seed, 600, 1100, [&](std::mt19937_64 &r) { return zipf(r); }, 20);
    check(c);
}

TEST_P(HashJoinTest, ResidualPredicate) {
    const std::uint64_t seed = test::test_seed();
    JoinCase c = random_case(
        seed, 1200, 1100, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 300); }, 15);
    // probe.pv < build.bw (NULL bw: the residual is NULL, so no match) and
    // probe.ps <> build.bs
    c.residual_expr = [] {
        return expr::logical_and(
            expr::less(expr::column(2, Type::bigint(), "pv"), expr::column(5, Type::bigint(), "bw")),
            expr::not_equal(expr::column(1, Type::varchar(), "ps"), expr::column(4, Type::varchar(), "bs")));
    };
    c.residual = [](const Row &p, const Row &b) {
        return !p[2].null && !b[2].null && p[2].i64 < b[2].i64 && p[1].str != b[1].str;
    };
    check(c);
}

TEST_P(HashJoinTest, ResidualOnUniqueKeys) {
    // At most one match per probe row: the selection-mode output path, with a
    // residual that rejects some of the matches (left outer: they turn into
    // NULL-padded rows).
    const std::uint64_t seed = test::test_seed();
    JoinCase c = random_case(
        seed, 1500, 0, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 2000); }, 12);
    for (std::int64_t k = 0; k < 1500; ++k) {
        c.build.push_back({Value::bigint(k * 2), Value::varchar("b"), Value::bigint(k * 5 % 3001),
                           Value::varchar("t" + std::to_string(k))});
    }
    c.residual_expr = [] {
        return expr::less(expr::column(2, Type::bigint()), expr::column(5, Type::bigint()));
    };
    c.residual = [](const Row &p, const Row &b) { return !p[2].null && !b[2].null && p[2].i64 < b[2].i64; };
    check(c);
}

TEST_P(HashJoinTest, MultiColumnStringKeys) {
    const std::uint64_t seed = test::test_seed();
    std::mt19937_64 random(seed);
    JoinCase c;
    c.probe_columns = {
        {"name", Type::varchar(), true}, {"n", Type::integer(), true}, {"x", Type::bigint(), true}};
    c.build_columns = {
        {"n", Type::integer(), true}, {"name", Type::varchar(60), true}, {"y", Type::varchar(), true}};
    const auto name = [&](std::uint64_t i) {
        // Short, long (multi-word hashing) and empty strings.
        switch (i % 4) {
        case 0:
            return std::string();
        case 1:
            return "n" + std::to_string(i);
        default:
            return "a much longer name that spans several words " + std::to_string(i);
        }
    };
    for (int i = 0; i < 800; ++i) {
        const std::uint64_t a = random() % 40;
        const bool null_name = random() % 17 == 0;
        c.probe.push_back({null_name ? Value::null_of(Type::varchar()) : Value::varchar(name(a)),
                           Value::integer(static_cast<std::int64_t>(random() % 3)), Value::bigint(i)});
    }
    for (int i = 0; i < 300; ++i) {
        const std::uint64_t a = random() % 40;
        const bool null_n = random() % 19 == 0;
        c.build.push_back({null_n ? Value::null_of(Type::integer())
                                  : Value::integer(static_cast<std::int64_t>(random() % 3)),
                           Value::varchar(name(a)), Value::varchar("y" + std::to_string(i))});
    }
    c.keys = {{0, 1}, {1, 0}};
    check(c);
}

TEST_P(HashJoinTest, DecimalDoubleAndDateKeys) {
    const std::uint64_t seed = test::test_seed();
    std::mt19937_64 random(seed);
    JoinCase c;
    c.probe_columns = {{"d", Type::decimal(30, 2), true},
                       {"f", Type::float64(), true},
                       {"day", Type::date(), true},
                       {"m", Type::decimal(12, 2), true}};
    c.build_columns = {{"day", Type::date(), true},
                       {"f", Type::float64(), true},
                       {"d", Type::decimal(30, 2), true},
                       {"m", Type::decimal(12, 2), true},
                       {"id", Type::integer(), true}};
    const auto d = [](std::uint64_t v) {
        return Value::decimal(decimal::pow10(20) * Int128{static_cast<std::int64_t>(v % 3)} +
                                  static_cast<std::int64_t>(v),
                              30, 2);
    };
    const auto f = [](std::uint64_t v) {
        // 0.0 and -0.0 are equal keys.
        if (v % 5 == 0) {
            return Value::float64(v % 2 == 0 ? 0.0 : -0.0);
        }
        return Value::float64(static_cast<double>(v % 4) * 0.25);
    };
    for (int i = 0; i < 800; ++i) {
        const std::uint64_t v = random() % 30;
        c.probe.push_back(
            {d(v), f(random() % 12), Value::date(19000 + static_cast<std::int64_t>(random() % 4)),
             random() % 23 == 0 ? Value::null_of(Type::decimal(12, 2))
                                : Value::decimal(static_cast<std::int64_t>(random() % 40) * 125, 12, 2)});
    }
    for (int i = 0; i < 500; ++i) {
        const std::uint64_t v = random() % 30;
        c.build.push_back({Value::date(19000 + static_cast<std::int64_t>(random() % 4)), f(random() % 12),
                           d(v), Value::decimal(static_cast<std::int64_t>(random() % 40) * 125, 12, 2),
                           Value::integer(i)});
    }
    c.keys = {{0, 2}, {1, 1}, {2, 0}};
    check(c, {JoinKind::inner, JoinKind::anti});
    c.keys = {{3, 3}, {1, 1}};
    check(c, {JoinKind::left_outer, JoinKind::semi});
}

TEST_P(HashJoinTest, LargeInputsSpanManyBatchesAndPartitions) {
    // Unique build keys, a probe side with hits and misses: many scan morsels, 64
    // partitions per side, Bloom filter rejects most misses.
    const std::uint64_t seed = test::test_seed();
    const std::size_t build_rows = test::scaled(6000, 2);
    const std::size_t probe_rows = test::scaled(8000, 2);
    std::mt19937_64 random(seed);
    JoinCase c;
    c.probe_columns = {{"k", Type::bigint(), true}, {"v", Type::varchar(), true}};
    c.build_columns = {{"k", Type::bigint(), true}, {"w", Type::bigint(), true}};
    for (std::size_t i = 0; i < build_rows; ++i) {
        c.build.push_back(
            {Value::bigint(static_cast<std::int64_t>(i * 7)), Value::bigint(static_cast<std::int64_t>(i))});
    }
    for (std::size_t i = 0; i < probe_rows; ++i) {
        const auto key = static_cast<std::int64_t>(random() % (build_rows * 14));
        c.probe.push_back({Value::bigint(key), Value::varchar("v" + std::to_string(i))});
    }
    c.keys = {{0, 0}};
    // The oracle by sorting (a nested loop over 200 M pairs is too slow under the
    // sanitizers).
    std::map<std::int64_t, std::vector<const Row *>> by_key;
    for (const Row &row : c.build) {
        by_key[row[0].i64].push_back(&row);
    }
    const auto probe_table = make_table("probe", c.probe_columns, c.probe, 1000);
    const auto build_table = make_table("build", c.build_columns, c.build, 1000);
    for (const JoinKind kind : all_kinds) {
        std::vector<std::string> expected;
        std::set<std::int64_t> probe_keys;
        for (const Row &p : c.probe) {
            const auto it = by_key.find(p[0].i64);
            const bool matched = it != by_key.end();
            probe_keys.insert(p[0].i64);
            if (outputs_build_only(kind)) {
                continue; // below, once every probe key is known
            }
            if (outputs_pairs(kind)) {
                if (matched) {
                    for (const Row *b : it->second) {
                        Row joined = p;
                        joined.insert(joined.end(), b->begin(), b->end());
                        expected.push_back(row_text(joined));
                    }
                } else if (pads_probe_rows(kind)) {
                    expected.push_back(row_text(
                        {p[0], p[1], Value::null_of(Type::bigint()), Value::null_of(Type::bigint())}));
                }
            } else if (matched == (kind == JoinKind::semi)) {
                expected.push_back(row_text(p));
            }
        }
        if (outputs_build_only(kind)) {
            for (const Row &b : c.build) {
                if ((probe_keys.count(b[0].i64) > 0) == (kind == JoinKind::right_semi)) {
                    expected.push_back(row_text(b));
                }
            }
        }
        if (pads_build_rows(kind)) {
            for (const Row &b : c.build) {
                if (probe_keys.count(b[0].i64) == 0) {
                    expected.push_back(row_text(
                        {Value::null_of(Type::bigint()), Value::null_of(Type::varchar()), b[0], b[1]}));
                }
            }
        }
        std::sort(expected.begin(), expected.end());
        for (const JoinStrategy strategy : all_strategies) {
            SCOPED_TRACE(std::string(mx::db::join_kind_name(kind)) + " " + strategy_name(strategy));
            ExecutionOptions options;
            options.morsel_rows = 1000;
            options.join.strategy = strategy;
            options.join.radix_bits = 6;
            const PlanPtr plan = make_plan(c, probe_table, build_table, kind);
            ASSERT_TRUE(same_rows(expected, result_rows(execute(runtime(), *plan, options))));
        }
    }
}

TEST_P(HashJoinTest, KeyExpressionErrorFailsTheQuery) {
    JoinCase c = random_case(
        5, 500, 300, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 50); }, 0);
    c.probe[17][0] = Value::bigint(std::int64_t{1} << 62);
    const auto probe_table = make_table("probe", c.probe_columns, c.probe);
    const auto build_table = make_table("build", c.build_columns, c.build);
    for (const JoinStrategy strategy : all_strategies) {
        // probe key pk * 4 overflows BIGINT in one row.
        PlanPtr plan = plan::hash_join(
            plan::scan(probe_table, {0, 1, 2}), plan::scan(build_table, {0, 1, 2, 3}), JoinKind::inner,
            {expr::multiply(expr::column(0, Type::bigint()), expr::constant(Value::bigint(4)))},
            {expr::column(0, Type::bigint())});
        ExecutionOptions options;
        options.join.strategy = strategy;
        EXPECT_THROW(static_cast<void>(execute(runtime(), *plan, options)), ExecutionError);
    }
}

TEST_P(HashJoinTest, KeyPairsOfDifferentTypesAreCast) {
    // INTEGER against DECIMAL(12,2) and INTEGER against BIGINT: the join casts
    // each pair to the common type, so 7 meets 7.00 and nothing else.
    Rows probe;
    Rows build;
    for (std::int64_t i = 0; i < 400; ++i) {
        probe.push_back(
            {i % 13 == 0 ? Value::null_of(Type::integer()) : Value::integer(i % 60), Value::integer(i % 3)});
    }
    for (std::int64_t j = 0; j < 150; ++j) {
        build.push_back({Value::decimal(j * 50, 12, 2), Value::bigint(j % 3)}); // 0.00, 0.50, 1.00, ...
    }
    const auto probe_table =
        make_table("probe", {{"k", Type::integer(), true}, {"m", Type::integer(), true}}, probe);
    const auto build_table =
        make_table("build", {{"d", Type::decimal(12, 2), true}, {"n", Type::bigint(), true}}, build);
    std::vector<std::string> expected;
    for (const Row &p : probe) {
        for (const Row &b : build) {
            if (!p[0].null && b[0].i64 == p[0].i64 * 100 && p[1].i64 == b[1].i64) {
                expected.push_back(row_text(p) + row_text(b));
            }
        }
    }
    std::sort(expected.begin(), expected.end());
    ASSERT_FALSE(expected.empty());
    for (const JoinStrategy strategy : all_strategies) {
        SCOPED_TRACE(strategy_name(strategy));
        PlanPtr plan =
            plan::hash_join(plan::scan(probe_table, {0, 1}), plan::scan(build_table, {0, 1}), JoinKind::inner,
                            {expr::column(0, Type::integer()), expr::column(1, Type::integer())},
                            {expr::column(0, Type::decimal(12, 2)), expr::column(1, Type::bigint())});
        ExecutionOptions options;
        options.join.strategy = strategy;
        ASSERT_TRUE(same_rows(expected, result_rows(execute(runtime(), *plan, options))));
    }
}

TEST_P(HashJoinTest, JoinOfJoinsWithExpressionKeys) {
    // (probe JOIN build ON pk = bk) JOIN build2 ON pv + 1 = id: the first join's
    // output is the second join's probe side, and the second join's build is
    // another join's output.
    const std::uint64_t seed = test::test_seed();
    JoinCase c = random_case(
        seed, 1200, 500, [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 400); }, 25);
    const auto probe_table = make_table("probe", c.probe_columns, c.probe);
    const auto build_table = make_table("build", c.build_columns, c.build);
    Rows ids;
    for (std::int64_t i = 0; i < 1300; i += 3) {
        ids.push_back({Value::bigint(i), Value::varchar("id" + std::to_string(i))});
    }
    const auto id_table =
        make_table("ids", {{"id", Type::bigint(), false}, {"label", Type::varchar(), false}}, ids);
    std::vector<std::string> expected;
    for (const Row &p : c.probe) {
        for (const Row &b : c.build) {
            if (p[0].null || b[0].null || p[0].i64 != b[0].i64) {
                continue;
            }
            for (const Row &i : ids) {
                if (!p[2].null && p[2].i64 + 1 == i[0].i64) {
                    Row joined = p;
                    joined.insert(joined.end(), b.begin(), b.end());
                    joined.insert(joined.end(), i.begin(), i.end());
                    expected.push_back(row_text(joined));
                }
            }
        }
    }
    std::sort(expected.begin(), expected.end());
    for (const JoinStrategy strategy : all_strategies) {
        SCOPED_TRACE(strategy_name(strategy));
        PlanPtr inner = plan::hash_join(plan::scan(probe_table, {0, 1, 2}),
                                        plan::scan(build_table, {0, 1, 2, 3}), JoinKind::inner,
                                        {expr::column(0, Type::bigint())}, {expr::column(0, Type::bigint())});
        PlanPtr plan =
            plan::hash_join(std::move(inner), plan::scan(id_table, {0, 1}), JoinKind::inner,
                            {expr::add(expr::column(2, Type::bigint()), expr::constant(Value::bigint(1)))},
                            {expr::column(0, Type::bigint())});
        ExecutionOptions options;
        options.morsel_rows = 256;
        options.join.strategy = strategy;
        ASSERT_TRUE(same_rows(expected, result_rows(execute(runtime(), *plan, options))));
    }
}

TEST_P(HashJoinTest, RightOuterEqualsLeftOuterWithSidesSwapped) {
    // A LEFT OUTER JOIN B and B RIGHT OUTER JOIN A (A hashed) are the same rows, columns
    // reordered: duplicates, NULL keys and unmatched rows on both sides, with and without a
    // residual, empty sides, and unique A keys (a foreign-key join such as TPC-H Q13's: every B
    // row meets at most one A row, the probe's selection mode).
    const std::uint64_t seed = test::test_seed();
    const auto draw = [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 400) - 50; };
    struct Shape {
        const char *name;
        std::size_t a_rows;
        std::size_t b_rows;
        bool residual;
        bool unique_a;
    };
    const Shape shapes[] = {
        {"duplicates", 700, 1800, false, false},      {"residual", 900, 1500, true, false},
        {"empty a", 0, 1200, false, false},           {"empty b", 800, 0, true, false},
        {"small b", 1500, 40, true, false},           {"unique a", 300, 2000, false, true},
        {"unique a, residual", 300, 2000, true, true}};
    for (const Shape &shape : shapes) {
        // A: (pk, ps, pv), B: (bk, bs, bw, bt); random_case's NULL keys come every 8 rows.
        JoinCase c = random_case(seed, shape.a_rows, shape.b_rows, draw, 8);
        if (shape.unique_a) {
            for (std::size_t i = 0; i < c.probe.size(); ++i) {
                if (!c.probe[i][0].null) {
                    c.probe[i][0] = Value::bigint(static_cast<std::int64_t>(i) - 50);
                }
            }
        }
        const auto a_table = make_table("a", c.probe_columns, c.probe);
        const auto b_table = make_table("b", c.build_columns, c.build);
        // A.pv < B.bw: over A ++ B for the left outer join, over B ++ A for the right outer one.
        const ExprPtr left_residual =
            shape.residual ? expr::less(expr::column(2, Type::bigint()), expr::column(5, Type::bigint()))
                           : nullptr;
        const ExprPtr right_residual =
            shape.residual ? expr::less(expr::column(6, Type::bigint()), expr::column(2, Type::bigint()))
                           : nullptr;
        for (const auto &[strategy, bloom] : configurations) {
            SCOPED_TRACE(std::string(shape.name) + " " + strategy_name(strategy) + (bloom ? " bloom" : ""));
            ExecutionOptions options;
            options.morsel_rows = 256;
            options.join.strategy = strategy;
            options.join.bloom_filter = bloom;
            const PlanPtr left = plan::hash_join(
                plan::scan(a_table, {0, 1, 2}), plan::scan(b_table, {0, 1, 2, 3}), JoinKind::left_outer,
                {expr::column(0, Type::bigint())}, {expr::column(0, Type::bigint())}, left_residual);
            const PlanPtr right = plan::hash_join(
                plan::scan(b_table, {0, 1, 2, 3}), plan::scan(a_table, {0, 1, 2}), JoinKind::right_outer,
                {expr::column(0, Type::bigint())}, {expr::column(0, Type::bigint())}, right_residual);
            ASSERT_EQ(right->output.size(), 7U);
            EXPECT_TRUE(right->output[0].nullable) << "the probe side is NULL-padded";
            const QueryResult left_result = execute(runtime(), *left, options);
            QueryResult right_result = execute(runtime(), *right, options);
            for (Row &row : right_result.rows) {
                std::rotate(row.begin(), row.begin() + 4, row.end()); // B ++ A -> A ++ B
            }
            const std::vector<std::string> expected = result_rows(left_result);
            // Every A row appears at least once, so the comparison cannot pass vacuously.
            ASSERT_GE(expected.size(), shape.a_rows);
            ASSERT_TRUE(same_rows(expected, result_rows(right_result)));
        }
    }
}

TEST_P(HashJoinTest, CountJoinCountsThePartnersOfEveryBuildRow) {
    // B right outer join A (A hashed) counting matches: every A row once, NULL keys and
    // duplicates included, with the number of B rows that meet it through key and residual.
    const std::uint64_t seed = test::test_seed();
    const auto draw = [](std::mt19937_64 &r) { return static_cast<std::int64_t>(r() % 400) - 50; };
    struct Shape {
        const char *name;
        std::size_t a_rows;
        std::size_t b_rows;
        bool residual;
    };
    const Shape shapes[] = {{"duplicates", 700, 1800, false}, {"residual", 900, 1500, true},
                            {"empty a", 0, 1200, false},      {"empty b", 800, 0, true},
                            {"small b", 1500, 40, true},      {"big b", 300, 5000, false}};
    for (const Shape &shape : shapes) {
        // A: (pk, ps, pv), B: (bk, bs, bw, bt); random_case's NULL keys come every 8 rows.
        const JoinCase c = random_case(seed, shape.a_rows, shape.b_rows, draw, 8);
        const auto a_table = make_table("a", c.probe_columns, c.probe);
        const auto b_table = make_table("b", c.build_columns, c.build);
        std::vector<std::string> expected;
        for (const Row &a : c.probe) {
            std::int64_t count = 0;
            for (const Row &b : c.build) {
                // B.bw > A.pv; a NULL bw fails it.
                const bool key = !a[0].null && !b[0].null && a[0].i64 == b[0].i64;
                if (key && (!shape.residual || (!b[2].null && !a[2].null && b[2].i64 > a[2].i64))) {
                    ++count;
                }
            }
            Row row = a;
            row.push_back(Value::bigint(count));
            expected.push_back(row_text(row));
        }
        std::sort(expected.begin(), expected.end());
        // Over B ++ A: B.bw (2) > A.pv (6).
        const ExprPtr residual =
            shape.residual ? expr::less(expr::column(6, Type::bigint()), expr::column(2, Type::bigint()))
                           : nullptr;
        for (const auto &[strategy, bloom] : configurations) {
            SCOPED_TRACE(std::string(shape.name) + " " + strategy_name(strategy) + (bloom ? " bloom" : ""));
            ExecutionOptions options;
            options.morsel_rows = 256;
            options.join.strategy = strategy;
            options.join.bloom_filter = bloom;
            const PlanPtr plan = plan::count_join(
                plan::scan(b_table, {0, 1, 2, 3}), plan::scan(a_table, {0, 1, 2}),
                {expr::column(0, Type::bigint())}, {expr::column(0, Type::bigint())}, residual, "matches");
            ASSERT_EQ(plan->output.size(), 4U);
            EXPECT_EQ(plan->output[3].name, "matches");
            EXPECT_FALSE(plan->output[3].nullable);
            ASSERT_TRUE(same_rows(expected, result_rows(execute(runtime(), *plan, options))));
        }
    }
}

TEST_P(HashJoinTest, OnlyARightOuterJoinCountsItsMatches) {
    const auto table = make_table("t", {{"k", Type::bigint(), true}}, {{Value::bigint(1)}});
    PlanPtr plan = plan::hash_join(plan::scan(table, {0}), plan::scan(table, {0}), JoinKind::inner,
                                   {expr::column(0, Type::bigint())}, {expr::column(0, Type::bigint())});
    plan->count_matches = true;
    try {
        static_cast<void>(execute(runtime(), *plan, ExecutionOptions{}));
        FAIL() << "an inner join counted its matches";
    } catch (const ExecutionError &error) {
        EXPECT_NE(std::string(error.what()).find("only a right outer join counts its matches"),
                  std::string::npos)
            << error.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, HashJoinTest,
                         ::testing::Values(test::RuntimeShape{"workers1", 1, "", 1, 0},
                                           test::RuntimeShape{"workers2", 2, "", 2, 0},
                                           test::RuntimeShape{"workers4", 4, "", 4, 0},
                                           test::RuntimeShape{"numa2x1", std::nullopt, "2x1", 2, 2}),
                         test::shape_name);

// ---------------------------------------------------------------------------------------------
// Building blocks

TEST(HashJoinBloomFilter, NoFalseNegativesFewFalsePositives) {
    detail::join::BloomFilter bloom;
    bloom.allocate(10000, 4);
    for (std::int64_t key = 0; key < 10000; ++key) {
        bloom.insert(detail::join::hash_value(key));
    }
    for (std::int64_t key = 0; key < 10000; ++key) {
        ASSERT_TRUE(bloom.maybe_contains(detail::join::hash_value(key))) << key;
    }
    int false_positives = 0;
    for (std::int64_t key = 10000; key < 110000; ++key) {
        false_positives += bloom.maybe_contains(detail::join::hash_value(key)) ? 1 : 0;
    }
    EXPECT_LT(false_positives, 3000) << "false positive rate above 3 %";
}

TEST(HashJoinKeyBitmap, ExactMembershipOverTheKeyRange) {
    detail::join::KeyBitmap bitmap;
    bitmap.min = -70;
    bitmap.bits = 200; // keys -70 .. 129
    bitmap.words.assign(4, 0);
    for (std::int64_t key = -70; key < 130; key += 7) {
        bitmap.insert(key);
    }
    bitmap.insert(129);
    for (std::int64_t key = -80; key < 140; ++key) {
        const bool expected = (key >= -70 && key < 130 && (key + 70) % 7 == 0) || key == 129;
        ASSERT_EQ(bitmap.contains(key), expected) << key;
    }
    EXPECT_FALSE(bitmap.contains(std::numeric_limits<std::int64_t>::min()));
    EXPECT_FALSE(bitmap.contains(std::numeric_limits<std::int64_t>::max()));
}

TEST(HashJoinStrategy, AutomaticPicksTheRadixJoinForBuildsBeyondTheCacheBudget) {
    detail::HashJoinTuning tuning;
    tuning.radix_threshold_bytes = 1 << 20;
    // 24-byte rows plus 8 bytes of bucket: 32 bytes per row, 32,768 rows fill 1
    // MiB.
    EXPECT_EQ(detail::join::choose_strategy(JoinStrategy::automatic, 32768, 24, tuning),
              JoinStrategy::non_partitioned);
    EXPECT_EQ(detail::join::choose_strategy(JoinStrategy::automatic, 32769, 24, tuning),
              JoinStrategy::radix_partitioned);
    EXPECT_EQ(detail::join::choose_strategy(JoinStrategy::non_partitioned, 1 << 30, 24, tuning),
              JoinStrategy::non_partitioned);
    EXPECT_EQ(detail::join::choose_strategy(JoinStrategy::radix_partitioned, 1, 24, tuning),
              JoinStrategy::radix_partitioned);
}

TEST(HashJoinPartitions, SplitCoversEveryPartitionInBalancedRanges) {
    std::vector<std::uint64_t> counts(64, 10);
    counts[5] = 1000; // a hot partition
    for (const std::uint32_t groups : {1U, 3U, 8U, 64U, 100U}) {
        const std::vector<std::uint32_t> bounds = detail::join::split_partitions(counts, groups);
        ASSERT_EQ(bounds.front(), 0U);
        ASSERT_EQ(bounds.back(), 64U);
        ASSERT_EQ(bounds.size(), std::min<std::size_t>(groups, 64) + 1);
        for (std::size_t i = 1; i < bounds.size(); ++i) {
            ASSERT_LT(bounds[i - 1], bounds[i]) << "every range takes at least one partition";
        }
    }
}

} // namespace
} // namespace mx::db
