// LIMIT / OFFSET. Over a sort the limit is folded into the sort (top-N). Over unordered input
// each batch claims the positions of its rows with one fetch_add on a shared counter and keeps
// the rows whose positions fall into [offset, offset + limit): some rows, which is all SQL
// promises there. Over other ordered input (a stage after a sort) the consume tasks may run in
// any order, so they only collect the batches, and finalize keeps SQL's first rows in sequence
// order and emits them numbered as they came.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>

#include "operator.h"

namespace mx::db::detail {

namespace {

using dataflow::FlowContext;

constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
    return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max()
                                                             : a + b;
}

class LimitNode final : public BatchNode {
public:
    LimitNode(std::optional<std::uint64_t> limit, std::uint64_t offset, bool ordered)
        : BatchNode("limit"), _limit(limit), _offset(offset),
          _end(limit ? saturating_add(offset, *limit) : std::numeric_limits<std::uint64_t>::max()),
          _ordered(ordered) {}

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _position.store(0, std::memory_order_relaxed);
        if (_ordered) {
            _collected.prepare(workers);
        }
    }

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        if (_ordered) {
            _collected.add(context.worker_id(), std::move(batch));
            return;
        }
        const std::uint64_t start = _position.fetch_add(batch->count(), std::memory_order_relaxed);
        keep(context, std::move(batch), start);
    }

    void finalize(FlowContext &context) noexcept override {
        if (!_ordered) {
            return;
        }
        std::vector<std::unique_ptr<Batch>> batches = _collected.take_in_sequence();
        std::uint64_t start = 0;
        for (auto &batch : batches) {
            const std::uint32_t count = batch->count();
            if (start >= _end) {
                break;
            }
            keep(context, std::move(batch), start);
            start += count;
        }
    }

    /// Emits the rows of `batch` (whose first row is at position `start`) that fall into the
    /// result.
    void keep(FlowContext &context, std::unique_ptr<Batch> batch, std::uint64_t start) noexcept {
        const std::uint32_t count = batch->count();
        const std::uint64_t end = start + count;
        if (end <= _offset || start >= _end) {
            return;
        }
        const auto first = static_cast<std::uint32_t>(std::max(_offset, start) - start);
        const auto last = static_cast<std::uint32_t>(std::min(_end, end) - start);
        if (first == 0 && last == count) {
            emit(context, std::move(batch));
            return;
        }
        std::vector<std::uint32_t> selection;
        selection.reserve(last - first);
        for (std::uint32_t i = first; i < last; ++i) {
            selection.push_back(batch->row(i));
        }
        batch->selection = std::move(selection);
        batch->all_selected = false;
        emit(context, std::move(batch));
    }

    [[nodiscard]] std::string details() const override {
        std::string text;
        if (_limit) {
            text.append("limit=").append(std::to_string(*_limit));
        }
        if (_offset > 0) {
            text.append(text.empty() ? "" : " ").append("offset=").append(std::to_string(_offset));
        }
        return text;
    }

private:
    std::optional<std::uint64_t> _limit;
    std::uint64_t _offset;
    std::uint64_t _end; // first position past the result
    bool _ordered;      // the input is a numbered (sorted) stream
    // Ordered input: the batches, taken in sequence order by finalize() (ordered after every
    // consume task by the layer).
    CollectedBatches _collected;
    // Rows that reached the limit so far: fetch_add by every consume task (any worker). Relaxed:
    // only the claimed ranges matter, they never overlap.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _position{0};
};

} // namespace

Compiled compile_limit(Compiler &compiler, const PlanNode &node) {
    const PlanNode &child = *node.children.at(0);
    if (child.kind == PlanKind::sort) {
        // Top-N: rows [offset, offset + limit) of the sort's own output.
        std::optional<std::uint64_t> limit = node.limit;
        if (child.limit) {
            const std::uint64_t remaining = *child.limit > node.offset ? *child.limit - node.offset : 0;
            limit = limit ? std::min(*limit, remaining) : remaining;
        }
        return compile_sort_with(compiler, child, limit, saturating_add(child.offset, node.offset));
    }
    const Compiled input = compile(compiler, child);
    auto &limit = compiler.graph.add<LimitNode>(node.limit, node.offset, input.ordered);
    compiler.graph.connect(input.output, limit.id());
    return Compiled{limit.id(), input.ordered};
}

} // namespace mx::db::detail
