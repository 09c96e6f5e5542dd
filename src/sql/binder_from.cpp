// FROM: tables, CTE references, derived tables and joins, and the names they make visible.

#include <algorithm>
#include <optional>

#include "binder.h"

namespace mx::sql::detail {

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

LogicalPtr Binder::bind_table_reference(const ast::RangeVar &range_var, ast::Location location,
                                        Block &block) {
    const std::string &name = range_var.name;
    const std::string &schema = range_var.schema;
    if (!range_var.catalog.empty() ||
        (!schema.empty() && !equal_names(schema, "main") && !equal_names(schema, "public"))) {
        fail("schemas are not supported: \"" + schema + "\" (tables live in one namespace)", location);
    }
    const std::optional<ast::Alias> &alias = range_var.alias;
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
            const ast::Alias cte_alias = alias.has_value() ? *alias : ast::Alias{name, {}};
            return bind_derived_table(it->second.query, &cte_alias, location, block, &it->second, scope);
        }
    }
    auto table = _catalog.find(name);
    if (table == nullptr) {
        fail("table \"" + name + "\" does not exist", location);
    }
    RangeEntry entry;
    entry.alias = alias.has_value() ? alias->name : table->name();
    const std::vector<std::string> no_aliases;
    const std::vector<std::string> &column_aliases = alias.has_value() ? alias->columns : no_aliases;
    if (column_aliases.size() > table->schema().size()) {
        fail("table \"" + name + "\" has fewer columns than aliases given", location);
    }
    std::vector<ColumnId> ids;
    for (std::size_t i = 0; i < table->schema().size(); ++i) {
        const auto &definition = table->schema()[i];
        std::string column = i < column_aliases.size() ? column_aliases[i] : definition.name;
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

LogicalPtr Binder::bind_derived_table(const ast::SelectStmt *subquery, const ast::Alias *alias,
                                      std::int64_t location, Block &block, const CteDefinition *cte,
                                      const Scope *cte_scope) {
    if (subquery == nullptr) {
        fail("only SELECT subqueries are supported in FROM", location);
    }
    // A derived table sees the enclosing blocks' CTEs but none of their columns (no LATERAL); a
    // CTE's query those of where it is defined, so every reference binds the same plan.
    Scope isolated;
    for (const Scope *scope = cte_scope != nullptr ? cte_scope : &block.scope; scope != nullptr;
         scope = scope->parent) {
        for (const auto &[name, definition] : scope->ctes) {
            isolated.ctes.emplace(name, definition);
        }
    }
    if (cte != nullptr) {
        isolated.binding_ctes.push_back(lower(alias->name));
        for (Scope *scope = &block.scope; scope != nullptr; scope = scope->parent) {
            isolated.binding_ctes.insert(isolated.binding_ctes.end(), scope->binding_ctes.begin(),
                                         scope->binding_ctes.end());
        }
    }
    BoundQuery bound = bind_select(*subquery, &isolated);
    RangeEntry entry;
    entry.alias = alias != nullptr ? alias->name : std::string();
    if (entry.alias.empty()) {
        fail("subquery in FROM must have an alias", location);
    }
    std::vector<std::string> names = bound.names;
    std::vector<std::string> aliases;
    if (alias != nullptr) {
        aliases = alias->columns;
    }
    if (aliases.empty() && cte != nullptr) {
        aliases = cte->column_aliases;
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
    LogicalPtr plan = make_project(std::move(bound.plan), std::move(expressions), std::move(ids));
    if (cte != nullptr) {
        plan->cte = cte->id;
        plan->alias = cte->name;
    }
    return plan;
}

LogicalPtr Binder::bind_from(const ast::FromItem &item, Block &block) {
    if (const auto *table = std::get_if<ast::RangeVar>(&item.node)) {
        return bind_table_reference(*table, item.location, block);
    }
    if (const auto *derived = std::get_if<ast::RangeSubselect>(&item.node)) {
        if (derived->lateral) {
            fail("LATERAL subqueries are not supported", item.location);
        }
        return bind_derived_table(derived->query.get(),
                                  derived->alias.has_value() ? &*derived->alias : nullptr, item.location,
                                  block);
    }
    if (const auto *join = std::get_if<ast::JoinExpr>(&item.node)) {
        return bind_join(*join, item.location, block);
    }
    fail(std::get<ast::UnsupportedFrom>(item.node).message, item.location);
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

LogicalPtr Binder::bind_join(const ast::JoinExpr &join_expression, ast::Location location, Block &block) {
    const ast::JoinType type = join_expression.type;
    if (join_expression.has_alias) {
        fail("aliases of join expressions are not supported", location);
    }
    const std::size_t left_begin = block.scope.entries.size();
    LogicalPtr left = bind_from(*join_expression.left, block);
    const std::size_t left_entries = block.scope.entries.size();
    LogicalPtr right = bind_from(*join_expression.right, block);
    const std::size_t right_end = block.scope.entries.size();
    db::JoinKind join_kind = db::JoinKind::inner;
    bool swap = false;
    if (type == ast::JoinType::left) {
        join_kind = db::JoinKind::left_outer;
    } else if (type == ast::JoinType::right) {
        join_kind = db::JoinKind::left_outer;
        swap = true;
    } else if (type == ast::JoinType::full) {
        join_kind = db::JoinKind::full_outer;
    } else if (type != ast::JoinType::inner) {
        fail("unsupported join type " + join_expression.type_name, location);
    }

    // USING (a, b) / NATURAL: the columns to join on, found among the visible columns of each
    // side (a column merged by an earlier USING counts once).
    std::vector<std::string> using_names;
    std::vector<std::int64_t> using_locations;
    if (join_expression.natural) {
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
    for (const std::string &text : join_expression.using_columns) {
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

    if (join_expression.condition != nullptr) {
        Context context;
        context.scope = &block.scope;
        context.block = nullptr; // no subqueries in ON
        context.clause = "JOIN condition";
        for (const ast::Expr *conjunct : split_and(*join_expression.condition, 0)) {
            db::ExprPtr condition = null_as_boolean(bind_value(*conjunct, context));
            if (condition->type().id != db::TypeId::boolean) {
                fail("argument of JOIN/ON must be type BOOLEAN, not type " + condition->type().to_string(),
                     conjunct->location);
            }
            if (!is_true(*condition)) {
                conjuncts.push_back(std::move(condition));
            }
        }
    } else if (join_kind != db::JoinKind::inner && join_columns.empty() && !join_expression.natural) {
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

} // namespace mx::sql::detail
