// Set operations. UNION ALL is a node with one data edge from every input: each input's batches
// pass through it as they come (any worker, any order), so the inputs' pipelines run at once and
// need no buffer. The distinct forms (UNION, INTERSECT, EXCEPT) are aggregations over a UNION ALL
// whose inputs carry a count column per side (the SQL planner builds them); INTERSECT ALL and
// EXCEPT ALL turn the per-side counts back into rows with the repeat node.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>

#include "hash_join_rows.h"
#include "operator.h"

namespace mx::db::detail {

namespace {

using dataflow::FlowContext;

/// Hands every batch of every input on unchanged (the stages fused behind it run on it).
class UnionAllNode final : public BatchNode {
public:
    UnionAllNode() : BatchNode("union all") {}

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        // The concatenation has no order: an input's sequence numbers mean nothing here.
        batch->sequence = 0;
        emit(context, std::move(batch));
    }
};

/// Emits every live row `count` times, in batches of at most `batch_rows` rows.
class RepeatNode final : public BatchNode {
public:
    RepeatNode(ExprPtr count, std::uint32_t batch_rows)
        : BatchNode("repeat"), _count(std::move(count)), _batch_rows(std::max<std::uint32_t>(batch_rows, 1)) {
    }

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        Vector counts;
        if (EvalStatus status = evaluate(*_count, *batch, counts); !status.ok()) {
            context.fail(status.message());
            return;
        }
        // The gathered vectors view the input's strings: they keep its columns alive.
        auto input = std::make_shared<std::vector<Vector>>(std::move(batch->columns));
        std::vector<std::uint32_t> rows;
        rows.reserve(_batch_rows);
        CancelPoll cancelled(context);
        auto flush = [&]() {
            auto out = std::make_unique<Batch>();
            out->rows = static_cast<std::uint32_t>(rows.size());
            for (const Vector &column : *input) {
                out->columns.push_back(join::gather_vector(column, rows.data(), out->rows));
                out->columns.back().keep_alive(input);
            }
            rows.clear();
            emit(context, std::move(out));
        };
        const bool wide = counts.type().id == TypeId::bigint;
        const std::uint32_t live = batch->count();
        for (std::uint32_t i = 0; i < live; ++i) {
            const std::uint32_t row = batch->row(i);
            if (counts.is_null(row)) {
                continue;
            }
            std::int64_t times = wide ? counts.data<std::int64_t>()[row] : counts.data<std::int32_t>()[row];
            while (times > 0) {
                const auto room = static_cast<std::int64_t>(_batch_rows - rows.size());
                const std::int64_t now = std::min(times, room);
                rows.insert(rows.end(), static_cast<std::size_t>(now), row);
                times -= now;
                if (rows.size() == _batch_rows) {
                    if (cancelled(_batch_rows)) {
                        return;
                    }
                    flush();
                }
            }
        }
        if (!rows.empty()) {
            flush();
        }
    }

    [[nodiscard]] std::string details() const override {
        return std::string("each row ").append(to_string(*_count)).append(" times");
    }

private:
    ExprPtr _count;
    std::uint32_t _batch_rows;
};

} // namespace

Compiled compile_union_all(Compiler &compiler, const PlanNode &node) {
    std::vector<Compiled> inputs;
    inputs.reserve(node.children.size());
    for (const auto &child : node.children) {
        inputs.push_back(compile(compiler, *child));
    }
    auto &union_node = compiler.graph.add<UnionAllNode>();
    for (const Compiled &input : inputs) {
        compiler.graph.connect(input.output, union_node.id());
    }
    return Compiled{union_node.id(), false};
}

Compiled compile_repeat(Compiler &compiler, const PlanNode &node) {
    const Compiled input = compile(compiler, *node.children.at(0));
    auto &repeat = compiler.graph.add<RepeatNode>(node.expressions.at(0), compiler.options.morsel_rows);
    compiler.graph.connect(input.output, repeat.id());
    // Copies of a row follow each other; batches of an ordered input keep their numbers, but one
    // input batch may become several output batches, so the order is not kept.
    return Compiled{repeat.id(), false};
}

} // namespace mx::db::detail
