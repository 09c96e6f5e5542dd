// Table scan: the source of a pipeline. start() dispatches one task per morsel (a row range of
// one fragment) to the fragment's NUMA region; each task builds a batch of column views (no copy),
// applies the scan predicate and emits the surviving rows into the pipeline.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
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

/// Calls visit(line) for every cache line (line-aligned address) of [data, data + bytes), at
/// most `limit` of them from the front.
template <class Visit>
void visit_lines(const void *data, std::size_t bytes, std::size_t limit, Visit &visit) noexcept {
    if (bytes == 0 || limit == 0) {
        return;
    }
    constexpr std::uintptr_t line = system::cache_line_size;
    const auto start = reinterpret_cast<std::uintptr_t>(data);
    const std::uintptr_t first = start & ~(line - 1);
    const std::uintptr_t last = (start + bytes - 1) & ~(line - 1);
    std::size_t count = 0;
    for (std::uintptr_t address = first; address <= last && count < limit; address += line, ++count) {
        visit(reinterpret_cast<const void *>(address));
    }
}

class ScanNode final : public OperatorNode {
public:
    ScanNode(const PlanNode &node, const ExecutionOptions &options)
        : OperatorNode("scan " + node.table->name()), _table(node.table), _columns(node.scan_columns),
          _predicate(node.predicate), _morsel_rows(std::max<std::uint32_t>(options.morsel_rows, 1)),
          _prefetch_lines(node.prefetch_lines != 0 ? node.prefetch_lines : options.prefetch_lines),
          _zone_maps(options.zone_maps), _progress(options.progress) {
        if (_predicate != nullptr) {
            split_predicate(options.dictionary_filters);
        }
        _widths.reserve(_columns.size());
        _strategies.reserve(_columns.size());
        for (std::size_t i = 0; i < _columns.size(); ++i) {
            const std::uint32_t column = _columns[i];
            _widths.push_back(
                _table->dictionary_encoded(column)
                    ? std::uint32_t{sizeof(std::uint32_t)}
                    : static_cast<std::uint32_t>(physical_size(_table->schema()[column].type.physical())));
            _strategies.push_back(effective_scan_prefetch(node, options, i));
        }
    }

    void start(FlowContext &context) noexcept override {
        const auto regions = context.region_count();
        for (const auto &fragment : _table->fragments()) {
            if (_predicate != nullptr && _zone_maps && !may_match(*_predicate, *fragment)) {
                _progress.advance(fragment->size());
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
        const auto &fragment = *static_cast<const Fragment *>(token.data);
        const auto begin = static_cast<std::uint32_t>(token.value);
        const std::uint32_t end = begin + std::min(_morsel_rows, fragment.size() - begin);
        if (!_consumer_counts || context.cancelled()) {
            _progress.advance(end - begin);
        }
        if (context.cancelled()) {
            return;
        }
        auto batch = std::make_unique<Batch>();
        batch->rows = end - begin;
        const bool by_codes = !_code_filters.empty() && codes_usable(fragment);
        if (by_codes && !select_by_codes(fragment, begin, *batch)) {
            if (_consumer_counts) {
                _progress.advance(end - begin); // no row survived: the consumer never sees a batch
            }
            return;
        }
        batch->columns.reserve(_columns.size());
        for (const std::uint32_t column : _columns) {
            batch->columns.push_back(fragment.column(column, begin, end));
        }
        if (!by_codes) {
            for (const CodeFilter &code_filter : _code_filters) {
                if (EvalStatus status = filter(*code_filter.conjunct, *batch); !status.ok()) {
                    context.fail(status.message());
                    return;
                }
            }
        }
        for (const Expr *conjunct : _row_conjuncts) {
            EvalStatus status = filter(*conjunct, *batch);
            if (!status.ok()) {
                context.fail(status.message());
                return;
            }
        }
        if (!emit(context, std::move(batch)) && _consumer_counts) {
            _progress.advance(end - begin); // no row survived: the consumer never sees the batch
        }
    }

    bool defer_progress() noexcept override {
        _consumer_counts = true;
        return true;
    }

    /// Per column as _strategies says: its first cache lines in the morsel, or its whole block
    /// of the morsel (and the NULL bytes alike).
    void prefetch(const Token &token) const noexcept override {
        auto issue = [](const void *line) { system::prefetch(line); };
        visit_prefetch_lines(token, issue);
    }
    [[nodiscard]] bool has_prefetch() const noexcept override {
        return std::any_of(_strategies.begin(), _strategies.end(),
                           [](ScanPrefetch strategy) { return strategy != ScanPrefetch::none; });
    }

    /// The cache lines prefetch(token) touches, in order (one code path for the run and tests).
    template <class Visit>
    void visit_prefetch_lines(const Token &token, Visit &visit) const noexcept {
        const auto &fragment = *static_cast<const Fragment *>(token.data);
        const auto begin = static_cast<std::uint32_t>(token.value);
        const std::uint32_t rows = std::min(_morsel_rows, fragment.size() - begin);
        for (std::size_t i = 0; i < _columns.size(); ++i) {
            if (_strategies[i] == ScanPrefetch::none) {
                continue;
            }
            const std::size_t limit =
                _strategies[i] == ScanPrefetch::whole_column ? ~std::size_t{0} : _prefetch_lines;
            const auto *data =
                static_cast<const std::byte *>(fragment.data(_columns[i])) + std::size_t{begin} * _widths[i];
            visit_lines(data, std::size_t{rows} * _widths[i], limit, visit);
            if (const std::uint8_t *nulls = fragment.nulls(_columns[i]); nulls != nullptr) {
                // One byte per row: the first line covers 64 rows, enough to get going.
                visit_lines(nulls + begin, rows, _strategies[i] == ScanPrefetch::whole_column ? limit : 1,
                            visit);
            }
        }
    }

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
        if (!_code_filters.empty()) {
            text.append(" dictionary_filters=[");
            for (std::size_t i = 0; i < _code_filters.size(); ++i) {
                text.append(i > 0 ? ", " : "")
                    .append(_table->schema()[_columns[_code_filters[i].column]].name);
            }
            text.append("]");
        }
        text.append(" morsel=").append(std::to_string(_morsel_rows));
        std::vector<std::string> names;
        for (const std::uint32_t column : _columns) {
            names.push_back(_table->schema()[column].name);
        }
        text.append(" ").append(describe_prefetch(names, _strategies, _prefetch_lines));
        return text;
    }

private:
    /// A conjunct over one dictionary-encoded column, evaluated once per dictionary entry.
    struct CodeFilter {
        const Expr *conjunct{nullptr};     // owned by _predicate
        const StringRef *entries{nullptr}; // the dictionary the codes index
        std::uint32_t column{0};           // index into _columns
        std::vector<std::uint8_t> passes;  // per code, then one entry for NULL: 1 = the row stays
    };

    /// Splits the predicate into conjuncts; those over a single dictionary-encoded column become
    /// code filters (when `dictionary` allows and evaluating them over the dictionary succeeds),
    /// the rest are evaluated on the decoded rows, in their order.
    void split_predicate(bool dictionary) {
        std::vector<const Expr *> conjuncts;
        flatten_and(*_predicate, conjuncts);
        for (const Expr *conjunct : conjuncts) {
            std::vector<std::uint32_t> referenced;
            expr::collect_columns(*conjunct, referenced);
            std::sort(referenced.begin(), referenced.end());
            referenced.erase(std::unique(referenced.begin(), referenced.end()), referenced.end());
            if (dictionary && referenced.size() == 1 && referenced[0] < _columns.size()) {
                if (const Dictionary *codes = _table->dictionary(_columns[referenced[0]]); codes != nullptr) {
                    if (std::optional<CodeFilter> code_filter =
                            over_dictionary(*conjunct, referenced[0], *codes)) {
                        _code_filters.push_back(std::move(*code_filter));
                        continue;
                    }
                }
            }
            _row_conjuncts.push_back(conjunct);
        }
    }

    static void flatten_and(const Expr &expression, std::vector<const Expr *> &out) {
        if (expression.kind() == ExprKind::logical_and) {
            for (const auto &child : expression.children()) {
                flatten_and(*child, out);
            }
            return;
        }
        out.push_back(&expression);
    }

    /// The conjunct evaluated for every dictionary entry and for NULL; nothing when the
    /// evaluation fails (an entry no scanned row may hold can raise an error: the conjunct then
    /// stays a row filter, whose errors are the rows' own).
    [[nodiscard]] std::optional<CodeFilter> over_dictionary(const Expr &conjunct, std::uint32_t column,
                                                            const Dictionary &dictionary) const {
        const std::uint32_t entries = dictionary.size();
        Batch batch;
        batch.rows = entries + 1;
        batch.columns.resize(_columns.size());
        Vector values(_table->schema()[_columns[column]].type, entries + 1);
        auto *strings = values.mutable_data<StringRef>();
        std::copy(dictionary.entries().begin(), dictionary.entries().end(), strings);
        strings[entries] = StringRef{};
        values.mutable_nulls()[entries] = 1;
        batch.columns[column] = std::move(values);
        if (!filter(conjunct, batch).ok()) {
            return std::nullopt;
        }
        CodeFilter result{&conjunct, dictionary.entries().data(), column,
                          std::vector<std::uint8_t>(entries + 1, 0)};
        for (std::uint32_t i = 0; i < batch.count(); ++i) {
            result.passes[batch.row(i)] = 1;
        }
        return result;
    }

    /// Whether the fragment's code filter columns use the dictionaries the filters were made
    /// from (a fragment may be stored plainly; then its rows are filtered after decoding).
    [[nodiscard]] bool codes_usable(const Fragment &fragment) const noexcept {
        return std::all_of(_code_filters.begin(), _code_filters.end(), [&](const CodeFilter &code_filter) {
            const std::uint32_t table_column = _columns[code_filter.column];
            return fragment.dictionary_encoded(table_column) &&
                   fragment.dictionary(table_column).data() == code_filter.entries;
        });
    }

    /// Narrows the batch's selection to the rows of [begin, begin + batch.rows) whose codes pass
    /// every code filter; false when none does.
    bool select_by_codes(const Fragment &fragment, std::uint32_t begin, Batch &batch) const {
        std::vector<std::uint32_t> &selection = batch.selection;
        selection.resize(batch.rows);
        std::uint32_t kept = 0;
        bool first = true;
        for (const CodeFilter &code_filter : _code_filters) {
            const std::uint32_t table_column = _columns[code_filter.column];
            const std::uint32_t *codes = fragment.codes(table_column) + begin;
            const std::uint8_t *nulls = fragment.nulls(table_column);
            const std::uint8_t *passes = code_filter.passes.data();
            const auto null_code = static_cast<std::uint32_t>(code_filter.passes.size() - 1);
            const auto pass = [&](std::uint32_t row) {
                const std::uint32_t code =
                    nulls != nullptr && nulls[begin + row] != 0 ? null_code : codes[row];
                return passes[code] != 0;
            };
            if (first) {
                for (std::uint32_t row = 0; row < batch.rows; ++row) {
                    selection[kept] = row;
                    kept += pass(row) ? 1U : 0U;
                }
                first = false;
            } else {
                std::uint32_t narrowed = 0;
                for (std::uint32_t i = 0; i < kept; ++i) {
                    const std::uint32_t row = selection[i];
                    selection[narrowed] = row;
                    narrowed += pass(row) ? 1U : 0U;
                }
                kept = narrowed;
            }
            if (kept == 0) {
                return false;
            }
        }
        selection.resize(kept);
        batch.all_selected = kept == batch.rows;
        if (batch.all_selected) {
            selection.clear();
        }
        return true;
    }

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
                                  mirrored(predicate.compare_op()), left.value());
        }
        return true;
    }

    // Set at construction, read-only during the run (start, consume and prefetch on any worker).
    std::shared_ptr<const Table> _table;
    std::vector<std::uint32_t> _columns;
    std::vector<std::uint32_t> _widths; // bytes per row of each scanned column block
    ExprPtr _predicate;
    std::vector<CodeFilter> _code_filters;    // conjuncts over one dictionary column, by code
    std::vector<const Expr *> _row_conjuncts; // the other conjuncts (owned by _predicate)
    std::uint32_t _morsel_rows;
    std::vector<ScanPrefetch> _strategies; // per scanned column, with the options' overrides applied
    std::uint8_t _prefetch_lines;
    bool _zone_maps;
    QueryProgress _progress;      // shared counter: the scan tasks add the rows they read
    bool _consumer_counts{false}; // the consumer counts the batches it gets (defer_progress)
};

} // namespace

ScanPrefetch effective_scan_prefetch(const PlanNode &scan, const ExecutionOptions &options,
                                     std::size_t column) {
    if (!options.prefetch) {
        return ScanPrefetch::none;
    }
    if (options.scan_prefetch.has_value()) {
        return *options.scan_prefetch;
    }
    return column < scan.scan_prefetch.size() ? scan.scan_prefetch[column] : ScanPrefetch::first_lines;
}

std::string describe_prefetch(const std::vector<std::string> &names,
                              const std::vector<ScanPrefetch> &strategies, std::uint8_t lines) {
    if (std::all_of(strategies.begin(), strategies.end(),
                    [](ScanPrefetch strategy) { return strategy == ScanPrefetch::none; })) {
        return "prefetch=off";
    }
    std::string text = "prefetch=[";
    for (std::size_t i = 0; i < strategies.size(); ++i) {
        text.append(i > 0 ? ", " : "").append(i < names.size() ? names[i] : "?").append(": ");
        switch (strategies[i]) {
        case ScanPrefetch::none:
            text.append("none");
            break;
        case ScanPrefetch::first_lines:
            text.append(std::to_string(lines)).append(lines == 1 ? " line" : " lines");
            break;
        case ScanPrefetch::whole_column:
            text.append("whole column");
            break;
        }
    }
    text.append("]");
    return text;
}

std::vector<const void *> scan_prefetch_lines(const PlanNode &scan, const ExecutionOptions &options,
                                              const Fragment &fragment, std::uint32_t begin) {
    const ScanNode node(scan, options);
    std::vector<const void *> lines;
    if (!node.has_prefetch()) {
        return lines;
    }
    auto collect = [&](const void *line) { lines.push_back(line); };
    node.visit_prefetch_lines(Token{const_cast<Fragment *>(&fragment), begin}, collect);
    return lines;
}

Compiled compile_scan(Compiler &compiler, const PlanNode &node) {
    if (node.table == nullptr) {
        throw std::invalid_argument("scan without a table");
    }
    if (!node.scan_prefetch.empty() && node.scan_prefetch.size() != node.scan_columns.size()) {
        throw std::invalid_argument("scan: scan_prefetch needs one entry per scanned column");
    }
    auto &scan = compiler.graph.add<ScanNode>(node, compiler.options);
    return Compiled{scan.id(), false};
}

} // namespace mx::db::detail
