// ORDER BY: consume tasks copy their rows into a run of the worker they run on (no shared
// buffer); finalize parts sort the runs in parallel (one per worker); finalize merges the sorted
// runs (k-way) and emits the result numbered in order (Batch::sequence): its consumers may run
// on any worker in any order, and those that care (limit, the result sink) restore the order.
//
// With a LIMIT (top-N, N = limit + offset) a run never keeps much more than N rows: once it
// holds 2N (at least N + 1024) it is cut down to its N best rows, and from then on rows that do
// not beat its current N-th row are not copied at all.
//
// Order: the sort keys with their directions and NULL placement, then, to make the result
// deterministic whatever the task schedule, every column ascending with NULLs last. Rows that tie
// on all of that are identical.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>

#include "cells.h"
#include "operator.h"

namespace mx::db::detail {

namespace {

using dataflow::FlowContext;

struct KeySpec {
    std::uint32_t column{0};
    bool descending{false};
    bool nulls_first{false};
};

/// Rows of one worker, column by column.
struct Run {
    std::vector<std::vector<std::byte>> values; // per column: physical values
    std::vector<std::vector<std::uint8_t>> nulls;
    std::unique_ptr<StringHeap> heap{std::make_unique<StringHeap>()};
    std::uint32_t rows{0};
    std::vector<std::uint32_t> order; // sorted row indices (finalize)

    [[nodiscard]] ColumnData column(std::size_t c, PhysicalType physical) const noexcept {
        return ColumnData{physical, static_cast<std::uint32_t>(physical_size(physical)), values[c].data(),
                          nulls[c].data()};
    }
};

class SortNode final : public BatchNode {
public:
    SortNode(const PlanNode &plan, std::vector<KeySpec> keys, std::optional<std::uint64_t> limit,
             std::uint64_t offset, std::uint32_t batch_rows)
        : BatchNode(limit ? "top-n" : "sort"), _keys(std::move(keys)), _limit(limit), _offset(offset),
          _batch_rows(std::max<std::uint32_t>(batch_rows, 1)) {
        for (const OutputColumn &column : plan.output) {
            _types.push_back(column.type);
            _physical.push_back(column.type.physical());
        }
        if (_limit) {
            const std::uint64_t wanted = *_limit > std::numeric_limits<std::uint64_t>::max() - _offset
                                             ? std::numeric_limits<std::uint64_t>::max()
                                             : *_limit + _offset;
            _keep = std::min<std::uint64_t>(wanted, std::numeric_limits<std::uint32_t>::max() / 4);
        }
    }

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _worker_count = workers;
        _runs = std::make_unique<WorkerRun[]>(workers);
        for (std::uint16_t w = 0; w < workers; ++w) {
            _runs[w].run = make_run();
        }
    }

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        WorkerRun &local = _runs[context.worker_id()];
        if (_limit && _keep == 0) {
            return;
        }
        std::vector<ColumnData> input(batch->columns.size());
        for (std::size_t c = 0; c < input.size(); ++c) {
            input[c] = column_data(batch->columns[c]);
        }
        std::vector<std::uint32_t> &rows = local.selected;
        rows.clear();
        const std::uint32_t count = batch->count();
        if (local.has_threshold) {
            // Only rows that beat the run's current N-th row can make it into the result.
            const std::vector<ColumnData> stored = columns(local.run);
            for (std::uint32_t i = 0; i < count; ++i) {
                const std::uint32_t row = batch->row(i);
                if (compare(input.data(), row, stored.data(), local.threshold) < 0) {
                    rows.push_back(row);
                }
            }
        } else {
            for (std::uint32_t i = 0; i < count; ++i) {
                rows.push_back(batch->row(i));
            }
        }
        append(local.run, input, rows);
        if (_limit && local.run.rows >= std::max<std::uint64_t>(2 * _keep, _keep + 1024)) {
            cut(local);
        }
    }

    [[nodiscard]] std::uint32_t finalize_parts(std::uint16_t workers) const noexcept override {
        return workers;
    }

    /// Sorts the run of worker `part` (on that worker: its rows are in that worker's cache).
    void finalize_part(FlowContext & /*context*/, std::uint32_t part) noexcept override {
        Run &run = _runs[part].run;
        run.order.resize(run.rows);
        std::iota(run.order.begin(), run.order.end(), 0U);
        const std::vector<ColumnData> data = columns(run);
        auto less = [&](std::uint32_t a, std::uint32_t b) {
            return compare(data.data(), a, data.data(), b) < 0;
        };
        if (_limit && _keep < run.rows) {
            std::partial_sort(run.order.begin(), run.order.begin() + static_cast<std::ptrdiff_t>(_keep),
                              run.order.end(), less);
            run.order.resize(_keep);
        } else {
            std::sort(run.order.begin(), run.order.end(), less);
        }
    }

    /// k-way merge of the sorted runs, emitted in order from this one task.
    void finalize(FlowContext &context) noexcept override {
        std::uint64_t sequence = 0;
        std::vector<std::vector<ColumnData>> data(_worker_count);
        std::vector<std::size_t> head(_worker_count, 0);
        std::uint64_t total = 0;
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            data[w] = columns(_runs[w].run);
            total += _runs[w].run.order.size();
        }
        std::uint64_t wanted = total > _offset ? total - _offset : 0;
        if (_limit) {
            wanted = std::min(wanted, *_limit);
        }
        std::uint64_t skip = _offset;
        std::unique_ptr<Batch> batch;
        std::uint32_t filled = 0;
        CancelPoll poll(context); // a big merge stops early when the run is cancelled
        while (wanted > 0 && !poll()) {
            // The smallest head; runs are few (one per worker), so a scan beats a heap.
            constexpr std::size_t none = ~std::size_t{0};
            std::size_t from = none;
            for (std::size_t w = 0; w < _worker_count; ++w) {
                if (head[w] == _runs[w].run.order.size()) {
                    continue;
                }
                if (from == none || compare(data[w].data(), _runs[w].run.order[head[w]], data[from].data(),
                                            _runs[from].run.order[head[from]]) < 0) {
                    from = w;
                }
            }
            MX_ASSERT(from != none, "sort ran out of rows it counted");
            const std::uint32_t row = _runs[from].run.order[head[from]++];
            if (skip > 0) {
                --skip;
                continue;
            }
            if (batch == nullptr) {
                const auto rows = static_cast<std::uint32_t>(std::min<std::uint64_t>(wanted, _batch_rows));
                batch = std::make_unique<Batch>();
                batch->rows = rows;
                for (const Type &type : _types) {
                    batch->columns.emplace_back(type, rows);
                }
                filled = 0;
            }
            for (std::size_t c = 0; c < _types.size(); ++c) {
                const ColumnData &column = data[from][c];
                if (column.is_null(row)) {
                    batch->columns[c].set_null(filled);
                } else {
                    put_cell(batch->columns[c], filled, column.cell(row));
                }
            }
            ++filled;
            --wanted;
            if (filled == batch->rows) {
                batch->sequence = sequence++;
                emit(context, std::move(batch));
                batch = nullptr;
            }
        }
    }

    [[nodiscard]] std::string details() const override {
        std::string text = "keys=[";
        for (std::size_t k = 0; k < _keys.size(); ++k) {
            if (k > 0) {
                text.append(", ");
            }
            text.append("#").append(std::to_string(_keys[k].column));
            text.append(_keys[k].descending ? " DESC" : " ASC");
            text.append(_keys[k].nulls_first ? " NULLS FIRST" : " NULLS LAST");
        }
        text.append("]");
        if (_limit) {
            text.append(" limit=").append(std::to_string(*_limit));
        }
        if (_offset > 0) {
            text.append(" offset=").append(std::to_string(_offset));
        }
        return text;
    }

private:
    // Owner-private per worker: written by that worker's consume tasks and its finalize part,
    // read by finalize() (ordered after both by the layer). Padded: workers write side by side.
    struct alignas(system::cache_line_size) WorkerRun {
        Run run;
        bool has_threshold{false};
        std::uint32_t threshold{0}; // row of `run` that is its current N-th best (top-N)
        std::vector<std::uint32_t> selected;
    };

    [[nodiscard]] Run make_run() const {
        Run run;
        run.values.resize(_types.size());
        run.nulls.resize(_types.size());
        return run;
    }

    [[nodiscard]] std::vector<ColumnData> columns(const Run &run) const {
        std::vector<ColumnData> data(_types.size());
        for (std::size_t c = 0; c < _types.size(); ++c) {
            data[c] = run.column(c, _physical[c]);
        }
        return data;
    }

    /// Copies rows `rows` of `input` to the end of `run` (strings into its heap).
    void append(Run &run, const std::vector<ColumnData> &input,
                const std::vector<std::uint32_t> &rows) const {
        if (rows.empty()) {
            return;
        }
        for (std::size_t c = 0; c < _types.size(); ++c) {
            const ColumnData &column = input[c];
            const std::size_t width = column.width;
            std::vector<std::byte> &values = run.values[c];
            std::vector<std::uint8_t> &nulls = run.nulls[c];
            const std::size_t base = values.size();
            values.resize(base + rows.size() * width);
            nulls.resize(run.rows + rows.size());
            std::byte *target = values.data() + base;
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const std::uint32_t row = rows[i];
                const bool null = column.is_null(row);
                nulls[run.rows + i] = null ? 1 : 0;
                if (null) {
                    std::memset(target + i * width, 0, width);
                } else if (column.physical == PhysicalType::string) {
                    StringRef text;
                    std::memcpy(&text, column.cell(row), sizeof(StringRef));
                    const StringRef copy = run.heap->add(text.view());
                    std::memcpy(target + i * width, &copy, sizeof(StringRef));
                } else {
                    std::memcpy(target + i * width, column.cell(row), width);
                }
            }
        }
        run.rows += static_cast<std::uint32_t>(rows.size());
    }

    /// Top-N: keeps the run's N best rows, in order, in a fresh run (and string heap).
    void cut(WorkerRun &local) const {
        Run &run = local.run;
        std::vector<std::uint32_t> order(run.rows);
        std::iota(order.begin(), order.end(), 0U);
        const std::vector<ColumnData> data = columns(run);
        std::partial_sort(
            order.begin(), order.begin() + static_cast<std::ptrdiff_t>(_keep), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return compare(data.data(), a, data.data(), b) < 0; });
        order.resize(_keep);
        Run kept = make_run();
        append(kept, data, order);
        local.run = std::move(kept);
        local.has_threshold = true;
        local.threshold = static_cast<std::uint32_t>(_keep - 1);
    }

    /// Order of row `ra` of columns `a` and row `rb` of columns `b` (same schema).
    [[nodiscard]] int compare(const ColumnData *a, std::uint32_t ra, const ColumnData *b,
                              std::uint32_t rb) const noexcept {
        for (const KeySpec &key : _keys) {
            const int order = compare_column(a[key.column], ra, b[key.column], rb, key.nulls_first);
            if (order != 0) {
                return key.descending && !(a[key.column].is_null(ra) || b[key.column].is_null(rb)) ? -order
                                                                                                   : order;
            }
        }
        for (std::size_t c = 0; c < _types.size(); ++c) {
            const int order = compare_column(a[c], ra, b[c], rb, false);
            if (order != 0) {
                return order;
            }
        }
        return 0;
    }

    /// Ascending order of two cells of one column, NULLs first or last.
    static int compare_column(const ColumnData &a, std::uint32_t ra, const ColumnData &b, std::uint32_t rb,
                              bool nulls_first) noexcept {
        const bool a_null = a.is_null(ra);
        const bool b_null = b.is_null(rb);
        if (a_null || b_null) {
            if (a_null == b_null) {
                return 0;
            }
            return (a_null == nulls_first) ? -1 : 1;
        }
        return compare_cells(a.physical, a.cell(ra), b.cell(rb));
    }

    // Set at construction, read-only during the run.
    std::vector<KeySpec> _keys;
    std::vector<Type> _types;
    std::vector<PhysicalType> _physical;
    std::optional<std::uint64_t> _limit;
    std::uint64_t _offset;
    std::uint64_t _keep{0}; // top-N: rows a run must keep (limit + offset)
    std::uint32_t _batch_rows;
    // Set in prepare() on the starting thread, read-only during the run.
    std::uint16_t _worker_count{0};
    std::unique_ptr<WorkerRun[]> _runs;
};

} // namespace

/// NULL placement when the plan does not say: PostgreSQL's rule (NULLs are larger than every
/// value: last ascending, first descending).
// DuckDB's default (NULLS LAST either way), see SortKey::nulls_first.
bool default_nulls_first(bool /*descending*/) noexcept { return false; }

Compiled compile_sort_with(Compiler &compiler, const PlanNode &node, std::optional<std::uint64_t> limit,
                           std::uint64_t offset) {
    const Compiled input = compile(compiler, *node.children.at(0));
    std::vector<KeySpec> keys;
    for (const SortKey &key : node.sort_keys) {
        keys.push_back(KeySpec{key.column, key.descending,
                               key.nulls_first.value_or(default_nulls_first(key.descending))});
    }
    auto &sort =
        compiler.graph.add<SortNode>(node, std::move(keys), limit, offset, compiler.options.morsel_rows);
    compiler.graph.connect(input.output, sort.id());
    return Compiled{sort.id(), true};
}

Compiled compile_sort(Compiler &compiler, const PlanNode &node) {
    return compile_sort_with(compiler, node, node.limit, node.offset);
}

} // namespace mx::db::detail
