#include "binder.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace mx::sql::detail {

void Binder::fail(const std::string &message, std::int64_t location) const {
    throw _source.error(message, location >= 0 ? location : _statement_location);
}

BoundQuery Binder::bind_select(const ast::SelectStmt &select, Scope *outer, Correlation correlation,
                               bool exists) {
    BoundQuery bound = bind_block(select, outer, correlation, exists);
    if (correlation == Correlation::semi_join && bound.correlation.empty() && outer != nullptr) {
        // A subquery nested in this one reads the enclosing query (a reference two or more levels
        // up, or a comparison with its column inside this block): no join above this block can
        // give it the value, so the block is the right side of a dependent join.
        std::set<ColumnId> enclosing;
        for (const Scope *scope = outer; scope != nullptr; scope = scope->parent) {
            for (const RangeEntry &entry : scope->entries) {
                enclosing.insert(entry.ids.begin(), entry.ids.end());
                enclosing.insert(entry.merged.begin(), entry.merged.end());
            }
        }
        if (plan_reads_any(*bound.plan, enclosing)) {
            return bind_block(select, outer, Correlation::dependent, false);
        }
    }
    return bound;
}

BoundQuery Binder::bind_block(const ast::SelectStmt &select, Scope *outer, Correlation correlation,
                              bool exists) {
    struct DepthGuard {
        int &depth;
        ~DepthGuard() { --depth; }
    } guard{++_query_depth};
    if (_query_depth > max_query_depth || select.too_deep) {
        fail("subqueries nested too deeply (more than 64 levels)", -1);
    }
    if (!select.unsupported_clause.empty()) {
        fail(select.unsupported_clause + " are not supported", -1);
    }
    // ORDER BY, LIMIT and WITH of a set operation or VALUES list come as a SELECT * around it.
    if (select.kind == ast::SelectStmt::Kind::set_operation) {
        return bind_set_operation(select, outer);
    }
    if (select.kind == ast::SelectStmt::Kind::values) {
        return bind_values(select);
    }
    Block block;
    block.scope.parent = outer;

    // WITH: CTEs are inlined at every reference (bound anew, like a view); the optimizer pass
    // shared_subplans computes one that is referenced more than once only once.
    if (select.with != nullptr) {
        if (select.with->recursive) {
            fail("WITH RECURSIVE is not supported", select.with->location);
        }
        for (const ast::CommonTableExpr &definition : select.with->ctes) {
            CteDefinition entry;
            entry.query = definition.query.get();
            entry.column_aliases = definition.columns;
            entry.name = definition.name;
            entry.id = ++_cte_count;
            const std::string name = lower(definition.name);
            if (!block.scope.ctes.emplace(name, entry).second) {
                fail("WITH query name \"" + name + "\" specified more than once", definition.location);
            }
        }
    }

    // FROM: comma-separated items are cross products (the optimizer turns them into joins).
    LogicalPtr tree;
    for (const ast::FromPtr &item : select.from) {
        LogicalPtr relation = bind_from(*item, block);
        tree = tree == nullptr ? std::move(relation)
                               : make_join(db::JoinKind::inner, std::move(tree), std::move(relation), {});
    }
    const bool has_from = tree != nullptr;
    if (tree == nullptr) {
        tree = one_row_relation();
    }

    // WHERE: subquery conjuncts become semi/anti joins, scalar subqueries joined relations.
    if (select.where != nullptr) {
        for (const ast::Expr *conjunct : split_and(*select.where, 0)) {
            bind_where_conjunct(*conjunct, block);
        }
    }

    BoundQuery result;
    // Subqueries in the select list, GROUP BY, HAVING and ORDER BY bound below may reference the
    // enclosing query too (two or more levels up): settled again once they are.
    const auto settle_correlation = [&] {
        if (!block.scope.outer_references.empty() && correlation == Correlation::none) {
            fail("correlated subqueries are not supported here", -1);
        }
        if (correlation == Correlation::dependent) {
            result.correlation.assign(block.scope.outer_references.begin(),
                                      block.scope.outer_references.end());
            std::sort(result.correlation.begin(), result.correlation.end());
        }
    };
    // Correlation: EXISTS and IN take the conjuncts over the enclosing block's columns out of
    // the block (their join applies them); a scalar subquery keeps them in its WHERE and becomes
    // the right side of a dependent join, which the optimizer pass decorrelate unnests.
    {
        settle_correlation();
        const std::set<ColumnId> outer_ids(block.scope.outer_references.begin(),
                                           block.scope.outer_references.end());
        if (correlation == Correlation::semi_join) {
            std::vector<db::ExprPtr> local;
            for (auto &conjunct : block.where_conjuncts) {
                const auto ids = columns_of(*conjunct);
                const bool reads_outer =
                    std::any_of(ids.begin(), ids.end(), [&](ColumnId id) { return outer_ids.count(id) > 0; });
                (reads_outer ? result.correlated : local).push_back(std::move(conjunct));
            }
            block.where_conjuncts = std::move(local);
        }
    }

    const std::vector<ast::ResTarget> &targets = select.targets;
    const std::vector<ast::SortBy> &sort_clause = select.order_by;
    const ast::Expr *having = select.having.get();
    const std::vector<ast::ExprPtr> &group_clause = select.group_by;
    bool aggregate = !group_clause.empty() || having != nullptr;
    for (const ast::ResTarget &target : targets) {
        aggregate = aggregate || contains_aggregate(*target.value, 0);
    }
    for (const ast::SortBy &sort : sort_clause) {
        aggregate = aggregate || contains_aggregate(*sort.value, 0);
    }
    block.aggregate = aggregate;
    bool limited = select.limit != nullptr || select.offset != nullptr;
    if (exists && select.limit != nullptr && select.offset == nullptr) {
        // EXISTS asks for one row: LIMIT n with n >= 1 (or NULL, no limit) does not change it.
        Context context;
        context.clause = "LIMIT";
        const db::ExprPtr count = bind_value(*select.limit, context);
        const bool integer =
            count->type().id == db::TypeId::integer || count->type().id == db::TypeId::bigint;
        const bool some_rows = count->kind() == db::ExprKind::constant &&
                               (count->value().null || (integer && count->value().i64 >= 1));
        limited = !some_rows;
    }
    const bool correlated = !block.scope.outer_references.empty();
    if (correlation == Correlation::semi_join && correlated && (aggregate || limited)) {
        // The aggregation or LIMIT must see the rows of one outer row only, which a join on the
        // correlation above the block cannot ensure: the whole block is the right side of a
        // dependent join (the optimizer pass decorrelate unnests it).
        return bind_select(select, outer, Correlation::dependent, false);
    }

    if (exists) {
        // EXISTS looks at rows only: the select list, ORDER BY and DISTINCT do not matter.
        tree = join_and_filter(std::move(tree), block);
        if (!correlated && (aggregate || !sort_clause.empty() || limited || select.distinct)) {
            // Evaluate the whole block and test it for rows (rare; bound as a normal query).
            return bind_select(select, outer, Correlation::none, false);
        }
        result.plan = std::move(tree);
        for (ColumnId id : result.plan->output) {
            result.names.push_back(_columns[id].name);
        }
        return result;
    }

    // GROUP BY keys: expressions over the FROM columns, or select-list aliases and ordinals.
    AggregateState state;
    auto target_value = [&](std::size_t index) -> const ast::Expr & { return *targets[index].value; };
    auto target_name = [&](std::size_t index) {
        const std::string &alias = targets[index].name;
        return alias.empty() ? column_name(target_value(index)) : alias;
    };
    if (aggregate) {
        for (const ast::ExprPtr &group_key : group_clause) {
            const ast::Expr *group = group_key.get();
            if (group->is<ast::GroupingSet>()) {
                fail("GROUPING SETS, ROLLUP and CUBE are not supported", group->location);
            }
            const ast::Expr *expression = group;
            // An ordinal or an output column name that is no input column.
            const auto *constant = group->as<ast::Constant>();
            const auto *reference = group->as<ast::ColumnRef>();
            if (constant != nullptr && constant->kind == ast::Constant::Kind::integer) {
                const std::int64_t ordinal = constant->integer;
                if (ordinal < 1 || static_cast<std::size_t>(ordinal) > targets.size()) {
                    fail("GROUP BY position " + std::to_string(ordinal) + " is not in select list",
                         group->location);
                }
                expression = &target_value(static_cast<std::size_t>(ordinal - 1));
            } else if (reference != nullptr) {
                if (reference->names.size() == 1 && !reference->star && !reference->inner_star) {
                    const std::string &name = reference->names[0];
                    bool input = false;
                    for (const auto &entry : block.scope.entries) {
                        for (const auto &column : entry.names) {
                            input = input || equal_names(column, name);
                        }
                    }
                    if (!input) {
                        for (std::size_t i = 0; i < targets.size(); ++i) {
                            if (equal_names(targets[i].name, name)) {
                                expression = &target_value(i);
                                break;
                            }
                        }
                    }
                }
            }
            Context context;
            context.scope = &block.scope;
            context.block = &block;
            context.clause = "GROUP BY";
            db::ExprPtr key = bind_value(*expression, context);
            bool duplicate = false;
            for (const auto &existing : state.groups) {
                duplicate = duplicate || same_expression(*existing, *key);
            }
            if (duplicate) {
                continue;
            }
            std::string name = column_name(*expression);
            state.groups.push_back(key);
            state.group_ids.push_back(
                _columns.add(name, key->type(),
                             key->kind() != db::ExprKind::column || _columns[key->column_index()].nullable));
        }
    }

    // Select list (with * expanded), then ORDER BY keys that are not in it.
    std::vector<BoundWindow> windows;
    std::vector<db::ExprPtr> expressions;
    std::vector<std::string> names;
    {
        Context context;
        context.scope = &block.scope;
        context.block = &block;
        context.clause = "SELECT";
        context.aggregates = aggregate ? &state : nullptr;
        context.windows = &windows;
        context.after_aggregate = aggregate;
        for (std::size_t i = 0; i < targets.size(); ++i) {
            const ast::Expr &value = target_value(i);
            if (const auto *reference = value.as<ast::ColumnRef>()) {
                if (reference->star) {
                    const std::size_t fields = reference->names.size() + 1;
                    std::string qualifier = fields == 2 ? reference->names[0] : std::string();
                    if (fields > 2) {
                        fail("schemas are not supported", value.location);
                    }
                    bool found = false;
                    for (const auto &entry : block.scope.entries) {
                        if (!qualifier.empty() && !equal_names(entry.alias, qualifier)) {
                            continue;
                        }
                        found = true;
                        for (std::size_t c = 0; c < entry.ids.size(); ++c) {
                            if (qualifier.empty() && entry.is_hidden(c)) {
                                continue;
                            }
                            db::ExprPtr column =
                                _columns.ref(qualifier.empty() ? entry.unqualified_id(c) : entry.ids[c]);
                            if (aggregate) {
                                auto grouped = match_group(column, state);
                                if (!grouped) {
                                    fail("column \"" + entry.names[c] +
                                             "\" must appear in the GROUP BY clause or be used in an "
                                             "aggregate function",
                                         value.location);
                                }
                                column = *grouped;
                            }
                            expressions.push_back(column);
                            names.push_back(entry.names[c]);
                        }
                    }
                    if (!found && !qualifier.empty()) {
                        fail("missing FROM-clause entry for table \"" + qualifier + "\"", value.location);
                    }
                    if (!found || (!has_from && qualifier.empty())) {
                        fail("SELECT * with no tables specified is not valid", value.location);
                    }
                    continue;
                }
            }
            expressions.push_back(bind_value(value, context));
            names.push_back(target_name(i));
        }
    }
    const std::size_t visible = expressions.size();
    if (visible == 0) {
        fail("a SELECT needs at least one output column", -1);
    }

    // ORDER BY: an ordinal, an output name, or an expression (matched against the select list
    // or computed as a hidden column).
    std::vector<std::pair<std::size_t, const ast::SortBy *>> order; // expression index, key
    const bool distinct = select.distinct;
    if (select.distinct_on) {
        fail("DISTINCT ON is not supported", -1);
    }
    for (const ast::SortBy &sort : sort_clause) {
        const ast::Expr &key = *sort.value;
        if (sort.using_operator) {
            fail("ORDER BY ... USING is not supported", key.location);
        }
        std::optional<std::size_t> index;
        const auto *constant = key.as<ast::Constant>();
        const auto *reference = key.as<ast::ColumnRef>();
        if (constant != nullptr && constant->kind == ast::Constant::Kind::integer) {
            const std::int64_t ordinal = constant->integer;
            if (ordinal < 1 || static_cast<std::size_t>(ordinal) > visible) {
                fail("ORDER BY position " + std::to_string(ordinal) + " is not in select list", key.location);
            }
            index = static_cast<std::size_t>(ordinal - 1);
        } else if (reference != nullptr) {
            if (reference->names.size() == 1 && !reference->star && !reference->inner_star) {
                const std::string &name = reference->names[0];
                for (std::size_t i = 0; i < visible; ++i) {
                    if (equal_names(names[i], name)) {
                        if (index.has_value() && !same_expression(*expressions[*index], *expressions[i])) {
                            fail("ORDER BY \"" + name + "\" is ambiguous", key.location);
                        }
                        index = i;
                    }
                }
            }
        }
        if (!index.has_value()) {
            Context context;
            context.scope = &block.scope;
            context.block = &block;
            context.clause = "ORDER BY";
            context.aggregates = aggregate ? &state : nullptr;
            context.windows = &windows;
            context.after_aggregate = aggregate;
            db::ExprPtr expression = bind_value(key, context);
            for (std::size_t i = 0; i < expressions.size() && !index.has_value(); ++i) {
                if (same_expression(*expressions[i], *expression)) {
                    index = i;
                }
            }
            if (!index.has_value()) {
                if (distinct) {
                    fail("for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                         key.location);
                }
                expressions.push_back(std::move(expression));
                names.push_back("(order key)");
                index = expressions.size() - 1;
            }
        }
        order.emplace_back(*index, &sort);
    }

    // Assemble: FROM x scalar subqueries -> semi joins -> WHERE -> GROUP BY -> HAVING ->
    // SELECT -> DISTINCT -> ORDER BY/LIMIT.
    tree = join_and_filter(std::move(tree), block);
    if (aggregate) {
        std::vector<db::ExprPtr> having_conjuncts;
        if (having != nullptr) {
            Context context;
            context.scope = &block.scope;
            context.block = &block;
            context.clause = "HAVING";
            context.aggregates = &state;
            context.after_aggregate = true;
            db::ExprPtr condition = null_as_boolean(bind_value(*having, context));
            if (condition->type().id != db::TypeId::boolean) {
                fail("argument of HAVING must be type BOOLEAN, not type " + condition->type().to_string(),
                     having->location);
            }
            split_conjuncts(condition, having_conjuncts);
        }
        tree = make_aggregate(std::move(tree), state.groups, state.group_ids, state.aggregates);
        for (auto &leaf : block.post_aggregate_leaves) {
            tree = make_join(db::JoinKind::inner, std::move(tree), std::move(leaf), {});
        }
        tree = apply_joins(std::move(tree), block.post_aggregate_joins);
        if (!having_conjuncts.empty()) {
            tree = make_filter(std::move(tree), std::move(having_conjuncts));
        }
        result.single_row = state.groups.empty() && having == nullptr;
    } else {
        result.single_row = !has_from && select.where == nullptr;
    }

    settle_correlation();
    if (!windows.empty()) {
        if (!result.correlation.empty() || !result.correlated.empty()) {
            // Decorrelation groups or joins on the correlation after the fact; a window over the
            // block would see the rows of every outer value at once.
            fail("window functions in correlated subqueries are not supported", -1);
        }
        tree = plan_windows(std::move(tree), windows);
    }

    std::vector<ColumnId> ids;
    std::vector<db::ExprPtr> projected;
    for (std::size_t i = 0; i < expressions.size(); ++i) {
        const auto &expression = expressions[i];
        bool nullable = true;
        if (expression->kind() == db::ExprKind::column) {
            nullable = _columns[expression->column_index()].nullable;
        } else if (expression->kind() == db::ExprKind::constant) {
            nullable = expression->value().null;
        }
        ids.push_back(_columns.add(names[i], expression->type(), nullable));
        projected.push_back(expression);
    }
    // A correlated IN/ANY subquery: the columns its correlation conjuncts read on this side pass
    // through the projection (behind the visible ones) for the join above. Its rows only count
    // as a set: ORDER BY and DISTINCT do not change the answer and are left out.
    const bool pass_through = correlation == Correlation::semi_join && !result.correlated.empty();
    if (pass_through) {
        projected.resize(visible);
        ids.resize(visible);
        std::set<ColumnId> outer_ids(block.scope.outer_references.begin(),
                                     block.scope.outer_references.end());
        std::set<ColumnId> inner_ids;
        for (const auto &conjunct : result.correlated) {
            for (ColumnId id : columns_of(*conjunct)) {
                if (outer_ids.count(id) == 0) {
                    inner_ids.insert(id);
                }
            }
        }
        for (ColumnId id : inner_ids) {
            projected.push_back(_columns.ref(id));
            ids.push_back(id);
        }
        result.plan = make_project(std::move(tree), std::move(projected), ids);
        result.names.assign(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(visible));
        return result;
    }
    tree = make_project(std::move(tree), std::move(projected), ids);

    if (distinct) {
        std::vector<db::ExprPtr> groups;
        std::vector<ColumnId> group_ids;
        for (std::size_t i = 0; i < visible; ++i) {
            const ColumnId id = ids[i];
            groups.push_back(_columns.ref(id));
            group_ids.push_back(_columns.add(_columns[id].name, _columns[id].type, _columns[id].nullable));
        }
        tree = make_aggregate(std::move(tree), std::move(groups), group_ids, {});
        for (std::size_t i = 0; i < visible; ++i) {
            ids[i] = group_ids[i];
        }
    }

    std::optional<std::uint64_t> limit;
    std::uint64_t offset = 0;
    auto constant_count = [&](const ast::Expr *node, const char *what) -> std::optional<std::uint64_t> {
        if (node == nullptr) {
            return std::nullopt;
        }
        Context context;
        context.clause = what;
        db::ExprPtr value = bind_value(*node, context);
        if (value->kind() != db::ExprKind::constant) {
            fail(std::string(what) + " must be a constant", node->location);
        }
        if (value->value().null) {
            return std::nullopt;
        }
        if (value->type().id != db::TypeId::integer && value->type().id != db::TypeId::bigint) {
            fail(std::string(what) + " must be an integer, not " + value->type().to_string(), node->location);
        }
        if (value->value().i64 < 0) {
            fail(std::string(what) + " must not be negative", node->location);
        }
        return static_cast<std::uint64_t>(value->value().i64);
    };
    if (select.with_ties) {
        fail("FETCH ... WITH TIES is not supported", -1);
    }
    limit = constant_count(select.limit.get(), "LIMIT");
    offset = constant_count(select.offset.get(), "OFFSET").value_or(0);

    if (!order.empty()) {
        std::vector<LogicalSortKey> keys;
        for (const auto &[index, sort] : order) {
            LogicalSortKey key;
            key.column = ids[index];
            key.descending = sort->direction == ast::SortDirection::descending;
            if (sort->nulls == ast::NullsOrder::first) {
                key.nulls_first = true;
            } else if (sort->nulls == ast::NullsOrder::last) {
                key.nulls_first = false;
            }
            keys.push_back(key);
        }
        tree = make_sort(std::move(tree), std::move(keys));
        tree->limit = limit;
        tree->offset = offset;
    } else if (limit.has_value() || offset > 0) {
        tree = make_limit(std::move(tree), limit, offset);
    }

    if (ids.size() > visible) {
        // Drop the hidden ORDER BY columns.
        std::vector<db::ExprPtr> kept;
        std::vector<ColumnId> kept_ids;
        for (std::size_t i = 0; i < visible; ++i) {
            kept.push_back(_columns.ref(ids[i]));
            kept_ids.push_back(
                _columns.add(_columns[ids[i]].name, _columns[ids[i]].type, _columns[ids[i]].nullable));
        }
        tree = make_project(std::move(tree), std::move(kept), kept_ids);
        ids = kept_ids;
    }
    settle_correlation();
    result.plan = std::move(tree);
    for (std::size_t i = 0; i < visible; ++i) {
        result.names.push_back(names[i]);
    }
    return result;
}

} // namespace mx::sql::detail
