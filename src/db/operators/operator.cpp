// The operator framework: emitting batches through fused stages, the filter and projection
// stages, and compiling plan nodes by kind.

#include "operator.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/expression.h>

namespace mx::db::detail {

namespace {

class FilterStage final : public Stage {
public:
    explicit FilterStage(ExprPtr predicate) : _predicate(std::move(predicate)) {}

    EvalStatus apply(Batch &batch) const noexcept override { return filter(*_predicate, batch); }
    [[nodiscard]] std::string describe() const override {
        return std::string("filter ").append(to_string(*_predicate));
    }

private:
    ExprPtr _predicate;
};

class ProjectStage final : public Stage {
public:
    explicit ProjectStage(std::vector<ExprPtr> expressions) : _expressions(std::move(expressions)) {}

    EvalStatus apply(Batch &batch) const noexcept override {
        std::vector<Vector> columns(_expressions.size());
        for (std::size_t i = 0; i < _expressions.size(); ++i) {
            EvalStatus status = evaluate(*_expressions[i], batch, columns[i]);
            if (!status.ok()) {
                return status;
            }
        }
        // Results may view the input's vectors (a column reference is a view of the column,
        // SUBSTRING points into its strings); input vectors that own memory, or keep other
        // vectors' memory alive (a join's gathered columns), must outlive them.
        bool owning_input = false;
        for (const Vector &column : batch.columns) {
            owning_input = owning_input || column.holds_memory();
        }
        if (owning_input) {
            auto input = std::make_shared<std::vector<Vector>>(std::move(batch.columns));
            for (Vector &column : columns) {
                column.keep_alive(input);
            }
        }
        batch.columns = std::move(columns);
        return {};
    }

    [[nodiscard]] std::string describe() const override {
        std::string text = "project ";
        for (std::size_t i = 0; i < _expressions.size(); ++i) {
            if (i > 0) {
                text.append(", ");
            }
            text.append(to_string(*_expressions[i]));
        }
        return text;
    }

private:
    std::vector<ExprPtr> _expressions;
};

/// A filter or projection running as a node of its own (fusion off, or nothing to fuse into).
class StageNode final : public BatchNode {
public:
    StageNode(std::string name, std::unique_ptr<Stage> stage)
        : BatchNode(std::move(name)), _stage(std::move(stage)) {}

    void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        EvalStatus status = _stage->apply(*batch);
        if (!status.ok()) {
            context.fail(status.message());
            return;
        }
        emit(context, std::move(batch));
    }

    [[nodiscard]] std::string details() const override { return _stage->describe(); }

private:
    std::unique_ptr<Stage> _stage;
};

Compiled compile_stage(Compiler &compiler, const PlanNode &node, std::unique_ptr<Stage> stage,
                       const char *name) {
    const Compiled input = compile(compiler, *node.children.at(0));
    if (OperatorNode *target = fusion_target(compiler, input); target != nullptr) {
        target->append_stage(std::move(stage));
        return input;
    }
    auto &stage_node = compiler.graph.add<StageNode>(name, std::move(stage));
    compiler.graph.connect(input.output, stage_node.id());
    // A stage keeps each batch (and its sequence number): the order survives.
    return Compiled{stage_node.id(), input.ordered};
}

} // namespace

// ---- OperatorNode -----------------------------------------------------------------------------

std::unique_ptr<Batch> OperatorNode::take(dataflow::Token token) noexcept {
    MX_ASSERT(token.value == 0, "a batch node received a token that carries no batch");
    return std::unique_ptr<Batch>(static_cast<Batch *>(token.data));
}

void OperatorNode::count_rows(std::uint16_t workers) {
    _row_counts = std::make_unique<RowCounts[]>(workers);
    _row_workers = workers;
    for (std::uint16_t worker = 0; worker < workers; ++worker) {
        _row_counts[worker].levels.assign(_stages.size() + 1, 0);
    }
}

std::vector<std::uint64_t> OperatorNode::counted_rows() const {
    std::vector<std::uint64_t> rows;
    if (_row_counts == nullptr) {
        return rows;
    }
    rows.assign(_stages.size() + 1, 0);
    for (std::uint16_t worker = 0; worker < _row_workers; ++worker) {
        for (std::size_t level = 0; level < rows.size(); ++level) {
            rows[level] += _row_counts[worker].levels[level];
        }
    }
    return rows;
}

bool OperatorNode::run_stages(dataflow::FlowContext &context, Batch &batch) noexcept {
    // Counted per batch, and only when analyzing: one test of a pointer otherwise.
    std::uint64_t *levels = _row_counts != nullptr ? _row_counts[context.worker_id()].levels.data() : nullptr;
    if (levels != nullptr) [[unlikely]] {
        levels[0] += batch.count();
    }
    for (std::size_t i = 0; i < _stages.size(); ++i) {
        if (batch.count() == 0) {
            return false;
        }
        EvalStatus status = _stages[i]->apply(batch);
        if (!status.ok()) {
            context.fail(status.message());
            return false;
        }
        if (levels != nullptr) [[unlikely]] {
            levels[i + 1] += batch.count();
        }
    }
    return batch.count() > 0;
}

bool OperatorNode::emit(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept {
    if (!run_stages(context, *batch)) {
        return false;
    }
    context.emit(dataflow::Token{batch.release(), 0});
    return true;
}

bool OperatorNode::emit(dataflow::FlowContext &context, std::unique_ptr<Batch> batch,
                        dataflow::DispatchTarget target) noexcept {
    if (!run_stages(context, *batch)) {
        return false;
    }
    context.emit(dataflow::Token{batch.release(), 0}, target);
    return true;
}

// ---- compilation ------------------------------------------------------------------------------

OperatorNode *fusion_target(Compiler &compiler, const Compiled &input) {
    if (!compiler.options.fuse_operators || !compiler.graph.successors(input.output).empty()) {
        return nullptr;
    }
    return dynamic_cast<OperatorNode *>(&compiler.graph.node(input.output));
}

std::unique_ptr<Stage> make_filter_stage(ExprPtr predicate) {
    return std::make_unique<FilterStage>(std::move(predicate));
}

std::unique_ptr<Stage> make_project_stage(std::vector<ExprPtr> expressions) {
    return std::make_unique<ProjectStage>(std::move(expressions));
}

Compiled compile_filter(Compiler &compiler, const PlanNode &node) {
    return compile_stage(compiler, node, make_filter_stage(node.predicate), "filter");
}

Compiled compile_project(Compiler &compiler, const PlanNode &node) {
    return compile_stage(compiler, node, make_project_stage(node.expressions), "project");
}

namespace {

Compiled compile_kind(Compiler &compiler, const PlanNode &node) {
    switch (node.kind) {
    case PlanKind::scan:
        return compile_scan(compiler, node);
    case PlanKind::filter:
        return compile_filter(compiler, node);
    case PlanKind::project:
        return compile_project(compiler, node);
    case PlanKind::hash_join:
        return compile_hash_join(compiler, node);
    case PlanKind::aggregate:
        return compile_aggregate(compiler, node);
    case PlanKind::sort:
        return compile_sort(compiler, node);
    case PlanKind::limit:
        return compile_limit(compiler, node);
    case PlanKind::union_all:
        return compile_union_all(compiler, node);
    case PlanKind::repeat:
        return compile_repeat(compiler, node);
    case PlanKind::window:
        return compile_window(compiler, node);
    case PlanKind::shared_scan:
        return compile_shared_scan(compiler, node);
    }
    throw std::invalid_argument("plan node of unknown kind");
}

} // namespace

Compiled compile(Compiler &compiler, const PlanNode &node) {
    const auto first = static_cast<dataflow::NodeId>(compiler.graph.size());
    const Compiled compiled = compile_kind(compiler, node);
    if (compiler.compiled != nullptr) {
        const auto *output = dynamic_cast<const OperatorNode *>(&compiler.graph.node(compiled.output));
        compiler.compiled->emplace_back(
            &node,
            CompiledPlanNode{.output = compiled.output,
                             .stage_level =
                                 output != nullptr ? static_cast<std::uint32_t>(output->stages().size()) : 0U,
                             .first = first,
                             .last = static_cast<dataflow::NodeId>(compiler.graph.size())});
    }
    return compiled;
}

} // namespace mx::db::detail
