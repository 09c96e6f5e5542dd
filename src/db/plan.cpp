// The plan:: builders: output schemas computed from the children, and every expression checked
// against the columns it refers to, so a bad hand-built plan fails here with a message instead of
// reading the wrong vector at run time.

#include <mx/db/plan.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/expression.h>
#include <mx/db/table.h>

namespace mx::db {

namespace {

[[noreturn]] void invalid(const char *builder, const std::string &message) {
    throw std::invalid_argument(std::string("plan::").append(builder).append(": ").append(message));
}

/// Every column reference of `expression` must name a column of `input` with its type.
void check_expression(const char *builder, const char *what, const Expr &expression,
                      const std::vector<OutputColumn> &input) {
    if (expression.kind() == ExprKind::column) {
        const std::uint32_t index = expression.column_index();
        if (index >= input.size()) {
            invalid(builder, std::string(what)
                                 .append(" refers to column #")
                                 .append(std::to_string(index))
                                 .append(", but the input has ")
                                 .append(std::to_string(input.size()))
                                 .append(" columns"));
        }
        if (!(input[index].type == expression.type())) {
            invalid(builder, std::string(what)
                                 .append(" reads column #")
                                 .append(std::to_string(index))
                                 .append(" (")
                                 .append(input[index].name)
                                 .append(") as ")
                                 .append(expression.type().to_string())
                                 .append(", but it is ")
                                 .append(input[index].type.to_string()));
        }
    }
    for (const auto &child : expression.children()) {
        check_expression(builder, what, *child, input);
    }
}

void check_expression(const char *builder, const char *what, const ExprPtr &expression,
                      const std::vector<OutputColumn> &input) {
    if (expression == nullptr) {
        invalid(builder, std::string(what).append(" is missing"));
    }
    check_expression(builder, what, *expression, input);
}

void check_predicate(const char *builder, const ExprPtr &predicate, const std::vector<OutputColumn> &input) {
    check_expression(builder, "predicate", predicate, input);
    if (predicate->type().id != TypeId::boolean) {
        invalid(builder,
                std::string("predicate must be BOOLEAN, not ").append(predicate->type().to_string()));
    }
}

void check_child(const char *builder, const PlanPtr &child) {
    if (child == nullptr) {
        invalid(builder, "input plan is missing");
    }
}

/// Whether the expression can be NULL, as far as the plan knows (a column reference inherits
/// its column's; anything else is assumed nullable).
bool nullable(const Expr &expression, const std::vector<OutputColumn> &input) {
    if (expression.kind() == ExprKind::column) {
        return input[expression.column_index()].nullable;
    }
    if (expression.kind() == ExprKind::constant) {
        return expression.value().null;
    }
    return true;
}

std::string expression_name(const Expr &expression, const std::vector<OutputColumn> &input) {
    if (expression.kind() == ExprKind::column) {
        return input[expression.column_index()].name;
    }
    return to_string(expression);
}

} // namespace

namespace plan {

PlanPtr scan(std::shared_ptr<const Table> table, std::vector<std::uint32_t> columns, ExprPtr predicate) {
    if (table == nullptr) {
        invalid("scan", "table is missing");
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::scan;
    for (const std::uint32_t column : columns) {
        if (column >= table->schema().size()) {
            invalid("scan", std::string("table ")
                                .append(table->name())
                                .append(" has no column #")
                                .append(std::to_string(column)));
        }
        const ColumnDef &def = table->schema()[column];
        node->output.push_back(OutputColumn{def.name, def.type, def.nullable});
    }
    if (predicate != nullptr) {
        check_predicate("scan", predicate, node->output);
    } else {
        node->estimated_rows = static_cast<double>(table->row_count());
    }
    node->table = std::move(table);
    node->scan_columns = std::move(columns);
    node->predicate = std::move(predicate);
    return node;
}

PlanPtr filter(PlanPtr child, ExprPtr predicate) {
    check_child("filter", child);
    check_predicate("filter", predicate, child->output);
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::filter;
    node->output = child->output;
    node->predicate = std::move(predicate);
    node->children.push_back(std::move(child));
    return node;
}

PlanPtr project(PlanPtr child, std::vector<ExprPtr> expressions, std::vector<std::string> names) {
    check_child("project", child);
    if (!names.empty() && names.size() != expressions.size()) {
        invalid("project", std::to_string(expressions.size())
                               .append(" expressions but ")
                               .append(std::to_string(names.size()))
                               .append(" names"));
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::project;
    for (std::size_t i = 0; i < expressions.size(); ++i) {
        check_expression("project", "expression", expressions[i], child->output);
        std::string name = names.empty() ? expression_name(*expressions[i], child->output) : names[i];
        node->output.push_back(
            OutputColumn{std::move(name), expressions[i]->type(), nullable(*expressions[i], child->output)});
    }
    node->estimated_rows = child->estimated_rows;
    node->expressions = std::move(expressions);
    node->children.push_back(std::move(child));
    return node;
}

PlanPtr hash_join(PlanPtr probe, PlanPtr build, JoinKind kind, std::vector<ExprPtr> probe_keys,
                  std::vector<ExprPtr> build_keys, ExprPtr residual) {
    check_child("hash_join", probe);
    check_child("hash_join", build);
    if (probe_keys.empty() || probe_keys.size() != build_keys.size()) {
        invalid("hash_join", std::string("needs as many build keys as probe keys, at least one (got ")
                                 .append(std::to_string(probe_keys.size()))
                                 .append(" and ")
                                 .append(std::to_string(build_keys.size()))
                                 .append(")"));
    }
    for (std::size_t i = 0; i < probe_keys.size(); ++i) {
        check_expression("hash_join", "probe key", probe_keys[i], probe->output);
        check_expression("hash_join", "build key", build_keys[i], build->output);
        try {
            static_cast<void>(expr::common_type(probe_keys[i]->type(), build_keys[i]->type(), "join on"));
        } catch (const TypeError &error) {
            invalid("hash_join", error.what());
        }
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::hash_join;
    node->join_kind = kind;
    node->output = outputs_build_only(kind) ? build->output : probe->output;
    if (kind == JoinKind::full_outer || kind == JoinKind::right_outer) {
        for (OutputColumn &column : node->output) {
            column.nullable = true;
        }
    }
    if (kind == JoinKind::inner || kind == JoinKind::left_outer || kind == JoinKind::full_outer ||
        kind == JoinKind::right_outer) {
        for (OutputColumn column : build->output) {
            column.nullable = column.nullable || kind == JoinKind::left_outer || kind == JoinKind::full_outer;
            node->output.push_back(std::move(column));
        }
    }
    if (kind == JoinKind::mark) {
        node->output.push_back(OutputColumn{"mark", Type::boolean(), false});
    }
    if (residual != nullptr) {
        std::vector<OutputColumn> both = probe->output;
        both.insert(both.end(), build->output.begin(), build->output.end());
        check_expression("hash_join", "residual condition", residual, both);
        if (residual->type().id != TypeId::boolean) {
            invalid("hash_join", "residual condition must be BOOLEAN");
        }
    }
    node->probe_keys = std::move(probe_keys);
    node->build_keys = std::move(build_keys);
    node->residual = std::move(residual);
    node->children.push_back(std::move(probe));
    node->children.push_back(std::move(build));
    return node;
}

PlanPtr count_join(PlanPtr probe, PlanPtr build, std::vector<ExprPtr> probe_keys,
                   std::vector<ExprPtr> build_keys, ExprPtr residual, std::string count_name) {
    std::vector<OutputColumn> output = build != nullptr ? build->output : std::vector<OutputColumn>{};
    PlanPtr node = hash_join(std::move(probe), std::move(build), JoinKind::right_outer, std::move(probe_keys),
                             std::move(build_keys), std::move(residual));
    node->count_matches = true;
    output.push_back(OutputColumn{std::move(count_name), Type::bigint(), false});
    node->output = std::move(output);
    return node;
}

PlanPtr aggregate(PlanPtr child, std::vector<ExprPtr> groups, std::vector<std::string> group_names,
                  std::vector<AggregateSpec> aggregates) {
    check_child("aggregate", child);
    if (!group_names.empty() && group_names.size() != groups.size()) {
        invalid("aggregate", std::to_string(groups.size())
                                 .append(" groups but ")
                                 .append(std::to_string(group_names.size()))
                                 .append(" group names"));
    }
    if (groups.size() > 63) {
        invalid("aggregate", "at most 63 group keys");
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::aggregate;
    for (std::size_t i = 0; i < groups.size(); ++i) {
        check_expression("aggregate", "group key", groups[i], child->output);
        std::string name = group_names.empty() ? expression_name(*groups[i], child->output) : group_names[i];
        node->output.push_back(
            OutputColumn{std::move(name), groups[i]->type(), nullable(*groups[i], child->output)});
    }
    for (AggregateSpec &spec : aggregates) {
        Type argument = Type::bigint();
        if (spec.function == AggregateFunction::count_star) {
            if (spec.argument != nullptr) {
                invalid("aggregate", "count(*) takes no argument");
            }
        } else {
            check_expression("aggregate", "aggregate argument", spec.argument, child->output);
            argument = spec.argument->type();
        }
        Type result;
        try {
            result = plan::aggregate_type(spec.function, argument);
        } catch (const std::invalid_argument &error) {
            invalid("aggregate", error.what());
        }
        if (spec.name.empty()) {
            spec.name =
                spec.function == AggregateFunction::count_star ? std::string("count_star()") : std::string();
            if (spec.name.empty()) {
                spec.name = std::string(spec.function == AggregateFunction::count_distinct ? "count(DISTINCT "
                                        : spec.function == AggregateFunction::sum_distinct ? "sum(DISTINCT "
                                        : spec.function == AggregateFunction::avg_distinct ? "avg(DISTINCT "
                                        : spec.function == AggregateFunction::count        ? "count("
                                        : spec.function == AggregateFunction::sum          ? "sum("
                                        : spec.function == AggregateFunction::avg          ? "avg("
                                        : spec.function == AggregateFunction::min          ? "min("
                                        : spec.function == AggregateFunction::var_samp     ? "var_samp("
                                        : spec.function == AggregateFunction::var_pop      ? "var_pop("
                                        : spec.function == AggregateFunction::stddev_samp  ? "stddev_samp("
                                        : spec.function == AggregateFunction::stddev_pop   ? "stddev_pop("
                                        : spec.function == AggregateFunction::quantile_cont ? "quantile_cont("
                                        : spec.function == AggregateFunction::string_agg    ? "string_agg("
                                                                                            : "max(")
                                .append(expression_name(*spec.argument, child->output))
                                .append(")");
            }
        }
        const bool counts = spec.function == AggregateFunction::count_star ||
                            spec.function == AggregateFunction::count ||
                            spec.function == AggregateFunction::count_distinct;
        node->output.push_back(OutputColumn{spec.name, result, !counts});
    }
    if (groups.empty()) {
        node->estimated_rows = 1;
    }
    node->groups = std::move(groups);
    node->aggregates = std::move(aggregates);
    node->children.push_back(std::move(child));
    return node;
}

PlanPtr sort(PlanPtr child, std::vector<SortKey> keys, std::optional<std::uint64_t> limit,
             std::uint64_t offset) {
    check_child("sort", child);
    for (const SortKey &key : keys) {
        if (key.column >= child->output.size()) {
            invalid("sort", std::string("sort key refers to column #")
                                .append(std::to_string(key.column))
                                .append(", but the input has ")
                                .append(std::to_string(child->output.size()))
                                .append(" columns"));
        }
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::sort;
    node->output = child->output;
    node->estimated_rows = child->estimated_rows;
    if (limit && node->estimated_rows >= 0) {
        node->estimated_rows = std::min(node->estimated_rows, static_cast<double>(*limit));
    }
    node->sort_keys = std::move(keys);
    node->limit = limit;
    node->offset = offset;
    node->children.push_back(std::move(child));
    return node;
}

PlanPtr limit(PlanPtr child, std::uint64_t limit, std::uint64_t offset) {
    check_child("limit", child);
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::limit;
    node->output = child->output;
    node->estimated_rows = child->estimated_rows >= 0
                               ? std::min(child->estimated_rows, static_cast<double>(limit))
                               : static_cast<double>(limit);
    node->limit = limit;
    node->offset = offset;
    node->children.push_back(std::move(child));
    return node;
}

PlanPtr union_all(std::vector<PlanPtr> children) {
    if (children.size() < 2) {
        invalid("union_all", "needs at least two inputs");
    }
    for (const auto &child : children) {
        check_child("union_all", child);
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::union_all;
    node->output = children.front()->output;
    double rows = 0.0;
    for (std::size_t c = 0; c < children.size(); ++c) {
        const auto &output = children[c]->output;
        if (output.size() != node->output.size()) {
            invalid("union_all", std::string("input #")
                                     .append(std::to_string(c))
                                     .append(" has ")
                                     .append(std::to_string(output.size()))
                                     .append(" columns, the first ")
                                     .append(std::to_string(node->output.size())));
        }
        for (std::size_t i = 0; i < output.size(); ++i) {
            if (!(output[i].type == node->output[i].type)) {
                invalid("union_all", std::string("column #")
                                         .append(std::to_string(i))
                                         .append(" of input #")
                                         .append(std::to_string(c))
                                         .append(" is ")
                                         .append(output[i].type.to_string())
                                         .append(", of the first input ")
                                         .append(node->output[i].type.to_string()));
            }
            node->output[i].nullable = node->output[i].nullable || output[i].nullable;
        }
        rows = rows < 0 || children[c]->estimated_rows < 0 ? -1.0 : rows + children[c]->estimated_rows;
    }
    node->estimated_rows = rows;
    node->children = std::move(children);
    return node;
}

PlanPtr repeat(PlanPtr child, ExprPtr count) {
    check_child("repeat", child);
    check_expression("repeat", "count", count, child->output);
    if (count->type().id != TypeId::integer && count->type().id != TypeId::bigint) {
        invalid("repeat",
                std::string("count must be INTEGER or BIGINT, not ").append(count->type().to_string()));
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::repeat;
    node->output = child->output;
    node->estimated_rows = child->estimated_rows;
    node->expressions.push_back(std::move(count));
    node->children.push_back(std::move(child));
    return node;
}

PlanPtr shared_scan(std::shared_ptr<const PlanNode> subplan, std::vector<std::uint32_t> columns) {
    if (subplan == nullptr) {
        invalid("shared_scan", "input plan is missing");
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::shared_scan;
    for (const std::uint32_t column : columns) {
        if (column >= subplan->output.size()) {
            invalid("shared_scan", std::string("the subplan has no column #").append(std::to_string(column)));
        }
        node->output.push_back(subplan->output[column]);
    }
    node->estimated_rows = subplan->estimated_rows;
    node->scan_columns = std::move(columns);
    node->shared = std::move(subplan);
    return node;
}

Type window_type(WindowFunction function, const Type &argument) {
    switch (function) {
    case WindowFunction::row_number:
    case WindowFunction::rank:
    case WindowFunction::dense_rank:
    case WindowFunction::ntile:
    case WindowFunction::count_star:
    case WindowFunction::count:
        return Type::bigint();
    case WindowFunction::lag:
    case WindowFunction::lead:
    case WindowFunction::first_value:
    case WindowFunction::last_value:
        return argument;
    case WindowFunction::sum:
        return aggregate_type(AggregateFunction::sum, argument);
    case WindowFunction::avg:
        return aggregate_type(AggregateFunction::avg, argument);
    case WindowFunction::min:
    case WindowFunction::max:
        return argument;
    }
    throw std::invalid_argument("unknown window function");
}

PlanPtr window(PlanPtr child, std::vector<std::uint32_t> partition, std::vector<SortKey> order,
               std::vector<WindowSpec> functions) {
    check_child("window", child);
    const std::size_t columns = child->output.size();
    auto check_column = [&](std::uint32_t column, const char *what) {
        if (column >= columns) {
            invalid("window", std::string(what)
                                  .append(" column ")
                                  .append(std::to_string(column))
                                  .append(" is out of range"));
        }
    };
    for (const std::uint32_t column : partition) {
        check_column(column, "partition");
    }
    for (const SortKey &key : order) {
        check_column(key.column, "order");
    }
    auto node = std::make_unique<PlanNode>();
    node->kind = PlanKind::window;
    node->output = child->output;
    for (const WindowSpec &spec : functions) {
        const bool needs_argument =
            spec.function != WindowFunction::row_number && spec.function != WindowFunction::rank &&
            spec.function != WindowFunction::dense_rank && spec.function != WindowFunction::count_star;
        if (needs_argument != spec.argument.has_value()) {
            invalid("window", std::string(window_function_name(spec.function)) +
                                  (needs_argument ? " needs an argument" : " takes no argument"));
        }
        Type argument = Type::bigint();
        if (spec.argument) {
            check_column(*spec.argument, "argument");
            argument = child->output[*spec.argument].type;
        }
        if (spec.function == WindowFunction::ntile && argument.id != TypeId::integer &&
            argument.id != TypeId::bigint) {
            invalid("window", "ntile needs an INTEGER or BIGINT bucket count");
        }
        if (spec.default_value) {
            check_column(*spec.default_value, "default");
            if (child->output[*spec.default_value].type != argument) {
                invalid("window", "the default of lag/lead must have the argument's type");
            }
        }
        if (!spec.rows &&
            (spec.start.kind == FrameBoundKind::preceding || spec.start.kind == FrameBoundKind::following ||
             spec.end.kind == FrameBoundKind::preceding || spec.end.kind == FrameBoundKind::following)) {
            invalid("window", "RANGE frames with offsets are not supported");
        }
        Type type;
        try {
            type = window_type(spec.function, argument);
        } catch (const std::invalid_argument &error) {
            invalid("window", error.what());
        }
        const bool never_null =
            spec.function == WindowFunction::row_number || spec.function == WindowFunction::rank ||
            spec.function == WindowFunction::dense_rank || spec.function == WindowFunction::count_star ||
            spec.function == WindowFunction::count;
        node->output.push_back(OutputColumn{spec.name, type, !never_null});
    }
    node->estimated_rows = child->estimated_rows;
    node->partition_columns = std::move(partition);
    node->sort_keys = std::move(order);
    node->windows = std::move(functions);
    node->children.push_back(std::move(child));
    return node;
}

Type aggregate_type(AggregateFunction function, const Type &argument) {
    switch (function) {
    case AggregateFunction::count_star:
    case AggregateFunction::count:
    case AggregateFunction::count_distinct:
        return Type::bigint();
    case AggregateFunction::sum:
    case AggregateFunction::sum_distinct:
        switch (argument.id) {
        case TypeId::decimal:
            return Type::decimal(decimal::max_precision, argument.scale);
        case TypeId::boolean:
        case TypeId::integer:
        case TypeId::bigint:
            return Type::decimal(decimal::max_precision, 0); // DuckDB: HUGEINT
        case TypeId::float64:
            return Type::float64();
        default:
            throw std::invalid_argument(
                std::string("sum() is not defined for ").append(argument.to_string()));
        }
    case AggregateFunction::var_samp:
    case AggregateFunction::var_pop:
    case AggregateFunction::stddev_samp:
    case AggregateFunction::stddev_pop:
        if (argument.id != TypeId::float64) {
            throw std::invalid_argument(
                std::string(aggregate_function_name(function)).append("() needs a DOUBLE argument"));
        }
        return Type::float64();
    case AggregateFunction::quantile_cont:
        // DuckDB: a DECIMAL quantile keeps the argument's type.
        if (argument.id == TypeId::decimal) {
            return argument;
        }
        if (argument.id != TypeId::float64) {
            throw std::invalid_argument("quantile_cont() needs a DOUBLE or DECIMAL argument");
        }
        return Type::float64();
    case AggregateFunction::string_agg:
        if (argument.id != TypeId::varchar) {
            throw std::invalid_argument("string_agg() needs a VARCHAR argument");
        }
        return Type::varchar();
    case AggregateFunction::avg:
    case AggregateFunction::avg_distinct:
        if (!argument.is_numeric()) {
            throw std::invalid_argument(
                std::string("avg() is not defined for ").append(argument.to_string()));
        }
        return Type::float64();
    case AggregateFunction::min:
    case AggregateFunction::max:
        return argument;
    }
    throw std::invalid_argument("unknown aggregate function");
}

} // namespace plan

const char *join_kind_name(JoinKind kind) noexcept {
    switch (kind) {
    case JoinKind::inner:
        return "inner";
    case JoinKind::left_outer:
        return "left outer";
    case JoinKind::semi:
        return "semi";
    case JoinKind::anti:
        return "anti";
    case JoinKind::full_outer:
        return "full outer";
    case JoinKind::mark:
        return "mark";
    case JoinKind::right_semi:
        return "right semi";
    case JoinKind::right_anti:
        return "right anti";
    case JoinKind::right_outer:
        return "right outer";
    }
    return "?";
}

const char *window_function_name(WindowFunction function) noexcept {
    switch (function) {
    case WindowFunction::row_number:
        return "row_number";
    case WindowFunction::rank:
        return "rank";
    case WindowFunction::dense_rank:
        return "dense_rank";
    case WindowFunction::ntile:
        return "ntile";
    case WindowFunction::lag:
        return "lag";
    case WindowFunction::lead:
        return "lead";
    case WindowFunction::first_value:
        return "first_value";
    case WindowFunction::last_value:
        return "last_value";
    case WindowFunction::count_star:
        return "count(*)";
    case WindowFunction::count:
        return "count";
    case WindowFunction::sum:
        return "sum";
    case WindowFunction::avg:
        return "avg";
    case WindowFunction::min:
        return "min";
    case WindowFunction::max:
        return "max";
    }
    return "?";
}

const char *aggregate_function_name(AggregateFunction function) noexcept {
    switch (function) {
    case AggregateFunction::count_star:
        return "count(*)";
    case AggregateFunction::count:
        return "count";
    case AggregateFunction::sum:
        return "sum";
    case AggregateFunction::avg:
        return "avg";
    case AggregateFunction::min:
        return "min";
    case AggregateFunction::max:
        return "max";
    case AggregateFunction::count_distinct:
        return "count_distinct";
    case AggregateFunction::sum_distinct:
        return "sum_distinct";
    case AggregateFunction::avg_distinct:
        return "avg_distinct";
    case AggregateFunction::var_samp:
        return "var_samp";
    case AggregateFunction::var_pop:
        return "var_pop";
    case AggregateFunction::stddev_samp:
        return "stddev_samp";
    case AggregateFunction::stddev_pop:
        return "stddev_pop";
    case AggregateFunction::quantile_cont:
        return "quantile_cont";
    case AggregateFunction::string_agg:
        return "string_agg";
    }
    return "?";
}

} // namespace mx::db
