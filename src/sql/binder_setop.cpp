// Binding of set operations (UNION, INTERSECT, EXCEPT, each with ALL) and VALUES lists.
//
// Plans (cols = the query's columns in the common type of both sides):
//   UNION ALL            union_all(left, right)
//   UNION                aggregate group by cols over union_all(...)
//   INTERSECT [ALL]      union_all(left ++ (1, NULL), right ++ (NULL, 1)), grouped by cols with
//   EXCEPT [ALL]         count(l), count(r) per group, then a filter (distinct forms) or a repeat
//                        by least(l, r) or l - r (ALL forms); NULLs are one group, as set
//                        semantics want (NOT DISTINCT).
// A left-deep chain of set operations (a UNION ALL b UNION ALL c ...) is bound in a loop, and
// consecutive UNIONs share one union_all node and one aggregation.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <mx/db/table.h>

#include "binder.h"

namespace mx::sql::detail {

namespace {

const char *operation_name(ast::SetOperator op) {
    switch (op) {
    case ast::SetOperator::intersect:
        return "INTERSECT";
    case ast::SetOperator::except:
        return "EXCEPT";
    case ast::SetOperator::union_op:
        break;
    }
    return "UNION";
}

/// Whether output column `index` of `plan` is an untyped NULL (SELECT NULL): it takes the other
/// side's type, whatever that is.
bool null_literal_column(const LogicalNode &plan, std::size_t index) {
    if (plan.kind != LogicalKind::project || index >= plan.expressions.size()) {
        return false;
    }
    const db::Expr &expression = *plan.expressions[index];
    return expression.kind() == db::ExprKind::constant && expression.value().null;
}

/// The first byte of the `index`-th select-list entry of a simple SELECT branch (-1 otherwise).
std::int64_t target_location(const ast::SelectStmt &select, std::size_t index) {
    return index < select.targets.size() ? select.targets[index].location : -1;
}

} // namespace

db::Type Binder::set_operation_type(const db::Type &a, const db::Type &b) {
    if (a == b) {
        return a;
    }
    // DuckDB: VARCHAR absorbs every other type, a BOOLEAN becomes the numeric type beside it;
    // otherwise the common type of comparisons and CASE.
    if (a.id == db::TypeId::varchar || b.id == db::TypeId::varchar) {
        return a.id == b.id ? db::expr::common_type(a, b) : db::Type::varchar(0);
    }
    if (a.id == db::TypeId::boolean && b.is_numeric()) {
        return b;
    }
    if (b.id == db::TypeId::boolean && a.is_numeric()) {
        return a;
    }
    return db::expr::common_type(a, b);
}

BoundQuery Binder::bind_set_operation(const ast::SelectStmt &select, Scope *outer) {
    // The chain is left-deep: the first branch, then each step's operator and right branch.
    BoundQuery first = bind_select(*select.first, outer);
    std::vector<std::string> names = first.names;
    std::vector<db::Type> types;
    std::vector<bool> nullable;
    std::vector<bool> untyped; // an untyped NULL on every side so far
    for (std::size_t i = 0; i < first.plan->output.size(); ++i) {
        const ColumnInfo &column = _columns[first.plan->output[i]];
        types.push_back(column.type);
        nullable.push_back(column.nullable);
        untyped.push_back(null_literal_column(*first.plan, i));
    }
    // The inputs of the pending UNION (ALL): their outputs have `types`.
    std::vector<LogicalPtr> inputs;
    inputs.push_back(std::move(first.plan));
    bool distinct_pending = false;

    // Casts `plan`'s outputs to `types` where they differ (a projection with new ids).
    auto cast_to = [&](LogicalPtr plan) {
        bool same = true;
        for (std::size_t i = 0; i < types.size(); ++i) {
            same = same && _columns[plan->output[i]].type == types[i];
        }
        if (same) {
            return plan;
        }
        std::vector<db::ExprPtr> expressions;
        std::vector<ColumnId> ids;
        for (std::size_t i = 0; i < types.size(); ++i) {
            const ColumnInfo column = _columns[plan->output[i]];
            expressions.push_back(null_literal_column(*plan, i)
                                      ? db::expr::null(types[i])
                                      : db::expr::cast(_columns.ref(plan->output[i]), types[i]));
            ids.push_back(_columns.add(column.name, types[i], column.nullable));
        }
        return make_project(std::move(plan), std::move(expressions), std::move(ids));
    };
    auto new_output = [&]() {
        std::vector<ColumnId> ids;
        for (std::size_t i = 0; i < types.size(); ++i) {
            ids.push_back(_columns.add(names[i], types[i], nullable[i]));
        }
        return ids;
    };
    // Reduces the pending inputs to one plan: their UNION ALL, deduplicated for UNION.
    auto combine = [&]() {
        LogicalPtr plan;
        if (inputs.size() == 1) {
            plan = std::move(inputs.front());
        } else {
            plan = make_union_all(std::move(inputs), new_output());
        }
        inputs.clear();
        if (distinct_pending) {
            std::vector<db::ExprPtr> groups;
            for (const ColumnId id : plan->output) {
                groups.push_back(_columns.ref(id));
            }
            plan = make_aggregate(std::move(plan), std::move(groups), new_output(), {});
            distinct_pending = false;
        }
        return plan;
    };

    for (const ast::SetStep &step : select.steps) {
        const ast::SetOperator op = step.op;
        const bool all = step.all;
        BoundQuery right = bind_select(*step.right, outer);
        if (right.plan->output.size() != types.size()) {
            fail(std::string("each ") + operation_name(op) + " query must have the same number of columns (" +
                     std::to_string(types.size()) + " on the left, " +
                     std::to_string(right.plan->output.size()) + " on the right)",
                 target_location(*step.right, std::min(types.size(), right.plan->output.size())));
        }
        for (std::size_t i = 0; i < types.size(); ++i) {
            const ColumnInfo &column = _columns[right.plan->output[i]];
            const bool right_untyped = null_literal_column(*right.plan, i);
            if (right_untyped && !untyped[i]) {
                // SELECT NULL takes the type of the other side.
            } else if (untyped[i] && !right_untyped) {
                types[i] = column.type;
            } else {
                try {
                    types[i] = set_operation_type(types[i], column.type);
                } catch (const db::TypeError &) {
                    fail(std::string(operation_name(op)) + " types " + types[i].to_string() + " and " +
                             column.type.to_string() + " cannot be matched (column " + std::to_string(i + 1) +
                             ")",
                         target_location(*step.right, i));
                }
            }
            untyped[i] = untyped[i] && right_untyped;
            nullable[i] = nullable[i] || column.nullable;
        }
        for (auto &input : inputs) {
            input = cast_to(std::move(input));
        }
        LogicalPtr right_plan = cast_to(std::move(right.plan));
        if (op == ast::SetOperator::union_op) {
            if (all && distinct_pending) {
                LogicalPtr left = combine();
                inputs.push_back(std::move(left));
            }
            inputs.push_back(std::move(right_plan));
            distinct_pending = distinct_pending || !all;
            continue;
        }
        // INTERSECT / EXCEPT: per-side counts of every distinct row.
        LogicalPtr left = combine();
        auto tagged = [&](LogicalPtr plan, bool left_side) {
            std::vector<db::ExprPtr> expressions;
            std::vector<ColumnId> ids;
            for (std::size_t i = 0; i < types.size(); ++i) {
                expressions.push_back(_columns.ref(plan->output[i]));
                ids.push_back(_columns.add(names[i], types[i], nullable[i]));
            }
            expressions.push_back(left_side ? db::expr::constant(db::Value::integer(1))
                                            : db::expr::null(db::Type::integer()));
            ids.push_back(_columns.add("left_side", db::Type::integer(), !left_side));
            expressions.push_back(left_side ? db::expr::null(db::Type::integer())
                                            : db::expr::constant(db::Value::integer(1)));
            ids.push_back(_columns.add("right_side", db::Type::integer(), left_side));
            return make_project(std::move(plan), std::move(expressions), std::move(ids));
        };
        std::vector<LogicalPtr> sides;
        sides.push_back(tagged(std::move(left), true));
        sides.push_back(tagged(std::move(right_plan), false));
        std::vector<ColumnId> union_ids = new_output();
        const ColumnId left_tag = _columns.add("left_side", db::Type::integer(), true);
        const ColumnId right_tag = _columns.add("right_side", db::Type::integer(), true);
        union_ids.push_back(left_tag);
        union_ids.push_back(right_tag);
        LogicalPtr plan = make_union_all(std::move(sides), std::move(union_ids));
        std::vector<db::ExprPtr> groups;
        for (std::size_t i = 0; i < types.size(); ++i) {
            groups.push_back(_columns.ref(plan->output[i]));
        }
        std::vector<ColumnId> group_ids = new_output();
        const ColumnId left_count = _columns.add("left_count", db::Type::bigint(), false);
        const ColumnId right_count = _columns.add("right_count", db::Type::bigint(), false);
        std::vector<LogicalAggregate> counts{
            LogicalAggregate{db::AggregateFunction::count, _columns.ref(left_tag), left_count},
            LogicalAggregate{db::AggregateFunction::count, _columns.ref(right_tag), right_count}};
        plan = make_aggregate(std::move(plan), std::move(groups), group_ids, std::move(counts));
        const db::ExprPtr l = _columns.ref(left_count);
        const db::ExprPtr r = _columns.ref(right_count);
        const db::ExprPtr zero = db::expr::constant(db::Value::bigint(0));
        const bool intersect = op == ast::SetOperator::intersect;
        if (!all) {
            std::vector<db::ExprPtr> conjuncts{db::expr::greater(l, zero), intersect
                                                                               ? db::expr::greater(r, zero)
                                                                               : db::expr::equal(r, zero)};
            plan = make_filter(std::move(plan), std::move(conjuncts));
        } else if (intersect) {
            plan = make_repeat(std::move(plan), db::expr::case_when({{db::expr::less(l, r), l}}, r));
        } else {
            plan = make_repeat(std::move(plan), db::expr::subtract(l, r));
        }
        std::vector<db::ExprPtr> kept;
        for (const ColumnId id : group_ids) {
            kept.push_back(_columns.ref(id));
        }
        plan = make_project(std::move(plan), std::move(kept), new_output());
        inputs.push_back(std::move(plan));
    }

    BoundQuery result;
    result.plan = combine();
    result.names = std::move(names);
    return result;
}

BoundQuery Binder::bind_values(const ast::SelectStmt &select) {
    std::vector<std::vector<Bound>> rows;
    for (const std::vector<ast::ExprPtr> &items : select.values) {
        std::vector<Bound> row;
        for (const ast::ExprPtr &item : items) {
            Context context;
            context.clause = "VALUES";
            Bound bound = bind(*item, context);
            if (bound.interval.has_value()) {
                fail("an interval is not a value", bound.location);
            }
            bound.expr = checked(bound.expr, bound.location);
            if (bound.expr->kind() != db::ExprKind::constant) {
                fail("VALUES lists may only contain constant expressions", item->location);
            }
            bound.location = item->location;
            row.push_back(std::move(bound));
        }
        if (!rows.empty() && row.size() != rows.front().size()) {
            fail("VALUES lists must all be the same length", items.empty() ? -1 : items.front()->location);
        }
        rows.push_back(std::move(row));
    }
    const std::size_t width = rows.front().size();
    // Column types: string literals take the type of the other values (DuckDB's literal rule),
    // the rest combine as in UNION; a column of NULLs is INTEGER, of string literals VARCHAR.
    std::vector<db::Type> types(width, db::Type::integer());
    for (std::size_t c = 0; c < width; ++c) {
        std::optional<db::Type> type;
        bool strings = false;
        for (const auto &row : rows) {
            const Bound &cell = row[c];
            if (cell.expr->value().null) {
                continue;
            }
            if (cell.string_literal) {
                strings = true;
                continue;
            }
            try {
                type = type.has_value() ? set_operation_type(*type, cell.expr->type()) : cell.expr->type();
            } catch (const db::TypeError &) {
                fail("VALUES types " + type->to_string() + " and " + cell.expr->type().to_string() +
                         " cannot be matched (column " + std::to_string(c + 1) + ")",
                     cell.location);
            }
        }
        if (type.has_value()) {
            types[c] = *type;
        } else if (strings) {
            types[c] = db::Type::varchar(0);
        }
    }
    std::vector<db::ColumnDef> definitions;
    for (std::size_t c = 0; c < width; ++c) {
        definitions.push_back(db::ColumnDef{"col" + std::to_string(c), types[c], true});
    }
    db::TableBuilder builder("(values)", db::Schema(definitions));
    for (const auto &row : rows) {
        std::vector<db::Value> values;
        for (std::size_t c = 0; c < width; ++c) {
            values.push_back(cast_literal(row[c], types[c])->value());
        }
        const std::string error = builder.append_row(values);
        if (error.empty()) {
            continue;
        }
        fail("VALUES row cannot be stored: " + error, row.front().location);
    }
    std::vector<ColumnId> ids;
    BoundQuery result;
    for (std::size_t c = 0; c < width; ++c) {
        ids.push_back(_columns.add(definitions[c].name, types[c], true));
        result.names.push_back(definitions[c].name);
    }
    result.plan = make_get(builder.finish(), std::move(ids), "(values)");
    result.single_row = rows.size() == 1;
    return result;
}

} // namespace mx::sql::detail
