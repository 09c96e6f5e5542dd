// Per-scan prefetch strategies (PlanNode::scan_prefetch, dissertation 7.3) and the executor's
// progress counter (QueryProgress):
//   - the scan's prefetch callback touches exactly the cache lines its strategy names (checked
//     through the test hook that walks the same code path as the callback),
//   - the options' overrides (off, one forced strategy) win over the plan,
//   - results are the same under every strategy,
//   - EXPLAIN shows the strategy the scan applies,
//   - the progress counter grows monotonically while a query runs and ends at its total.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/plan.h>
#include <mx/db/table.h>
#include <mx/system/cpu.h>
#include <mx/tasking/config.h>
#include <mx/tasking/runtime.h>

#include "operators/operator.h"
#include "support/runtime_fixture.h"

namespace mx::db {
namespace {

constexpr std::uintptr_t line_size = system::cache_line_size;

tasking::RuntimeConfig two_workers() {
    tasking::RuntimeConfig config;
    config.workers = 2;
    return config;
}

/// t(k INTEGER NOT NULL, v BIGINT NULL, w BIGINT NOT NULL): k = i, v NULL for every 7th row,
/// w a random number (also returned in `w_values`, the oracle's input).
std::shared_ptr<const Table> make_table(tasking::Runtime &runtime, std::uint32_t rows, std::uint32_t capacity,
                                        std::uint64_t seed, std::vector<std::int64_t> &w_values) {
    TableBuilder builder(
        "t",
        Schema({{"k", Type::integer(), false}, {"v", Type::bigint(), true}, {"w", Type::bigint(), false}}),
        TableOptions{.fragment_capacity = capacity});
    std::mt19937_64 random(seed);
    w_values.clear();
    for (std::uint32_t i = 0; i < rows; ++i) {
        const auto w = static_cast<std::int64_t>(random() % 1000);
        w_values.push_back(w);
        const std::vector<Value> row = {Value::integer(static_cast<std::int64_t>(i)),
                                        i % 7 == 0 ? Value::null_of(Type::bigint())
                                                   : Value::bigint(static_cast<std::int64_t>(i) * 3),
                                        Value::bigint(w)};
        const std::string error = builder.append_row(row);
        EXPECT_EQ(error, "");
    }
    return builder.finish(&runtime);
}

/// The cache lines of [data, data + bytes).
std::vector<const void *> lines_of(const void *data, std::size_t bytes) {
    std::vector<const void *> lines;
    const auto start = reinterpret_cast<std::uintptr_t>(data);
    for (std::uintptr_t line = start & ~(line_size - 1); line < start + bytes; line += line_size) {
        lines.push_back(reinterpret_cast<const void *>(line));
    }
    return lines;
}

std::vector<const void *> sorted(std::vector<const void *> lines) {
    std::sort(lines.begin(), lines.end());
    return lines;
}

class ScanPrefetchTest : public ::testing::Test {
protected:
    void SetUp() override {
        seed = test::test_seed();
        table = make_table(runtime, 5000, 1024, seed, w_values);
    }

    /// scan (k, v, w) with the given per-column strategies.
    PlanPtr scan(std::vector<ScanPrefetch> strategies, ExprPtr predicate = nullptr) const {
        auto node = plan::scan(table, {0, 1, 2}, std::move(predicate));
        node->scan_prefetch = std::move(strategies);
        return node;
    }

    /// Bytes per row of a column block.
    [[nodiscard]] std::size_t width(std::size_t column) const {
        return physical_size(table->schema()[column].type.physical());
    }

    tasking::Runtime runtime{two_workers()};
    std::uint64_t seed{0};
    std::vector<std::int64_t> w_values;
    std::shared_ptr<const Table> table;
};

TEST_F(ScanPrefetchTest, CallbackTouchesWholeColumnOrFirstLinesAsThePlanSays) {
    const auto node = scan({ScanPrefetch::first_lines, ScanPrefetch::whole_column, ScanPrefetch::none});
    ExecutionOptions options;
    options.morsel_rows = 500;
    options.prefetch_lines = 3;
    const Fragment &fragment = table->fragment(1);
    ASSERT_NE(fragment.nulls(1), nullptr); // v has NULLs in every fragment
    for (const std::uint32_t begin : {0U, 500U, 1000U}) {
        const std::uint32_t rows = std::min<std::uint32_t>(500, fragment.size() - begin);
        const auto *k = static_cast<const std::byte *>(fragment.data(0)) + std::size_t{begin} * width(0);
        const auto *v = static_cast<const std::byte *>(fragment.data(1)) + std::size_t{begin} * width(1);
        std::vector<const void *> expected;
        // k: its first 3 lines (no NULL bytes: NOT NULL column), fewer in the short last morsel.
        const auto k_lines = lines_of(k, std::size_t{rows} * width(0));
        ASSERT_GE(k_lines.size(), begin < 1000 ? 4U : 1U);
        expected.insert(expected.end(), k_lines.begin(),
                        k_lines.begin() +
                            static_cast<std::ptrdiff_t>(std::min<std::size_t>(3, k_lines.size())));
        // v: every line of its block in the morsel, and of its NULL bytes.
        const auto v_lines = lines_of(v, std::size_t{rows} * width(1));
        expected.insert(expected.end(), v_lines.begin(), v_lines.end());
        const auto null_lines = lines_of(fragment.nulls(1) + begin, rows);
        expected.insert(expected.end(), null_lines.begin(), null_lines.end());
        // w: nothing.
        const auto actual = detail::scan_prefetch_lines(*node, options, fragment, begin);
        EXPECT_EQ(sorted(actual), sorted(expected)) << "morsel at " << begin;
    }
}

TEST_F(ScanPrefetchTest, FirstLinesNeverLeaveTheMorselAndDefaultIsFirstLines) {
    const auto node = plan::scan(table, {0}); // no strategy set: first_lines
    ExecutionOptions options;
    options.morsel_rows = 10; // 10 values of k: two or three lines
    options.prefetch_lines = 8;
    const Fragment &fragment = table->fragment(0);
    const auto *k = static_cast<const std::byte *>(fragment.data(0)) + 20 * width(0);
    EXPECT_EQ(detail::scan_prefetch_lines(*node, options, fragment, 20), lines_of(k, 10 * width(0)));
    // A node-level line count wins over the options'.
    auto wide = plan::scan(table, {0});
    wide->prefetch_lines = 1;
    options.morsel_rows = 1000;
    EXPECT_EQ(detail::scan_prefetch_lines(*wide, options, fragment, 0).size(), 1U);
}

TEST_F(ScanPrefetchTest, OptionsOverrideThePlan) {
    const auto node =
        scan({ScanPrefetch::whole_column, ScanPrefetch::first_lines, ScanPrefetch::first_lines});
    const Fragment &fragment = table->fragment(0);
    ExecutionOptions off;
    off.prefetch = false;
    EXPECT_TRUE(detail::scan_prefetch_lines(*node, off, fragment, 0).empty());
    ExecutionOptions none;
    none.scan_prefetch = ScanPrefetch::none;
    EXPECT_TRUE(detail::scan_prefetch_lines(*node, none, fragment, 0).empty());
    ExecutionOptions whole;
    whole.morsel_rows = 1024;
    whole.scan_prefetch = ScanPrefetch::whole_column;
    std::set<const void *> expected;
    for (std::size_t c = 0; c < 3; ++c) {
        for (const void *line : lines_of(fragment.data(c), std::size_t{fragment.size()} * width(c))) {
            expected.insert(line);
        }
        if (fragment.nulls(c) != nullptr) {
            for (const void *line : lines_of(fragment.nulls(c), fragment.size())) {
                expected.insert(line);
            }
        }
    }
    const auto actual = detail::scan_prefetch_lines(*node, whole, fragment, 0);
    EXPECT_EQ(std::set<const void *>(actual.begin(), actual.end()), expected);
    EXPECT_EQ(actual.size(), expected.size()) << "a line prefetched twice";
}

TEST_F(ScanPrefetchTest, ResultsAreTheSameUnderEveryStrategy) {
    // sum(w), count(*) where k < 1234: the oracle from the generated values.
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < 1234; ++i) {
        sum += w_values[i];
    }
    const std::vector<std::vector<ScanPrefetch>> plans = {
        {}, // default: first lines
        {ScanPrefetch::whole_column, ScanPrefetch::first_lines, ScanPrefetch::first_lines},
        {ScanPrefetch::none, ScanPrefetch::whole_column, ScanPrefetch::whole_column},
    };
    const std::vector<std::optional<ScanPrefetch>> overrides = {
        std::nullopt, ScanPrefetch::none, ScanPrefetch::first_lines, ScanPrefetch::whole_column};
    for (const auto &strategies : plans) {
        for (const auto &override : overrides) {
            for (const bool prefetch : {true, false}) {
                auto node = scan(strategies, expr::less(expr::column(0, Type::integer(), "k"),
                                                        expr::constant(Value::integer(1234))));
                auto aggregate = plan::aggregate(
                    std::move(node), {}, {},
                    {AggregateSpec{AggregateFunction::sum, expr::column(2, Type::bigint(), "w"), "s"},
                     AggregateSpec{AggregateFunction::count_star, nullptr, "c"}});
                ExecutionOptions options;
                options.morsel_rows = 300;
                options.prefetch = prefetch;
                options.scan_prefetch = override;
                const QueryResult result = execute(runtime, *aggregate, options);
                ASSERT_EQ(result.row_count(), 1U);
                EXPECT_EQ(result.at(0, 0).to_string(), std::to_string(sum)) << "seed " << seed;
                EXPECT_EQ(result.at(0, 1).i64, 1234);
            }
        }
    }
}

TEST_F(ScanPrefetchTest, ExplainShowsWhatTheScanDoes) {
    const auto node =
        scan({ScanPrefetch::whole_column, ScanPrefetch::first_lines, ScanPrefetch::first_lines});
    const std::string text = explain(*node);
    // Once in the plan tree, once in the scan node's details.
    const std::string expected = "prefetch=[k: whole column, v: 2 lines, w: 2 lines]";
    const auto first = text.find(expected);
    ASSERT_NE(first, std::string::npos) << text;
    EXPECT_NE(text.find(expected, first + 1), std::string::npos) << text;
    ExecutionOptions off;
    off.prefetch = false;
    EXPECT_NE(explain(*node, off).find("prefetch=off"), std::string::npos);
    ExecutionOptions forced;
    forced.scan_prefetch = ScanPrefetch::whole_column;
    forced.prefetch_lines = 5;
    EXPECT_NE(explain(*node, forced).find("prefetch=[k: whole column, v: whole column, w: whole column]"),
              std::string::npos);
    EXPECT_THROW(
        {
            auto bad = scan({ScanPrefetch::whole_column});
            (void)explain(*bad);
        },
        ExecutionError);
}

// ---- progress -----------------------------------------------------------------------------------

TEST_F(ScanPrefetchTest, ProgressIsMonotoneAndEndsAtTheTotal) {
    // A self-join: both scans count, so the total is twice the table.
    auto join_plan = [&] {
        auto probe = plan::scan(table, {0, 2});
        auto build = plan::scan(table, {0});
        auto join =
            plan::hash_join(std::move(probe), std::move(build), JoinKind::inner,
                            {expr::column(0, Type::integer(), "k")}, {expr::column(0, Type::integer(), "k")});
        return plan::aggregate(
            std::move(join), {}, {},
            {AggregateSpec{AggregateFunction::sum, expr::column(1, Type::bigint(), "w"), "s"}});
    };
    std::int64_t sum = 0;
    for (const std::int64_t w : w_values) {
        sum += w;
    }
    for (int repetition = 0; repetition < 3; ++repetition) {
        const auto plan = join_plan();
        ExecutionOptions options;
        options.morsel_rows = 64; // many scan tasks, so the watcher sees intermediate values
        const QueryProgress progress = options.progress;
        std::atomic<bool> done{false};
        std::vector<QueryProgress::Snapshot> seen;
        std::thread watcher([&] {
            while (!done.load()) {
                const QueryProgress::Snapshot snapshot = progress.snapshot();
                if (seen.empty() || seen.back().done != snapshot.done ||
                    seen.back().total != snapshot.total) {
                    seen.push_back(snapshot);
                }
                std::this_thread::yield();
            }
        });
        const QueryResult result = execute(runtime, *plan, options);
        done.store(true);
        watcher.join();
        ASSERT_EQ(result.row_count(), 1U);
        EXPECT_EQ(result.at(0, 0).to_string(), std::to_string(sum));
        const QueryProgress::Snapshot end = progress.snapshot();
        EXPECT_EQ(end.total, 2 * table->row_count());
        EXPECT_EQ(end.done, end.total);
        std::uint64_t last = 0;
        for (const auto &snapshot : seen) {
            if (snapshot.total == 0) {
                EXPECT_EQ(snapshot.done, 0U); // before the run started
                continue;
            }
            EXPECT_EQ(snapshot.total, end.total);
            EXPECT_GE(snapshot.done, last);
            EXPECT_LE(snapshot.done, snapshot.total);
            last = snapshot.done;
        }
    }
}

TEST_F(ScanPrefetchTest, ProgressCountsFragmentsZoneMapsSkip) {
    // k < 100 lies in fragment 0 only: the zone maps skip the other four, which count as done.
    auto node = plan::scan(
        table, {0}, expr::less(expr::column(0, Type::integer(), "k"), expr::constant(Value::integer(100))));
    ExecutionOptions options;
    const QueryResult result = execute(runtime, *node, options);
    EXPECT_EQ(result.row_count(), 100U);
    const auto end = options.progress.snapshot();
    EXPECT_EQ(end.total, table->row_count());
    EXPECT_EQ(end.done, end.total);

    // Morsels whose rows all fail the predicate (zone maps off) or a fused filter: no batch
    // reaches the consumer, the scan counts them itself.
    for (const bool fuse : {true, false}) {
        auto empty_scan =
            plan::scan(table, {0, 2},
                       expr::less(expr::column(0, Type::integer(), "k"), expr::constant(Value::integer(-1))));
        auto filtered =
            plan::filter(plan::scan(table, {0, 2}),
                         expr::less(expr::column(1, Type::bigint(), "w"), expr::constant(Value::bigint(-1))));
        for (const PlanPtr *plan : {&empty_scan, &filtered}) {
            ExecutionOptions none;
            none.zone_maps = false;
            none.fuse_operators = fuse;
            none.morsel_rows = 100;
            EXPECT_EQ(execute(runtime, **plan, none).row_count(), 0U);
            EXPECT_EQ(none.progress.snapshot().done, table->row_count()) << "fuse " << fuse;
            EXPECT_EQ(none.progress.snapshot().total, table->row_count());
        }
    }
}

} // namespace
} // namespace mx::db
