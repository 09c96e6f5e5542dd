// Subqueries in expressions: EXISTS, IN and ANY/ALL as mark joins or aggregates, scalar
// subqueries as one-row relations or, correlated, dependent joins (the optimizer pass
// decorrelate unnests them).

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <set>

#include "binder.h"

namespace mx::sql::detail {

namespace {

/// NOT (x op y) for non-NULL operands: x ALL (op) S is NOT (x ANY (negated op) S).
db::CompareOp negated(db::CompareOp op) noexcept {
    switch (op) {
    case db::CompareOp::equal:
        return db::CompareOp::not_equal;
    case db::CompareOp::not_equal:
        return db::CompareOp::equal;
    case db::CompareOp::less:
        return db::CompareOp::greater_equal;
    case db::CompareOp::less_equal:
        return db::CompareOp::greater;
    case db::CompareOp::greater:
        return db::CompareOp::less_equal;
    case db::CompareOp::greater_equal:
        return db::CompareOp::less;
    }
    return op;
}

/// CASE WHEN matched THEN TRUE WHEN unknown THEN NULL ELSE FALSE: SQL's answer of a quantified
/// comparison from "some row compares true" and "some row compares NULL" (no unknown: matched).
db::ExprPtr three_valued(db::ExprPtr matched, db::ExprPtr unknown) {
    if (unknown == nullptr) {
        return matched;
    }
    return db::expr::case_when({{std::move(matched), db::expr::constant(db::Value::boolean(true))},
                                {std::move(unknown), db::expr::null(db::Type::boolean())}},
                               db::expr::constant(db::Value::boolean(false)));
}

} // namespace

db::ExprPtr Binder::add_mark(Context &context, LogicalPtr right, std::vector<db::ExprPtr> conjuncts,
                             bool dependent) {
    const ColumnId mark = _columns.add("mark", db::Type::boolean(), false);
    if (dependent) {
        right = make_dependent_join(db::JoinKind::mark, nullptr, std::move(right));
        right->conjuncts = std::move(conjuncts);
        right->mark = mark;
        right->output.push_back(mark);
        conjuncts.clear();
    }
    SemiJoin join{db::JoinKind::mark, std::move(right), std::move(conjuncts), mark};
    (context.after_aggregate ? context.block->post_aggregate_joins : context.block->outer_leaves)
        .push_back(std::move(join));
    return _columns.ref(mark);
}

void Binder::regroup(LogicalNode &plan, Context &context, std::int64_t location) {
    if (!context.after_aggregate) {
        return;
    }
    // WHERE conjuncts (filters) read the enclosing block, and the conditions of the joins that
    // subqueries nested in the subquery became.
    if (plan.kind == LogicalKind::filter || plan.kind == LogicalKind::join ||
        plan.kind == LogicalKind::dependent_join) {
        plan.conjuncts = correlate(std::move(plan.conjuncts), context, location);
    }
    for (auto &child : plan.children) {
        regroup(*child, context, location);
    }
}

std::vector<db::ExprPtr> Binder::correlate(std::vector<db::ExprPtr> conjuncts, Context &context,
                                           std::int64_t location) {
    if (!context.after_aggregate || context.aggregates == nullptr || conjuncts.empty()) {
        return conjuncts;
    }
    std::set<ColumnId> outer;
    for (const RangeEntry &entry : context.scope->entries) {
        outer.insert(entry.ids.begin(), entry.ids.end());
        outer.insert(entry.merged.begin(), entry.merged.end());
    }
    for (auto &conjunct : conjuncts) {
        conjunct = db::expr::remap_columns(conjunct, [&](std::uint32_t id) -> std::uint32_t {
            if (outer.count(id) == 0) {
                return id;
            }
            const auto grouped = match_group(_columns.ref(id), *context.aggregates);
            if (!grouped.has_value()) {
                fail("subquery uses ungrouped column \"" + _columns[id].name +
                         "\" from outer query (it must appear in the GROUP BY clause)",
                     location);
            }
            return static_cast<std::uint32_t>((*grouped)->column_index());
        });
    }
    return conjuncts;
}

Bound Binder::bind_quantified(const ast::Expr &node, bool all, Context &context) {
    const ast::SubLink &sublink = node.get<ast::SubLink>();
    const std::int64_t location = node.location;
    const ast::SelectStmt &subselect = *sublink.query;
    const std::vector<std::string> &operator_names = sublink.operators;
    std::string op = "=";
    if (operator_names.size() > 1) {
        fail("qualified operator names are not supported with ANY/ALL", location);
    }
    if (operator_names.size() == 1) {
        op = operator_names.front();
    }
    static const std::pair<const char *, db::CompareOp> operators[] = {
        {"=", db::CompareOp::equal},         {"<>", db::CompareOp::not_equal},
        {"!=", db::CompareOp::not_equal},    {"<", db::CompareOp::less},
        {"<=", db::CompareOp::less_equal},   {">", db::CompareOp::greater},
        {">=", db::CompareOp::greater_equal}};
    const auto found = std::find_if(std::begin(operators), std::end(operators),
                                    [&](const auto &entry) { return op == entry.first; });
    if (found == std::end(operators)) {
        fail("operator " + op + " is not supported with ANY/ALL subqueries", location);
    }
    // x op ALL (S) = NOT (x (negated op) ANY (S)), in three-valued logic as well.
    const db::CompareOp compare_op = all ? negated(found->second) : found->second;
    std::vector<const ast::Expr *> tests{sublink.test.get()};
    if (const auto *row = sublink.test->as<ast::Row>()) {
        tests.clear();
        for (const auto &argument : row->arguments) {
            tests.push_back(argument.get());
        }
        if (compare_op != db::CompareOp::equal) {
            fail("row comparisons with ANY/ALL subqueries are supported only as IN and NOT IN", location);
        }
    }
    std::vector<Bound> outer;
    bool outer_nullable = false;
    for (const ast::Expr *item : tests) {
        outer.push_back(bind(*item, context));
        if (outer.back().interval.has_value()) {
            fail("an interval cannot be compared", outer.back().location);
        }
        for (ColumnId id : columns_of(*outer.back().expr)) {
            outer_nullable = outer_nullable || _columns[id].nullable;
        }
    }
    if (outer.size() == 1 && single_row_aggregate(subselect)) {
        // An aggregate without GROUP BY has exactly one row v: x op ANY {v} and x op ALL {v}
        // are both x op v (a scalar subquery, correlated or not).
        Bound value = bind_scalar_subquery(node, context);
        Bound result;
        result.location = location;
        result.expr = compare(found->second, outer.front(), value, location);
        return result;
    }
    const auto bind_subquery = [&] {
        BoundQuery bound = bind_select(subselect, context.scope, Correlation::semi_join);
        if (bound.names.size() != outer.size()) {
            fail(bound.names.size() > outer.size() ? "subquery has too many columns"
                                                   : "subquery has too few columns",
                 location);
        }
        if (outer.size() > 1 && (!bound.correlated.empty() || !bound.correlation.empty())) {
            fail("correlated IN subqueries with several columns are not supported", location);
        }
        bound.correlated = correlate(std::move(bound.correlated), context, location);
        if (!bound.correlation.empty()) {
            regroup(*bound.plan, context, location);
        }
        return bound;
    };
    const auto inner_bound = [&](ColumnId id) {
        Bound b;
        b.expr = _columns.ref(id);
        b.location = location;
        return b;
    };
    BoundQuery bound = bind_subquery();
    bool inner_nullable = false;
    for (std::size_t i = 0; i < outer.size(); ++i) {
        inner_nullable = inner_nullable || _columns[bound.plan->output[i]].nullable;
    }
    Bound result;
    result.location = location;

    // A dependent subquery (an aggregation or LIMIT sees the correlation) is the right side of
    // dependent mark joins.
    const bool dependent = !bound.correlation.empty();
    if (compare_op != db::CompareOp::equal && bound.correlated.empty() && !dependent) {
        // An ordering (or <>) comparison with an uncorrelated subquery: one row of min, max,
        // row count and non-NULL count decides it for every outer row.
        const ColumnId value = bound.plan->output.front();
        const db::Type type = _columns[value].type;
        const ColumnId rows = _columns.add("any_rows", db::Type::bigint(), false);
        const ColumnId values = _columns.add("any_values", db::Type::bigint(), false);
        const ColumnId low = _columns.add("any_min", type, true);
        const ColumnId high = _columns.add("any_max", type, true);
        std::vector<LogicalAggregate> aggregates{
            LogicalAggregate{db::AggregateFunction::count_star, nullptr, rows},
            LogicalAggregate{db::AggregateFunction::count, _columns.ref(value), values},
            LogicalAggregate{db::AggregateFunction::min, _columns.ref(value), low},
            LogicalAggregate{db::AggregateFunction::max, _columns.ref(value), high}};
        (context.after_aggregate ? context.block->post_aggregate_leaves : context.block->leaves)
            .push_back(make_aggregate(std::move(bound.plan), {}, {}, std::move(aggregates)));
        db::ExprPtr matched;
        switch (compare_op) {
        case db::CompareOp::less:
        case db::CompareOp::less_equal:
            matched = compare(compare_op, outer.front(), inner_bound(high), location);
            break;
        case db::CompareOp::greater:
        case db::CompareOp::greater_equal:
            matched = compare(compare_op, outer.front(), inner_bound(low), location);
            break;
        default: // <>: some non-NULL value differs from x
            matched = db::expr::logical_or(compare(compare_op, outer.front(), inner_bound(low), location),
                                           compare(compare_op, outer.front(), inner_bound(high), location));
            break;
        }
        const db::ExprPtr zero = db::expr::constant(db::Value::bigint(0));
        db::ExprPtr unknown =
            db::expr::logical_or(db::expr::greater(_columns.ref(rows), _columns.ref(values)),
                                 db::expr::logical_and(db::expr::is_null(outer.front().expr),
                                                       db::expr::greater(_columns.ref(rows), zero)));
        result.expr = three_valued(std::move(matched), std::move(unknown));
        if (all) {
            result.expr = db::expr::logical_not(result.expr);
        }
        return result;
    }

    // Mark joins: "some row compares true" (hash keys when op is =), and where NULLs can occur
    // "some row compares NULL".
    std::vector<db::ExprPtr> conjuncts;
    for (std::size_t i = 0; i < outer.size(); ++i) {
        conjuncts.push_back(compare(compare_op, outer[i], inner_bound(bound.plan->output[i]), location));
    }
    conjuncts.insert(conjuncts.end(), bound.correlated.begin(), bound.correlated.end());
    const bool correlated = !bound.correlated.empty() || dependent;
    db::ExprPtr matched = add_mark(context, std::move(bound.plan), std::move(conjuncts), dependent);
    db::ExprPtr unknown;
    // No row compares true: NULL when the subquery has a NULL (in any column: DuckDB's null-aware
    // mark join, so a row can compare NULL where PostgreSQL finds a column pair that is false),
    // or when x has one and the subquery has rows.
    db::ExprPtr outer_null;
    if (outer_nullable) {
        std::vector<db::ExprPtr> nulls;
        for (const Bound &item : outer) {
            nulls.push_back(db::expr::is_null(item.expr));
        }
        outer_null = nulls.size() == 1 ? nulls.front() : db::expr::logical_or(std::move(nulls));
    }
    std::vector<db::ExprPtr> parts;
    if ((inner_nullable || outer_nullable) && !correlated) {
        // Uncorrelated: one row of counts (rows, rows without NULLs) answers both questions for
        // every outer row.
        BoundQuery copy = bind_subquery();
        db::ExprPtr complete = _columns.ref(copy.plan->output.front());
        if (outer.size() > 1) {
            std::vector<db::ExprPtr> present;
            for (std::size_t i = 0; i < outer.size(); ++i) {
                present.push_back(db::expr::is_null(_columns.ref(copy.plan->output[i]), true));
            }
            complete = db::expr::case_when(
                {{db::expr::logical_and(std::move(present)), db::expr::constant(db::Value::integer(1))}},
                db::expr::null(db::Type::integer()));
        }
        const ColumnId rows = _columns.add("in_rows", db::Type::bigint(), false);
        const ColumnId complete_rows = _columns.add("in_rows_without_nulls", db::Type::bigint(), false);
        std::vector<LogicalAggregate> aggregates{
            LogicalAggregate{db::AggregateFunction::count_star, nullptr, rows},
            LogicalAggregate{db::AggregateFunction::count, std::move(complete), complete_rows}};
        (context.after_aggregate ? context.block->post_aggregate_leaves : context.block->leaves)
            .push_back(make_aggregate(std::move(copy.plan), {}, {}, std::move(aggregates)));
        if (inner_nullable) {
            parts.push_back(db::expr::greater(_columns.ref(rows), _columns.ref(complete_rows)));
        }
        if (outer_nullable) {
            parts.push_back(db::expr::logical_and(
                outer_null, db::expr::greater(_columns.ref(rows), db::expr::constant(db::Value::bigint(0)))));
        }
    } else {
        // Correlated: marks over copies of the subquery, per outer row's correlation values.
        if (inner_nullable) {
            BoundQuery copy = bind_subquery();
            std::vector<db::ExprPtr> null_rows;
            for (std::size_t i = 0; i < outer.size(); ++i) {
                null_rows.push_back(db::expr::is_null(_columns.ref(copy.plan->output[i])));
            }
            std::vector<db::ExprPtr> null_row = copy.correlated;
            null_row.push_back(null_rows.size() == 1 ? null_rows.front()
                                                     : db::expr::logical_or(std::move(null_rows)));
            parts.push_back(add_mark(context, std::move(copy.plan), std::move(null_row), dependent));
        }
        if (outer_nullable) {
            BoundQuery copy = bind_subquery();
            db::ExprPtr any_row =
                add_mark(context, std::move(copy.plan), std::move(copy.correlated), dependent);
            parts.push_back(db::expr::logical_and(outer_null, any_row));
        }
    }
    if (!parts.empty()) {
        unknown = parts.size() == 1 ? parts.front() : db::expr::logical_or(std::move(parts));
    }
    result.expr = three_valued(std::move(matched), std::move(unknown));
    if (all) {
        result.expr = db::expr::logical_not(result.expr);
    }
    return result;
}

Bound Binder::bind_sublink(const ast::Expr &node, Context &context) {
    const ast::SubLink &sublink = node.get<ast::SubLink>();
    const std::int64_t location = node.location;
    if (sublink.kind == ast::SubLinkKind::other) {
        fail(sublink.kind_name == "ARRAY_SUBLINK"
                 ? "ARRAY subqueries are not supported"
                 : "this kind of subquery (" + sublink.kind_name + ") is not supported",
             location);
    }
    if (context.block == nullptr) {
        fail(std::string("subqueries are not allowed in ") + context.clause, location);
    }
    const ast::SelectStmt &subselect = *sublink.query;
    if (sublink.kind == ast::SubLinkKind::exists) {
        BoundQuery bound = bind_select(subselect, context.scope, Correlation::semi_join, true);
        Bound result;
        result.location = location;
        const bool dependent = !bound.correlation.empty();
        if (dependent) {
            regroup(*bound.plan, context, location);
        }
        result.expr = add_mark(context, std::move(bound.plan),
                               correlate(std::move(bound.correlated), context, location), dependent);
        return result;
    }
    if (sublink.kind != ast::SubLinkKind::expression) {
        return bind_quantified(node, sublink.kind == ast::SubLinkKind::all, context);
    }
    return bind_scalar_subquery(node, context);
}

bool Binder::single_row_aggregate(const ast::SelectStmt &select) {
    if (select.kind != ast::SelectStmt::Kind::select || select.targets.size() != 1 ||
        !select.group_by.empty() || select.having != nullptr || select.limit != nullptr ||
        select.offset != nullptr) {
        return false;
    }
    const ast::Expr &value = *select.targets.front().value;
    return contains_aggregate(value, 0) && !contains_window(value, 0);
}

Bound Binder::bind_scalar_subquery(const ast::Expr &node, Context &context) {
    const std::int64_t location = node.location;
    Block &block = *context.block;
    const ast::SelectStmt &subselect = *node.get<ast::SubLink>().query;
    BoundQuery bound = bind_select(subselect, context.scope, Correlation::dependent);
    if (bound.plan->output.size() != 1) {
        fail("subquery must return only one column", location);
    }
    const ColumnId value = bound.plan->output.front();
    Bound result;
    result.location = location;
    result.expr = _columns.ref(value);
    if (bound.correlation.empty()) {
        if (!bound.single_row) {
            fail("scalar subqueries must be aggregates without GROUP BY (TunaDB cannot prove that this one "
                 "returns at most one row)",
                 location);
        }
        (context.after_aggregate ? block.post_aggregate_leaves : block.leaves)
            .push_back(std::move(bound.plan));
        return result;
    }
    if (!contains_aggregate(subselect)) {
        fail("correlated scalar subqueries must compute an aggregate", location);
    }
    // Above the aggregation the enclosing block's rows are groups: the correlation reads their
    // GROUP BY keys.
    regroup(*bound.plan, context, location);
    // An outer row without a subquery row reads NULL or, after decorrelation, the value over no
    // rows (count() 0).
    _columns[value].nullable = true;
    // An operand of a WHERE comparison: a NULL value drops the row anyway.
    const bool drops_null = context.decorrelatable == &node && !context.after_aggregate;
    LogicalPtr join = make_dependent_join(drops_null ? db::JoinKind::inner : db::JoinKind::left_outer,
                                          nullptr, std::move(bound.plan));
    if (drops_null) {
        block.leaves.push_back(std::move(join));
    } else {
        (context.after_aggregate ? block.post_aggregate_joins : block.outer_leaves)
            .push_back(SemiJoin{db::JoinKind::left_outer, std::move(join), {}, 0});
    }
    return result;
}

} // namespace mx::sql::detail
