// Hash aggregation (grouped and scalar) with worker-local state and a parallel merge.
//
// Consume: each task evaluates the group keys and aggregate arguments of its batch and updates
// the hash tables of the worker it runs on: no lock, no shared cache line. Each worker's table is
// split into P partitions by the top bits of the key hash. Finalize: P parts run in parallel;
// part p merges partition p of every worker through worker 0's index of partition p (rows stay
// where they are) and emits its groups.
// So no worker waits on a sequential merge of everything (the Vectorwise problem of a single
// thread finishing the aggregation), and skewed keys only make one group's states hot inside
// each worker, never a shared structure.
//
// COUNT/SUM/AVG(DISTINCT x) keep, per worker and partition, a set of (group key, x); partition
// p's sets are merged (deduplicated) in part p and folded (counted, summed) into the merged
// groups. Scalar aggregation (no GROUP BY) keeps one state row per worker, merged in finalize();
// its distinct sets are partitioned by the hash of x and folded per part.
//
// SQL semantics: aggregates skip NULL arguments; SUM/AVG/MIN/MAX of no values are NULL, COUNT is
// 0; NULL keys form their own group; a scalar aggregation emits one row even for empty input, a
// grouped one emits nothing. SUM of integers and decimals is exact (Int128), AVG divides the exact
// sum like DuckDB.

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>

#include "cells.h"
#include "operator.h"
#include "row_table.h"

namespace mx::db::detail {

namespace {

using dataflow::FlowContext;

/// One aggregate's state inside a group row. `wide` holds the exact sum (Int128), the double sum
/// (its first 8 bytes) or the MIN/MAX cell (its first physical-width bytes); `count` counts the
/// values seen (0 = NULL result), or the distinct values once they are counted. An exact sum of
/// 128-bit values is carry * 2^128 + wide: the carry keeps the sum exact when a partial sum leaves
/// 128 bits (M + M - M - M), so the result does not depend on the order of the rows.
struct alignas(16) AggState {
    Int128 wide;
    std::int64_t count;
    std::int64_t carry;
};
static_assert(sizeof(AggState) == 32);

inline AggState &state_at(std::byte *row, std::uint32_t offset) noexcept {
    return *reinterpret_cast<AggState *>(row + offset);
}
inline const AggState &state_at(const std::byte *row, std::uint32_t offset) noexcept {
    return *reinterpret_cast<const AggState *>(row + offset);
}

inline double get_double(const AggState &state) noexcept {
    double value = 0;
    std::memcpy(&value, &state.wide, 8);
    return value;
}
inline void set_double(AggState &state, double value) noexcept { std::memcpy(&state.wide, &value, 8); }

/// Variance state: the running mean and the sum of squared deviations (M2) of `count` values,
/// in the two halves of `wide`. Welford's update per value and Chan's merge of two states keep it
/// accurate where the textbook sum-of-squares formula cancels (values far from zero).
struct Moments {
    double mean;
    double m2;
};
inline Moments get_moments(const AggState &state) noexcept {
    Moments moments{};
    std::memcpy(&moments, &state.wide, sizeof(moments));
    return moments;
}
inline void set_moments(AggState &state, Moments moments) noexcept {
    std::memcpy(&state.wide, &moments, sizeof(moments));
}
static_assert(sizeof(Moments) == sizeof(Int128));

/// quantile_cont state: `wide` points to the group's values (a list owned by the worker that
/// started it, see WorkerState::lists); `count` counts them. DOUBLE arguments fill `doubles`,
/// DECIMAL arguments fill `decimals` with the unscaled values, so their quantile is exact.
struct ValueList {
    std::vector<double> doubles;
    std::vector<Int128> decimals;
};
inline ValueList *get_list(const AggState &state) noexcept {
    ValueList *list = nullptr;
    std::memcpy(&list, &state.wide, sizeof(list));
    return list;
}
inline void set_list(AggState &state, ValueList *list) noexcept {
    std::memcpy(&state.wide, &list, sizeof(list));
}
/// string_agg state: the same with the group's strings (copies in the worker's arena).
using StringList = std::vector<StringRef>;
inline StringList *get_strings(const AggState &state) noexcept {
    StringList *list = nullptr;
    std::memcpy(&list, &state.wide, sizeof(list));
    return list;
}
inline void set_strings(AggState &state, StringList *list) noexcept {
    std::memcpy(&state.wide, &list, sizeof(list));
}

/// Adds carry * 2^128 + value to the exact sum. A 128-bit add that wraps is off by exactly 2^128
/// in the direction of the addend's sign; the carry (64 bits, at most one step per value) records
/// it, so the sum stays exact for any 2^63 values.
inline void add_wide(AggState &state, Int128 value, std::int64_t carry) noexcept {
    state.carry += carry;
    if (__builtin_add_overflow(state.wide, value, &state.wide)) {
        state.carry += value < 0 ? -1 : 1;
    }
}

struct AggregateInfo {
    AggregateFunction function{AggregateFunction::count_star};
    ExprPtr argument;
    Type input{};  // the argument's type
    Type result{}; // the output column's type
    std::uint32_t offset{0};
    std::int32_t distinct{-1}; // index of the COUNT DISTINCT set
    double fraction{0.5};      // quantile_cont
    std::string separator;     // string_agg
    int order{0};              // string_agg: 1 ascending, -1 descending, 0 as merged
    std::string name;
};

/// Calls f(i, row) for the live rows whose argument is not NULL.
template <class F>
inline void for_each_value(const Batch &batch, std::uint32_t count, const ColumnData &argument, F &&f) {
    if (argument.nulls == nullptr) {
        for (std::uint32_t i = 0; i < count; ++i) {
            f(i, batch.row(i));
        }
        return;
    }
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint32_t row = batch.row(i);
        if (argument.nulls[row] == 0) {
            f(i, row);
        }
    }
}

/// Folds the argument values of a batch into the states `rows[i]` (one per live row).
void update(const AggregateInfo &aggregate, std::byte *const *rows, const ColumnData *argument,
            const Batch &batch, std::uint32_t count, StringHeap &arena, std::deque<ValueList> &lists,
            std::deque<StringList> &strings) noexcept {
    const std::uint32_t offset = aggregate.offset;
    switch (aggregate.function) {
    case AggregateFunction::count_star:
        for (std::uint32_t i = 0; i < count; ++i) {
            ++state_at(rows[i], offset).count;
        }
        return;
    case AggregateFunction::count:
        for_each_value(batch, count, *argument,
                       [&](std::uint32_t i, std::uint32_t) { ++state_at(rows[i], offset).count; });
        return;
    case AggregateFunction::sum:
    case AggregateFunction::avg:
        switch (argument->physical) {
        case PhysicalType::u8:
            for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
                AggState &state = state_at(rows[i], offset);
                state.wide += argument->get<std::uint8_t>(row);
                ++state.count;
            });
            return;
        case PhysicalType::i64:
            // |value| < 2^63, so 2^64 additions cannot overflow the 128-bit sum.
            for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
                AggState &state = state_at(rows[i], offset);
                state.wide += argument->get<std::int64_t>(row);
                ++state.count;
            });
            return;
        case PhysicalType::i128:
            for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
                AggState &state = state_at(rows[i], offset);
                add_wide(state, argument->get<Int128>(row), 0);
                ++state.count;
            });
            return;
        case PhysicalType::f64:
            for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
                AggState &state = state_at(rows[i], offset);
                set_double(state, get_double(state) + argument->get<double>(row));
                ++state.count;
            });
            return;
        case PhysicalType::string:
            return; // rejected by the plan builder
        }
        return;
    case AggregateFunction::min:
    case AggregateFunction::max: {
        const bool is_min = aggregate.function == AggregateFunction::min;
        const PhysicalType physical = argument->physical;
        const std::uint32_t width = argument->width;
        for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
            AggState &state = state_at(rows[i], offset);
            const std::byte *cell = argument->cell(row);
            if (state.count != 0) {
                const int order =
                    compare_cells(physical, cell, reinterpret_cast<const std::byte *>(&state.wide));
                if (is_min ? order >= 0 : order <= 0) {
                    return;
                }
            }
            if (physical == PhysicalType::string) {
                StringRef text;
                std::memcpy(&text, cell, sizeof(StringRef));
                const StringRef copy = arena.add(text.view()); // the batch's strings die with it
                std::memcpy(&state.wide, &copy, sizeof(StringRef));
            } else {
                std::memcpy(&state.wide, cell, width);
            }
            state.count = 1;
        });
        return;
    }
    case AggregateFunction::count_distinct:
    case AggregateFunction::sum_distinct:
    case AggregateFunction::avg_distinct:
        return; // folded from the distinct sets in finalize
    case AggregateFunction::string_agg:
        for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
            AggState &state = state_at(rows[i], offset);
            StringList *list = get_strings(state);
            if (list == nullptr) {
                list = &strings.emplace_back();
                set_strings(state, list);
            }
            list->push_back(arena.add(argument->get<StringRef>(row).view())); // the batch dies
            ++state.count;
        });
        return;
    case AggregateFunction::quantile_cont:
        for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
            AggState &state = state_at(rows[i], offset);
            ValueList *list = get_list(state);
            if (list == nullptr) {
                list = &lists.emplace_back();
                set_list(state, list);
            }
            switch (argument->physical) {
            case PhysicalType::i64:
                list->decimals.push_back(argument->get<std::int64_t>(row));
                break;
            case PhysicalType::i128:
                list->decimals.push_back(argument->get<Int128>(row));
                break;
            default:
                list->doubles.push_back(argument->get<double>(row));
                break;
            }
            ++state.count;
        });
        return;
    case AggregateFunction::var_samp:
    case AggregateFunction::var_pop:
    case AggregateFunction::stddev_samp:
    case AggregateFunction::stddev_pop:
        for_each_value(batch, count, *argument, [&](std::uint32_t i, std::uint32_t row) {
            AggState &state = state_at(rows[i], offset);
            Moments moments = get_moments(state);
            const double x = argument->get<double>(row);
            ++state.count;
            const double delta = x - moments.mean;
            moments.mean += delta / static_cast<double>(state.count);
            moments.m2 += delta * (x - moments.mean);
            set_moments(state, moments);
        });
        return;
    }
    return;
}

/// Folds the state of `from` into `into` (same aggregate).
void merge_state(const AggregateInfo &aggregate, AggState &into, const AggState &from) noexcept {
    switch (aggregate.function) {
    case AggregateFunction::count_star:
    case AggregateFunction::count:
        into.count += from.count;
        return;
    case AggregateFunction::sum:
    case AggregateFunction::avg:
        into.count += from.count;
        if (aggregate.input.physical() == PhysicalType::f64) {
            set_double(into, get_double(into) + get_double(from));
            return;
        }
        add_wide(into, from.wide, from.carry);
        return;
    case AggregateFunction::min:
    case AggregateFunction::max: {
        if (from.count == 0) {
            return;
        }
        if (into.count != 0) {
            const int order =
                compare_cells(aggregate.input.physical(), reinterpret_cast<const std::byte *>(&from.wide),
                              reinterpret_cast<const std::byte *>(&into.wide));
            if (aggregate.function == AggregateFunction::min ? order >= 0 : order <= 0) {
                return;
            }
        }
        into.wide = from.wide; // strings stay in the arena of the worker that copied them
        into.count = 1;
        return;
    }
    case AggregateFunction::count_distinct:
    case AggregateFunction::sum_distinct:
    case AggregateFunction::avg_distinct:
        return;
    case AggregateFunction::var_samp:
    case AggregateFunction::var_pop:
    case AggregateFunction::stddev_samp:
    case AggregateFunction::stddev_pop: {
        if (from.count == 0) {
            return;
        }
        const Moments a = get_moments(into);
        const Moments b = get_moments(from);
        const auto na = static_cast<double>(into.count);
        const auto nb = static_cast<double>(from.count);
        const double n = na + nb;
        const double delta = b.mean - a.mean;
        set_moments(into, Moments{a.mean + delta * nb / n, a.m2 + b.m2 + delta * delta * na * nb / n});
        into.count += from.count;
        return;
    }
    case AggregateFunction::string_agg: {
        StringList *from_list = get_strings(from);
        if (from_list == nullptr) {
            return;
        }
        StringList *into_list = get_strings(into);
        if (into_list == nullptr) {
            set_strings(into, from_list);
        } else {
            into_list->insert(into_list->end(), from_list->begin(), from_list->end());
        }
        into.count += from.count;
        return;
    }
    case AggregateFunction::quantile_cont: {
        // Each list belongs to one group row of one partition, so only the task merging that
        // partition touches it.
        ValueList *from_list = get_list(from);
        if (from_list == nullptr) {
            return;
        }
        ValueList *into_list = get_list(into);
        if (into_list == nullptr) {
            set_list(into, from_list);
        } else {
            into_list->doubles.insert(into_list->doubles.end(), from_list->doubles.begin(),
                                      from_list->doubles.end());
            into_list->decimals.insert(into_list->decimals.end(), from_list->decimals.begin(),
                                       from_list->decimals.end());
        }
        into.count += from.count;
        return;
    }
    }
    return;
}

/// DuckDB's 128-bit to DOUBLE conversion: the low and high 64-bit halves are converted apart,
/// except for small negative values (high half -1), which convert from their magnitude.
inline double wide_to_double(Int128 value) noexcept {
    const auto lower = static_cast<std::uint64_t>(value); // modulo 2^64: the low half
    const auto upper = static_cast<std::int64_t>(value >> 64);
    if (upper == -1) {
        return -static_cast<double>(std::numeric_limits<std::uint64_t>::max() - lower) - 1.0;
    }
    return static_cast<double>(lower) + static_cast<double>(upper) * 18446744073709551616.0;
}

/// quantile_cont of unscaled DECIMAL values with DuckDB's result in the same DECIMAL type: with
/// position p = fraction * (n - 1), the value at floor(p) when p is whole; otherwise, between
/// the values lo and hi at floor(p) and ceil(p) and d = p - floor(p), 64-bit decimals give
/// lo + trunc((hi - lo) * d) (so the interpolation rounds down) and 128-bit decimals give
/// trunc(lo * (1 - d) + hi * d) computed in DOUBLE (so it rounds toward zero).
Int128 decimal_quantile(std::vector<Int128> &values, double fraction, bool wide) noexcept {
    MX_ASSERT(!values.empty(), "a quantile of no values");
    const double position = fraction * static_cast<double>(values.size() - 1);
    const auto low = static_cast<std::size_t>(std::floor(position));
    const auto high = static_cast<std::size_t>(std::ceil(position));
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(low), values.end());
    const Int128 low_value = values[low];
    if (high == low) {
        return low_value;
    }
    const Int128 high_value =
        *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(high), values.end());
    const double d = position - static_cast<double>(low);
    if (!wide) {
        // Both values fit 64 bits with at most 18 digits, so the difference does too.
        const auto delta = static_cast<double>(static_cast<std::int64_t>(high_value - low_value));
        return low_value + static_cast<Int128>(static_cast<std::int64_t>(delta * d));
    }
    const double mixed = wide_to_double(low_value) * (1.0 - d) + wide_to_double(high_value) * d;
    // |mixed| stays within the two inputs' range, below 10^38 < 2^127.
    return static_cast<Int128>(mixed);
}

/// Writes the final value of an aggregate into row `out_row` of `out`. Returns false when an
/// exact sum does not fit DECIMAL(38, s).
bool write_result(const AggregateInfo &aggregate, const AggState &state, Vector &out,
                  std::uint32_t out_row) noexcept {
    switch (aggregate.function) {
    case AggregateFunction::count_star:
    case AggregateFunction::count:
    case AggregateFunction::count_distinct:
        out.mutable_data<std::int64_t>()[out_row] = state.count;
        return true;
    case AggregateFunction::sum:
    case AggregateFunction::sum_distinct:
        if (state.count == 0) {
            out.set_null(out_row);
            return true;
        }
        if (aggregate.input.physical() == PhysicalType::f64) {
            out.mutable_data<double>()[out_row] = get_double(state);
            return true;
        }
        if (state.carry != 0 || !decimal::fits(state.wide, decimal::max_precision)) {
            return false;
        }
        std::memcpy(out.mutable_data<Int128>() + out_row, &state.wide, sizeof(Int128));
        return true;
    case AggregateFunction::avg:
    case AggregateFunction::avg_distinct: {
        if (state.count == 0) {
            out.set_null(out_row);
            return true;
        }
        double average = 0;
        if (aggregate.input.physical() == PhysicalType::f64) {
            average = get_double(state) / static_cast<double>(state.count);
        } else {
            // As DuckDB: the exact sum divided by count * 10^scale in long double.
            const std::uint8_t scale = aggregate.input.id == TypeId::decimal ? aggregate.input.scale : 0;
            const long double divisor =
                static_cast<long double>(state.count) * static_cast<long double>(decimal::pow10(scale));
            average = static_cast<double>(static_cast<long double>(state.wide) / divisor);
        }
        out.mutable_data<double>()[out_row] = average;
        return true;
    }
    case AggregateFunction::min:
    case AggregateFunction::max:
        if (state.count == 0) {
            out.set_null(out_row);
            return true;
        }
        put_cell(out, out_row, reinterpret_cast<const std::byte *>(&state.wide));
        return true;
    case AggregateFunction::var_samp:
    case AggregateFunction::var_pop:
    case AggregateFunction::stddev_samp:
    case AggregateFunction::stddev_pop: {
        const bool sample = aggregate.function == AggregateFunction::var_samp ||
                            aggregate.function == AggregateFunction::stddev_samp;
        if (state.count < (sample ? 2 : 1)) {
            out.set_null(out_row);
            return true;
        }
        const double variance =
            get_moments(state).m2 / static_cast<double>(sample ? state.count - 1 : state.count);
        const bool root = aggregate.function == AggregateFunction::stddev_samp ||
                          aggregate.function == AggregateFunction::stddev_pop;
        out.mutable_data<double>()[out_row] = root ? std::sqrt(variance) : variance;
        return true;
    }
    case AggregateFunction::string_agg: {
        StringList *list = get_strings(state);
        if (list == nullptr || list->empty()) {
            out.set_null(out_row);
            return true;
        }
        if (aggregate.order != 0) {
            std::sort(list->begin(), list->end(), [&](const StringRef &a, const StringRef &b) {
                return aggregate.order > 0 ? a < b : b < a;
            });
        }
        std::string joined;
        for (std::size_t k = 0; k < list->size(); ++k) {
            joined.append(k == 0 ? "" : aggregate.separator).append((*list)[k].view());
        }
        out.mutable_data<StringRef>()[out_row] = out.heap().add(joined);
        return true;
    }
    case AggregateFunction::quantile_cont: {
        ValueList *list = get_list(state);
        if (list == nullptr || state.count == 0) {
            out.set_null(out_row);
            return true;
        }
        if (aggregate.input.id == TypeId::decimal) {
            const Int128 value = decimal_quantile(list->decimals, aggregate.fraction,
                                                  aggregate.input.physical() == PhysicalType::i128);
            if (aggregate.result.physical() == PhysicalType::i128) {
                out.mutable_data<Int128>()[out_row] = value;
            } else {
                out.mutable_data<std::int64_t>()[out_row] = static_cast<std::int64_t>(value);
            }
            return true;
        }
        std::vector<double> &values = list->doubles;
        // DuckDB: interpolate between the values at floor and ceil of fraction * (n - 1).
        const double position = aggregate.fraction * static_cast<double>(values.size() - 1);
        const auto low = static_cast<std::size_t>(std::floor(position));
        const auto high = static_cast<std::size_t>(std::ceil(position));
        std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(low), values.end());
        const double low_value = values[low];
        double high_value = low_value;
        if (high != low) {
            high_value = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(high), values.end());
        }
        out.mutable_data<double>()[out_row] =
            low_value + (position - static_cast<double>(low)) * (high_value - low_value);
        return true;
    }
    }
    return true;
}

// ---- small-group kernels ----------------------------------------------------------------------
//
// Two kernels for aggregations whose batches hold few distinct keys (TPC-H Q1: 4 groups over 6 M
// rows; every scalar aggregation). The key cache finds a row's group by the raw bytes of its key
// cells instead of hashing and comparing the values; the lanes add the sums and counts of a
// batch into small local accumulators, so rows of one group do not wait on each other's stores
// into the same state.

/// Key columns the cache handles; wider keys take the hash path.
constexpr std::uint32_t key_cache_columns = 4;
/// Direct-mapped slots of the cache.
constexpr std::uint32_t key_cache_slots = 64;
/// Groups a batch may touch and still use the lanes.
constexpr std::uint32_t lane_groups = 16;
/// Independent accumulators per group: consecutive rows go to different lanes.
constexpr std::uint32_t lane_count = 4;

/// The raw words of a key cell: equal words imply equal group keys as long as the memory a
/// string reference points to does not change, which holds within one batch (so a cache entry
/// is valid for one batch only). Strings compare by address and length, so equal strings at
/// different addresses only miss the cache; doubles by bits (0.0 and -0.0 miss and meet in
/// the table).
inline void raw_key_words(const ColumnData &column, std::uint32_t row, std::uint64_t &low,
                          std::uint64_t &high) noexcept {
    low = 0;
    high = 0;
    switch (column.physical) {
    case PhysicalType::u8:
        low = std::to_integer<std::uint64_t>(column.data[row]);
        return;
    case PhysicalType::i64:
    case PhysicalType::f64:
        std::memcpy(&low, column.data + std::size_t{row} * 8, 8);
        return;
    case PhysicalType::i128:
        std::memcpy(&low, column.data + std::size_t{row} * 16, 8);
        std::memcpy(&high, column.data + std::size_t{row} * 16 + 8, 8);
        return;
    case PhysicalType::string: {
        StringRef text; // the fields, not the padding bytes
        std::memcpy(&text, column.data + std::size_t{row} * sizeof(StringRef), sizeof(StringRef));
        low = reinterpret_cast<std::uintptr_t>(text.data);
        high = text.size;
        return;
    }
    }
}

/// One entry of the key cache: the raw key, its NULL mask, its group row and its batch-local
/// group number (for the lanes; `lane_groups` when the batch has too many groups).
struct KeyCacheSlot {
    std::array<std::uint64_t, 2 * key_cache_columns> words{};
    std::uint64_t nulls{0};
    std::byte *group{nullptr};
    std::uint64_t epoch{0}; // the batch it belongs to; 0: none
    std::uint32_t local{0};
};

/// Per-group accumulators of one sum, average or count over a batch: lanes[lane * lane_groups +
/// local group]. `sum` and `carry` as in AggState (carry * 2^128 + sum is exact).
struct LaneState {
    Int128 sum;
    std::int64_t count;
    std::int64_t carry;
};
static_assert(sizeof(LaneState) == 32);

/// Whether update_lanes() computes this aggregate: exact sums and counts (their result does not
/// depend on the order of the additions; double sums do, so they keep the row order).
[[nodiscard]] inline bool lane_kernel(const AggregateInfo &aggregate) noexcept {
    switch (aggregate.function) {
    case AggregateFunction::count_star:
    case AggregateFunction::count:
        return true;
    case AggregateFunction::sum:
    case AggregateFunction::avg: {
        const PhysicalType physical = aggregate.input.physical();
        return physical == PhysicalType::u8 || physical == PhysicalType::i64 ||
               physical == PhysicalType::i128;
    }
    default:
        return false;
    }
}

/// Calls add(lane, value) for the live rows whose argument is not NULL, with the lane of row i
/// (lanes[ids[i]]) and its value as T (void: no value, for counts). The pointers are copied into
/// locals and T fixes the width, so the loop reloads nothing but the row's cells.
template <class T, class Add>
void lane_loop(const Batch &batch, std::uint32_t count, const ColumnData &argument, const std::uint8_t *ids,
               LaneState *lanes, Add &&add) noexcept {
    const std::byte *data = argument.data;
    const std::uint8_t *nulls = argument.nulls;
    const std::uint32_t *selection = batch.all_selected ? nullptr : batch.selection.data();
    auto body = [&](std::uint32_t i, std::uint32_t row) {
        LaneState &lane = lanes[ids[i]];
        if constexpr (std::is_void_v<T>) {
            add(lane);
        } else {
            T value;
            std::memcpy(&value, data + std::size_t{row} * sizeof(T), sizeof(T));
            add(lane, value);
        }
    };
    if (selection == nullptr) {
        for (std::uint32_t i = 0; i < count; ++i) {
            if (nulls == nullptr || nulls[i] == 0) {
                body(i, i);
            }
        }
        return;
    }
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::uint32_t row = selection[i];
        if (nulls == nullptr || nulls[row] == 0) {
            body(i, row);
        }
    }
}

/// Adds the batch's values of a lane_kernel() aggregate into local lanes, row i into lanes[ids[i]]
/// (lane i % lane_count of its batch-local group: ids[i] = lane * lane_groups + group), then
/// folds the lanes into the states at `offset` of the `groups` group rows `locals`.
void update_lanes(const AggregateInfo &aggregate, const ColumnData *argument, const Batch &batch,
                  std::uint32_t count, const std::uint8_t *ids, std::byte *const *locals,
                  std::uint32_t groups) noexcept {
    // On the stack, so the compiler sees that the lanes' stores do not touch the argument.
    std::array<LaneState, lane_count * lane_groups> lanes;
    std::memset(static_cast<void *>(lanes.data()), 0, sizeof(lanes));
    auto count_row = [](LaneState &lane) { ++lane.count; };
    if (aggregate.function == AggregateFunction::count_star) {
        // Every live row counts: no selection or NULLs to look at.
        lane_loop<void>(Batch{}, count, ColumnData{PhysicalType::u8, 1, nullptr, nullptr}, ids, lanes.data(),
                        count_row);
    } else if (aggregate.function == AggregateFunction::count) {
        lane_loop<void>(batch, count, *argument, ids, lanes.data(), count_row);
    } else {
        auto add_narrow = [](LaneState &lane, auto value) {
            // A batch has fewer than 2^32 rows of |value| < 2^63: the 128-bit lane cannot overflow.
            lane.sum += value;
            ++lane.count;
        };
        switch (argument->physical) {
        case PhysicalType::u8:
            lane_loop<std::uint8_t>(batch, count, *argument, ids, lanes.data(), add_narrow);
            break;
        case PhysicalType::i64:
            lane_loop<std::int64_t>(batch, count, *argument, ids, lanes.data(), add_narrow);
            break;
        case PhysicalType::i128:
            lane_loop<Int128>(batch, count, *argument, ids, lanes.data(), [](LaneState &lane, Int128 value) {
                if (__builtin_add_overflow(lane.sum, value, &lane.sum)) {
                    lane.carry += value < 0 ? -1 : 1;
                }
                ++lane.count;
            });
            break;
        default:
            MX_ASSERT(false, "update_lanes on an aggregate without a lane kernel");
            return;
        }
    }
    for (std::uint32_t l = 0; l < lane_count; ++l) {
        for (std::uint32_t g = 0; g < groups; ++g) {
            const LaneState &from = lanes[l * lane_groups + g];
            AggState &into = state_at(locals[g], aggregate.offset);
            into.count += from.count;
            add_wide(into, from.sum, from.carry);
        }
    }
}

/// Rows ahead whose group index slot is prefetched: enough to cover a DRAM miss with the
/// lookups of the rows in between (about 20 ns each when they hit).
constexpr std::uint32_t group_prefetch_distance = 16;

class AggregateNode final : public BatchNode {
public:
    AggregateNode(const PlanNode &plan, std::uint32_t batch_rows)
        : BatchNode(plan.groups.empty() ? "aggregate" : "group by"), _groups(plan.groups),
          _batch_rows(std::max<std::uint32_t>(batch_rows, 1)), _estimated_groups(plan.estimated_rows) {
        std::vector<PhysicalType> key_types;
        for (const auto &group : _groups) {
            key_types.push_back(group->type().physical());
            _group_types.push_back(group->type());
        }
        _key = KeyLayout(key_types);
        std::uint32_t offset = RowTable::header + _key.width();
        for (std::size_t i = 0; i < plan.aggregates.size(); ++i) {
            const AggregateSpec &spec = plan.aggregates[i];
            AggregateInfo info;
            info.function = spec.function;
            info.argument = spec.argument;
            info.input = spec.argument != nullptr ? spec.argument->type() : Type::bigint();
            info.result = plan.output.at(_groups.size() + i).type;
            info.offset = offset;
            info.name = spec.name;
            info.fraction = spec.fraction;
            info.separator = spec.separator;
            info.order = spec.order;
            offset += sizeof(AggState);
            if (spec.function == AggregateFunction::count_distinct ||
                spec.function == AggregateFunction::sum_distinct ||
                spec.function == AggregateFunction::avg_distinct) {
                info.distinct = static_cast<std::int32_t>(_distinct_keys.size());
                _distinct_aggregate.push_back(i);
                std::vector<PhysicalType> distinct_types = key_types;
                distinct_types.push_back(info.input.physical());
                _distinct_keys.emplace_back(distinct_types);
            }
            _aggregates.push_back(std::move(info));
        }
        _row_width = offset;
        // The DISTINCT sets need every row's key hash, which the key cache does not compute.
        _key_cacheable = _groups.size() <= key_cache_columns && _distinct_keys.empty();
    }

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _worker_count = workers;
        // More partitions than workers so the parallel merge balances; one when nothing is
        // merged across workers.
        const std::uint32_t partitions =
            workers == 1 ? 1U : std::min<std::uint32_t>(std::bit_ceil(workers) * 4U, 256U);
        _partition_bits = static_cast<std::uint32_t>(std::countr_zero(partitions));
        _partitions = partitions;
        _workers = std::make_unique<WorkerState[]>(workers);
        const std::uint64_t expected = expected_keys_per_table();
        for (std::uint16_t w = 0; w < workers; ++w) {
            WorkerState &state = _workers[w];
            if (grouped()) {
                for (std::uint32_t p = 0; p < partitions; ++p) {
                    state.groups.emplace_back(_row_width).expect(expected);
                }
            } else {
                state.scalar.reset(new std::byte[_row_width]);
                std::memset(state.scalar.get(), 0, _row_width);
            }
            state.distinct.resize(_distinct_keys.size());
            for (std::size_t d = 0; d < _distinct_keys.size(); ++d) {
                for (std::uint32_t p = 0; p < partitions; ++p) {
                    state.distinct[d].emplace_back(RowTable::header + _distinct_keys[d].width());
                }
            }
            state.keys.resize(_groups.size());
            state.key_data.resize(_groups.size());
            state.arguments.resize(_aggregates.size());
            state.argument_data.resize(_aggregates.size());
            state.distinct_data.resize(_groups.size() + 1);
        }
        _distinct_partials.assign(std::size_t{partitions} * _distinct_keys.size(), AggState{});
    }

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        WorkerState &state = _workers[context.worker_id()];
        const std::uint32_t count = batch->count();
        for (std::size_t g = 0; g < _groups.size(); ++g) {
            if (!check(context, evaluate(*_groups[g], *batch, state.keys[g]))) {
                return;
            }
            state.key_data[g] = column_data(state.keys[g]);
        }
        for (std::size_t a = 0; a < _aggregates.size(); ++a) {
            if (_aggregates[a].argument == nullptr) {
                continue;
            }
            if (!check(context, evaluate(*_aggregates[a].argument, *batch, state.arguments[a]))) {
                return;
            }
            state.argument_data[a] = column_data(state.arguments[a]);
        }
        state.rows.resize(count);
        // Whether state.ids gives each row its lane and state.locals the batch's groups (at most
        // lane_groups of them), so update_lanes() may run.
        bool dense = false;
        if (grouped() && _key_cacheable && state.key_cache_on) {
            dense = group_by_key_cache(state, *batch, count);
        } else if (grouped()) {
            state.hashes.resize(count);
            KeyLayout::hash_rows(state.key_data.data(), static_cast<std::uint32_t>(_groups.size()), *batch,
                                 count, state.hashes.data());
            // The index slots of the rows `group_prefetch_distance` ahead are loaded while these
            // rows look theirs up; with many groups each lookup is a cache miss.
            const std::uint64_t *hashes = state.hashes.data();
            for (std::uint32_t i = 0; i < std::min(count, group_prefetch_distance); ++i) {
                state.groups[partition_of(hashes[i])].prefetch(hashes[i]);
            }
            for (std::uint32_t i = 0; i < count; ++i) {
                if (i + group_prefetch_distance < count) {
                    const std::uint64_t ahead = hashes[i + group_prefetch_distance];
                    state.groups[partition_of(ahead)].prefetch(ahead);
                }
                const std::uint32_t row = batch->row(i);
                // Rows of one group often come together (lineitem by order): the previous row's
                // group is checked first, without a lookup.
                if (i > 0 && hashes[i] == hashes[i - 1] &&
                    _key.equals(RowTable::key_of(state.rows[i - 1]), state.key_data.data(), row)) {
                    state.rows[i] = state.rows[i - 1];
                    continue;
                }
                RowTable &table = state.groups[partition_of(hashes[i])];
                state.rows[i] =
                    table
                        .find_or_insert(
                            state.hashes[i],
                            [&](const std::byte *candidate) {
                                return _key.equals(RowTable::key_of(candidate), state.key_data.data(), row);
                            },
                            [&](std::byte *fresh) {
                                _key.store(RowTable::key_of(fresh), state.key_data.data(), row, state.arena);
                            })
                        .first;
            }
        } else {
            std::fill(state.rows.begin(), state.rows.end(), state.scalar.get());
            state.ids.resize(count);
            for (std::uint32_t i = 0; i < count; ++i) {
                state.ids[i] = static_cast<std::uint8_t>((i % lane_count) * lane_groups);
            }
            state.locals[0] = state.scalar.get();
            state.local_count = 1;
            dense = true;
        }
        for (std::size_t a = 0; a < _aggregates.size(); ++a) {
            const AggregateInfo &aggregate = _aggregates[a];
            if (aggregate.distinct >= 0) {
                insert_distinct(state, a, *batch, count);
            } else if (dense && lane_kernel(aggregate)) {
                update_lanes(aggregate, &state.argument_data[a], *batch, count, state.ids.data(),
                             state.locals.data(), state.local_count);
            } else {
                update(aggregate, state.rows.data(), &state.argument_data[a], *batch, count, state.arena,
                       state.lists, state.strings);
            }
        }
        // The evaluated vectors may view the batch, which dies now.
        for (Vector &vector : state.keys) {
            vector = Vector{};
        }
        for (Vector &vector : state.arguments) {
            vector = Vector{};
        }
    }

    [[nodiscard]] std::uint32_t finalize_parts(std::uint16_t /*workers*/) const noexcept override {
        if (grouped()) {
            return _partitions;
        }
        return _distinct_keys.empty() ? 0U : _partitions;
    }

    void finalize_part(FlowContext &context, std::uint32_t part) noexcept override {
        // Merging big partitions takes long: a cancelled run skips the rest (its state is only
        // freed afterwards, never read).
        CancelPoll poll(context);
        if (!grouped()) {
            for (std::size_t d = 0; d < _distinct_keys.size(); ++d) {
                const RowTable &set = merge_distinct(d, part, poll);
                AggState &partial = _distinct_partials[std::size_t{part} * _distinct_keys.size() + d];
                const AggregateInfo &aggregate = _aggregates[_distinct_aggregate[d]];
                set.for_each([&](const std::byte *entry) { fold_distinct(aggregate, partial, entry); });
            }
            return;
        }
        // Worker 0's index of the partition takes in every other worker's groups: a group seen
        // before is merged into the row the index has and marked, a new one is indexed where it
        // lies. No row is copied, and the index grows once.
        RowTable &target = _workers[0].groups[part];
        std::uint64_t keys = 0;
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            keys += _workers[w].groups[part].size();
        }
        if (_worker_count > 1) {
            target.reserve(keys);
        }
        for (std::uint16_t w = 1; w < _worker_count; ++w) {
            _workers[w].groups[part].for_each([&](std::byte *row) {
                if (poll()) {
                    return;
                }
                std::byte *into = target.find_or_adopt(row, [&](const std::byte *candidate) {
                    return _key.equals_stored(RowTable::key_of(candidate), RowTable::key_of(row));
                });
                if (into == row) {
                    return;
                }
                for (const AggregateInfo &aggregate : _aggregates) {
                    merge_state(aggregate, state_at(into, aggregate.offset), state_at(row, aggregate.offset));
                }
                RowTable::set_aux(row, merged_row);
            });
        }
        for (const AggregateInfo &aggregate : _aggregates) {
            if (aggregate.distinct < 0) {
                continue;
            }
            const RowTable &set = merge_distinct(static_cast<std::size_t>(aggregate.distinct), part, poll);
            set.for_each([&](const std::byte *entry) {
                if (poll()) {
                    return;
                }
                std::byte *group = target.find(RowTable::aux_of(entry), [&](const std::byte *candidate) {
                    return _key.equals_stored(RowTable::key_of(candidate), RowTable::key_of(entry));
                });
                MX_ASSERT(group != nullptr, "a distinct value without its group");
                fold_distinct(aggregate, state_at(group, aggregate.offset), entry);
            });
        }
        if (poll.stopped()) {
            return;
        }
        emit_groups(context, part, poll);
    }

    void finalize(FlowContext &context) noexcept override {
        if (grouped()) {
            return; // the parts emitted the groups
        }
        std::byte *into = _workers[0].scalar.get();
        for (std::uint16_t w = 1; w < _worker_count; ++w) {
            for (const AggregateInfo &aggregate : _aggregates) {
                merge_state(aggregate, state_at(into, aggregate.offset),
                            state_at(_workers[w].scalar.get(), aggregate.offset));
            }
        }
        for (const AggregateInfo &aggregate : _aggregates) {
            if (aggregate.distinct < 0) {
                continue;
            }
            AggState &state = state_at(into, aggregate.offset);
            for (std::uint32_t p = 0; p < _partitions; ++p) {
                const AggState &partial = _distinct_partials[std::size_t{p} * _distinct_keys.size() +
                                                             static_cast<std::size_t>(aggregate.distinct)];
                state.count += partial.count;
                if (aggregate.input.physical() == PhysicalType::f64) {
                    set_double(state, get_double(state) + get_double(partial));
                } else {
                    add_wide(state, partial.wide, partial.carry);
                }
            }
        }
        auto batch = make_output(1);
        if (!write_row(into, *batch, 0)) {
            context.fail(overflow_message());
            return;
        }
        emit(context, std::move(batch));
    }

    /// The group tables (with DISTINCT sets) and copied strings of every worker.
    [[nodiscard]] std::uint64_t memory_bytes() const override {
        std::uint64_t total = 0;
        for (std::uint16_t w = 0; _workers && w < _worker_count; ++w) {
            const WorkerState &state = _workers[w];
            for (const RowTable &table : state.groups) {
                total += table.bytes();
            }
            for (const auto &tables : state.distinct) {
                for (const RowTable &table : tables) {
                    total += table.bytes();
                }
            }
            total += state.arena.bytes();
        }
        return total;
    }

    [[nodiscard]] std::string details() const override {
        std::string text;
        if (grouped()) {
            text.append("keys=[");
            for (std::size_t g = 0; g < _groups.size(); ++g) {
                if (g > 0) {
                    text.append(", ");
                }
                text.append(to_string(*_groups[g]));
            }
            text.append("] ");
        }
        text.append("aggregates=[");
        for (std::size_t a = 0; a < _aggregates.size(); ++a) {
            if (a > 0) {
                text.append(", ");
            }
            text.append(aggregate_function_name(_aggregates[a].function));
            if (_aggregates[a].argument != nullptr) {
                text.append("(").append(to_string(*_aggregates[a].argument)).append(")");
            }
        }
        text.append("]");
        return text;
    }

private:
    // Owner-private per worker: written by the consume tasks of that worker, then read and
    // written by the finalize parts (ordered after every consume task by the dataflow layer;
    // part p touches partition p of every worker and nothing else). Padded: workers write side
    // by side.
    struct alignas(system::cache_line_size) WorkerState {
        std::vector<RowTable> groups;                // [partition]
        std::vector<std::vector<RowTable>> distinct; // [distinct aggregate][partition]
        std::unique_ptr<std::byte[]> scalar;         // scalar aggregation: the one state row
        StringHeap arena;                            // copied key strings and MIN/MAX strings
        std::deque<ValueList> lists;                 // quantile_cont values of the groups it started
        std::deque<StringList> strings;              // string_agg values of the groups it started
        // scratch of the consume tasks
        std::vector<Vector> keys;
        std::vector<ColumnData> key_data;
        std::vector<Vector> arguments;
        std::vector<ColumnData> argument_data;
        std::vector<ColumnData> distinct_data;
        std::vector<std::uint64_t> hashes;
        std::vector<std::byte *> rows;
        // small-group kernels (scratch of the consume tasks as well)
        bool key_cache_on{true}; // off for good once a batch misses the cache too often
        std::uint64_t epoch{0};  // batches this worker consumed: key cache entries of older ones are stale
        std::array<KeyCacheSlot, key_cache_slots> key_cache{};
        std::vector<std::uint8_t> ids;                 // per live row: its lane (update_lanes())
        std::array<std::byte *, lane_groups> locals{}; // batch-local group -> group row
        std::uint32_t local_count{0};
    };

    [[nodiscard]] bool grouped() const noexcept { return !_groups.empty(); }

    /// Groups each worker's partition table expects (RowTable::expect(): its index jumps to this
    /// size once the table outgrows a small one): the optimizer's group estimate spread over the
    /// tables (as when the workers see disjoint groups, the smallest share; an index that needs
    /// more still doubles). The estimate counts up to 2 M groups, so one far too high costs at
    /// most 64 MiB of index over all tables, and only if the tables are big anyway.
    [[nodiscard]] std::uint64_t expected_keys_per_table() const noexcept {
        constexpr double cap = 1U << 21U;
        if (!grouped() || !(_estimated_groups > 0)) {
            return 0;
        }
        const double tables = static_cast<double>(_partitions) * static_cast<double>(_worker_count);
        return static_cast<std::uint64_t>(std::min(_estimated_groups, cap) / tables);
    }

    /// The aux word of a group row merged into another worker's row of the same group (the
    /// aux word of a group row is 0 otherwise): emit_groups() skips it.
    static constexpr std::uint64_t merged_row = 1;

    /// The hash of row `row`'s key, as KeyLayout::hash_rows computes it.
    [[nodiscard]] std::uint64_t key_hash(const WorkerState &state, std::uint32_t row) const noexcept {
        std::uint64_t hash = KeyLayout::seed;
        for (std::size_t g = 0; g < _groups.size(); ++g) {
            const ColumnData &column = state.key_data[g];
            hash = combine_hash(hash, column.is_null(row) ? null_hash
                                                          : hash_cell(column.physical, column.cell(row)));
        }
        return hash;
    }

    /// Finds the group rows of a batch through the key cache (rows whose key cells have the same
    /// raw bytes as an earlier row of the batch take its group without hashing or comparing
    /// values), numbers the batch's groups (state.locals) and gives each row its lane
    /// (state.ids). Returns whether the lanes hold (at most `lane_groups` groups). Switches the
    /// cache off for the worker when more than an eighth of a batch's rows miss it: many groups,
    /// or strings at many addresses.
    bool group_by_key_cache(WorkerState &state, const Batch &batch, std::uint32_t count) {
        switch (_groups.size()) {
        case 1:
            return group_by_key_cache<1>(state, batch, count);
        case 2:
            return group_by_key_cache<2>(state, batch, count);
        case 3:
            return group_by_key_cache<3>(state, batch, count);
        default:
            MX_ASSERT(_groups.size() == key_cache_columns, "the key cache takes 1 to 4 key columns");
            return group_by_key_cache<key_cache_columns>(state, batch, count);
        }
    }

    /// group_by_key_cache() for `Columns` key columns: the raw key stays in registers.
    template <std::uint32_t Columns>
    bool group_by_key_cache(WorkerState &state, const Batch &batch, std::uint32_t count) {
        const std::uint64_t epoch = ++state.epoch;
        state.ids.resize(count);
        state.local_count = 0;
        std::array<ColumnData, Columns> columns;
        std::copy_n(state.key_data.begin(), Columns, columns.begin());
        const std::uint32_t *selection = batch.all_selected ? nullptr : batch.selection.data();
        std::byte **rows = state.rows.data();
        std::uint8_t *ids = state.ids.data();
        bool dense = true;
        std::uint32_t misses = 0;
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::uint32_t row = selection == nullptr ? i : selection[i];
            std::array<std::uint64_t, 2 * Columns> words;
            std::uint64_t nulls = 0;
            std::uint64_t mix = 0;
            for (std::uint32_t c = 0; c < Columns; ++c) {
                if (columns[c].is_null(row)) {
                    nulls |= std::uint64_t{1} << c;
                    words[2 * c] = 0;
                    words[2 * c + 1] = 0;
                } else {
                    raw_key_words(columns[c], row, words[2 * c], words[2 * c + 1]);
                }
                mix = (mix ^ words[2 * c]) * 0x9e3779b97f4a7c15ULL;
                mix = (mix ^ words[2 * c + 1]) * 0xff51afd7ed558ccdULL;
            }
            mix ^= nulls;
            KeyCacheSlot &slot = state.key_cache[(mix ^ (mix >> 32U)) % key_cache_slots];
            bool hit = slot.epoch == epoch && slot.nulls == nulls;
            for (std::uint32_t w = 0; w < 2 * Columns; ++w) {
                hit = hit && slot.words[w] == words[w];
            }
            if (!hit) {
                ++misses;
                fill_key_cache(state, slot, row, words.data(), 2 * Columns, nulls, epoch);
                dense = dense && slot.local < lane_groups;
            }
            rows[i] = slot.group;
            ids[i] = static_cast<std::uint8_t>((i % lane_count) * lane_groups + slot.local);
        }
        if (count >= 64 && misses * 8 > count) {
            state.key_cache_on = false;
        }
        return dense;
    }

    /// A key cache miss: looks the row's group up in the hash table and puts it into `slot`
    /// with its batch-local number (`lane_groups` when the batch has too many groups).
    void fill_key_cache(WorkerState &state, KeyCacheSlot &slot, std::uint32_t row, const std::uint64_t *words,
                        std::uint32_t word_count, std::uint64_t nulls, std::uint64_t epoch) {
        const std::uint64_t hash = key_hash(state, row);
        slot.group = state.groups[partition_of(hash)]
                         .find_or_insert(
                             hash,
                             [&](const std::byte *candidate) {
                                 return _key.equals(RowTable::key_of(candidate), state.key_data.data(), row);
                             },
                             [&](std::byte *fresh) {
                                 _key.store(RowTable::key_of(fresh), state.key_data.data(), row, state.arena);
                             })
                         .first;
        std::copy_n(words, word_count, slot.words.begin());
        slot.nulls = nulls;
        slot.epoch = epoch;
        slot.local = lane_groups;
        // Two raw keys of one group (a string at two addresses) get one local number.
        for (std::uint32_t g = 0; g < state.local_count; ++g) {
            if (state.locals[g] == slot.group) {
                slot.local = g;
            }
        }
        if (slot.local == lane_groups && state.local_count < lane_groups) {
            slot.local = state.local_count;
            state.locals[state.local_count++] = slot.group;
        }
    }

    [[nodiscard]] std::uint32_t partition_of(std::uint64_t hash) const noexcept {
        return _partition_bits == 0 ? 0U : static_cast<std::uint32_t>(hash >> (64U - _partition_bits));
    }

    static bool check(FlowContext &context, const EvalStatus &status) noexcept {
        if (!status.ok()) {
            context.fail(status.message());
            return false;
        }
        return true;
    }

    [[nodiscard]] static std::string overflow_message() {
        return "Overflow in SUM: the result does not fit DECIMAL(38)";
    }

    /// Folds one entry of a distinct set (group key + value) into its aggregate's state: counts it,
    /// and for sum/avg(DISTINCT) adds the value.
    void fold_distinct(const AggregateInfo &aggregate, AggState &state,
                       const std::byte *entry) const noexcept {
        ++state.count;
        if (aggregate.function == AggregateFunction::count_distinct) {
            return;
        }
        const std::byte *cell =
            KeyLayout::slot(RowTable::key_of(entry), static_cast<std::uint32_t>(_groups.size()));
        switch (aggregate.input.physical()) {
        case PhysicalType::u8: {
            std::uint8_t value = 0;
            std::memcpy(&value, cell, sizeof(value));
            state.wide += value;
            return;
        }
        case PhysicalType::i64: {
            std::int64_t value = 0;
            std::memcpy(&value, cell, sizeof(value));
            state.wide += value; // |value| < 2^63: 2^64 of them cannot overflow the 128-bit sum
            return;
        }
        case PhysicalType::i128: {
            Int128 value = 0;
            std::memcpy(&value, cell, sizeof(value));
            add_wide(state, value, 0);
            return;
        }
        case PhysicalType::f64: {
            double value = 0;
            std::memcpy(&value, cell, sizeof(value));
            set_double(state, get_double(state) + value);
            return;
        }
        case PhysicalType::string:
            return; // rejected by the plan builder
        }
    }

    void insert_distinct(WorkerState &state, std::size_t aggregate, const Batch &batch,
                         std::uint32_t count) noexcept {
        const auto index = static_cast<std::size_t>(_aggregates[aggregate].distinct);
        const ColumnData argument = state.argument_data[aggregate];
        const KeyLayout &layout = _distinct_keys[index];
        std::copy(state.key_data.begin(), state.key_data.end(), state.distinct_data.begin());
        state.distinct_data[_groups.size()] = argument;
        for_each_value(batch, count, argument, [&](std::uint32_t i, std::uint32_t row) {
            const std::uint64_t group_hash = grouped() ? state.hashes[i] : KeyLayout::seed;
            const std::uint64_t hash =
                combine_hash(group_hash, hash_cell(argument.physical, argument.cell(row)));
            RowTable &set = state.distinct[index][partition_of(grouped() ? group_hash : hash)];
            set.find_or_insert(
                hash,
                [&](const std::byte *candidate) {
                    return layout.equals(RowTable::key_of(candidate), state.distinct_data.data(), row);
                },
                [&](std::byte *fresh) {
                    layout.store(RowTable::key_of(fresh), state.distinct_data.data(), row, state.arena);
                    RowTable::set_aux(fresh, group_hash);
                });
        });
    }

    /// Merges partition `part` of every worker's distinct set `index` into worker 0's.
    RowTable &merge_distinct(std::size_t index, std::uint32_t part, CancelPoll &poll) {
        RowTable &target = _workers[0].distinct[index][part];
        const KeyLayout &layout = _distinct_keys[index];
        const std::uint32_t width = target.row_width();
        for (std::uint16_t w = 1; w < _worker_count; ++w) {
            _workers[w].distinct[index][part].for_each([&](const std::byte *entry) {
                if (poll()) {
                    return;
                }
                target.find_or_insert(
                    RowTable::hash_of(entry),
                    [&](const std::byte *candidate) {
                        return layout.equals_stored(RowTable::key_of(candidate), RowTable::key_of(entry));
                    },
                    [&](std::byte *fresh) { std::memcpy(fresh + 8, entry + 8, width - 8); });
            });
        }
        return target;
    }

    [[nodiscard]] std::unique_ptr<Batch> make_output(std::uint32_t rows) const {
        auto batch = std::make_unique<Batch>();
        batch->rows = rows;
        for (const Type &type : _group_types) {
            batch->columns.emplace_back(type, rows);
        }
        for (const AggregateInfo &aggregate : _aggregates) {
            batch->columns.emplace_back(aggregate.result, rows);
        }
        return batch;
    }

    /// Writes one group (key and aggregate results) as row `out_row`.
    bool write_row(const std::byte *row, Batch &batch, std::uint32_t out_row) const noexcept {
        const std::byte *key = RowTable::key_of(row);
        for (std::uint32_t g = 0; g < _groups.size(); ++g) {
            Vector &out = batch.columns[g];
            if (KeyLayout::is_null(key, g)) {
                out.set_null(out_row);
            } else {
                put_cell(out, out_row, KeyLayout::slot(key, g));
            }
        }
        bool ok = true;
        for (std::size_t a = 0; a < _aggregates.size(); ++a) {
            ok = write_result(_aggregates[a], state_at(row, _aggregates[a].offset),
                              batch.columns[_groups.size() + a], out_row) &&
                 ok;
        }
        return ok;
    }

    /// Emits the groups of partition `part` after its merge: the rows of every worker's table
    /// that were not merged into another worker's row, each table in its insertion order.
    void emit_groups(FlowContext &context, std::uint32_t part, CancelPoll &poll) noexcept {
        std::uint64_t remaining = _workers[0].groups[part].size();
        std::unique_ptr<Batch> batch;
        std::uint32_t filled = 0;
        bool ok = true;
        for (std::uint16_t w = 0; w < _worker_count && ok; ++w) {
            _workers[w].groups[part].for_each([&](const std::byte *row) {
                if (!ok || RowTable::aux_of(row) == merged_row || poll()) {
                    return;
                }
                if (batch == nullptr) {
                    const auto rows =
                        static_cast<std::uint32_t>(std::min<std::uint64_t>(remaining, _batch_rows));
                    batch = make_output(rows);
                    filled = 0;
                }
                ok = write_row(row, *batch, filled);
                ++filled;
                --remaining;
                if (filled == batch->rows) {
                    emit(context, std::move(batch));
                    batch = nullptr;
                }
            });
        }
        if (!ok) {
            context.fail(overflow_message());
        }
    }

    // Set at construction, read-only during the run.
    std::vector<ExprPtr> _groups;
    std::vector<Type> _group_types;
    std::vector<AggregateInfo> _aggregates;
    KeyLayout _key;
    std::vector<KeyLayout> _distinct_keys;        // per aggregate over DISTINCT: group key + argument
    std::vector<std::size_t> _distinct_aggregate; // per distinct set: the index of its aggregate
    std::uint32_t _row_width{0};
    std::uint32_t _batch_rows;
    double _estimated_groups;   // the optimizer's, -1 when unknown
    bool _key_cacheable{false}; // the key cache applies: at most 4 key columns, no DISTINCT
    // Set in prepare() on the starting thread, read-only during the run.
    std::uint16_t _worker_count{0};
    std::uint32_t _partitions{1};
    std::uint32_t _partition_bits{0};
    std::unique_ptr<WorkerState[]> _workers;
    // Scalar aggregates over distinct values: [part][distinct set], written by part `part`, read
    // by finalize() (ordered after every part by the layer).
    std::vector<AggState> _distinct_partials;
};

} // namespace

Compiled compile_aggregate(Compiler &compiler, const PlanNode &node) {
    const Compiled input = compile(compiler, *node.children.at(0));
    auto &aggregate = compiler.graph.add<AggregateNode>(node, compiler.options.morsel_rows);
    compiler.graph.connect(input.output, aggregate.id());
    return Compiled{aggregate.id(), false};
}

} // namespace mx::db::detail
