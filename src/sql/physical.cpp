#include "physical.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include <mx/util/assert.h>

namespace mx::sql::detail {

namespace {

class Planner {
public:
    explicit Planner(const ColumnRegistry &columns) : _columns(columns) {}

    struct Result {
        db::PlanPtr plan;
        std::vector<ColumnId> layout; // ColumnId of each output position
    };

    /// `prune`: drop columns nobody above reads right here (off for the probe input of a join,
    /// whose batches stream through the probe without copies anyway).
    Result build(const LogicalNode &node, const std::set<ColumnId> &required, bool prune = true);
    /// A semi/anti join that hashes its left side (LogicalNode::build_left): a right semi/anti
    /// hash join probed by the right side, whose output is the left side's columns. A left outer
    /// join that does: a right outer hash join, whose output is the right side's columns, then
    /// the left side's (the layout tells the parents where each column went).
    Result build_left_join(const LogicalNode &node, const std::set<ColumnId> &required,
                           const std::set<ColumnId> &left_needed, const std::set<ColumnId> &right_needed);

    static std::uint32_t position(const std::vector<ColumnId> &layout, ColumnId id) {
        const auto it = std::find(layout.begin(), layout.end(), id);
        if (it == layout.end()) {
            throw std::logic_error("planner: column " + std::to_string(id) + " is not in the input");
        }
        return static_cast<std::uint32_t>(it - layout.begin());
    }
    /// The sort keys with their columns as positions in `layout`.
    static std::vector<db::SortKey> sort_keys_at(const std::vector<ColumnId> &layout,
                                                 const std::vector<LogicalSortKey> &sort_keys) {
        std::vector<db::SortKey> keys;
        for (const auto &key : sort_keys) {
            db::SortKey sort_key;
            sort_key.column = position(layout, key.column);
            sort_key.descending = key.descending;
            sort_key.nulls_first = key.nulls_first;
            keys.push_back(sort_key);
        }
        return keys;
    }
    static db::ExprPtr remap(const db::ExprPtr &expression, const std::vector<ColumnId> &layout) {
        return db::expr::remap_columns(expression, [&](std::uint32_t id) { return position(layout, id); });
    }
    static void add_columns(const db::ExprPtr &expression, std::set<ColumnId> &into) {
        if (expression != nullptr) {
            for (ColumnId id : columns_of(*expression)) {
                into.insert(id);
            }
        }
    }
    static db::ExprPtr conjunction(const std::vector<db::ExprPtr> &conjuncts) {
        if (conjuncts.empty()) {
            return nullptr;
        }
        return conjuncts.size() == 1 ? conjuncts.front() : db::expr::logical_and(conjuncts);
    }

    static bool only_column_references(const std::vector<db::ExprPtr> &expressions) {
        return std::all_of(expressions.begin(), expressions.end(),
                           [](const db::ExprPtr &e) { return e->kind() == db::ExprKind::column; });
    }

    /// A projection over `input`; merged with a projection below it when one of the two only
    /// selects columns (fewer operators, and batches are not re-wrapped twice).
    static db::PlanPtr project_on(db::PlanPtr input, std::vector<db::ExprPtr> expressions,
                                  std::vector<std::string> names, double rows) {
        if (input->kind == db::PlanKind::project) {
            const auto &below = input->expressions;
            if (only_column_references(expressions)) {
                std::vector<db::ExprPtr> picked;
                for (const auto &expression : expressions) {
                    picked.push_back(below[expression->column_index()]);
                }
                expressions = std::move(picked);
                input = std::move(input->children[0]);
            } else if (only_column_references(below)) {
                std::vector<std::uint32_t> positions;
                for (const auto &expression : below) {
                    positions.push_back(expression->column_index());
                }
                for (auto &expression : expressions) {
                    expression =
                        db::expr::remap_columns(expression, [&](std::uint32_t i) { return positions[i]; });
                }
                input = std::move(input->children[0]);
            }
        }
        db::PlanPtr plan = db::plan::project(std::move(input), std::move(expressions), std::move(names));
        plan->estimated_rows = rows;
        return plan;
    }

    /// An aggregation over a right outer join (below a projection of columns at most) that groups
    /// by build columns and counts one probe column: the join counts the probe rows per build
    /// row (db::plan::count_join, over the probe rows whose counted column is not NULL), and the
    /// aggregation sums those counts per group, cast back to count's BIGINT. Every group holds at
    /// least one build row, so no sum is NULL, and a build row without a match counts 0 as
    /// count() of its NULL-padded row does. TPC-H Q13 then hashes no 1.35 M join rows into a
    /// table of 150 K customers. Null (and `input` untouched) when the plan has another shape.
    static db::PlanPtr count_join(db::PlanPtr &input, const std::vector<db::ExprPtr> &groups,
                                  const std::vector<std::string> &names,
                                  const std::vector<db::AggregateSpec> &aggregates, double rows) {
        if (groups.empty() || aggregates.size() != 1 ||
            aggregates[0].function != db::AggregateFunction::count || aggregates[0].argument == nullptr ||
            aggregates[0].argument->kind() != db::ExprKind::column || !only_column_references(groups)) {
            return nullptr;
        }
        // Positions in the join's output of the input's columns.
        db::PlanNode *join = input.get();
        std::vector<std::uint32_t> positions;
        if (join->kind == db::PlanKind::project && only_column_references(join->expressions)) {
            for (const auto &expression : join->expressions) {
                positions.push_back(expression->column_index());
            }
            join = join->children[0].get();
        } else {
            for (std::uint32_t i = 0; i < join->output.size(); ++i) {
                positions.push_back(i);
            }
        }
        if (join->kind != db::PlanKind::hash_join || join->join_kind != db::JoinKind::right_outer ||
            join->count_matches) {
            return nullptr;
        }
        const auto probe_width = static_cast<std::uint32_t>(join->children[0]->output.size());
        const std::uint32_t counted = positions[aggregates[0].argument->column_index()];
        if (counted >= probe_width) {
            return nullptr;
        }
        std::vector<std::uint32_t> group_columns;
        for (const auto &group : groups) {
            const std::uint32_t position = positions[group->column_index()];
            if (position < probe_width) {
                return nullptr;
            }
            group_columns.push_back(position - probe_width);
        }

        db::PlanPtr probe = std::move(join->children[0]);
        db::PlanPtr build = std::move(join->children[1]);
        const double probe_rows = probe->estimated_rows;
        const double build_rows = build->estimated_rows;
        if (probe->output[counted].nullable) {
            const db::OutputColumn &column = probe->output[counted];
            probe = db::plan::filter(
                std::move(probe),
                db::expr::is_null(db::expr::column(counted, column.type, column.name), true));
            probe->estimated_rows = probe_rows;
        }
        const auto build_width = static_cast<std::uint32_t>(build->output.size());
        db::PlanPtr joined = db::plan::count_join(std::move(probe), std::move(build), join->probe_keys,
                                                  join->build_keys, join->residual, aggregates[0].name);
        joined->bloom_filter = join->bloom_filter;
        joined->join_strategy = join->join_strategy;
        joined->estimated_rows = build_rows;

        std::vector<db::ExprPtr> sum_groups;
        for (const std::uint32_t column : group_columns) {
            const db::OutputColumn &output = joined->output[column];
            sum_groups.push_back(db::expr::column(column, output.type, output.name));
        }
        db::AggregateSpec sum;
        sum.function = db::AggregateFunction::sum;
        sum.argument = db::expr::column(build_width, db::Type::bigint(), aggregates[0].name);
        sum.name = aggregates[0].name;
        db::PlanPtr summed = db::plan::aggregate(std::move(joined), std::move(sum_groups), names, {sum});
        summed->estimated_rows = rows;
        std::vector<db::ExprPtr> expressions;
        std::vector<std::string> output_names = names;
        for (std::uint32_t i = 0; i < summed->output.size(); ++i) {
            const db::OutputColumn &output = summed->output[i];
            expressions.push_back(db::expr::column(i, output.type, output.name));
        }
        expressions.back() = db::expr::cast(expressions.back(), db::Type::bigint());
        output_names.push_back(aggregates[0].name);
        input.reset();
        return project_on(std::move(summed), std::move(expressions), std::move(output_names), rows);
    }

    /// Drops output columns nobody above reads (a projection of column references).
    Result pruned(Result input, const std::set<ColumnId> &required, double rows, bool enabled = true) {
        if (!enabled) {
            return input;
        }
        std::vector<db::ExprPtr> expressions;
        std::vector<std::string> names;
        std::vector<ColumnId> layout;
        for (std::size_t i = 0; i < input.layout.size(); ++i) {
            const ColumnId id = input.layout[i];
            if (required.count(id) == 0 || std::find(layout.begin(), layout.end(), id) != layout.end()) {
                continue;
            }
            const auto &column = input.plan->output[i];
            expressions.push_back(db::expr::column(static_cast<std::uint32_t>(i), column.type, column.name));
            names.push_back(column.name);
            layout.push_back(id);
        }
        if (layout.size() == input.layout.size()) {
            return input;
        }
        if (layout.empty()) {
            // Keep one column: batches need a width to carry their row count.
            const auto &column = input.plan->output[0];
            expressions.push_back(db::expr::column(0, column.type, column.name));
            names.push_back(column.name);
            layout.push_back(input.layout[0]);
        }
        Result result;
        result.plan = project_on(std::move(input.plan), std::move(expressions), std::move(names), rows);
        result.layout = std::move(layout);
        return result;
    }

    /// Counts the shared_scan nodes of `node`, and of the shared subplans they read, per subplan.
    void count_readers(const LogicalNode &node) {
        if (node.kind == LogicalKind::shared_scan) {
            SharedState &state = _shared[node.shared.get()];
            if (state.expected++ == 0) {
                count_readers(*node.shared->plan);
            }
        }
        for (const auto &child : node.children) {
            count_readers(*child);
        }
    }
    /// Plans every shared subplan once all its readers are planned (they say which of its columns
    /// it must deliver: the union of theirs) and points the readers at it.
    void build_shared();

private:
    /// A shared_scan planned before its subplan: the columns it reads, as the subplan's ids.
    struct SharedReader {
        db::PlanNode *node{nullptr};
        std::vector<ColumnId> subplan_ids;
    };
    struct SharedState {
        std::set<ColumnId> required; // subplan output ids some reader reads
        std::vector<SharedReader> readers;
        std::size_t expected{0}; // readers in the whole plan
        bool built{false};
    };

    const ColumnRegistry &_columns;
    std::map<const SharedPlan *, SharedState> _shared;
};

void Planner::build_shared() {
    for (;;) {
        const SharedPlan *next = nullptr;
        bool pending = false;
        for (const auto &[subplan, state] : _shared) {
            if (!state.built) {
                pending = true;
                if (state.readers.size() == state.expected) {
                    next = subplan;
                    break;
                }
            }
        }
        if (next == nullptr) {
            if (pending) {
                throw std::logic_error("planner: a shared subplan's readers were not all planned");
            }
            return;
        }
        SharedState &state = _shared[next];
        state.built = true;
        Result result = build(*next->plan, state.required);
        const std::shared_ptr<const db::PlanNode> subplan(std::move(result.plan));
        for (const SharedReader &reader : state.readers) {
            std::vector<std::uint32_t> columns;
            for (const ColumnId id : reader.subplan_ids) {
                columns.push_back(position(result.layout, id));
            }
            db::PlanPtr scan = db::plan::shared_scan(subplan, std::move(columns));
            for (std::size_t i = 0; i < scan->output.size(); ++i) {
                scan->output[i].name = reader.node->output[i].name;
            }
            scan->estimated_rows = reader.node->estimated_rows;
            *reader.node = std::move(*scan);
        }
    }
}

Planner::Result Planner::build_left_join(const LogicalNode &node, const std::set<ColumnId> &required,
                                         const std::set<ColumnId> &left_needed,
                                         const std::set<ColumnId> &right_needed) {
    MX_ASSERT(node.join_kind == db::JoinKind::semi || node.join_kind == db::JoinKind::anti ||
                  node.join_kind == db::JoinKind::left_outer,
              "only semi, anti and left outer joins hash their left side");
    const bool outer = node.join_kind == db::JoinKind::left_outer;
    // The left rows are stored in the hash table: only the columns someone reads go in.
    Result left = build(*node.children[0], left_needed);
    Result right = build(*node.children[1], right_needed, !outer);
    std::vector<db::ExprPtr> probe_keys;
    std::vector<db::ExprPtr> build_keys;
    for (const auto &key : node.right_keys) {
        probe_keys.push_back(remap(key, right.layout));
    }
    for (const auto &key : node.left_keys) {
        build_keys.push_back(remap(key, left.layout));
    }
    std::vector<ColumnId> combined = right.layout;
    combined.insert(combined.end(), left.layout.begin(), left.layout.end());
    db::ExprPtr residual = conjunction(node.conjuncts);
    if (residual != nullptr) {
        residual = remap(residual, combined);
    }
    db::JoinKind kind = db::JoinKind::right_outer;
    if (!outer) {
        kind = node.join_kind == db::JoinKind::semi ? db::JoinKind::right_semi : db::JoinKind::right_anti;
    }
    Result result;
    result.plan = db::plan::hash_join(std::move(right.plan), std::move(left.plan), kind,
                                      std::move(probe_keys), std::move(build_keys), std::move(residual));
    result.plan->estimated_rows = node.rows;
    result.plan->bloom_filter = node.bloom_filter;
    result.layout = outer ? std::move(combined) : left.layout;
    return pruned(std::move(result), required, node.rows);
}

Planner::Result Planner::build(const LogicalNode &node, const std::set<ColumnId> &required, bool prune) {
    Result result;
    switch (node.kind) {
    case LogicalKind::get: {
        std::set<ColumnId> needed = required;
        for (const auto &conjunct : node.conjuncts) {
            add_columns(conjunct, needed);
        }
        std::vector<std::uint32_t> scan_columns;
        for (std::size_t i = 0; i < node.table_columns.size(); ++i) {
            if (needed.count(node.table_columns[i]) > 0) {
                scan_columns.push_back(static_cast<std::uint32_t>(i));
                result.layout.push_back(node.table_columns[i]);
            }
        }
        if (scan_columns.empty()) {
            // count(*) and the like read no column, but a scan produces at least one.
            scan_columns.push_back(0);
            result.layout.push_back(node.table_columns[0]);
        }
        db::ExprPtr predicate = conjunction(node.conjuncts);
        if (predicate != nullptr) {
            predicate = remap(predicate, result.layout);
        }
        std::vector<db::ScanPrefetch> prefetch;
        prefetch.reserve(result.layout.size());
        for (const ColumnId id : result.layout) {
            prefetch.push_back(std::binary_search(node.prefetch_whole.begin(), node.prefetch_whole.end(), id)
                                   ? db::ScanPrefetch::whole_column
                                   : db::ScanPrefetch::first_lines);
        }
        result.plan = db::plan::scan(node.table, std::move(scan_columns), std::move(predicate));
        result.plan->scan_prefetch = std::move(prefetch);
        result.plan->estimated_rows = node.rows;
        return pruned(std::move(result), required, node.rows, prune);
    }
    case LogicalKind::filter: {
        std::set<ColumnId> needed = required;
        for (const auto &conjunct : node.conjuncts) {
            add_columns(conjunct, needed);
        }
        Result child = build(*node.children[0], needed);
        result.layout = child.layout;
        result.plan =
            db::plan::filter(std::move(child.plan), remap(conjunction(node.conjuncts), result.layout));
        result.plan->estimated_rows = node.rows;
        return pruned(std::move(result), required, node.rows, prune);
    }
    case LogicalKind::project: {
        std::set<ColumnId> needed;
        std::vector<std::size_t> kept;
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            if (required.count(node.output[i]) > 0 &&
                std::find_if(kept.begin(), kept.end(),
                             [&](std::size_t k) { return node.output[k] == node.output[i]; }) == kept.end()) {
                kept.push_back(i);
                add_columns(node.expressions[i], needed);
            }
        }
        if (kept.empty() && !node.output.empty()) {
            kept.push_back(0);
            add_columns(node.expressions[0], needed);
        }
        Result child = build(*node.children[0], needed);
        // A projection that only reorders or renames nothing is left out.
        bool identity = kept.size() == child.layout.size();
        for (std::size_t k = 0; k < kept.size() && identity; ++k) {
            const auto &expression = node.expressions[kept[k]];
            identity = expression->kind() == db::ExprKind::column &&
                       expression->column_index() == child.layout[k] &&
                       child.plan->output[k].name == _columns[node.output[kept[k]]].name;
        }
        std::vector<db::ExprPtr> expressions;
        std::vector<std::string> names;
        for (std::size_t k : kept) {
            expressions.push_back(remap(node.expressions[k], child.layout));
            names.push_back(_columns[node.output[k]].name);
            result.layout.push_back(node.output[k]);
        }
        if (identity) {
            child.layout = result.layout;
            return child;
        }
        result.plan = project_on(std::move(child.plan), std::move(expressions), std::move(names), node.rows);
        return result;
    }
    case LogicalKind::join: {
        const std::set<ColumnId> left_ids(node.children[0]->output.begin(), node.children[0]->output.end());
        const std::set<ColumnId> right_ids(node.children[1]->output.begin(), node.children[1]->output.end());
        std::set<ColumnId> left_needed;
        std::set<ColumnId> right_needed;
        const bool keeps_right = node.join_kind == db::JoinKind::inner ||
                                 node.join_kind == db::JoinKind::left_outer ||
                                 node.join_kind == db::JoinKind::full_outer;
        for (ColumnId id : required) {
            if (left_ids.count(id) > 0) {
                left_needed.insert(id);
            } else if (keeps_right && right_ids.count(id) > 0) {
                right_needed.insert(id);
            }
        }
        for (const auto &key : node.left_keys) {
            add_columns(key, left_needed);
        }
        for (const auto &key : node.right_keys) {
            add_columns(key, right_needed);
        }
        for (const auto &conjunct : node.conjuncts) {
            for (ColumnId id : columns_of(*conjunct)) {
                (left_ids.count(id) > 0 ? left_needed : right_needed).insert(id);
            }
        }
        if (node.build_left) {
            return build_left_join(node, required, left_needed, right_needed);
        }
        Result left = build(*node.children[0], left_needed, false);
        Result right = build(*node.children[1], right_needed);
        std::vector<db::ExprPtr> probe_keys;
        std::vector<db::ExprPtr> build_keys;
        for (const auto &key : node.left_keys) {
            probe_keys.push_back(remap(key, left.layout));
        }
        for (const auto &key : node.right_keys) {
            build_keys.push_back(remap(key, right.layout));
        }
        if (probe_keys.empty()) {
            // No equality: every probe row meets every build row (cross product, or a semi
            // join decided by the residual alone) through one constant key.
            probe_keys.push_back(db::expr::constant(db::Value::integer(1)));
            build_keys.push_back(db::expr::constant(db::Value::integer(1)));
        }
        std::vector<ColumnId> combined = left.layout;
        combined.insert(combined.end(), right.layout.begin(), right.layout.end());
        db::ExprPtr residual = conjunction(node.conjuncts);
        if (residual != nullptr) {
            residual = remap(residual, combined);
        }
        result.plan = db::plan::hash_join(std::move(left.plan), std::move(right.plan), node.join_kind,
                                          std::move(probe_keys), std::move(build_keys), std::move(residual));
        result.plan->estimated_rows = node.rows;
        result.plan->bloom_filter = node.bloom_filter;
        result.layout = keeps_right ? combined : left.layout;
        if (node.join_kind == db::JoinKind::mark) {
            result.plan->output.back().name = _columns[node.mark].name;
            result.layout.push_back(node.mark);
        }
        return pruned(std::move(result), required, node.rows, prune);
    }
    case LogicalKind::aggregate: {
        std::set<ColumnId> needed;
        for (const auto &group : node.groups) {
            add_columns(group, needed);
        }
        for (const auto &aggregate : node.aggregates) {
            add_columns(aggregate.argument, needed);
        }
        Result child = build(*node.children[0], needed);
        std::vector<db::ExprPtr> groups;
        std::vector<std::string> names;
        for (std::size_t i = 0; i < node.groups.size(); ++i) {
            groups.push_back(remap(node.groups[i], child.layout));
            names.push_back(_columns[node.output[i]].name);
        }
        std::vector<db::AggregateSpec> aggregates;
        for (const auto &aggregate : node.aggregates) {
            db::AggregateSpec spec;
            spec.function = aggregate.function;
            spec.argument = aggregate.argument != nullptr ? remap(aggregate.argument, child.layout) : nullptr;
            spec.name = _columns[aggregate.output].name;
            spec.fraction = aggregate.fraction;
            spec.separator = aggregate.separator;
            spec.order = aggregate.order;
            aggregates.push_back(std::move(spec));
        }
        if (node.count_join) {
            if (db::PlanPtr counted = count_join(child.plan, groups, names, aggregates, node.rows)) {
                result.plan = std::move(counted);
                result.layout = node.output;
                return result;
            }
        }
        result.plan = db::plan::aggregate(std::move(child.plan), std::move(groups), std::move(names),
                                          std::move(aggregates));
        result.plan->estimated_rows = node.rows;
        result.layout = node.output;
        return result;
    }
    case LogicalKind::sort: {
        std::set<ColumnId> needed = required;
        for (const auto &key : node.sort_keys) {
            needed.insert(key.column);
        }
        Result child = build(*node.children[0], needed);
        std::vector<db::SortKey> keys = sort_keys_at(child.layout, node.sort_keys);
        result.layout = child.layout;
        result.plan = db::plan::sort(std::move(child.plan), std::move(keys), node.limit, node.offset);
        result.plan->estimated_rows = node.rows;
        return result;
    }
    case LogicalKind::union_all: {
        // Every input delivers the required positions, in output order (a projection per input
        // where its own layout differs).
        std::vector<std::size_t> kept;
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            if (required.count(node.output[i]) > 0) {
                kept.push_back(i);
            }
        }
        if (kept.empty()) {
            kept.push_back(0);
        }
        std::vector<db::PlanPtr> inputs;
        for (const auto &child_node : node.children) {
            std::set<ColumnId> needed;
            for (std::size_t i : kept) {
                needed.insert(child_node->output[i]);
            }
            Result child = build(*child_node, needed);
            std::vector<ColumnId> wanted;
            for (std::size_t i : kept) {
                wanted.push_back(child_node->output[i]);
            }
            if (child.layout != wanted) {
                std::vector<db::ExprPtr> expressions;
                std::vector<std::string> names;
                for (const ColumnId id : wanted) {
                    const std::uint32_t index = position(child.layout, id);
                    const auto &column = child.plan->output[index];
                    expressions.push_back(db::expr::column(index, column.type, column.name));
                    names.push_back(column.name);
                }
                const double rows = child.plan->estimated_rows;
                child.plan =
                    project_on(std::move(child.plan), std::move(expressions), std::move(names), rows);
            }
            inputs.push_back(std::move(child.plan));
        }
        result.plan = db::plan::union_all(std::move(inputs));
        // Names of the first input's columns are its own: the union's are the output's.
        for (std::size_t k = 0; k < kept.size(); ++k) {
            result.plan->output[k].name = _columns[node.output[kept[k]]].name;
            result.layout.push_back(node.output[kept[k]]);
        }
        result.plan->estimated_rows = node.rows;
        return result;
    }
    case LogicalKind::repeat: {
        std::set<ColumnId> needed = required;
        add_columns(node.expressions[0], needed);
        Result child = build(*node.children[0], needed);
        result.layout = child.layout;
        result.plan = db::plan::repeat(std::move(child.plan), remap(node.expressions[0], child.layout));
        result.plan->estimated_rows = node.rows;
        return pruned(std::move(result), required, node.rows, prune);
    }
    case LogicalKind::window: {
        std::set<ColumnId> needed;
        for (const ColumnId id : node.children[0]->output) {
            if (required.count(id) > 0) {
                needed.insert(id);
            }
        }
        needed.insert(node.partition.begin(), node.partition.end());
        for (const auto &key : node.sort_keys) {
            needed.insert(key.column);
        }
        for (const auto &function : node.windows) {
            if (function.argument) {
                needed.insert(*function.argument);
            }
            if (function.default_value) {
                needed.insert(*function.default_value);
            }
        }
        Result child = build(*node.children[0], needed);
        std::vector<std::uint32_t> partition;
        for (const ColumnId id : node.partition) {
            partition.push_back(position(child.layout, id));
        }
        std::vector<db::SortKey> keys = sort_keys_at(child.layout, node.sort_keys);
        std::vector<db::WindowSpec> functions;
        result.layout = child.layout;
        for (const auto &function : node.windows) {
            db::WindowSpec spec;
            spec.function = function.function;
            if (function.argument) {
                spec.argument = position(child.layout, *function.argument);
            }
            if (function.default_value) {
                spec.default_value = position(child.layout, *function.default_value);
            }
            spec.offset = function.offset;
            spec.rows = function.rows;
            spec.start = function.start;
            spec.end = function.end;
            spec.name = _columns[function.output].name;
            functions.push_back(std::move(spec));
            result.layout.push_back(function.output);
        }
        result.plan = db::plan::window(std::move(child.plan), std::move(partition), std::move(keys),
                                       std::move(functions));
        result.plan->estimated_rows = node.rows;
        return pruned(std::move(result), required, node.rows, prune);
    }
    case LogicalKind::shared_scan: {
        // The subplan is planned once all its readers are (build_shared): this node is filled in
        // then, with the positions of its columns in the subplan's output.
        const LogicalNode &subplan = *node.shared->plan;
        SharedState &state = _shared[node.shared.get()];
        std::vector<std::size_t> picked;
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            if (required.count(node.output[i]) > 0 && std::find(result.layout.begin(), result.layout.end(),
                                                                node.output[i]) == result.layout.end()) {
                picked.push_back(i);
                result.layout.push_back(node.output[i]);
            }
        }
        if (picked.empty()) {
            // Batches need a width to carry their row count.
            picked.push_back(0);
            result.layout.push_back(node.output[0]);
        }
        auto scan = std::make_unique<db::PlanNode>();
        scan->kind = db::PlanKind::shared_scan;
        scan->estimated_rows = node.rows;
        SharedReader reader{scan.get(), {}};
        for (const std::size_t i : picked) {
            const ColumnInfo &column = _columns[node.output[i]];
            scan->output.push_back(db::OutputColumn{column.name, column.type, column.nullable});
            reader.subplan_ids.push_back(subplan.output[i]);
            state.required.insert(subplan.output[i]);
        }
        state.readers.push_back(std::move(reader));
        result.plan = std::move(scan);
        return result;
    }
    case LogicalKind::dependent_join:
        throw std::logic_error(
            "planner: a dependent join remains (the optimizer pass decorrelate unnests them)");
    case LogicalKind::limit: {
        Result child = build(*node.children[0], required);
        result.layout = child.layout;
        result.plan = db::plan::limit(std::move(child.plan), node.limit.value_or(UINT64_MAX), node.offset);
        result.plan->estimated_rows = node.rows;
        return result;
    }
    }
    throw std::logic_error("planner: unknown logical node");
}

} // namespace

PhysicalPlan plan_physical(const LogicalNode &root, const std::vector<std::string> &names,
                           const ColumnRegistry &columns) {
    Planner planner(columns);
    planner.count_readers(root);
    const std::set<ColumnId> required(root.output.begin(), root.output.end());
    Planner::Result result = planner.build(root, required);
    planner.build_shared();
    // The query's columns in select-list order under their select-list names.
    bool exact = result.layout == root.output;
    for (std::size_t i = 0; exact && i < names.size(); ++i) {
        exact = result.plan->output[i].name == names[i];
    }
    if (!exact) {
        std::vector<db::ExprPtr> expressions;
        std::vector<std::string> output_names;
        for (std::size_t i = 0; i < root.output.size(); ++i) {
            const auto it = std::find(result.layout.begin(), result.layout.end(), root.output[i]);
            const auto index = static_cast<std::uint32_t>(it - result.layout.begin());
            const auto &column = result.plan->output[index];
            expressions.push_back(db::expr::column(index, column.type, column.name));
            output_names.push_back(i < names.size() ? names[i] : column.name);
        }
        const double rows = result.plan->estimated_rows;
        result.plan = Planner::project_on(std::move(result.plan), std::move(expressions),
                                          std::move(output_names), rows);
    }
    PhysicalPlan plan;
    plan.root = std::move(result.plan);
    return plan;
}

} // namespace mx::sql::detail
