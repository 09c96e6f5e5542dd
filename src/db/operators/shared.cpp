// Shared subplans (PlanKind::shared_scan): a subplan several parts of one plan read runs once.
// Its batches go to a materialize node that keeps them, a pipeline breaker like a hash join's
// build. Every reader is a source whose pipeline depends on the materialize node (it starts once
// the result is complete, as a probe waits for its build); its tasks emit, one per kept batch,
// a batch of views of the kept columns, so the result is not copied. The kept batches live as
// long as the graph, which outlives every batch of the run (operator.h's conventions).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>

#include "operator.h"

namespace mx::db::detail {

namespace {

using dataflow::DispatchTarget;
using dataflow::FlowContext;
using dataflow::Token;

/// Keeps every batch of the shared subplan, in sequence order once complete.
class MaterializeNode final : public BatchNode {
public:
    MaterializeNode() : BatchNode("materialize") {}

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _batches.prepare(workers);
        _kept.clear();
    }

    void consume_batch(FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        _batches.add(context.worker_id(), std::move(batch));
    }

    void finalize(FlowContext & /*context*/) noexcept override { _kept = _batches.in_sequence(); }

    /// The result (read by the readers' tasks, which start after finalize).
    [[nodiscard]] const std::vector<const Batch *> &kept() const noexcept { return _kept; }

private:
    CollectedBatches _batches;
    std::vector<const Batch *> _kept;
};

/// A reader: one task per kept batch, which emits views of the chosen columns.
class SharedScanNode final : public OperatorNode {
public:
    SharedScanNode(const MaterializeNode &input, std::vector<std::uint32_t> columns)
        : OperatorNode("shared scan"), _input(input), _columns(std::move(columns)) {}

    void start(FlowContext &context) noexcept override {
        const std::size_t batches = _input.kept().size();
        for (std::size_t i = 0; i < batches; ++i) {
            context.dispatch(Token{nullptr, i}, DispatchTarget::any());
        }
    }

    void consume(FlowContext &context, Token token) noexcept override {
        const Batch &kept = *_input.kept()[token.value];
        auto batch = std::make_unique<Batch>();
        batch->columns.reserve(_columns.size());
        for (const std::uint32_t column : _columns) {
            const Vector &source = kept.columns[column];
            batch->columns.push_back(source.slice(0, source.size()));
        }
        batch->rows = kept.rows;
        batch->all_selected = kept.all_selected;
        batch->selection = kept.selection;
        batch->sequence = kept.sequence;
        emit(context, std::move(batch));
    }

    [[nodiscard]] std::string details() const override {
        std::string text = "columns [";
        for (std::size_t i = 0; i < _columns.size(); ++i) {
            text.append(i > 0 ? ", " : "").append(std::to_string(_columns[i]));
        }
        return text.append("]");
    }

private:
    const MaterializeNode &_input;
    std::vector<std::uint32_t> _columns;
};

} // namespace

Compiled compile_shared_scan(Compiler &compiler, const PlanNode &node) {
    auto it = compiler.shared.find(node.shared.get());
    if (it == compiler.shared.end()) {
        const Compiled input = compile(compiler, *node.shared);
        auto &materialize = compiler.graph.add<MaterializeNode>();
        compiler.graph.connect(input.output, materialize.id());
        it =
            compiler.shared.emplace(node.shared.get(), std::make_pair(materialize.id(), input.ordered)).first;
    }
    const auto &materialize = dynamic_cast<const MaterializeNode &>(compiler.graph.node(it->second.first));
    auto &scan = compiler.graph.add<SharedScanNode>(materialize, node.scan_columns);
    compiler.graph.depend(materialize.id(), scan.id());
    return Compiled{scan.id(), it->second.second};
}

} // namespace mx::db::detail
