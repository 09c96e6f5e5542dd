#include "binder.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace mx::sql::detail {

namespace {

/// Clauses of SELECT that TunaDB does not implement, with the name users know them by.
void reject_unsupported(const Json &select, Binder &binder) {
    static const std::pair<const char *, const char *> unsupported[] = {
        {"windowClause", "WINDOW clauses"},
        {"lockingClause", "FOR UPDATE/SHARE"},
        {"intoClause", "SELECT INTO"},
        {"groupDistinct", "GROUP BY DISTINCT"},
    };
    for (const auto &[key, what] : unsupported) {
        if (select.contains(key)) {
            std::string message(what);
            message.append(" are not supported");
            binder.fail(message, -1);
        }
    }
}

} // namespace

void Binder::fail(const std::string &message, std::int64_t location) const {
    throw _source.error(message, location >= 0 ? location : _statement_location);
}

std::vector<const Json *> Binder::split_and(const Json &node, int depth) {
    if (depth > max_expression_depth) {
        fail("expression nested too deeply (more than 256 levels)", location_of(node));
    }
    std::vector<const Json *> out;
    if (node_name(node) == "BoolExpr" && string_field(node_body(node), "boolop") == "AND_EXPR") {
        for (const Json *argument : list_field(node_body(node), "args")) {
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
        tree = make_join(db::JoinKind::inner, std::move(tree), std::move(leaf), {});
    }
    for (auto &semi : block.semi_joins) {
        tree = make_join(semi.kind, std::move(tree), std::move(semi.right), std::move(semi.conjuncts));
    }
    tree = apply_joins(std::move(tree), block.outer_leaves);
    if (!block.where_conjuncts.empty()) {
        tree = make_filter(std::move(tree), std::move(block.where_conjuncts));
    }
    return tree;
}

LogicalPtr Binder::apply_joins(LogicalPtr tree, std::vector<SemiJoin> &joins) {
    for (auto &join : joins) {
        tree =
            join.kind == db::JoinKind::mark
                ? make_mark_join(std::move(tree), std::move(join.right), std::move(join.conjuncts), join.mark)
                : make_join(join.kind, std::move(tree), std::move(join.right), std::move(join.conjuncts));
    }
    joins.clear();
    return tree;
}

LogicalPtr Binder::one_row_relation() {
    if (_one_row == nullptr) {
        db::TableBuilder builder("(no table)",
                                 db::Schema({db::ColumnDef{"dummy", db::Type::boolean(), false}}));
        const db::Value value = db::Value::boolean(true);
        const std::string error = builder.append_row(std::span<const db::Value>(&value, 1));
        if (!error.empty()) {
            throw SqlError("internal error: " + error);
        }
        _one_row = builder.finish();
    }
    std::vector<ColumnId> ids{_columns.add("dummy", db::Type::boolean(), false)};
    return make_get(_one_row, std::move(ids), "(no table)");
}

LogicalPtr Binder::bind_table_reference(const Json &range_var, Block &block) {
    const std::string name = string_field(range_var, "relname");
    const std::int64_t location = int_field(range_var, "location", -1);
    const std::string schema = string_field(range_var, "schemaname");
    if (!string_field(range_var, "catalogname").empty() ||
        (!schema.empty() && !equal_names(schema, "main") && !equal_names(schema, "public"))) {
        fail("schemas are not supported: \"" + schema + "\" (tables live in one namespace)", location);
    }
    const Json &alias = field(range_var, "alias");
    // A CTE of this or an enclosing block shadows a table of the same name.
    if (schema.empty()) {
        for (Scope *scope = &block.scope; scope != nullptr; scope = scope->parent) {
            const auto it = scope->ctes.find(lower(name));
            if (it == scope->ctes.end()) {
                continue;
            }
            for (Scope *s = &block.scope; s != nullptr; s = s->parent) {
                if (std::find(s->binding_ctes.begin(), s->binding_ctes.end(), lower(name)) !=
                    s->binding_ctes.end()) {
                    fail("recursive reference to WITH query \"" + name + "\" is not supported", location);
                }
            }
            Json alias_node = alias.is_object() ? alias : Json::object();
            if (!alias_node.contains("aliasname")) {
                alias_node["aliasname"] = name;
            }
            return bind_derived_table(*it->second.query, alias_node, location, block, it->second.query,
                                      &it->second.column_aliases);
        }
    }
    auto table = _catalog.find(name);
    if (table == nullptr) {
        fail("table \"" + name + "\" does not exist", location);
    }
    RangeEntry entry;
    entry.alias = alias.is_object() ? string_field(alias, "aliasname") : table->name();
    const auto column_aliases = list_field(alias, "colnames");
    if (column_aliases.size() > table->schema().size()) {
        fail("table \"" + name + "\" has fewer columns than aliases given", location);
    }
    std::vector<ColumnId> ids;
    for (std::size_t i = 0; i < table->schema().size(); ++i) {
        const auto &definition = table->schema()[i];
        std::string column = i < column_aliases.size() ? string_value(*column_aliases[i]) : definition.name;
        ids.push_back(_columns.add(column, definition.type, definition.nullable));
        entry.names.push_back(std::move(column));
        entry.ids.push_back(ids.back());
    }
    for (const auto &other : block.scope.entries) {
        if (equal_names(other.alias, entry.alias)) {
            fail("table name \"" + entry.alias + "\" specified more than once", location);
        }
    }
    block.scope.entries.push_back(std::move(entry));
    return make_get(std::move(table), std::move(ids), block.scope.entries.back().alias);
}

LogicalPtr Binder::bind_derived_table(const Json &subquery, const Json &alias, std::int64_t location,
                                      Block &block, const Json *cte_query,
                                      const std::vector<std::string> *cte_columns) {
    if (node_name(subquery) != "SelectStmt") {
        fail("only SELECT subqueries are supported in FROM", location);
    }
    // A derived table sees the enclosing blocks' CTEs but none of their columns (no LATERAL).
    Scope isolated;
    isolated.ctes = block.scope.ctes;
    for (Scope *scope = block.scope.parent; scope != nullptr; scope = scope->parent) {
        for (const auto &[name, definition] : scope->ctes) {
            isolated.ctes.emplace(name, definition);
        }
    }
    if (cte_query != nullptr) {
        isolated.binding_ctes.push_back(lower(string_field(alias, "aliasname")));
        for (Scope *scope = &block.scope; scope != nullptr; scope = scope->parent) {
            isolated.binding_ctes.insert(isolated.binding_ctes.end(), scope->binding_ctes.begin(),
                                         scope->binding_ctes.end());
        }
    }
    BoundQuery bound = bind_select(node_body(subquery), &isolated);
    RangeEntry entry;
    entry.alias = alias.is_object() ? string_field(alias, "aliasname") : std::string();
    if (entry.alias.empty()) {
        fail("subquery in FROM must have an alias", location);
    }
    std::vector<std::string> names = bound.names;
    std::vector<std::string> aliases;
    for (const Json *column : list_field(alias, "colnames")) {
        aliases.push_back(string_value(*column));
    }
    if (aliases.empty() && cte_columns != nullptr) {
        aliases = *cte_columns;
    }
    if (aliases.size() > names.size()) {
        fail("\"" + entry.alias + "\" has " + std::to_string(names.size()) + " columns available but " +
                 std::to_string(aliases.size()) + " columns specified",
             location);
    }
    for (std::size_t i = 0; i < aliases.size(); ++i) {
        names[i] = aliases[i];
    }
    // Give the derived table's columns their own ids so that name lookups and EXPLAIN show the
    // alias; a projection of plain column references costs nothing and is pruned away.
    std::vector<db::ExprPtr> expressions;
    std::vector<ColumnId> ids;
    for (std::size_t i = 0; i < bound.plan->output.size(); ++i) {
        const ColumnId inner = bound.plan->output[i];
        expressions.push_back(_columns.ref(inner));
        ids.push_back(_columns.add(names[i], _columns[inner].type, _columns[inner].nullable));
    }
    entry.names = names;
    entry.ids = ids;
    for (const auto &other : block.scope.entries) {
        if (equal_names(other.alias, entry.alias)) {
            fail("table name \"" + entry.alias + "\" specified more than once", location);
        }
    }
    block.scope.entries.push_back(std::move(entry));
    return make_project(std::move(bound.plan), std::move(expressions), std::move(ids));
}

LogicalPtr Binder::bind_from(const Json &item, Block &block) {
    const std::string_view kind = node_name(item);
    const Json &body = node_body(item);
    if (kind == "RangeVar") {
        return bind_table_reference(body, block);
    }
    if (kind == "RangeSubselect") {
        if (bool_field(body, "lateral")) {
            fail("LATERAL subqueries are not supported", location_of(field(body, "subquery")));
        }
        return bind_derived_table(field(body, "subquery"), field(body, "alias"),
                                  location_of(field(body, "subquery")), block);
    }
    if (kind == "JoinExpr") {
        return bind_join(body, block);
    }
    if (kind == "RangeFunction") {
        fail("table functions are not supported", location_of(item));
    }
    fail("unsupported FROM item: " + std::string(kind), location_of(item));
}

std::vector<std::string> Binder::visible_names(const Block &block, std::size_t from, std::size_t to) {
    std::vector<std::string> names;
    for (std::size_t e = from; e < to; ++e) {
        const RangeEntry &entry = block.scope.entries[e];
        for (std::size_t i = 0; i < entry.names.size(); ++i) {
            if (!entry.is_hidden(i)) {
                names.push_back(entry.names[i]);
            }
        }
    }
    return names;
}

std::pair<std::size_t, std::size_t> Binder::join_column(const Block &block, std::size_t from, std::size_t to,
                                                        const std::string &name, const char *side,
                                                        std::int64_t location) {
    std::optional<std::pair<std::size_t, std::size_t>> found;
    for (std::size_t e = from; e < to; ++e) {
        const RangeEntry &entry = block.scope.entries[e];
        for (std::size_t i = 0; i < entry.names.size(); ++i) {
            if (entry.is_hidden(i) || !equal_names(entry.names[i], name)) {
                continue;
            }
            if (found.has_value()) {
                fail("common column name \"" + name + "\" appears more than once in " + side + " table",
                     location);
            }
            found = std::make_pair(e, i);
        }
    }
    if (!found.has_value()) {
        fail("column \"" + name + "\" specified in USING clause does not exist in " + side + " table",
             location);
    }
    return *found;
}

LogicalPtr Binder::bind_join(const Json &body, Block &block) {
    const std::string type = string_field(body, "jointype");
    const std::int64_t location = location_of(field(body, "larg"));
    if (field(body, "alias").is_object() || field(body, "join_using_alias").is_object()) {
        fail("aliases of join expressions are not supported", location);
    }
    const std::size_t left_begin = block.scope.entries.size();
    LogicalPtr left = bind_from(field(body, "larg"), block);
    const std::size_t left_entries = block.scope.entries.size();
    LogicalPtr right = bind_from(field(body, "rarg"), block);
    const std::size_t right_end = block.scope.entries.size();
    db::JoinKind join_kind = db::JoinKind::inner;
    bool swap = false;
    if (type == "JOIN_LEFT") {
        join_kind = db::JoinKind::left_outer;
    } else if (type == "JOIN_RIGHT") {
        join_kind = db::JoinKind::left_outer;
        swap = true;
    } else if (type == "JOIN_FULL") {
        join_kind = db::JoinKind::full_outer;
    } else if (type != "JOIN_INNER") {
        fail("unsupported join type " + type, location);
    }

    // USING (a, b) / NATURAL: the columns to join on, found among the visible columns of each
    // side (a column merged by an earlier USING counts once).
    std::vector<std::string> using_names;
    std::vector<std::int64_t> using_locations;
    if (bool_field(body, "isNatural")) {
        const std::vector<std::string> right_names = visible_names(block, left_entries, right_end);
        for (const std::string &name : visible_names(block, left_begin, left_entries)) {
            const bool shared =
                std::any_of(right_names.begin(), right_names.end(),
                            [&](const std::string &other) { return equal_names(name, other); });
            const bool listed =
                std::any_of(using_names.begin(), using_names.end(),
                            [&](const std::string &other) { return equal_names(name, other); });
            if (shared && !listed) {
                using_names.push_back(name);
                using_locations.push_back(location);
            }
        }
        if (using_names.empty()) {
            // DuckDB refuses what PostgreSQL would run as a cross product.
            fail("NATURAL JOIN found no column names that both sides have", location);
        }
    }
    for (const Json *name : list_field(body, "usingClause")) {
        const std::string text = string_value(*name);
        for (const std::string &other : using_names) {
            if (equal_names(text, other)) {
                fail("column name \"" + text + "\" appears more than once in USING clause", location);
            }
        }
        using_names.push_back(text);
        using_locations.push_back(location);
    }
    struct JoinColumn {
        std::pair<std::size_t, std::size_t> left;
        std::pair<std::size_t, std::size_t> right;
    };
    std::vector<JoinColumn> join_columns;
    std::vector<db::ExprPtr> conjuncts;
    for (std::size_t u = 0; u < using_names.size(); ++u) {
        JoinColumn column{
            join_column(block, left_begin, left_entries, using_names[u], "left", using_locations[u]),
            join_column(block, left_entries, right_end, using_names[u], "right", using_locations[u])};
        const RangeEntry &l = block.scope.entries[column.left.first];
        const RangeEntry &r = block.scope.entries[column.right.first];
        Bound a;
        a.expr = _columns.ref(l.unqualified_id(column.left.second));
        a.location = using_locations[u];
        Bound b;
        b.expr = _columns.ref(r.unqualified_id(column.right.second));
        b.location = using_locations[u];
        conjuncts.push_back(compare(db::CompareOp::equal, a, b, using_locations[u]));
        join_columns.push_back(column);
    }

    // The preserved side's columns stay as they are; the other side's become nullable.
    if (join_kind == db::JoinKind::left_outer || join_kind == db::JoinKind::full_outer) {
        const bool full = join_kind == db::JoinKind::full_outer;
        const std::size_t from = swap || full ? left_begin : left_entries;
        const std::size_t to = swap ? left_entries : right_end;
        for (std::size_t e = from; e < to; ++e) {
            for (ColumnId id : block.scope.entries[e].ids) {
                _columns[id].nullable = true;
            }
        }
    }
    // Unqualified, a join column is the left's (the right's for RIGHT JOIN, COALESCE(left,
    // right) for FULL JOIN, computed by a projection above the join): the left side's entry
    // shows the merged column in its place, the right side's copy is hidden.
    std::vector<db::ExprPtr> coalesced;
    std::vector<ColumnId> coalesced_ids;
    for (const JoinColumn &column : join_columns) {
        RangeEntry &l = block.scope.entries[column.left.first];
        RangeEntry &r = block.scope.entries[column.right.first];
        ColumnId merged = swap ? r.unqualified_id(column.right.second) : l.unqualified_id(column.left.second);
        if (join_kind == db::JoinKind::full_outer) {
            const ColumnId a = l.unqualified_id(column.left.second);
            const ColumnId b = r.unqualified_id(column.right.second);
            db::ExprPtr value;
            try {
                value = db::expr::coalesce({_columns.ref(a), _columns.ref(b)});
            } catch (const db::TypeError &error) {
                fail(error.what(), location);
            }
            merged = _columns.add(_columns[a].name, value->type(), true);
            coalesced.push_back(std::move(value));
            coalesced_ids.push_back(merged);
        }
        if (l.merged.empty()) {
            l.merged = l.ids;
        }
        l.merged[column.left.second] = merged;
        r.hidden.resize(r.ids.size(), false);
        r.hidden[column.right.second] = true;
    }

    const Json &quals = field(body, "quals");
    if (!quals.is_null()) {
        Context context;
        context.scope = &block.scope;
        context.block = nullptr; // no subqueries in ON
        context.clause = "JOIN condition";
        for (const Json *conjunct : split_and(quals, 0)) {
            db::ExprPtr condition = null_as_boolean(bind_value(*conjunct, context));
            if (condition->type().id != db::TypeId::boolean) {
                fail("argument of JOIN/ON must be type BOOLEAN, not type " + condition->type().to_string(),
                     location_of(*conjunct));
            }
            if (!is_true(*condition)) {
                conjuncts.push_back(std::move(condition));
            }
        }
    } else if (join_kind != db::JoinKind::inner && join_columns.empty() && !bool_field(body, "isNatural")) {
        fail("an outer join needs an ON condition", location);
    }
    if (swap) {
        std::swap(left, right);
    }
    LogicalPtr join = make_join(join_kind, std::move(left), std::move(right), std::move(conjuncts));
    if (coalesced.empty()) {
        return join;
    }
    std::vector<db::ExprPtr> expressions;
    std::vector<ColumnId> ids = join->output;
    for (const ColumnId id : ids) {
        expressions.push_back(_columns.ref(id));
    }
    expressions.insert(expressions.end(), coalesced.begin(), coalesced.end());
    ids.insert(ids.end(), coalesced_ids.begin(), coalesced_ids.end());
    return make_project(std::move(join), std::move(expressions), std::move(ids));
}

bool Binder::bind_subquery_conjunct(const Json &sublink, bool negated, Block &block) {
    const std::string type = string_field(sublink, "subLinkType");
    const std::int64_t location = int_field(sublink, "location", -1);
    const Json &subselect = field(sublink, "subselect");
    if (type == "EXISTS_SUBLINK") {
        BoundQuery bound = bind_select(node_body(subselect), &block.scope, Correlation::semi_join, true);
        SemiJoin join;
        join.kind = negated ? db::JoinKind::anti : db::JoinKind::semi;
        join.right = std::move(bound.plan);
        join.conjuncts = std::move(bound.correlated);
        block.semi_joins.push_back(std::move(join));
        return true;
    }
    // x [NOT] IN (SELECT y ...), (x1, x2) [NOT] IN (SELECT y1, y2 ...); other operators and
    // one-row aggregates (x = v) are bound as values (bind_quantified).
    if (list_field(sublink, "operName").size() > 1 || single_row_aggregate(node_body(subselect))) {
        return false;
    }
    for (const Json *name : list_field(sublink, "operName")) {
        if (string_value(*name) != "=") {
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
    const Json &test = field(sublink, "testexpr");
    std::vector<const Json *> tests{&test};
    if (node_name(test) == "RowExpr") {
        tests = list_field(node_body(test), "args");
    }
    std::vector<Bound> outer;
    for (const Json *item : tests) {
        outer.push_back(bind(*item, context));
        if (outer.back().interval.has_value()) {
            fail("an interval cannot be compared", outer.back().location);
        }
    }
    BoundQuery bound = bind_select(node_body(subselect), &block.scope, Correlation::semi_join);
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
    if (negated && nullable && (outer.size() > 1 || !bound.correlated.empty())) {
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
    if (negated && nullable) {
        // NOT IN is NULL (so the row is dropped) when x is NULL and the subquery is not empty,
        // or when the subquery yields a NULL: an anti join alone would keep such rows. A second
        // copy of the subquery counts its rows and non-NULL values for a check after the join.
        const db::ExprPtr outer_expr = outer.front().expr;
        BoundQuery copy = bind_select(node_body(subselect), &block.scope, Correlation::none);
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

void Binder::bind_where_conjunct(const Json &node, Block &block) {
    const std::string_view kind = node_name(node);
    const Json &body = node_body(node);
    if (kind == "SubLink") {
        const std::string type = string_field(body, "subLinkType");
        if ((type == "EXISTS_SUBLINK" || type == "ANY_SUBLINK") &&
            bind_subquery_conjunct(body, false, block)) {
            return;
        }
    }
    if (kind == "BoolExpr" && string_field(body, "boolop") == "NOT_EXPR") {
        const auto arguments = list_field(body, "args");
        if (arguments.size() == 1 && node_name(*arguments[0]) == "SubLink") {
            const Json &sublink = node_body(*arguments[0]);
            const std::string type = string_field(sublink, "subLinkType");
            if ((type == "EXISTS_SUBLINK" || type == "ANY_SUBLINK") &&
                bind_subquery_conjunct(sublink, true, block)) {
                return;
            }
        }
    }
    Context context;
    context.scope = &block.scope;
    context.block = &block;
    context.clause = "WHERE";
    // A correlated scalar subquery can be decorrelated when it is an operand of a comparison
    // that is a WHERE conjunct (a missing group then drops the row, as NULL would).
    if (kind == "A_Expr" && string_field(body, "kind") == "AEXPR_OP") {
        const Json &left = field(body, "lexpr");
        const Json &right = field(body, "rexpr");
        if (node_name(right) == "SubLink") {
            context.decorrelatable = &right;
        } else if (node_name(left) == "SubLink") {
            context.decorrelatable = &left;
        }
    }
    block.scope.outer_allowed = true;
    db::ExprPtr condition = null_as_boolean(bind_value(node, context));
    block.scope.outer_allowed = false;
    if (condition->type().id != db::TypeId::boolean) {
        fail("argument of WHERE must be type BOOLEAN, not type " + condition->type().to_string(),
             location_of(node));
    }
    std::vector<db::ExprPtr> parts;
    split_conjuncts(condition, parts);
    for (auto &part : parts) {
        if (!is_true(*part)) {
            block.where_conjuncts.push_back(std::move(part));
        }
    }
}

BoundQuery Binder::bind_select(const Json &select, Scope *outer, Correlation correlation, bool exists) {
    struct DepthGuard {
        int &depth;
        ~DepthGuard() { --depth; }
    } guard{++_query_depth};
    if (_query_depth > max_query_depth) {
        fail("subqueries nested too deeply (more than 64 levels)", -1);
    }
    reject_unsupported(select, *this);
    const std::string op = string_field(select, "op");
    const bool set_operation = !op.empty() && op != "SETOP_NONE";
    if (set_operation || field(select, "valuesLists").is_array()) {
        if (field(select, "sortClause").is_array() || !field(select, "limitCount").is_null() ||
            !field(select, "limitOffset").is_null() || field(select, "withClause").is_object()) {
            return bind_result_of(select, outer, correlation, exists);
        }
        return set_operation ? bind_set_operation(select, outer) : bind_values(select);
    }
    Block block;
    block.scope.parent = outer;

    // WITH: CTEs are inlined at every reference (bound anew, like a view).
    const Json &with = field(select, "withClause");
    if (with.is_object()) {
        if (bool_field(with, "recursive")) {
            fail("WITH RECURSIVE is not supported", int_field(with, "location", -1));
        }
        for (const Json *cte : list_field(with, "ctes")) {
            const Json &definition = node_body(*cte);
            CteDefinition entry;
            entry.query = &field(definition, "ctequery");
            for (const Json *name : list_field(definition, "aliascolnames")) {
                entry.column_aliases.push_back(string_value(*name));
            }
            const std::string name = lower(string_field(definition, "ctename"));
            if (!block.scope.ctes.emplace(name, entry).second) {
                fail("WITH query name \"" + name + "\" specified more than once",
                     int_field(definition, "location", -1));
            }
        }
    }

    // FROM: comma-separated items are cross products (the optimizer turns them into joins).
    LogicalPtr tree;
    for (const Json *item : list_field(select, "fromClause")) {
        LogicalPtr relation = bind_from(*item, block);
        tree = tree == nullptr ? std::move(relation)
                               : make_join(db::JoinKind::inner, std::move(tree), std::move(relation), {});
    }
    const bool has_from = tree != nullptr;
    if (tree == nullptr) {
        tree = one_row_relation();
    }
    block.scope.relation = tree.get();

    // WHERE: subquery conjuncts become semi/anti joins, scalar subqueries joined relations.
    const Json &where = field(select, "whereClause");
    if (!where.is_null()) {
        for (const Json *conjunct : split_and(where, 0)) {
            bind_where_conjunct(*conjunct, block);
        }
    }

    BoundQuery result;
    // Correlation: conjuncts over the enclosing block's columns leave this block.
    std::vector<db::ExprPtr> inner_keys;
    {
        const std::set<ColumnId> outer_ids(block.scope.outer_references.begin(),
                                           block.scope.outer_references.end());
        if (!outer_ids.empty() && correlation == Correlation::none) {
            fail("correlated subqueries are not supported here", -1);
        }
        std::vector<db::ExprPtr> local;
        std::vector<db::ExprPtr> correlated;
        for (auto &conjunct : block.where_conjuncts) {
            const auto ids = columns_of(*conjunct);
            const bool reads_outer =
                std::any_of(ids.begin(), ids.end(), [&](ColumnId id) { return outer_ids.count(id) > 0; });
            (reads_outer ? correlated : local).push_back(std::move(conjunct));
        }
        if (correlation == Correlation::semi_join) {
            result.correlated = std::move(correlated);
            correlated.clear();
        }
        // group_by_key: inner = outer equalities become the keys directly.
        auto all_outer = [&](const std::vector<ColumnId> &set) {
            return !set.empty() &&
                   std::all_of(set.begin(), set.end(), [&](ColumnId id) { return outer_ids.count(id) > 0; });
        };
        auto none_outer = [&](const std::vector<ColumnId> &set) {
            return std::none_of(set.begin(), set.end(), [&](ColumnId id) { return outer_ids.count(id) > 0; });
        };
        bool equalities = true;
        for (const auto &conjunct : correlated) {
            bool ok =
                conjunct->kind() == db::ExprKind::compare && conjunct->compare_op() == db::CompareOp::equal;
            if (ok) {
                const auto left = columns_of(conjunct->child(0));
                const auto right = columns_of(conjunct->child(1));
                if (all_outer(left) && none_outer(right) && !right.empty()) {
                    result.outer_keys.push_back(conjunct->children()[0]);
                    inner_keys.push_back(conjunct->children()[1]);
                } else if (all_outer(right) && none_outer(left) && !left.empty()) {
                    result.outer_keys.push_back(conjunct->children()[1]);
                    inner_keys.push_back(conjunct->children()[0]);
                } else {
                    ok = false;
                }
            }
            equalities = equalities && ok;
        }
        if (!equalities) {
            // Other conditions: the subquery is computed for every distinct value of the outer
            // columns it reads (a DISTINCT over a copy of the enclosing block's FROM), joined
            // to its rows on the conditions, grouped by those values; the enclosing block then
            // joins it on them (Neumann and Kemper's dependent join).
            if (outer == nullptr || outer->relation == nullptr) {
                fail("correlated subqueries are not supported here", -1);
            }
            result.outer_keys.clear();
            inner_keys.clear();
            std::vector<db::ExprPtr> groups;
            std::vector<ColumnId> group_ids;
            std::map<ColumnId, ColumnId> to_distinct;
            for (const ColumnId id : outer_ids) {
                groups.push_back(_columns.ref(id));
                group_ids.push_back(_columns.add(_columns[id].name, _columns[id].type, true));
                to_distinct[id] = group_ids.back();
                result.outer_keys.push_back(_columns.ref(id));
                inner_keys.push_back(_columns.ref(group_ids.back()));
            }
            // A NULL outer value can have rows (u.c < t.c OR u.b = t.a), so the keys compare
            // NULL-safe, and a constant key tells the enclosing block's outer join which rows met a
            // group.
            const ColumnId present = _columns.add("present", db::Type::boolean(), true);
            groups.push_back(db::expr::constant(db::Value::boolean(true)));
            group_ids.push_back(present);
            result.outer_keys.push_back(db::expr::constant(db::Value::boolean(true)));
            inner_keys.push_back(_columns.ref(present));
            result.null_safe_keys = true;
            block.leaves.push_back(
                make_aggregate(clone_plan(*outer->relation), std::move(groups), group_ids, {}));
            for (const auto &conjunct : correlated) {
                local.push_back(db::expr::remap_columns(conjunct, [&](std::uint32_t id) {
                    const auto it = to_distinct.find(id);
                    return it == to_distinct.end() ? id : it->second;
                }));
            }
        }
        block.where_conjuncts = std::move(local);
    }

    const auto targets = list_field(select, "targetList");
    const auto sort_clause = list_field(select, "sortClause");
    const Json &having = field(select, "havingClause");
    const auto group_clause = list_field(select, "groupClause");
    bool aggregate = !group_clause.empty() || !having.is_null() || !inner_keys.empty();
    for (const Json *target : targets) {
        aggregate = aggregate || contains_aggregate(field(node_body(*target), "val"), 0);
    }
    for (const Json *sort : sort_clause) {
        aggregate = aggregate || contains_aggregate(field(node_body(*sort), "node"), 0);
    }
    block.aggregate = aggregate;
    if (correlation == Correlation::semi_join && !result.correlated.empty() && aggregate) {
        fail("correlated EXISTS/IN subqueries with aggregates are not supported", -1);
    }

    if (exists) {
        // EXISTS looks at rows only: the select list does not matter.
        tree = join_and_filter(std::move(tree), block);
        if (aggregate || !sort_clause.empty() || field(select, "limitCount").is_object() ||
            field(select, "distinctClause").is_array()) {
            if (!result.correlated.empty()) {
                fail("correlated EXISTS subqueries with GROUP BY, ORDER BY, LIMIT or DISTINCT are not "
                     "supported",
                     -1);
            }
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
    auto target_value = [&](std::size_t index) -> const Json & {
        return field(node_body(*targets[index]), "val");
    };
    auto target_name = [&](std::size_t index) {
        const std::string alias = string_field(node_body(*targets[index]), "name");
        return alias.empty() ? column_name(target_value(index)) : alias;
    };
    if (aggregate) {
        for (auto &key : inner_keys) {
            state.groups.push_back(key);
            state.group_ids.push_back(
                _columns.add(_columns[columns_of(*key).front()].name, key->type(), true));
        }
        for (const Json *group : group_clause) {
            const std::string_view kind = node_name(*group);
            if (kind == "GroupingSet") {
                fail("GROUPING SETS, ROLLUP and CUBE are not supported", location_of(*group));
            }
            const Json *expression = group;
            // An ordinal or an output column name that is no input column.
            if (kind == "A_Const" && field(node_body(*group), "ival").is_object()) {
                const std::int64_t ordinal = int_field(field(node_body(*group), "ival"), "ival");
                if (ordinal < 1 || static_cast<std::size_t>(ordinal) > targets.size()) {
                    fail("GROUP BY position " + std::to_string(ordinal) + " is not in select list",
                         location_of(*group));
                }
                expression = &target_value(static_cast<std::size_t>(ordinal - 1));
            } else if (kind == "ColumnRef") {
                const auto fields = list_field(node_body(*group), "fields");
                if (fields.size() == 1 && node_name(*fields[0]) == "String") {
                    const std::string name = string_value(*fields[0]);
                    bool input = false;
                    for (const auto &entry : block.scope.entries) {
                        for (const auto &column : entry.names) {
                            input = input || equal_names(column, name);
                        }
                    }
                    if (!input) {
                        for (std::size_t i = 0; i < targets.size(); ++i) {
                            if (equal_names(string_field(node_body(*targets[i]), "name"), name)) {
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
            std::string name = expression == group ? column_name(*group) : column_name(*expression);
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
            const Json &value = target_value(i);
            if (node_name(value) == "ColumnRef") {
                const auto fields = list_field(node_body(value), "fields");
                if (!fields.empty() && node_name(*fields.back()) == "A_Star") {
                    std::string qualifier = fields.size() == 2 ? string_value(*fields[0]) : std::string();
                    if (fields.size() > 2) {
                        fail("schemas are not supported", location_of(value));
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
                                         location_of(value));
                                }
                                column = *grouped;
                            }
                            expressions.push_back(column);
                            names.push_back(entry.names[c]);
                        }
                    }
                    if (!found && !qualifier.empty()) {
                        fail("missing FROM-clause entry for table \"" + qualifier + "\"", location_of(value));
                    }
                    if (!found || (!has_from && qualifier.empty())) {
                        fail("SELECT * with no tables specified is not valid", location_of(value));
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
    std::vector<std::pair<std::size_t, const Json *>> order; // expression index, SortBy body
    const bool distinct = field(select, "distinctClause").is_array();
    if (distinct && !list_field(select, "distinctClause").empty() &&
        !list_field(select, "distinctClause").front()->empty()) {
        fail("DISTINCT ON is not supported", -1);
    }
    for (const Json *sort : sort_clause) {
        const Json &body = node_body(*sort);
        const Json &key = field(body, "node");
        if (!string_field(body, "useOp").empty() || field(body, "useOp").is_array()) {
            fail("ORDER BY ... USING is not supported", location_of(key));
        }
        std::optional<std::size_t> index;
        if (node_name(key) == "A_Const" && field(node_body(key), "ival").is_object()) {
            const std::int64_t ordinal = int_field(field(node_body(key), "ival"), "ival");
            if (ordinal < 1 || static_cast<std::size_t>(ordinal) > visible) {
                fail("ORDER BY position " + std::to_string(ordinal) + " is not in select list",
                     location_of(key));
            }
            index = static_cast<std::size_t>(ordinal - 1);
        } else if (node_name(key) == "ColumnRef") {
            const auto fields = list_field(node_body(key), "fields");
            if (fields.size() == 1 && node_name(*fields[0]) == "String") {
                const std::string name = string_value(*fields[0]);
                for (std::size_t i = 0; i < visible; ++i) {
                    if (equal_names(names[i], name)) {
                        if (index.has_value() && !same_expression(*expressions[*index], *expressions[i])) {
                            fail("ORDER BY \"" + name + "\" is ambiguous", location_of(key));
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
                         location_of(key));
                }
                expressions.push_back(std::move(expression));
                names.push_back("(order key)");
                index = expressions.size() - 1;
            }
        }
        order.emplace_back(*index, &body);
    }

    // Assemble: FROM x scalar subqueries -> semi joins -> WHERE -> GROUP BY -> HAVING ->
    // SELECT -> DISTINCT -> ORDER BY/LIMIT.
    tree = join_and_filter(std::move(tree), block);
    if (aggregate) {
        std::vector<db::ExprPtr> having_conjuncts;
        if (!having.is_null()) {
            Context context;
            context.scope = &block.scope;
            context.block = &block;
            context.clause = "HAVING";
            context.aggregates = &state;
            context.after_aggregate = true;
            db::ExprPtr condition = null_as_boolean(bind_value(having, context));
            if (condition->type().id != db::TypeId::boolean) {
                fail("argument of HAVING must be type BOOLEAN, not type " + condition->type().to_string(),
                     location_of(having));
            }
            split_conjuncts(condition, having_conjuncts);
        }
        if (!inner_keys.empty() && group_clause.empty()) {
            // A decorrelated scalar subquery: what an outer row whose key has no group reads.
            result.empty_value = value_over_no_rows(expressions.front(), state, -1);
            for (const auto &conjunct : having_conjuncts) {
                if (!is_true(*value_over_no_rows(conjunct, state, -1))) {
                    result.empty_value = db::expr::null(expressions.front()->type());
                }
            }
        }
        tree = make_aggregate(std::move(tree), state.groups, state.group_ids, state.aggregates);
        for (auto &leaf : block.post_aggregate_leaves) {
            tree = make_join(db::JoinKind::inner, std::move(tree), std::move(leaf), {});
        }
        tree = apply_joins(std::move(tree), block.post_aggregate_joins);
        if (!having_conjuncts.empty()) {
            tree = make_filter(std::move(tree), std::move(having_conjuncts));
        }
        result.single_row = state.groups.empty() && having.is_null();
        result.one_row_per_key = state.groups.size() == inner_keys.size();
    } else {
        result.single_row = !has_from && where.is_null();
    }

    if (!windows.empty()) {
        if (!inner_keys.empty() || !result.correlated.empty()) {
            // Decorrelation groups or joins on the correlation after the fact; a window over the
            // block would see the rows of every outer value at once.
            fail("window functions in correlated subqueries are not supported", -1);
        }
        tree = plan_windows(std::move(tree), windows);
    }

    std::vector<ColumnId> ids;
    std::vector<ColumnId> key_outputs;
    std::vector<db::ExprPtr> projected;
    for (std::size_t i = 0; i < inner_keys.size(); ++i) {
        // Decorrelated scalar subquery: the keys come first in the output.
        projected.push_back(_columns.ref(state.group_ids[i]));
        key_outputs.push_back(_columns.add(_columns[state.group_ids[i]].name, state.groups[i]->type(), true));
        ids.push_back(key_outputs.back());
    }
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
        if (field(select, "limitCount").is_object() || field(select, "limitOffset").is_object()) {
            fail("correlated IN/ANY/ALL subqueries with LIMIT or OFFSET are not supported", -1);
        }
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
    const std::size_t offset_ids = inner_keys.size();

    if (distinct) {
        std::vector<db::ExprPtr> groups;
        std::vector<ColumnId> group_ids;
        for (std::size_t i = 0; i < visible; ++i) {
            const ColumnId id = ids[offset_ids + i];
            groups.push_back(_columns.ref(id));
            group_ids.push_back(_columns.add(_columns[id].name, _columns[id].type, _columns[id].nullable));
        }
        tree = make_aggregate(std::move(tree), std::move(groups), group_ids, {});
        for (std::size_t i = 0; i < visible; ++i) {
            ids[offset_ids + i] = group_ids[i];
        }
    }

    std::optional<std::uint64_t> limit;
    std::uint64_t offset = 0;
    auto constant_count = [&](const Json &node, const char *what) -> std::optional<std::uint64_t> {
        if (node.is_null()) {
            return std::nullopt;
        }
        Context context;
        context.clause = what;
        db::ExprPtr value = bind_value(node, context);
        if (value->kind() != db::ExprKind::constant) {
            fail(std::string(what) + " must be a constant", location_of(node));
        }
        if (value->value().null) {
            return std::nullopt;
        }
        if (value->type().id != db::TypeId::integer && value->type().id != db::TypeId::bigint) {
            fail(std::string(what) + " must be an integer, not " + value->type().to_string(),
                 location_of(node));
        }
        if (value->value().i64 < 0) {
            fail(std::string(what) + " must not be negative", location_of(node));
        }
        return static_cast<std::uint64_t>(value->value().i64);
    };
    if (string_field(select, "limitOption") == "LIMIT_OPTION_WITH_TIES") {
        fail("FETCH ... WITH TIES is not supported", -1);
    }
    limit = constant_count(field(select, "limitCount"), "LIMIT");
    offset = constant_count(field(select, "limitOffset"), "OFFSET").value_or(0);

    if (!order.empty()) {
        std::vector<LogicalSortKey> keys;
        for (const auto &[index, body] : order) {
            LogicalSortKey key;
            key.column = ids[offset_ids + index];
            key.descending = string_field(*body, "sortby_dir") == "SORTBY_DESC";
            const std::string nulls = string_field(*body, "sortby_nulls");
            if (nulls == "SORTBY_NULLS_FIRST") {
                key.nulls_first = true;
            } else if (nulls == "SORTBY_NULLS_LAST") {
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

    if (ids.size() > offset_ids + visible) {
        // Drop the hidden ORDER BY columns.
        std::vector<db::ExprPtr> kept;
        std::vector<ColumnId> kept_ids;
        for (std::size_t i = 0; i < offset_ids + visible; ++i) {
            kept.push_back(_columns.ref(ids[i]));
            kept_ids.push_back(
                _columns.add(_columns[ids[i]].name, _columns[ids[i]].type, _columns[ids[i]].nullable));
        }
        tree = make_project(std::move(tree), std::move(kept), kept_ids);
        ids = kept_ids;
    }
    for (std::size_t i = 0; i < offset_ids; ++i) {
        result.inner_keys.push_back(ids[i]);
    }
    result.plan = std::move(tree);
    for (std::size_t i = 0; i < visible; ++i) {
        result.names.push_back(names[i]);
    }
    if (offset_ids > 0) {
        std::vector<std::string> all;
        for (std::size_t i = 0; i < offset_ids; ++i) {
            all.push_back(_columns[ids[i]].name);
        }
        all.insert(all.end(), result.names.begin(), result.names.end());
        result.names = std::move(all);
    }
    return result;
}

LogicalPtr Binder::plan_windows(LogicalPtr tree, std::vector<BoundWindow> &windows) {
    // Every key and argument that is not a plain column becomes a column of a projection below.
    std::vector<db::ExprPtr> expressions;
    std::vector<ColumnId> ids;
    for (const ColumnId id : tree->output) {
        expressions.push_back(_columns.ref(id));
        ids.push_back(id);
    }
    auto column_of = [&](const db::ExprPtr &expression) -> ColumnId {
        if (expression->kind() == db::ExprKind::column) {
            return static_cast<ColumnId>(expression->column_index());
        }
        for (std::size_t i = tree->output.size(); i < expressions.size(); ++i) {
            if (same_expression(*expressions[i], *expression)) {
                return ids[i];
            }
        }
        const bool nullable = expression->kind() != db::ExprKind::constant || expression->value().null;
        expressions.push_back(expression);
        ids.push_back(_columns.add(db::to_string(*expression), expression->type(), nullable));
        return ids.back();
    };
    struct Group {
        std::vector<ColumnId> partition;
        std::vector<LogicalSortKey> order;
        std::vector<LogicalWindowFunction> functions;
    };
    std::vector<Group> groups;
    for (const BoundWindow &window : windows) {
        Group group;
        for (const auto &key : window.partition) {
            group.partition.push_back(column_of(key));
        }
        for (std::size_t k = 0; k < window.order.size(); ++k) {
            LogicalSortKey key = window.order_keys[k];
            key.column = column_of(window.order[k]);
            group.order.push_back(key);
        }
        LogicalWindowFunction function;
        function.function = window.function;
        if (window.argument != nullptr) {
            function.argument = column_of(window.argument);
        }
        if (window.default_value != nullptr) {
            function.default_value = column_of(window.default_value);
        }
        function.offset = window.offset;
        function.rows = window.rows;
        function.start = window.start;
        function.end = window.end;
        function.output = window.output;
        auto same_keys = [&](const Group &other) {
            if (other.partition != group.partition || other.order.size() != group.order.size()) {
                return false;
            }
            for (std::size_t k = 0; k < group.order.size(); ++k) {
                const auto &a = other.order[k];
                const auto &b = group.order[k];
                if (a.column != b.column || a.descending != b.descending || a.nulls_first != b.nulls_first) {
                    return false;
                }
            }
            return true;
        };
        const auto found = std::find_if(groups.begin(), groups.end(), same_keys);
        if (found != groups.end()) {
            found->functions.push_back(function);
        } else {
            group.functions.push_back(function);
            groups.push_back(std::move(group));
        }
    }
    if (expressions.size() > tree->output.size()) {
        tree = make_project(std::move(tree), std::move(expressions), std::move(ids));
    }
    for (Group &group : groups) {
        tree = make_window(std::move(tree), std::move(group.partition), std::move(group.order),
                           std::move(group.functions));
    }
    return tree;
}

} // namespace mx::sql::detail
