// Window functions (OVER): consume tasks hash-partition their rows by the PARTITION BY key into
// P buckets of their worker (no shared buffer; strings into the worker's arena). Finalize parts
// (one per bucket, in parallel) gather bucket p of every worker, sort it by (partition key,
// ORDER BY key), evaluate every window function partition by partition and emit the rows with
// their results. Every row of one SQL partition lands in the same bucket, so the parts are
// independent. Without PARTITION BY there is one bucket: below a row threshold one task sorts and
// evaluates all rows.
//
// Without PARTITION BY and with at least parallel_min_rows rows (and every function supported,
// see parallel_capable), finalize runs one part per worker over a range of the sorted order
// instead: every part computes the same splitters (ORDER BY keys sampled from every worker's
// rows), so ranges split between peer groups, never inside one. Part k scans all rows once: it
// keeps its own range, counts and sums (exact) what lies before and after it, keeps the last and
// first `halo` rows around it (for lag/lead and sliding ROWS frames) and the extremes before and
// after it (for min/max and first_value/last_value over unbounded frames). It sorts its range and
// evaluates every function at global positions (its range starts after the rows before it), so
// the results equal the one-task path's. DOUBLE sums and dense_rank depend on everything before
// a range in sorted order and stay on the one-task path.
//
// Strings are copied into the arena of the worker whose consume task saw the row; the arenas
// live as long as the node, so emitted batches view them.
//
// Order inside a bucket: the partition columns ascending (NULLs form a partition of their own),
// the ORDER BY keys with their directions and NULL placement, then every column ascending, so
// that ROWS frames over ties see a deterministic order whatever the schedule. The output is in
// no particular order (the node is not ordered: an ORDER BY above it sorts).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>

#include "cells.h"
#include "operator.h"

namespace mx::db::detail {

namespace {

using dataflow::FlowContext;

struct OrderSpec {
    std::uint32_t column{0};
    bool descending{false};
    bool nulls_first{false};
};

/// Rows of one bucket of one worker (or of all workers, gathered), column by column.
struct Rows {
    std::vector<std::vector<std::byte>> values;
    std::vector<std::vector<std::uint8_t>> nulls;
    std::uint32_t rows{0};
};

/// One window function's results of a finalize part, by sorted position.
struct Results {
    std::vector<std::byte> values;
    std::vector<std::uint8_t> nulls;
    std::uint32_t width{8};

    void init(PhysicalType physical, std::size_t rows) {
        width = static_cast<std::uint32_t>(physical_size(physical));
        values.assign(rows * width, std::byte{0});
        nulls.assign(rows, 0);
    }
    template <class T>
    void set(std::size_t position, const T &value) noexcept {
        std::memcpy(values.data() + position * width, &value, sizeof(T));
    }
    void set_cell(std::size_t position, const std::byte *cell) noexcept {
        std::memcpy(values.data() + position * width, cell, width);
    }
    void set_null(std::size_t position) noexcept { nulls[position] = 1; }
};

[[nodiscard]] bool integral(PhysicalType physical) noexcept {
    return physical == PhysicalType::u8 || physical == PhysicalType::i64 || physical == PhysicalType::i128;
}

[[nodiscard]] Int128 integral_value(const ColumnData &column, std::uint32_t row) noexcept {
    switch (column.physical) {
    case PhysicalType::u8:
        return column.get<std::uint8_t>(row);
    case PhysicalType::i64:
        return column.get<std::int64_t>(row);
    case PhysicalType::i128:
        return column.get<Int128>(row);
    default:
        return 0;
    }
}

class WindowNode final : public BatchNode {
public:
    WindowNode(const PlanNode &plan, std::vector<OrderSpec> order, std::uint32_t batch_rows)
        : BatchNode("window"), _partition(plan.partition_columns), _order(std::move(order)),
          _functions(plan.windows), _batch_rows(std::max<std::uint32_t>(batch_rows, 1)),
          _parallel_min_rows(std::size_t{16} * _batch_rows) {
        const std::size_t inputs = plan.children[0]->output.size();
        for (std::size_t c = 0; c < plan.output.size(); ++c) {
            (c < inputs ? _types : _result_types).push_back(plan.output[c].type);
        }
        for (const Type &type : _types) {
            _physical.push_back(type.physical());
        }
    }

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _worker_count = workers;
        _buckets = _partition.empty()
                       ? 1U
                       : std::min<std::uint32_t>(256, 4 * std::bit_ceil(static_cast<std::uint32_t>(workers)));
        _local = std::make_unique<Local[]>(workers);
        for (std::uint16_t w = 0; w < workers; ++w) {
            _local[w].buckets.resize(_buckets);
            for (Rows &rows : _local[w].buckets) {
                rows.values.resize(_types.size());
                rows.nulls.resize(_types.size());
            }
        }
    }

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        Local &local = _local[context.worker_id()];
        std::vector<ColumnData> input(batch->columns.size());
        for (std::size_t c = 0; c < input.size(); ++c) {
            input[c] = column_data(batch->columns[c]);
        }
        const std::uint32_t count = batch->count();
        local.selected.resize(_buckets);
        for (auto &rows : local.selected) {
            rows.clear();
        }
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::uint32_t row = batch->row(i);
            std::uint64_t hash = 0;
            for (const std::uint32_t column : _partition) {
                const ColumnData &data = input[column];
                hash = combine_hash(hash,
                                    data.is_null(row) ? null_hash : hash_cell(data.physical, data.cell(row)));
            }
            const auto bucket = static_cast<std::uint32_t>(mix_hash(hash) % _buckets);
            local.selected[bucket].push_back(row);
        }
        for (std::uint32_t b = 0; b < _buckets; ++b) {
            append(local.buckets[b], input, local.selected[b], *local.heap);
        }
    }

    [[nodiscard]] std::uint32_t finalize_parts(std::uint16_t /*workers*/) const noexcept override {
        // Called once after the consume phase: the row count is known.
        return _partition.empty() ? parallel_parts() : _buckets;
    }

    void finalize_part(FlowContext &context, std::uint32_t part) noexcept override {
        if (_partition.empty()) {
            // Every part of a parallel run reads every worker's buffer: nothing is released here.
            if (const std::uint32_t parts = parallel_parts(); parts > 1) {
                parallel_part(context, part, parts);
                return;
            }
        }
        // Gather bucket `part` of every worker (strings stay in the workers' arenas, which live
        // as long as the graph).
        // The emitted batches copy the values (strings stay views into the arenas), so the
        // gathered rows die with this task.
        Rows rows;
        rows.values.resize(_types.size());
        rows.nulls.resize(_types.size());
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            Rows &from = _local[w].buckets[part];
            for (std::size_t c = 0; c < _types.size(); ++c) {
                rows.values[c].insert(rows.values[c].end(), from.values[c].begin(), from.values[c].end());
                rows.nulls[c].insert(rows.nulls[c].end(), from.nulls[c].begin(), from.nulls[c].end());
            }
            rows.rows += from.rows;
            from = Rows{};
        }
        if (rows.rows == 0 || context.cancelled()) {
            return;
        }
        const std::vector<ColumnData> data = columns(rows);
        std::vector<std::uint32_t> order(rows.rows);
        std::iota(order.begin(), order.end(), 0U);
        std::sort(order.begin(), order.end(),
                  [&](std::uint32_t a, std::uint32_t b) { return compare_full(data.data(), a, b) < 0; });
        if (context.cancelled()) {
            return;
        }

        // Partition and peer-group boundaries by sorted position.
        const std::size_t n = order.size();
        std::vector<std::uint32_t> partition_end(n);
        std::vector<std::uint32_t> peer_start(n);
        std::vector<std::uint32_t> peer_end(n);
        std::vector<std::uint32_t> partition_start(n);
        {
            std::size_t start = 0;
            std::size_t peer = 0;
            for (std::size_t i = 0; i < n; ++i) {
                if (i > 0 && !same_partition(data.data(), order[i - 1], order[i])) {
                    start = i;
                    peer = i;
                } else if (i > 0 && !same_peers(data.data(), order[i - 1], order[i])) {
                    peer = i;
                }
                partition_start[i] = static_cast<std::uint32_t>(start);
                peer_start[i] = static_cast<std::uint32_t>(peer);
            }
            std::size_t end = n;
            std::size_t peer_stop = n;
            for (std::size_t i = n; i-- > 0;) {
                if (i + 1 < n && partition_start[i + 1] != partition_start[i]) {
                    end = i + 1;
                    peer_stop = i + 1;
                } else if (i + 1 < n && peer_start[i + 1] != peer_start[i]) {
                    peer_stop = i + 1;
                }
                partition_end[i] = static_cast<std::uint32_t>(end);
                peer_end[i] = static_cast<std::uint32_t>(peer_stop);
            }
        }
        const Bounds bounds{order, partition_start, partition_end, peer_start, peer_end};

        std::vector<Results> results(_functions.size());
        for (std::size_t f = 0; f < _functions.size(); ++f) {
            results[f].init(_result_types[f].physical(), n);
            if (!evaluate(context, _functions[f], _result_types[f], data, bounds, results[f])) {
                return;
            }
        }
        emit_rows(context, data, order, results);
    }

    void finalize(FlowContext & /*context*/) noexcept override {}

    [[nodiscard]] std::string details() const override {
        std::string text = "partition=[";
        for (std::size_t i = 0; i < _partition.size(); ++i) {
            text.append(i > 0 ? ", #" : "#").append(std::to_string(_partition[i]));
        }
        text.append("] order=[");
        for (std::size_t i = 0; i < _order.size(); ++i) {
            text.append(i > 0 ? ", #" : "#").append(std::to_string(_order[i].column));
            text.append(_order[i].descending ? " DESC" : " ASC");
        }
        text.append("] functions=[");
        for (std::size_t i = 0; i < _functions.size(); ++i) {
            text.append(i > 0 ? ", " : "").append(window_function_name(_functions[i].function));
        }
        text.append("]");
        if (std::size_t halo = 0; parallel_capable(halo)) {
            text.append(" parallel from ").append(std::to_string(_parallel_min_rows)).append(" rows");
        }
        return text;
    }

private:
    struct Bounds {
        const std::vector<std::uint32_t> &order;
        const std::vector<std::uint32_t> &partition_start;
        const std::vector<std::uint32_t> &partition_end;
        const std::vector<std::uint32_t> &peer_start;
        const std::vector<std::uint32_t> &peer_end;
    };

    // Owner-private per worker: written by that worker's consume tasks; read by the finalize
    // parts (ordered after every consume task by the layer), each of which takes one bucket.
    // Padded: workers write side by side.
    struct alignas(system::cache_line_size) Local {
        std::vector<Rows> buckets;
        std::unique_ptr<StringHeap> heap{std::make_unique<StringHeap>()};
        std::vector<std::vector<std::uint32_t>> selected;
    };

    [[nodiscard]] std::vector<ColumnData> columns(const Rows &rows) const {
        std::vector<ColumnData> data(_types.size());
        for (std::size_t c = 0; c < _types.size(); ++c) {
            data[c] = ColumnData{_physical[c], static_cast<std::uint32_t>(physical_size(_physical[c])),
                                 rows.values[c].data(), rows.nulls[c].data()};
        }
        return data;
    }

    void append(Rows &rows, const std::vector<ColumnData> &input, const std::vector<std::uint32_t> &selected,
                StringHeap &heap) const {
        if (selected.empty()) {
            return;
        }
        for (std::size_t c = 0; c < _types.size(); ++c) {
            const ColumnData &column = input[c];
            const std::size_t width = column.width;
            std::vector<std::byte> &values = rows.values[c];
            std::vector<std::uint8_t> &nulls = rows.nulls[c];
            const std::size_t base = values.size();
            values.resize(base + selected.size() * width);
            nulls.resize(rows.rows + selected.size());
            std::byte *target = values.data() + base;
            for (std::size_t i = 0; i < selected.size(); ++i) {
                const std::uint32_t row = selected[i];
                const bool null = column.is_null(row);
                nulls[rows.rows + i] = null ? 1 : 0;
                if (null) {
                    std::memset(target + i * width, 0, width);
                } else if (column.physical == PhysicalType::string) {
                    StringRef text;
                    std::memcpy(&text, column.cell(row), sizeof(StringRef));
                    const StringRef copy = heap.add(text.view());
                    std::memcpy(target + i * width, &copy, sizeof(StringRef));
                } else {
                    std::memcpy(target + i * width, column.cell(row), width);
                }
            }
        }
        rows.rows += static_cast<std::uint32_t>(selected.size());
    }

    static int compare_column(const ColumnData &column, std::uint32_t a, std::uint32_t b,
                              bool nulls_first) noexcept {
        return compare_column(column, a, column, b, nulls_first);
    }
    static int compare_column(const ColumnData &left, std::uint32_t a, const ColumnData &right,
                              std::uint32_t b, bool nulls_first) noexcept {
        const bool a_null = left.is_null(a);
        const bool b_null = right.is_null(b);
        if (a_null || b_null) {
            if (a_null == b_null) {
                return 0;
            }
            return (a_null == nulls_first) ? -1 : 1;
        }
        return compare_cells(left.physical, left.cell(a), right.cell(b));
    }

    [[nodiscard]] bool same_partition(const ColumnData *data, std::uint32_t a,
                                      std::uint32_t b) const noexcept {
        return std::all_of(_partition.begin(), _partition.end(), [&](std::uint32_t column) {
            return compare_column(data[column], a, b, false) == 0;
        });
    }

    [[nodiscard]] bool same_peers(const ColumnData *data, std::uint32_t a, std::uint32_t b) const noexcept {
        return std::all_of(_order.begin(), _order.end(), [&](const OrderSpec &key) {
            return compare_column(data[key.column], a, b, false) == 0;
        });
    }

    [[nodiscard]] int compare_full(const ColumnData *data, std::uint32_t a, std::uint32_t b) const noexcept {
        for (const std::uint32_t column : _partition) {
            if (const int order = compare_column(data[column], a, b, false); order != 0) {
                return order;
            }
        }
        for (const OrderSpec &key : _order) {
            const ColumnData &column = data[key.column];
            if (const int order = compare_column(column, a, b, key.nulls_first); order != 0) {
                return key.descending && !(column.is_null(a) || column.is_null(b)) ? -order : order;
            }
        }
        for (std::size_t c = 0; c < _types.size(); ++c) {
            if (const int order = compare_column(data[c], a, b, false); order != 0) {
                return order;
            }
        }
        return 0;
    }

    /// The frame [start, end) of sorted position i.
    static std::pair<std::size_t, std::size_t> frame(const WindowSpec &spec, const Bounds &bounds,
                                                     std::size_t i) noexcept {
        return frame(spec, i, bounds.partition_start[i], bounds.partition_end[i], bounds.peer_start[i],
                     bounds.peer_end[i]);
    }
    /// The frame [start, end) of position i in the partition [ps, pe) with peers [peer_start, peer_end).
    static std::pair<std::size_t, std::size_t> frame(const WindowSpec &spec, std::size_t i, std::size_t ps,
                                                     std::size_t pe, std::size_t peer_start,
                                                     std::size_t peer_end) noexcept {
        auto position = [&](const FrameBound &bound, bool is_end) -> std::size_t {
            switch (bound.kind) {
            case FrameBoundKind::unbounded_preceding:
                return ps;
            case FrameBoundKind::unbounded_following:
                return pe;
            case FrameBoundKind::current_row:
                if (!spec.rows) {
                    return is_end ? peer_end : peer_start;
                }
                return is_end ? i + 1 : i;
            case FrameBoundKind::preceding: {
                const std::size_t back = bound.offset > i - ps ? ps : i - bound.offset;
                return is_end ? std::min(back + 1, pe) : back;
            }
            case FrameBoundKind::following: {
                const std::size_t ahead = bound.offset >= pe - i ? pe : i + bound.offset;
                return is_end ? std::min(ahead + 1, pe) : ahead;
            }
            }
            return ps;
        };
        std::size_t start = position(spec.start, false);
        std::size_t end = position(spec.end, true);
        // A PRECEDING end before the partition ends the frame before its start: empty.
        if (spec.end.kind == FrameBoundKind::preceding && spec.end.offset > i - ps) {
            end = ps;
        }
        if (end < start) {
            end = start;
        }
        return {start, end};
    }

    /// Computes one function for every sorted position; false when the query failed.
    bool evaluate(FlowContext &context, const WindowSpec &spec, const Type &type,
                  const std::vector<ColumnData> &data, const Bounds &bounds, Results &out) const noexcept {
        const std::vector<std::uint32_t> &order = bounds.order;
        const std::size_t n = order.size();
        const ColumnData *argument = spec.argument ? &data[*spec.argument] : nullptr;
        CancelPoll poll(context);
        switch (spec.function) {
        case WindowFunction::row_number:
        case WindowFunction::rank:
        case WindowFunction::dense_rank: {
            std::int64_t dense = 0;
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t ps = bounds.partition_start[i];
                if (i == ps) {
                    dense = 0;
                }
                if (bounds.peer_start[i] == i) {
                    ++dense;
                }
                const auto value = spec.function == WindowFunction::row_number
                                       ? static_cast<std::int64_t>(i - ps + 1)
                                   : spec.function == WindowFunction::rank
                                       ? static_cast<std::int64_t>(bounds.peer_start[i] - ps + 1)
                                       : dense;
                out.set(i, value);
            }
            return true;
        }
        case WindowFunction::ntile:
            for (std::size_t i = 0; i < n; ++i) {
                const std::uint32_t row = order[i];
                if (argument->is_null(row)) {
                    out.set_null(i);
                    continue;
                }
                const std::int64_t buckets = argument->get<std::int64_t>(row);
                if (buckets <= 0) {
                    context.fail("Argument for ntile must be greater than zero");
                    return false;
                }
                const std::size_t ps = bounds.partition_start[i];
                const auto total = static_cast<std::int64_t>(bounds.partition_end[i] - ps);
                const std::int64_t used = std::min(buckets, total);
                const std::int64_t size = total / used;
                const std::int64_t large = total - used * size; // buckets with size + 1 rows
                const auto index = static_cast<std::int64_t>(i - ps);
                const std::int64_t small_start = large * (size + 1);
                const std::int64_t bucket =
                    index < small_start ? 1 + index / (size + 1) : 1 + large + (index - small_start) / size;
                out.set(i, bucket);
            }
            return true;
        case WindowFunction::lag:
        case WindowFunction::lead: {
            const ColumnData *fallback = spec.default_value ? &data[*spec.default_value] : nullptr;
            // A negative offset looks the other way (DuckDB); unsigned magnitudes cannot overflow.
            const bool backward = (spec.function == WindowFunction::lag) == (spec.offset >= 0);
            const std::uint64_t distance = spec.offset >= 0 ? static_cast<std::uint64_t>(spec.offset)
                                                            : 0 - static_cast<std::uint64_t>(spec.offset);
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t ps = bounds.partition_start[i];
                const std::size_t pe = bounds.partition_end[i];
                const bool inside = backward ? distance <= i - ps : distance < pe - i;
                const ColumnData *from = argument;
                std::uint32_t row = 0;
                if (inside) {
                    row = order[backward ? i - distance : i + distance];
                } else if (fallback != nullptr) {
                    from = fallback;
                    row = order[i];
                } else {
                    out.set_null(i);
                    continue;
                }
                if (from->is_null(row)) {
                    out.set_null(i);
                } else {
                    out.set_cell(i, from->cell(row));
                }
            }
            return true;
        }
        case WindowFunction::first_value:
        case WindowFunction::last_value:
            for (std::size_t i = 0; i < n && !poll(); ++i) {
                const auto [start, end] = frame(spec, bounds, i);
                if (start == end) {
                    out.set_null(i);
                    continue;
                }
                const std::uint32_t row =
                    order[spec.function == WindowFunction::first_value ? start : end - 1];
                if (argument->is_null(row)) {
                    out.set_null(i);
                } else {
                    out.set_cell(i, argument->cell(row));
                }
            }
            return !poll.stopped();
        case WindowFunction::count_star:
            for (std::size_t i = 0; i < n; ++i) {
                const auto [start, end] = frame(spec, bounds, i);
                out.set(i, static_cast<std::int64_t>(end - start));
            }
            return true;
        case WindowFunction::count:
        case WindowFunction::sum:
        case WindowFunction::avg:
            return evaluate_sum(context, spec, type, *argument, bounds, out);
        case WindowFunction::min:
        case WindowFunction::max:
            return evaluate_extreme(context, spec, *argument, bounds, out);
        }
        return true;
    }

    /// count/sum/avg from prefix sums over the sorted positions (exact 128-bit sums for
    /// integers and decimals; doubles are added frame by frame unless the frame starts at the
    /// partition's start, so that no subtraction loses precision).
    bool evaluate_sum(FlowContext &context, const WindowSpec &spec, const Type &type,
                      const ColumnData &argument, const Bounds &bounds, Results &out) const noexcept {
        const std::vector<std::uint32_t> &order = bounds.order;
        const std::size_t n = order.size();
        std::vector<std::int64_t> counts(n + 1, 0);
        const bool exact = integral(argument.physical);
        std::vector<Int128> sums(exact ? n + 1 : 0, 0);
        std::vector<double> running(exact ? 0 : n + 1, 0.0);
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint32_t row = order[i];
            const bool null = argument.is_null(row);
            // Prefix values restart at every partition, so a sum never spans two partitions.
            const bool first = bounds.partition_start[i] == i;
            counts[i + 1] = (first ? 0 : counts[i]) + (null ? 0 : 1);
            if (exact) {
                const Int128 base = first ? 0 : sums[i];
                Int128 next = base;
                if (!null && __builtin_add_overflow(base, integral_value(argument, row), &next)) {
                    context.fail("Overflow in SUM: the result does not fit DECIMAL(38)");
                    return false;
                }
                sums[i + 1] = next;
            } else if (argument.physical == PhysicalType::f64) {
                running[i + 1] = (first ? 0.0 : running[i]) + (null ? 0.0 : argument.get<double>(row));
            }
        }
        CancelPoll poll(context);
        for (std::size_t i = 0; i < n && !poll(); ++i) {
            const auto [start, end] = frame(spec, bounds, i);
            const std::size_t ps = bounds.partition_start[i];
            auto prefix_count = [&](std::size_t k) { return k == ps ? std::int64_t{0} : counts[k]; };
            const std::int64_t count = start == end ? 0 : prefix_count(end) - prefix_count(start);
            if (spec.function == WindowFunction::count) {
                out.set(i, count);
                continue;
            }
            if (count == 0) {
                out.set_null(i);
                continue;
            }
            if (exact) {
                auto prefix_sum = [&](std::size_t k) { return k == ps ? Int128{0} : sums[k]; };
                const Int128 sum = prefix_sum(end) - prefix_sum(start);
                if (spec.function == WindowFunction::sum) {
                    out.set(i, sum);
                } else {
                    // As DuckDB and the aggregation: the exact sum / (count * 10^scale) in long double.
                    const long double divisor =
                        static_cast<long double>(count) *
                        static_cast<long double>(decimal::pow10(argument_scale(spec)));
                    out.set(i, static_cast<double>(static_cast<long double>(sum) / divisor));
                }
                continue;
            }
            double sum = 0.0;
            if (start == ps) {
                sum = running[end];
            } else {
                for (std::size_t k = start; k < end; ++k) {
                    if (!argument.is_null(order[k])) {
                        sum += argument.get<double>(order[k]);
                    }
                }
                poll(static_cast<std::uint32_t>(std::min<std::size_t>(end - start, UINT32_MAX)));
            }
            if (spec.function == WindowFunction::sum) {
                out.set(i, sum);
            } else {
                out.set(i, sum / static_cast<double>(count));
            }
        }
        (void)type;
        return !poll.stopped();
    }

    [[nodiscard]] std::uint8_t argument_scale(const WindowSpec &spec) const noexcept {
        const Type &type = _types[*spec.argument];
        return type.id == TypeId::decimal ? type.scale : 0;
    }

    /// min/max in one pass per partition: frame starts and ends never move backwards, so a deque
    /// of candidate positions (increasing positions, each better than every later one) gives
    /// each frame's extreme at its front (the sliding-window minimum).
    bool evaluate_extreme(FlowContext &context, const WindowSpec &spec, const ColumnData &argument,
                          const Bounds &bounds, Results &out) const noexcept {
        const std::vector<std::uint32_t> &order = bounds.order;
        const std::size_t n = order.size();
        const int wanted = spec.function == WindowFunction::min ? -1 : 1;
        auto at_least_as_good = [&](std::size_t a, std::size_t b) {
            return compare_cells(argument.physical, argument.cell(order[a]), argument.cell(order[b])) *
                       wanted >=
                   0;
        };
        std::deque<std::size_t> candidates;
        std::size_t next = 0; // the first position not yet offered to the deque
        CancelPoll poll(context);
        for (std::size_t i = 0; i < n && !poll(); ++i) {
            if (bounds.partition_start[i] == i) {
                candidates.clear();
                next = i;
            }
            const auto [start, end] = frame(spec, bounds, i);
            for (; next < end; ++next) {
                if (argument.is_null(order[next])) {
                    continue;
                }
                while (!candidates.empty() && at_least_as_good(next, candidates.back())) {
                    candidates.pop_back();
                }
                candidates.push_back(next);
            }
            while (!candidates.empty() && candidates.front() < start) {
                candidates.pop_front();
            }
            if (start == end || candidates.empty() || candidates.front() >= end) {
                out.set_null(i);
            } else {
                out.set_cell(i, argument.cell(order[candidates.front()]));
            }
        }
        return !poll.stopped();
    }

    /// Appends the functions' results for sorted positions [first, first + rows) to `batch`.
    void append_results(Batch &batch, const std::vector<Results> &results, std::size_t first,
                        std::uint32_t rows) const {
        for (std::size_t f = 0; f < results.size(); ++f) {
            Vector &vector = batch.columns.emplace_back(_result_types[f], rows);
            const Results &result = results[f];
            for (std::uint32_t r = 0; r < rows; ++r) {
                if (result.nulls[first + r] != 0) {
                    vector.set_null(r);
                } else {
                    put_cell(vector, r, result.values.data() + (first + r) * result.width);
                }
            }
        }
    }

    /// Emits `n` rows with the functions' results, in batches; `cell_of(c, i)` says where row i's
    /// value of input column c lives (its column and row there).
    template <class CellOf>
    void emit_in_batches(FlowContext &context, std::size_t n, const std::vector<Results> &results,
                         CellOf &&cell_of) noexcept {
        for (std::size_t first = 0; first < n; first += _batch_rows) {
            if (context.cancelled()) {
                return;
            }
            const auto rows = static_cast<std::uint32_t>(std::min<std::size_t>(_batch_rows, n - first));
            auto batch = std::make_unique<Batch>();
            batch->rows = rows;
            for (std::size_t c = 0; c < _types.size(); ++c) {
                Vector &vector = batch->columns.emplace_back(_types[c], rows);
                for (std::uint32_t r = 0; r < rows; ++r) {
                    const auto [column, row] = cell_of(c, first + r);
                    if (column->is_null(row)) {
                        vector.set_null(r);
                    } else {
                        put_cell(vector, r, column->cell(row));
                    }
                }
            }
            append_results(*batch, results, first, rows);
            emit(context, std::move(batch));
        }
    }

    /// Emits the part's rows in sorted order with the functions' results.
    void emit_rows(FlowContext &context, const std::vector<ColumnData> &data,
                   const std::vector<std::uint32_t> &order, const std::vector<Results> &results) noexcept {
        emit_in_batches(context, order.size(), results, [&](std::size_t c, std::size_t i) {
            return std::pair{&data[c], order[i]};
        });
    }

    // ---- Parallel evaluation without PARTITION BY (see the top of the file) ----

    /// A row of one worker's buffer.
    struct Ref {
        std::uint32_t worker{0};
        std::uint32_t row{0};
    };

    /// Running totals of the rows on one side of a part's range, per function.
    struct Side {
        std::vector<std::int64_t> counts;         // non-NULL arguments
        std::vector<Int128> sums;                 // exact sums of integral arguments
        std::vector<std::optional<Ref>> extremes; // min/max: the best non-NULL argument
    };

    static constexpr std::size_t max_halo = 4096;

    /// Whether every function can be evaluated by ranges of the sorted order; the halo (rows
    /// each range needs from its neighbours) goes to `halo`.
    [[nodiscard]] bool parallel_capable(std::size_t &halo) const noexcept {
        halo = 0;
        if (!_partition.empty()) {
            return false;
        }
        auto bound_ok = [&](const FrameBound &bound) {
            if (bound.kind == FrameBoundKind::preceding || bound.kind == FrameBoundKind::following) {
                if (bound.offset > max_halo) {
                    return false;
                }
                halo = std::max<std::size_t>(halo, bound.offset);
            }
            return true;
        };
        for (const WindowSpec &spec : _functions) {
            switch (spec.function) {
            case WindowFunction::dense_rank:
                return false;
            case WindowFunction::lag:
            case WindowFunction::lead: {
                const std::uint64_t distance = spec.offset >= 0 ? static_cast<std::uint64_t>(spec.offset)
                                                                : 0 - static_cast<std::uint64_t>(spec.offset);
                if (distance > max_halo) {
                    return false;
                }
                halo = std::max<std::size_t>(halo, distance);
                break;
            }
            case WindowFunction::sum:
            case WindowFunction::avg:
                if (!integral(_physical[*spec.argument])) {
                    return false; // DOUBLE sums add in sorted order
                }
                [[fallthrough]];
            default:
                if (!bound_ok(spec.start) || !bound_ok(spec.end)) {
                    return false;
                }
                break;
            }
        }
        return true;
    }

    [[nodiscard]] std::size_t total_rows() const noexcept {
        std::size_t rows = 0;
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            rows += _local[w].buckets[0].rows;
        }
        return rows;
    }

    /// The number of ranges a run without PARTITION BY evaluates in parallel (1: one task).
    [[nodiscard]] std::uint32_t parallel_parts() const noexcept {
        std::size_t halo = 0;
        if (_worker_count < 2 || !parallel_capable(halo) || total_rows() < _parallel_min_rows) {
            return 1;
        }
        return _worker_count;
    }

    [[nodiscard]] int compare_keys(const std::vector<std::vector<ColumnData>> &sources, Ref a,
                                   Ref b) const noexcept {
        const std::vector<ColumnData> &left = sources[a.worker];
        const std::vector<ColumnData> &right = sources[b.worker];
        for (const OrderSpec &key : _order) {
            const ColumnData &l = left[key.column];
            const ColumnData &r = right[key.column];
            if (const int order = compare_column(l, a.row, r, b.row, key.nulls_first); order != 0) {
                return key.descending && !(l.is_null(a.row) || r.is_null(b.row)) ? -order : order;
            }
        }
        return 0;
    }

    /// compare_full without partition columns, across workers' buffers.
    [[nodiscard]] int compare_refs(const std::vector<std::vector<ColumnData>> &sources, Ref a,
                                   Ref b) const noexcept {
        if (const int order = compare_keys(sources, a, b); order != 0) {
            return order;
        }
        for (std::size_t c = 0; c < _types.size(); ++c) {
            if (const int order =
                    compare_column(sources[a.worker][c], a.row, sources[b.worker][c], b.row, false);
                order != 0) {
                return order;
            }
        }
        return 0;
    }

    /// Splitters on the ORDER BY keys from a sample of every worker's rows; every part computes
    /// the same ones. Range k holds the rows r with splitter[k-1] <= r < splitter[k] (keys only).
    [[nodiscard]] std::vector<Ref> splitters(const std::vector<std::vector<ColumnData>> &sources,
                                             std::uint32_t parts) const {
        const std::size_t per_worker = 64 * std::size_t{parts};
        std::vector<Ref> sample;
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            const std::uint32_t rows = _local[w].buckets[0].rows;
            const std::uint32_t stride =
                std::max<std::uint32_t>(1, static_cast<std::uint32_t>(rows / per_worker));
            for (std::uint32_t r = 0; r < rows; r += stride) {
                sample.push_back(Ref{w, r});
            }
        }
        std::sort(sample.begin(), sample.end(), [&](Ref a, Ref b) {
            const int order = compare_refs(sources, a, b);
            return order != 0 ? order < 0 : (a.worker != b.worker ? a.worker < b.worker : a.row < b.row);
        });
        std::vector<Ref> result;
        for (std::uint32_t k = 1; k < parts; ++k) {
            result.push_back(sample[sample.size() * k / parts]);
        }
        return result;
    }

    /// Adds row `ref` to the totals of one side.
    bool add_to_side(FlowContext &context, const std::vector<std::vector<ColumnData>> &sources, Ref ref,
                     Side &side) const noexcept {
        for (std::size_t f = 0; f < _functions.size(); ++f) {
            const WindowSpec &spec = _functions[f];
            if (!spec.argument.has_value()) {
                continue;
            }
            const ColumnData &argument = sources[ref.worker][*spec.argument];
            if (argument.is_null(ref.row)) {
                continue;
            }
            switch (spec.function) {
            case WindowFunction::count:
                ++side.counts[f];
                break;
            case WindowFunction::sum:
            case WindowFunction::avg:
                ++side.counts[f];
                if (__builtin_add_overflow(side.sums[f], integral_value(argument, ref.row), &side.sums[f])) {
                    context.fail("Overflow in SUM: the result does not fit DECIMAL(38)");
                    return false;
                }
                break;
            case WindowFunction::min:
            case WindowFunction::max: {
                std::optional<Ref> &best = side.extremes[f];
                const int wanted = spec.function == WindowFunction::min ? -1 : 1;
                if (!best.has_value() ||
                    compare_cells(argument.physical, argument.cell(ref.row),
                                  sources[best->worker][*spec.argument].cell(best->row)) *
                            wanted >
                        0) {
                    best = ref;
                }
                break;
            }
            default:
                break;
            }
        }
        return true;
    }

    void parallel_part(FlowContext &context, std::uint32_t part, std::uint32_t parts) noexcept {
        std::size_t halo = 0;
        (void)parallel_capable(halo);
        std::vector<std::vector<ColumnData>> sources(_worker_count);
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            sources[w] = columns(_local[w].buckets[0]);
        }
        const std::vector<Ref> split = splitters(sources, parts);
        auto less = [&](Ref a, Ref b) { return compare_refs(sources, a, b) < 0; };
        auto greater = [&](Ref a, Ref b) { return compare_refs(sources, a, b) > 0; };

        // One scan over every row: the own range, the sides' totals and halos, the first and last rows.
        const std::size_t functions = _functions.size();
        Side before{std::vector<std::int64_t>(functions, 0), std::vector<Int128>(functions, 0),
                    std::vector<std::optional<Ref>>(functions)};
        Side after = before;
        std::vector<Ref> own;
        std::vector<Ref> halo_before; // heap: the `halo` greatest rows before the range (front: least)
        std::vector<Ref> halo_after;  // heap: the `halo` least rows after the range (front: greatest)
        std::optional<Ref> first;     // the least row before the range
        std::optional<Ref> last;      // the greatest row after the range
        std::size_t count_before = 0;
        std::size_t count_after = 0;
        CancelPoll poll(context);
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            const std::uint32_t rows = _local[w].buckets[0].rows;
            for (std::uint32_t r = 0; r < rows; ++r) {
                if (poll()) {
                    return;
                }
                const Ref ref{w, r};
                if (part > 0 && compare_keys(sources, ref, split[part - 1]) < 0) {
                    ++count_before;
                    if (!add_to_side(context, sources, ref, before)) {
                        return;
                    }
                    if (!first.has_value() || less(ref, *first)) {
                        first = ref;
                    }
                    if (halo > 0) {
                        if (halo_before.size() < halo) {
                            halo_before.push_back(ref);
                            std::push_heap(halo_before.begin(), halo_before.end(), greater);
                        } else if (less(halo_before.front(), ref)) {
                            std::pop_heap(halo_before.begin(), halo_before.end(), greater);
                            halo_before.back() = ref;
                            std::push_heap(halo_before.begin(), halo_before.end(), greater);
                        }
                    }
                } else if (part + 1 < parts && compare_keys(sources, split[part], ref) <= 0) {
                    ++count_after;
                    if (!add_to_side(context, sources, ref, after)) {
                        return;
                    }
                    if (!last.has_value() || less(*last, ref)) {
                        last = ref;
                    }
                    if (halo > 0) {
                        if (halo_after.size() < halo) {
                            halo_after.push_back(ref);
                            std::push_heap(halo_after.begin(), halo_after.end(), less);
                        } else if (less(ref, halo_after.front())) {
                            std::pop_heap(halo_after.begin(), halo_after.end(), less);
                            halo_after.back() = ref;
                            std::push_heap(halo_after.begin(), halo_after.end(), less);
                        }
                    }
                } else {
                    own.push_back(ref);
                }
            }
        }
        if (own.empty()) {
            return;
        }
        std::sort(own.begin(), own.end(), less);
        std::sort(halo_before.begin(), halo_before.end(), less);
        std::sort(halo_after.begin(), halo_after.end(), less);
        if (context.cancelled()) {
            return;
        }
        // extended = halo before, own range, halo after: global positions base .. base + size.
        std::vector<Ref> extended;
        extended.reserve(halo_before.size() + own.size() + halo_after.size());
        extended.insert(extended.end(), halo_before.begin(), halo_before.end());
        extended.insert(extended.end(), own.begin(), own.end());
        extended.insert(extended.end(), halo_after.begin(), halo_after.end());
        const std::size_t n = count_before + own.size() + count_after;
        const std::size_t offset = count_before; // global position of own[0]
        const std::size_t base = count_before - halo_before.size();
        const std::size_t local_start = halo_before.size();
        auto at = [&](std::size_t global) -> Ref {
            if (global >= base && global - base < extended.size()) {
                return extended[global - base];
            }
            MX_ASSERT(global == 0 || global + 1 == n, "a window position outside the halo");
            if (global == 0) {
                return first.value_or(extended.front());
            }
            return last.value_or(extended.back());
        };

        // Peer groups never cross ranges: the splitters compare the ORDER BY keys only.
        const std::size_t m = own.size();
        std::vector<std::uint32_t> peer_start(m);
        std::vector<std::uint32_t> peer_end(m);
        for (std::size_t j = 0; j < m; ++j) {
            peer_start[j] = j > 0 && compare_keys(sources, own[j - 1], own[j]) == 0
                                ? peer_start[j - 1]
                                : static_cast<std::uint32_t>(j);
        }
        for (std::size_t j = m; j-- > 0;) {
            peer_end[j] = j + 1 < m && peer_start[j + 1] == peer_start[j] ? peer_end[j + 1]
                                                                          : static_cast<std::uint32_t>(j + 1);
        }
        auto global_frame = [&](const WindowSpec &spec, std::size_t j) {
            return frame(spec, offset + j, 0, n, offset + peer_start[j], offset + peer_end[j]);
        };

        std::vector<Results> results(functions);
        for (std::size_t f = 0; f < functions; ++f) {
            results[f].init(_result_types[f].physical(), m);
            if (!evaluate_range(context, f, sources, extended, base, n, offset, local_start, before, after,
                                at, global_frame, results[f])) {
                return;
            }
        }
        emit_refs(context, sources, own, results);
    }

    template <class At, class GlobalFrame>
    bool evaluate_range(FlowContext &context, std::size_t f,
                        const std::vector<std::vector<ColumnData>> &sources, const std::vector<Ref> &extended,
                        std::size_t base, std::size_t n, std::size_t offset, std::size_t local_start,
                        const Side &before, const Side &after, At &&at, GlobalFrame &&global_frame,
                        Results &out) const noexcept {
        const WindowSpec &spec = _functions[f];
        const std::size_t m = out.nulls.size();
        auto argument_of = [&](Ref ref) -> const ColumnData & { return sources[ref.worker][*spec.argument]; };
        auto set_from = [&](std::size_t j, const ColumnData &column, std::uint32_t row) {
            if (column.is_null(row)) {
                out.set_null(j);
            } else {
                out.set_cell(j, column.cell(row));
            }
        };
        CancelPoll poll(context);
        switch (spec.function) {
        case WindowFunction::row_number:
            for (std::size_t j = 0; j < m; ++j) {
                out.set(j, static_cast<std::int64_t>(offset + j + 1));
            }
            return true;
        case WindowFunction::rank: {
            // A RANGE frame from CURRENT ROW starts at the first peer: the rank is its position + 1.
            WindowSpec peers;
            peers.start = FrameBound{FrameBoundKind::current_row, 0};
            for (std::size_t j = 0; j < m; ++j) {
                out.set(j, static_cast<std::int64_t>(global_frame(peers, j).first + 1));
            }
            return true;
        }
        case WindowFunction::count_star:
            for (std::size_t j = 0; j < m; ++j) {
                const auto [start, end] = global_frame(spec, j);
                out.set(j, static_cast<std::int64_t>(end - start));
            }
            return true;
        case WindowFunction::dense_rank:
            return false; // not parallel_capable
        case WindowFunction::ntile:
            for (std::size_t j = 0; j < m; ++j) {
                const Ref ref = extended[local_start + j];
                const ColumnData &argument = argument_of(ref);
                if (argument.is_null(ref.row)) {
                    out.set_null(j);
                    continue;
                }
                const std::int64_t buckets = argument.get<std::int64_t>(ref.row);
                if (buckets <= 0) {
                    context.fail("Argument for ntile must be greater than zero");
                    return false;
                }
                const auto total = static_cast<std::int64_t>(n);
                const std::int64_t used = std::min(buckets, total);
                const std::int64_t size = total / used;
                const std::int64_t large = total - used * size;
                const auto index = static_cast<std::int64_t>(offset + j);
                const std::int64_t small_start = large * (size + 1);
                out.set(j, index < small_start ? 1 + index / (size + 1)
                                               : 1 + large + (index - small_start) / size);
            }
            return true;
        case WindowFunction::lag:
        case WindowFunction::lead: {
            const bool backward = (spec.function == WindowFunction::lag) == (spec.offset >= 0);
            const std::uint64_t distance = spec.offset >= 0 ? static_cast<std::uint64_t>(spec.offset)
                                                            : 0 - static_cast<std::uint64_t>(spec.offset);
            for (std::size_t j = 0; j < m; ++j) {
                const std::size_t i = offset + j;
                const bool inside = backward ? distance <= i : distance < n - i;
                if (inside) {
                    const Ref ref = at(backward ? i - distance : i + distance);
                    set_from(j, argument_of(ref), ref.row);
                } else if (spec.default_value.has_value()) {
                    const Ref ref = extended[local_start + j];
                    set_from(j, sources[ref.worker][*spec.default_value], ref.row);
                } else {
                    out.set_null(j);
                }
            }
            return true;
        }
        case WindowFunction::first_value:
        case WindowFunction::last_value:
            for (std::size_t j = 0; j < m && !poll(); ++j) {
                const auto [start, end] = global_frame(spec, j);
                if (start == end) {
                    out.set_null(j);
                    continue;
                }
                const Ref ref = at(spec.function == WindowFunction::first_value ? start : end - 1);
                set_from(j, argument_of(ref), ref.row);
            }
            return !poll.stopped();
        case WindowFunction::count:
        case WindowFunction::sum:
        case WindowFunction::avg: {
            // Prefix counts and sums over the extended rows; prefix(g) for a global position g.
            const std::size_t size = extended.size();
            const bool exact = spec.function != WindowFunction::count;
            std::vector<std::int64_t> counts(size + 1, 0);
            std::vector<Int128> sums(exact ? size + 1 : 0, 0);
            for (std::size_t t = 0; t < size; ++t) {
                const ColumnData &argument = argument_of(extended[t]);
                const bool null = argument.is_null(extended[t].row);
                counts[t + 1] = counts[t] + (null ? 0 : 1);
                if (exact) {
                    sums[t + 1] = sums[t];
                    if (!null && __builtin_add_overflow(sums[t], integral_value(argument, extended[t].row),
                                                        &sums[t + 1])) {
                        context.fail("Overflow in SUM: the result does not fit DECIMAL(38)");
                        return false;
                    }
                }
            }
            // Totals of the rows before the extended ones: `before` less the halo before.
            const std::int64_t count_base = before.counts[f] - counts[local_start];
            const Int128 sum_base = exact ? before.sums[f] - sums[local_start] : 0;
            const std::size_t own_end = local_start + m; // the halo after follows
            const std::int64_t count_total =
                before.counts[f] + (counts[own_end] - counts[local_start]) + after.counts[f];
            Int128 sum_total = 0;
            if (exact &&
                (__builtin_add_overflow(before.sums[f], sums[own_end] - sums[local_start], &sum_total) ||
                 __builtin_add_overflow(sum_total, after.sums[f], &sum_total))) {
                context.fail("Overflow in SUM: the result does not fit DECIMAL(38)");
                return false;
            }
            auto prefix = [&](std::size_t g) -> std::pair<std::int64_t, Int128> {
                if (g == 0) {
                    return {0, 0};
                }
                if (g == n) {
                    return {count_total, sum_total};
                }
                MX_ASSERT(g >= base && g - base <= size, "a frame bound outside the halo");
                return {count_base + counts[g - base], exact ? sum_base + sums[g - base] : Int128{0}};
            };
            for (std::size_t j = 0; j < m; ++j) {
                const auto [start, end] = global_frame(spec, j);
                if (start == end) {
                    if (spec.function == WindowFunction::count) {
                        out.set(j, std::int64_t{0});
                    } else {
                        out.set_null(j);
                    }
                    continue;
                }
                const auto [count_end, sum_end] = prefix(end);
                const auto [count_start, sum_start] = prefix(start);
                const std::int64_t count = count_end - count_start;
                if (spec.function == WindowFunction::count) {
                    out.set(j, count);
                } else if (count == 0) {
                    out.set_null(j);
                } else if (spec.function == WindowFunction::sum) {
                    out.set(j, sum_end - sum_start);
                } else {
                    const long double divisor =
                        static_cast<long double>(count) *
                        static_cast<long double>(decimal::pow10(argument_scale(spec)));
                    out.set(j, static_cast<double>(static_cast<long double>(sum_end - sum_start) / divisor));
                }
            }
            return true;
        }
        case WindowFunction::min:
        case WindowFunction::max: {
            const int wanted = spec.function == WindowFunction::min ? -1 : 1;
            auto better = [&](Ref a, Ref b) { // a strictly better than b
                return compare_cells(argument_of(a).physical, argument_of(a).cell(a.row),
                                     argument_of(b).cell(b.row)) *
                           wanted >
                       0;
            };
            // Sliding extreme over the extended rows (frame starts and ends never move back).
            std::deque<std::size_t> candidates;
            std::size_t next = 0;
            const std::size_t size = extended.size();
            for (std::size_t j = 0; j < m && !poll(); ++j) {
                const auto [start, end] = global_frame(spec, j);
                if (start == end) {
                    out.set_null(j);
                    continue;
                }
                const std::size_t local_begin = std::clamp(start, base, base + size) - base;
                const std::size_t local_end = std::clamp(end, base, base + size) - base;
                for (; next < local_end; ++next) {
                    if (argument_of(extended[next]).is_null(extended[next].row)) {
                        continue;
                    }
                    while (!candidates.empty() && !better(extended[candidates.back()], extended[next])) {
                        candidates.pop_back();
                    }
                    candidates.push_back(next);
                }
                while (!candidates.empty() && candidates.front() < local_begin) {
                    candidates.pop_front();
                }
                std::optional<Ref> best;
                if (!candidates.empty() && candidates.front() < local_end) {
                    best = extended[candidates.front()];
                }
                for (const std::optional<Ref> &side :
                     {start == 0 && base > 0 ? before.extremes[f] : std::nullopt,
                      end == n && base + size < n ? after.extremes[f] : std::nullopt}) {
                    if (side.has_value() && (!best.has_value() || better(*side, *best))) {
                        best = side;
                    }
                }
                if (best.has_value()) {
                    out.set_cell(j, argument_of(*best).cell(best->row));
                } else {
                    out.set_null(j);
                }
            }
            return !poll.stopped();
        }
        }
        return true;
    }

    /// Emits a range's rows (from the workers' buffers) with the functions' results.
    void emit_refs(FlowContext &context, const std::vector<std::vector<ColumnData>> &sources,
                   const std::vector<Ref> &rows_in_order, const std::vector<Results> &results) noexcept {
        emit_in_batches(context, rows_in_order.size(), results, [&](std::size_t c, std::size_t i) {
            const Ref ref = rows_in_order[i];
            return std::pair{&sources[ref.worker][c], ref.row};
        });
    }

    // Set at construction, read-only during the run.
    std::vector<std::uint32_t> _partition;
    std::vector<OrderSpec> _order;
    std::vector<WindowSpec> _functions;
    std::vector<Type> _types; // of the input columns
    std::vector<PhysicalType> _physical;
    std::vector<Type> _result_types;
    std::uint32_t _batch_rows;
    std::size_t _parallel_min_rows; // fewer rows without PARTITION BY: one task
    // Set in prepare() on the starting thread, read-only during the run.
    std::uint16_t _worker_count{0};
    std::uint32_t _buckets{1};
    std::unique_ptr<Local[]> _local;
};

} // namespace

Compiled compile_window(Compiler &compiler, const PlanNode &node) {
    const Compiled input = compile(compiler, *node.children.at(0));
    std::vector<OrderSpec> order;
    for (const SortKey &key : node.sort_keys) {
        order.push_back(OrderSpec{key.column, key.descending,
                                  key.nulls_first.value_or(default_nulls_first(key.descending))});
    }
    auto &window = compiler.graph.add<WindowNode>(node, std::move(order), compiler.options.morsel_rows);
    compiler.graph.connect(input.output, window.id());
    return Compiled{window.id(), false};
}

} // namespace mx::db::detail
