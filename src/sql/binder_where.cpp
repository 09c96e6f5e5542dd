// WHERE: conjuncts, subquery conjuncts as semi and anti joins, and the joins and filter that
// close a block's FROM.

#include <algorithm>

#include "binder.h"

namespace mx::sql::detail {

namespace {

/// A dependent join that has no left input yet (a subquery's plan may itself be a dependent join
/// with its left input, whose root it is).
bool awaits_left(const LogicalNode &node) noexcept {
    return node.kind == LogicalKind::dependent_join && node.children.size() == 1;
}

} // namespace

std::vector<const ast::Expr *> Binder::split_and(const ast::Expr &node, int depth) {
    if (depth > max_expression_depth) {
        fail("expression nested too deeply (more than 256 levels)", node.location);
    }
    std::vector<const ast::Expr *> out;
    if (const auto *bool_expression = node.as<ast::BoolExpr>();
        bool_expression != nullptr && bool_expression->op == ast::BoolOperator::and_op) {
        for (const auto &argument : bool_expression->arguments) {
            auto inner = split_and(*argument, depth + 1);
            out.insert(out.end(), inner.begin(), inner.end());
        }
        return out;
    }
    out.push_back(&node);
    return out;
}

LogicalPtr Binder::join_and_filter(LogicalPtr tree, Block &block) {
    for (auto &leaf : block.leaves) {
        tree = awaits_left(*leaf) ? attach_dependent(std::move(tree), std::move(leaf))
                                  : make_join(db::JoinKind::inner, std::move(tree), std::move(leaf), {});
    }
    for (auto &semi : block.semi_joins) {
        tree = awaits_left(*semi.right)
                   ? attach_dependent(std::move(tree), std::move(semi.right))
                   : make_join(semi.kind, std::move(tree), std::move(semi.right), std::move(semi.conjuncts));
    }
    tree = apply_joins(std::move(tree), block.outer_leaves);
    if (!block.where_conjuncts.empty()) {
        tree = make_filter(std::move(tree), std::move(block.where_conjuncts));
    }
    return tree;
}

LogicalPtr Binder::apply_joins(LogicalPtr tree, std::vector<SemiJoin> &joins) {
    for (auto &join : joins) {
        if (awaits_left(*join.right)) {
            tree = attach_dependent(std::move(tree), std::move(join.right));
            continue;
        }
        tree =
            join.kind == db::JoinKind::mark
                ? make_mark_join(std::move(tree), std::move(join.right), std::move(join.conjuncts), join.mark)
                : make_join(join.kind, std::move(tree), std::move(join.right), std::move(join.conjuncts));
    }
    joins.clear();
    return tree;
}

bool Binder::bind_subquery_conjunct(const ast::SubLink &sublink, ast::Location location, bool negated,
                                    Block &block) {
    const ast::SelectStmt &subselect = *sublink.query;
    if (sublink.kind == ast::SubLinkKind::exists) {
        BoundQuery bound = bind_select(subselect, &block.scope, Correlation::semi_join, true);
        SemiJoin join;
        join.kind = negated ? db::JoinKind::anti : db::JoinKind::semi;
        if (bound.correlation.empty()) {
            join.right = std::move(bound.plan);
            join.conjuncts = std::move(bound.correlated);
        } else {
            join.right = make_dependent_join(join.kind, nullptr, std::move(bound.plan));
        }
        block.semi_joins.push_back(std::move(join));
        return true;
    }
    // x [NOT] IN (SELECT y ...), (x1, x2) [NOT] IN (SELECT y1, y2 ...); other operators and
    // one-row aggregates (x = v) are bound as values (bind_quantified).
    if (sublink.operators.size() > 1 || single_row_aggregate(subselect)) {
        return false;
    }
    for (const std::string &name : sublink.operators) {
        if (name != "=") {
            return false;
        }
    }
    // Subqueries inside x go to a scratch block until this form is taken (else the general
    // form binds x again).
    Block scratch;
    Context context;
    context.scope = &block.scope;
    context.block = &scratch;
    context.clause = "WHERE";
    std::vector<const ast::Expr *> tests{sublink.test.get()};
    if (const auto *row = sublink.test->as<ast::Row>()) {
        tests.clear();
        for (const auto &argument : row->arguments) {
            tests.push_back(argument.get());
        }
    }
    std::vector<Bound> outer;
    for (const ast::Expr *item : tests) {
        outer.push_back(bind(*item, context));
        if (outer.back().interval.has_value()) {
            fail("an interval cannot be compared", outer.back().location);
        }
    }
    BoundQuery bound = bind_select(subselect, &block.scope, Correlation::semi_join);
    if (bound.names.size() != outer.size()) {
        fail(bound.names.size() > outer.size() ? "subquery has too many columns"
                                               : "subquery has too few columns",
             location);
    }
    bool outer_nullable = false;
    for (const Bound &item : outer) {
        for (ColumnId id : columns_of(*item.expr)) {
            outer_nullable = outer_nullable || _columns[id].nullable;
        }
    }
    bool inner_nullable = false;
    for (std::size_t i = 0; i < outer.size(); ++i) {
        inner_nullable = inner_nullable || _columns[bound.plan->output[i]].nullable;
    }
    const bool nullable = outer_nullable || inner_nullable;
    const bool dependent = !bound.correlation.empty();
    if (negated && nullable && (outer.size() > 1 || !bound.correlated.empty() || dependent)) {
        // The count check below answers NULLs of an uncorrelated single column only; mark
        // joins answer the rest.
        return false;
    }
    for (auto &leaf : scratch.leaves) {
        block.leaves.push_back(std::move(leaf));
    }
    for (auto &join : scratch.outer_leaves) {
        block.outer_leaves.push_back(std::move(join));
    }
    block.where_conjuncts.insert(block.where_conjuncts.end(), scratch.where_conjuncts.begin(),
                                 scratch.where_conjuncts.end());
    SemiJoin join;
    join.kind = negated ? db::JoinKind::anti : db::JoinKind::semi;
    for (std::size_t i = 0; i < outer.size(); ++i) {
        const ColumnId inner = bound.plan->output[i];
        Bound inner_bound;
        inner_bound.expr = _columns.ref(inner);
        inner_bound.location = location;
        join.conjuncts.push_back(compare(db::CompareOp::equal, outer[i], inner_bound, location));
    }
    join.conjuncts.insert(join.conjuncts.end(), bound.correlated.begin(), bound.correlated.end());
    join.right = std::move(bound.plan);
    if (dependent) {
        // The comparisons are the dependent join's condition (decorrelate adds the correlation).
        join.right = make_dependent_join(join.kind, nullptr, std::move(join.right));
        join.right->conjuncts = std::move(join.conjuncts);
        join.conjuncts.clear();
    }
    if (negated && nullable) {
        // NOT IN is NULL (so the row is dropped) when x is NULL and the subquery is not empty,
        // or when the subquery yields a NULL: an anti join alone would keep such rows. A second
        // copy of the subquery counts its rows and non-NULL values for a check after the join.
        const db::ExprPtr outer_expr = outer.front().expr;
        BoundQuery copy = bind_select(subselect, &block.scope, Correlation::none);
        const ColumnId value = copy.plan->output.front();
        const ColumnId rows = _columns.add("not_in_rows", db::Type::bigint(), false);
        const ColumnId values = _columns.add("not_in_values", db::Type::bigint(), false);
        std::vector<LogicalAggregate> aggregates{
            LogicalAggregate{db::AggregateFunction::count_star, nullptr, rows},
            LogicalAggregate{db::AggregateFunction::count, _columns.ref(value), values}};
        block.leaves.push_back(make_aggregate(std::move(copy.plan), {}, {}, std::move(aggregates)));
        block.where_conjuncts.push_back(db::expr::equal(_columns.ref(rows), _columns.ref(values)));
        block.where_conjuncts.push_back(db::expr::logical_or(
            db::expr::is_null(outer_expr, true),
            db::expr::equal(_columns.ref(rows), db::expr::constant(db::Value::bigint(0)))));
    }
    block.semi_joins.push_back(std::move(join));
    return true;
}

void Binder::bind_where_conjunct(const ast::Expr &node, Block &block) {
    const auto is_subquery_conjunct = [](const ast::SubLink *sublink) {
        return sublink != nullptr &&
               (sublink->kind == ast::SubLinkKind::exists || sublink->kind == ast::SubLinkKind::any);
    };
    if (const auto *sublink = node.as<ast::SubLink>();
        is_subquery_conjunct(sublink) && bind_subquery_conjunct(*sublink, node.location, false, block)) {
        return;
    }
    if (const auto *not_expression = node.as<ast::BoolExpr>();
        not_expression != nullptr && not_expression->op == ast::BoolOperator::not_op &&
        not_expression->arguments.size() == 1) {
        const ast::Expr &argument = *not_expression->arguments[0];
        if (const auto *sublink = argument.as<ast::SubLink>();
            is_subquery_conjunct(sublink) &&
            bind_subquery_conjunct(*sublink, argument.location, true, block)) {
            return;
        }
    }
    Context context;
    context.scope = &block.scope;
    context.block = &block;
    context.clause = "WHERE";
    // A correlated scalar subquery that is an operand of a comparison that is a WHERE conjunct
    // is an inner dependent join: a row whose value is NULL is dropped anyway.
    if (const auto *op = node.as<ast::Operator>()) {
        if (op->right != nullptr && op->right->is<ast::SubLink>()) {
            context.decorrelatable = op->right.get();
        } else if (op->left != nullptr && op->left->is<ast::SubLink>()) {
            context.decorrelatable = op->left.get();
        }
    }
    block.scope.outer_allowed = true;
    db::ExprPtr condition = null_as_boolean(bind_value(node, context));
    block.scope.outer_allowed = false;
    if (condition->type().id != db::TypeId::boolean) {
        fail("argument of WHERE must be type BOOLEAN, not type " + condition->type().to_string(),
             node.location);
    }
    std::vector<db::ExprPtr> parts;
    split_conjuncts(condition, parts);
    for (auto &part : parts) {
        if (!is_true(*part)) {
            block.where_conjuncts.push_back(std::move(part));
        }
    }
}

} // namespace mx::sql::detail
