// The executor: compiles a plan into a dataflow graph (operators/), runs it, collects the result.

#include <mx/db/executor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mx/db/expression.h>
#include <mx/db/table.h>
#include <mx/tasking/runtime.h>

#include "operators/operator.h"
#include "operators/sink.h"

namespace mx::db {

namespace {

void check_options(const ExecutionOptions &options) {
    if (options.morsel_rows == 0 || options.morsel_rows > TableOptions::max_fragment_capacity) {
        throw std::invalid_argument("ExecutionOptions::morsel_rows must be between 1 and " +
                                    std::to_string(TableOptions::max_fragment_capacity));
    }
}

/// The inputs of a plan node: its children, and a shared subplan where `shared` says that this
/// reader is the first of the subplan met (it is shown, counted and compiled there, once).
std::vector<const PlanNode *> inputs(const PlanNode &node, std::set<const PlanNode *> &shared) {
    std::vector<const PlanNode *> result;
    for (const auto &child : node.children) {
        result.push_back(child.get());
    }
    if (node.shared != nullptr && shared.insert(node.shared.get()).second) {
        result.push_back(node.shared.get());
    }
    return result;
}

/// Calls visit(node, depth) for every node of the plan in pre-order, a shared subplan once,
/// below its first reader.
template <class Visit>
void visit_plan(const PlanNode &node, int depth, std::set<const PlanNode *> &shared, Visit &visit) {
    visit(node, depth);
    for (const PlanNode *input : inputs(node, shared)) {
        visit_plan(*input, depth + 1, shared, visit);
    }
}

template <class Visit>
void visit_plan(const PlanNode &plan, Visit visit) {
    std::set<const PlanNode *> shared;
    visit_plan(plan, 0, shared, visit);
}

void collect_tables(const PlanNode &plan, std::vector<std::shared_ptr<const Table>> &tables) {
    visit_plan(plan, [&](const PlanNode &node, int /*depth*/) {
        if (node.table != nullptr) {
            tables.push_back(node.table);
        }
    });
}

/// The query's graph: the compiled plan feeding the result sink.
struct CompiledQuery {
    dataflow::Graph graph;
    detail::SinkNode *sink{nullptr};
    /// ExecutionOptions::analyze: where each compiled plan node ended up.
    std::vector<std::pair<const PlanNode *, detail::CompiledPlanNode>> plan_nodes;
};

/// Lets the consumer of every scan count the scan's morsels into the progress once it processed
/// them (see OperatorNode::defer_progress).
void defer_scan_progress(dataflow::Graph &graph, const QueryProgress &progress) {
    for (std::size_t id = 0; id < graph.size(); ++id) {
        const auto node_id = static_cast<dataflow::NodeId>(id);
        auto *consumer = dynamic_cast<detail::BatchNode *>(&graph.node(node_id));
        if (consumer == nullptr || graph.predecessors(node_id).size() != 1) {
            continue;
        }
        const dataflow::NodeId input = graph.predecessors(node_id).front();
        auto *source = dynamic_cast<detail::OperatorNode *>(&graph.node(input));
        if (source != nullptr && graph.successors(input).size() == 1 && source->defer_progress()) {
            consumer->count_progress(progress);
        }
    }
}

void compile_query(CompiledQuery &query, const PlanNode &plan, const ExecutionOptions &options) {
    detail::Compiler compiler{query.graph, options, options.analyze ? &query.plan_nodes : nullptr};
    try {
        const detail::Compiled output = detail::compile(compiler, plan);
        auto &sink = query.graph.add<detail::SinkNode>();
        query.graph.connect(output.output, sink.id());
        query.sink = &sink;
        query.graph.validate();
        defer_scan_progress(query.graph, options.progress);
    } catch (const std::exception &error) {
        throw ExecutionError(std::string("cannot execute the plan: ").append(error.what()));
    }
}

std::string format_rows(double rows) {
    if (rows < 0) {
        return "?";
    }
    char text[32];
    std::snprintf(text, sizeof(text), "%.0f", rows);
    return text;
}

void append_list(std::string &text, const std::vector<ExprPtr> &expressions) {
    for (std::size_t i = 0; i < expressions.size(); ++i) {
        if (i > 0) {
            text.append(", ");
        }
        text.append(to_string(*expressions[i]));
    }
}

/// Rows the scans of the plan read when no zone map prunes: the progress total.
std::uint64_t scanned_rows(const PlanNode &plan) {
    std::uint64_t rows = 0;
    visit_plan(plan, [&](const PlanNode &node, int /*depth*/) {
        if (node.kind == PlanKind::scan && node.table != nullptr) {
            rows += node.table->row_count();
        }
    });
    return rows;
}

/// Numbers of the plan's shared subplans (1, 2, ... in the order EXPLAIN shows them).
using SharedNumbers = std::map<const PlanNode *, std::size_t>;
SharedNumbers shared_numbers(const PlanNode &plan) {
    SharedNumbers numbers;
    visit_plan(plan, [&](const PlanNode &node, int /*depth*/) {
        if (node.shared != nullptr) {
            numbers.emplace(node.shared.get(), numbers.size() + 1);
        }
    });
    return numbers;
}

/// One operator as EXPLAIN shows it, without indentation and estimate. `first`: a shared_scan
/// is the first reader of its subplan (shown below it).
void describe_node(const PlanNode &node, const ExecutionOptions &options, const SharedNumbers &shared,
                   bool first, std::string &text) {
    switch (node.kind) {
    case PlanKind::shared_scan: {
        const auto it = shared.find(node.shared.get());
        const std::string number = it != shared.end() ? std::to_string(it->second) : std::string("?");
        text.append("SharedScan #").append(number).append(" [");
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            text.append(i > 0 ? ", " : "").append(node.output[i].name);
        }
        text.append(first ? "] of shared subplan #" + number + " (below, computed once)"
                          : "] of shared subplan #" + number + " (above)");
        break;
    }
    case PlanKind::scan:
        text.append("Scan ").append(node.table != nullptr ? node.table->name() : "?").append(" [");
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            text.append(i > 0 ? ", " : "").append(node.output[i].name);
        }
        text.append("]");
        if (node.predicate != nullptr) {
            text.append(" where ").append(to_string(*node.predicate));
        }
        {
            // The same decision the scan node applies (effective_scan_prefetch).
            std::vector<std::string> names;
            std::vector<ScanPrefetch> strategies;
            for (std::size_t i = 0; i < node.output.size(); ++i) {
                names.push_back(node.output[i].name);
                strategies.push_back(detail::effective_scan_prefetch(node, options, i));
            }
            text.append(" ").append(detail::describe_prefetch(
                names, strategies, node.prefetch_lines != 0 ? node.prefetch_lines : options.prefetch_lines));
        }
        break;
    case PlanKind::filter:
        text.append("Filter ").append(to_string(*node.predicate));
        break;
    case PlanKind::project:
        text.append("Project ");
        for (std::size_t i = 0; i < node.expressions.size(); ++i) {
            text.append(i > 0 ? ", " : "").append(to_string(*node.expressions[i]));
            text.append(" AS ").append(node.output[i].name);
        }
        break;
    case PlanKind::hash_join:
        text.append("HashJoin ").append(join_kind_name(node.join_kind));
        if (node.count_matches) {
            text.append(" counting matches AS ").append(node.output.back().name);
        }
        text.append(" probe [");
        append_list(text, node.probe_keys);
        text.append("] = build [");
        append_list(text, node.build_keys);
        text.append("]");
        if (node.residual != nullptr) {
            text.append(" and ").append(to_string(*node.residual));
        }
        break;
    case PlanKind::aggregate:
        text.append("Aggregate");
        if (!node.groups.empty()) {
            text.append(" group by [");
            append_list(text, node.groups);
            text.append("]");
        }
        text.append(" [");
        for (std::size_t i = 0; i < node.aggregates.size(); ++i) {
            const AggregateSpec &spec = node.aggregates[i];
            text.append(i > 0 ? ", " : "").append(aggregate_function_name(spec.function));
            if (spec.argument != nullptr) {
                text.append("(").append(to_string(*spec.argument)).append(")");
            }
            text.append(" AS ").append(node.output[node.groups.size() + i].name);
        }
        text.append("]");
        break;
    case PlanKind::sort:
        text.append("Sort [");
        for (std::size_t i = 0; i < node.sort_keys.size(); ++i) {
            const SortKey &key = node.sort_keys[i];
            text.append(i > 0 ? ", " : "").append(node.children[0]->output.at(key.column).name);
            text.append(key.descending ? " DESC" : " ASC");
            if (key.nulls_first) {
                text.append(*key.nulls_first ? " NULLS FIRST" : " NULLS LAST");
            }
        }
        text.append("]");
        if (node.limit) {
            text.append(" limit ").append(std::to_string(*node.limit));
        }
        if (node.offset > 0) {
            text.append(" offset ").append(std::to_string(node.offset));
        }
        break;
    case PlanKind::union_all:
        text.append("UnionAll [");
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            text.append(i > 0 ? ", " : "").append(node.output[i].name);
        }
        text.append("]");
        break;
    case PlanKind::repeat:
        text.append("Repeat each row ").append(to_string(*node.expressions[0])).append(" times");
        break;
    case PlanKind::window: {
        const auto &input = node.children[0]->output;
        text.append("Window");
        if (!node.partition_columns.empty()) {
            text.append(" partition by [");
            for (std::size_t i = 0; i < node.partition_columns.size(); ++i) {
                text.append(i > 0 ? ", " : "").append(input.at(node.partition_columns[i]).name);
            }
            text.append("]");
        }
        if (!node.sort_keys.empty()) {
            text.append(" order by [");
            for (std::size_t i = 0; i < node.sort_keys.size(); ++i) {
                const SortKey &key = node.sort_keys[i];
                text.append(i > 0 ? ", " : "").append(input.at(key.column).name);
                text.append(key.descending ? " DESC" : " ASC");
            }
            text.append("]");
        }
        text.append(" [");
        for (std::size_t i = 0; i < node.windows.size(); ++i) {
            const WindowSpec &spec = node.windows[i];
            text.append(i > 0 ? ", " : "").append(window_function_name(spec.function));
            if (spec.argument) {
                text.append("(").append(input.at(*spec.argument).name).append(")");
            }
            text.append(" AS ").append(node.output[input.size() + i].name);
        }
        text.append("]");
        break;
    }
    case PlanKind::limit:
        text.append("Limit");
        if (node.limit) {
            text.append(" ").append(std::to_string(*node.limit));
        }
        if (node.offset > 0) {
            text.append(" offset ").append(std::to_string(node.offset));
        }
        break;
    }
}

/// The plan nodes in pre-order with their depth (a shared subplan once, below its first
/// reader), and whether each is the first reader of a shared subplan.
struct PlanLine {
    const PlanNode *node{nullptr};
    int depth{0};
    bool first_reader{false};
};
std::vector<PlanLine> plan_order(const PlanNode &plan) {
    std::vector<PlanLine> order;
    std::set<const PlanNode *> seen;
    visit_plan(plan, [&](const PlanNode &node, int depth) {
        order.push_back(
            PlanLine{&node, depth, node.shared != nullptr && seen.insert(node.shared.get()).second});
    });
    return order;
}

void describe_plan(const PlanNode &plan, const ExecutionOptions &options, std::string &text) {
    const SharedNumbers shared = shared_numbers(plan);
    for (const PlanLine &line : plan_order(plan)) {
        text.append(static_cast<std::size_t>(line.depth + 1) * 2, ' ');
        describe_node(*line.node, options, shared, line.first_reader, text);
        text.append("  (rows=").append(format_rows(line.node->estimated_rows)).append(")\n");
    }
}

/// EXPLAIN ANALYZE: per plan node its rows (from the operator nodes' row counts), its own
/// dataflow nodes' tasks and time (a node belongs to the innermost plan node that added it), and
/// their pipelines' wall times.
std::vector<OperatorAnalysis> analyze(const PlanNode &plan, const ExecutionOptions &options,
                                      const CompiledQuery &query, const dataflow::RunResult &run) {
    const std::vector<PlanLine> order = plan_order(plan);
    const SharedNumbers shared = shared_numbers(plan);
    const std::size_t nodes = query.graph.size();
    // The owner of a dataflow node: the recorded plan node with the smallest range holding it.
    std::vector<const detail::CompiledPlanNode *> owner(nodes, nullptr);
    for (const auto &[plan_node, compiled] : query.plan_nodes) {
        for (dataflow::NodeId id = compiled.first; id < compiled.last; ++id) {
            if (owner[id] == nullptr || owner[id]->last - owner[id]->first > compiled.last - compiled.first) {
                owner[id] = &compiled;
            }
        }
    }
    const std::vector<dataflow::Pipeline> pipelines = query.graph.pipelines();
    std::vector<std::uint32_t> pipeline_of(nodes, 0);
    for (const dataflow::Pipeline &pipeline : pipelines) {
        for (const dataflow::NodeId id : pipeline.nodes) {
            pipeline_of[id] = pipeline.id;
        }
    }
    auto add_pipeline = [&](OperatorAnalysis &analysis, dataflow::NodeId id) {
        const std::uint32_t pipeline = pipeline_of[id];
        for (const auto &timing : analysis.pipelines) {
            if (timing.pipeline == pipeline) {
                return;
            }
        }
        if (pipeline < run.pipelines.size()) {
            analysis.pipelines.push_back(run.pipelines[pipeline]);
        }
    };

    std::vector<OperatorAnalysis> result;
    for (const PlanLine &line : order) {
        const PlanNode *plan_node = line.node;
        OperatorAnalysis analysis;
        analysis.node = plan_node;
        analysis.depth = line.depth;
        describe_node(*plan_node, options, shared, line.first_reader, analysis.description);
        const detail::CompiledPlanNode *compiled = nullptr;
        for (const auto &[recorded, where] : query.plan_nodes) {
            if (recorded == plan_node) {
                compiled = &where;
            }
        }
        if (compiled != nullptr) {
            const auto *output =
                dynamic_cast<const detail::OperatorNode *>(&query.graph.node(compiled->output));
            if (output != nullptr) {
                const std::vector<std::uint64_t> rows = output->counted_rows();
                if (compiled->stage_level < rows.size()) {
                    analysis.rows = rows[compiled->stage_level];
                }
            }
            for (dataflow::NodeId id = compiled->first; id < compiled->last; ++id) {
                if (owner[id] != compiled) {
                    continue;
                }
                if (id < run.nodes.size()) {
                    analysis.tasks += run.nodes[id].tasks;
                    analysis.busy += run.nodes[id].busy;
                    const auto &spread = run.nodes[id].tasks_per_worker;
                    analysis.tasks_per_worker.resize(
                        std::max(analysis.tasks_per_worker.size(), spread.size()), 0);
                    for (std::size_t w = 0; w < spread.size(); ++w) {
                        analysis.tasks_per_worker[w] += spread[w];
                    }
                }
                analysis.memory_bytes += query.graph.node(id).memory_bytes();
                if (std::string note = query.graph.node(id).run_notes(); !note.empty()) {
                    analysis.notes.append(analysis.notes.empty() ? "" : " ").append(note);
                }
                add_pipeline(analysis, id);
            }
            if (analysis.pipelines.empty()) { // fused: runs in the tasks of its output node
                analysis.fused_into = query.graph.node(compiled->output).name();
                add_pipeline(analysis, compiled->output);
            }
        }
        result.push_back(std::move(analysis));
    }
    return result;
}

std::string format_ms(std::chrono::nanoseconds time) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.3f ms", static_cast<double>(time.count()) / 1e6);
    return text;
}

/// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled; `force` quotes
/// any field (the empty string, and text equal to the NULL text, so both differ from NULL).
std::string csv_text(std::string_view text, bool force) {
    if (!force && text.find_first_of(",\"\r\n") == std::string_view::npos) {
        return std::string(text);
    }
    std::string quoted = "\"";
    for (const char c : text) {
        if (c == '"') {
            quoted.push_back('"');
        }
        quoted.push_back(c);
    }
    quoted.push_back('"');
    return quoted;
}

std::string csv_field(const Value &value, std::string_view null_text) {
    if (value.null) {
        return std::string(null_text);
    }
    const std::string text = value.to_string();
    return csv_text(text, value.type.id == TypeId::varchar && (text.empty() || text == null_text));
}

} // namespace

std::string QueryResult::to_csv(std::string_view null_text) const {
    std::string text;
    for (std::size_t c = 0; c < columns.size(); ++c) {
        text.append(c > 0 ? "," : "").append(csv_text(columns[c].name, columns[c].name.empty()));
    }
    text.push_back('\n');
    for (const auto &row : rows) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            text.append(c > 0 ? "," : "").append(csv_field(row[c], null_text));
        }
        text.push_back('\n');
    }
    return text;
}

QueryResult execute(tasking::Runtime &runtime, const PlanNode &plan, const ExecutionOptions &options) {
    check_options(options);
    // The plan holds its tables, but a caller may drop the plan's last reference to a table
    // version (a concurrent DROP through the catalog): the run keeps its own.
    std::vector<std::shared_ptr<const Table>> tables;
    collect_tables(plan, tables);

    CompiledQuery query;
    compile_query(query, plan, options);

    options.progress.start(scanned_rows(plan));
    if (options.analyze) {
        for (std::size_t id = 0; id < query.graph.size(); ++id) {
            if (auto *node = dynamic_cast<detail::OperatorNode *>(
                    &query.graph.node(static_cast<dataflow::NodeId>(id)));
                node != nullptr) {
                node->count_rows(runtime.worker_count());
            }
        }
    }
    const dataflow::RunResult run =
        dataflow::run(runtime, query.graph, options.cancel, dataflow::RunOptions{.profile = options.analyze});
    if (!run.ok) {
        throw ExecutionError(run.error);
    }
    QueryResult result;
    result.columns = plan.output;
    if (options.columnar) {
        result.columnar = query.sink->columns(runtime, plan.output);
    } else {
        result.rows = query.sink->rows();
    }
    result.elapsed = run.elapsed;
    result.pipelines = run.pipelines;
    if (options.analyze) {
        result.analysis = analyze(plan, options, query, run);
    }
    return result;
}

namespace {

std::string format_bytes(std::uint64_t bytes) {
    char text[32];
    if (bytes < (std::uint64_t{1} << 20U)) {
        std::snprintf(text, sizeof(text), "%.1f KiB", static_cast<double>(bytes) / 1024.0);
    } else {
        std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    }
    return text;
}

} // namespace

std::string explain_analyze(const QueryResult &result) {
    std::string text = "Plan:\n";
    for (const OperatorAnalysis &op : result.analysis) {
        text.append(static_cast<std::size_t>(op.depth + 1) * 2, ' ').append(op.description);
        text.append("  (rows=").append(op.rows ? std::to_string(*op.rows) : std::string("?"));
        if (!op.rows) {
            text.append(" folded into its parent)\n");
            continue;
        }
        if (op.fused_into.empty()) {
            text.append(" tasks=").append(std::to_string(op.tasks));
            if (op.tasks_per_worker.size() > 1) {
                // The spread over the workers: a skewed one shows where a pipeline waited.
                text.append(" per worker=");
                for (std::size_t w = 0; w < op.tasks_per_worker.size(); ++w) {
                    text.append(w == 0 ? "" : "/").append(std::to_string(op.tasks_per_worker[w]));
                }
            }
            text.append(" time=").append(format_ms(op.busy));
            if (op.memory_bytes > 0) {
                text.append(" memory=").append(format_bytes(op.memory_bytes));
            }
            if (!op.notes.empty()) {
                text.append(" ").append(op.notes);
            }
        } else {
            text.append(" fused into ").append(op.fused_into);
        }
        for (const auto &pipeline : op.pipelines) {
            text.append(" pipeline ").append(std::to_string(pipeline.pipeline)).append(": ");
            text.append(format_ms(pipeline.finished - pipeline.started));
        }
        text.append(")\n");
    }
    text.append("Total: ").append(std::to_string(result.row_count())).append(" rows in ");
    text.append(format_ms(result.elapsed)).append("\n");
    return text;
}

std::string explain(const PlanNode &plan, const ExecutionOptions &options) {
    check_options(options);
    std::string text = "Plan:\n";
    describe_plan(plan, options, text);
    CompiledQuery query;
    compile_query(query, plan, options);
    text.append("Pipelines:\n").append(query.graph.describe());
    if (!text.empty() && text.back() != '\n') {
        text.push_back('\n');
    }
    bool header = false;
    for (std::size_t id = 0; id < query.graph.size(); ++id) {
        const auto *node =
            dynamic_cast<const detail::OperatorNode *>(&query.graph.node(static_cast<dataflow::NodeId>(id)));
        if (node == nullptr || node->stages().empty()) {
            continue;
        }
        if (!header) {
            text.append("Fused into the tasks of:\n");
            header = true;
        }
        text.append("  node ").append(std::to_string(id)).append(" (").append(node->name()).append("):");
        for (const auto &stage : node->stages()) {
            text.append(" ").append(stage->describe()).append(";");
        }
        text.push_back('\n');
    }
    return text;
}

} // namespace mx::db
