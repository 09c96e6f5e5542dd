// Table scan: the source of a pipeline. start() dispatches one task per morsel (a row range of
// one fragment) to the fragment's NUMA region; each task builds a batch of column views (no copy),
// applies the scan predicate and emits the surviving rows into the pipeline.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>
#include <mx/db/table.h>

#include "cells.h"
#include "operator.h"

namespace mx::db::detail {

namespace {

using dataflow::DispatchTarget;
using dataflow::FlowContext;
using dataflow::Token;

/// Whether `zone` (the non-NULL range of a column in a fragment) may hold a row for which
/// `column op constant` is true. Only types whose Value comparison is exact are pruned.
bool zone_may_match(const ZoneMap &zone, std::uint32_t fragment_rows, CompareOp op, const Value &constant) {
    if (constant.null) {
        return false; // a comparison with NULL is never true
    }
    if (zone.min.null || zone.max.null) {
        // Every row NULL (or only NaNs): nothing compares true unless NaNs are possible.
        return zone.null_count < fragment_rows && constant.type.physical() == PhysicalType::f64;
    }
    int low = 0;  // sign of (min - constant)
    int high = 0; // sign of (max - constant)
    switch (constant.type.physical()) {
    case PhysicalType::u8:
    case PhysicalType::i64:
        low = three_way(zone.min.i64, constant.i64);
        high = three_way(zone.max.i64, constant.i64);
        break;
    case PhysicalType::i128:
        low = three_way(zone.min.i128, constant.i128);
        high = three_way(zone.max.i128, constant.i128);
        break;
    case PhysicalType::string:
        low = three_way(zone.min.str, constant.str);
        high = three_way(zone.max.str, constant.str);
        break;
    case PhysicalType::f64:
        return true; // NaN handling makes the range test subtle; doubles are not pruned
    }
    switch (op) {
    case CompareOp::equal:
        return low <= 0 && high >= 0;
    case CompareOp::not_equal:
        return !(low == 0 && high == 0);
    case CompareOp::less:
        return low < 0;
    case CompareOp::less_equal:
        return low <= 0;
    case CompareOp::greater:
        return high > 0;
    case CompareOp::greater_equal:
        return high >= 0;
    }
    return true;
}

CompareOp mirror(CompareOp op) noexcept {
    switch (op) {
    case CompareOp::less:
        return CompareOp::greater;
    case CompareOp::less_equal:
        return CompareOp::greater_equal;
    case CompareOp::greater:
        return CompareOp::less;
    case CompareOp::greater_equal:
        return CompareOp::less_equal;
    default:
        return op;
    }
}

class ScanNode final : public OperatorNode {
public:
    ScanNode(std::shared_ptr<const Table> table, std::vector<std::uint32_t> columns, ExprPtr predicate,
             const ExecutionOptions &options)
        : OperatorNode("scan " + table->name()), _table(std::move(table)), _columns(std::move(columns)),
          _predicate(std::move(predicate)), _morsel_rows(std::max<std::uint32_t>(options.morsel_rows, 1)),
          _prefetch(options.prefetch), _prefetch_lines(options.prefetch_lines),
          _zone_maps(options.zone_maps) {
        _widths.reserve(_columns.size());
        for (const std::uint32_t column : _columns) {
            _widths.push_back(
                _table->dictionary_encoded(column)
                    ? std::uint32_t{sizeof(std::uint32_t)}
                    : static_cast<std::uint32_t>(physical_size(_table->schema()[column].type.physical())));
        }
    }

    void start(FlowContext &context) noexcept override {
        const auto regions = context.region_count();
        for (const auto &fragment : _table->fragments()) {
            if (_predicate != nullptr && _zone_maps && !may_match(*_predicate, *fragment)) {
                continue;
            }
            // Fragments of a table built for another topology still run somewhere sensible.
            const auto region = static_cast<std::uint8_t>(fragment->region() % regions);
            for (std::uint32_t begin = 0; begin < fragment->size(); begin += _morsel_rows) {
                context.dispatch(Token{const_cast<Fragment *>(fragment.get()), begin},
                                 DispatchTarget::region(region));
                if (fragment->size() - begin <= _morsel_rows) {
                    break; // avoids overflow of begin near 2^32
                }
            }
        }
    }

    void consume(FlowContext &context, Token token) noexcept override {
        if (context.cancelled()) {
            return;
        }
        const auto &fragment = *static_cast<const Fragment *>(token.data);
        const auto begin = static_cast<std::uint32_t>(token.value);
        const std::uint32_t end = begin + std::min(_morsel_rows, fragment.size() - begin);
        auto batch = std::make_unique<Batch>();
        batch->rows = end - begin;
        batch->columns.reserve(_columns.size());
        for (const std::uint32_t column : _columns) {
            batch->columns.push_back(fragment.column(column, begin, end));
        }
        if (_predicate != nullptr) {
            EvalStatus status = filter(*_predicate, *batch);
            if (!status.ok()) {
                context.fail(status.message());
                return;
            }
        }
        emit(context, std::move(batch));
    }

    /// The first cache lines of every column the morsel reads (and of its NULL bytes).
    void prefetch(const Token &token) const noexcept override {
        const auto &fragment = *static_cast<const Fragment *>(token.data);
        const auto begin = static_cast<std::size_t>(token.value);
        for (std::size_t i = 0; i < _columns.size(); ++i) {
            const auto *data =
                static_cast<const std::byte *>(fragment.data(_columns[i])) + begin * _widths[i];
            const std::uint8_t *nulls = fragment.nulls(_columns[i]);
            for (std::uint32_t line = 0; line < _prefetch_lines; ++line) {
                system::prefetch(data + std::size_t{line} * system::cache_line_size);
            }
            if (nulls != nullptr) {
                system::prefetch(nulls + begin);
            }
        }
    }
    [[nodiscard]] bool has_prefetch() const noexcept override { return _prefetch && !_columns.empty(); }

    [[nodiscard]] std::string details() const override {
        std::string text = "columns=[";
        for (std::size_t i = 0; i < _columns.size(); ++i) {
            if (i > 0) {
                text.append(", ");
            }
            text.append(_table->schema()[_columns[i]].name);
        }
        text.append("]");
        if (_predicate != nullptr) {
            text.append(" where ").append(to_string(*_predicate));
        }
        text.append(" morsel=").append(std::to_string(_morsel_rows));
        if (_prefetch) {
            text.append(" prefetch=").append(std::to_string(_prefetch_lines)).append("l/col");
        }
        return text;
    }

private:
    /// False only when the fragment's zone maps prove the predicate false for every row.
    [[nodiscard]] bool may_match(const Expr &predicate, const Fragment &fragment) const {
        if (predicate.kind() == ExprKind::logical_and) {
            for (const auto &child : predicate.children()) {
                if (!may_match(*child, fragment)) {
                    return false;
                }
            }
            return true;
        }
        if (predicate.kind() != ExprKind::compare) {
            return true;
        }
        const Expr &left = predicate.child(0);
        const Expr &right = predicate.child(1);
        // The factories cast both sides to one type; anything else is not pruned.
        if (left.type().id != right.type().id || left.type().scale != right.type().scale ||
            left.type().physical() != right.type().physical()) {
            return true;
        }
        if (left.kind() == ExprKind::column && right.kind() == ExprKind::constant) {
            return zone_may_match(fragment.zone_map(_columns.at(left.column_index())), fragment.size(),
                                  predicate.compare_op(), right.value());
        }
        if (right.kind() == ExprKind::column && left.kind() == ExprKind::constant) {
            return zone_may_match(fragment.zone_map(_columns.at(right.column_index())), fragment.size(),
                                  mirror(predicate.compare_op()), left.value());
        }
        return true;
    }

    // Set at construction, read-only during the run (start, consume and prefetch on any worker).
    std::shared_ptr<const Table> _table;
    std::vector<std::uint32_t> _columns;
    std::vector<std::uint32_t> _widths; // bytes per row of each scanned column block
    ExprPtr _predicate;
    std::uint32_t _morsel_rows;
    bool _prefetch;
    std::uint8_t _prefetch_lines;
    bool _zone_maps;
};

} // namespace

Compiled compile_scan(Compiler &compiler, const PlanNode &node) {
    if (node.table == nullptr) {
        throw std::invalid_argument("scan without a table");
    }
    auto &scan =
        compiler.graph.add<ScanNode>(node.table, node.scan_columns, node.predicate, compiler.options);
    return Compiled{scan.id(), false};
}

} // namespace mx::db::detail
