#include "logical.h"

#include <algorithm>
#include <functional>
#include <utility>

#include <mx/util/assert.h>

namespace mx::sql::detail {

LogicalPtr make_get(std::shared_ptr<const db::Table> table, std::vector<ColumnId> columns,
                    std::string alias) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::get;
    node->table = std::move(table);
    node->output = columns;
    node->table_columns = std::move(columns);
    node->alias = std::move(alias);
    return node;
}

LogicalPtr make_filter(LogicalPtr child, std::vector<db::ExprPtr> conjuncts) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::filter;
    node->output = child->output;
    node->children.push_back(std::move(child));
    node->conjuncts = std::move(conjuncts);
    return node;
}

LogicalPtr make_project(LogicalPtr child, std::vector<db::ExprPtr> expressions,
                        std::vector<ColumnId> output) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::project;
    node->children.push_back(std::move(child));
    node->expressions = std::move(expressions);
    node->output = std::move(output);
    return node;
}

LogicalPtr make_join(db::JoinKind kind, LogicalPtr left, LogicalPtr right,
                     std::vector<db::ExprPtr> conjuncts) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::join;
    node->join_kind = kind;
    node->output = left->output;
    if (kind == db::JoinKind::inner || kind == db::JoinKind::left_outer || kind == db::JoinKind::full_outer) {
        node->output.insert(node->output.end(), right->output.begin(), right->output.end());
    }
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    node->conjuncts = std::move(conjuncts);
    return node;
}

LogicalPtr make_mark_join(LogicalPtr left, LogicalPtr right, std::vector<db::ExprPtr> conjuncts,
                          ColumnId mark) {
    LogicalPtr node = make_join(db::JoinKind::mark, std::move(left), std::move(right), std::move(conjuncts));
    node->mark = mark;
    node->output.push_back(mark);
    return node;
}

LogicalPtr make_dependent_join(db::JoinKind kind, LogicalPtr left, LogicalPtr right) {
    MX_ASSERT(kind == db::JoinKind::inner || kind == db::JoinKind::left_outer || kind == db::JoinKind::semi ||
                  kind == db::JoinKind::anti || kind == db::JoinKind::mark,
              "a dependent join is a scalar subquery's (inner, left outer) or a quantified one's");
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::dependent_join;
    node->join_kind = kind;
    if (kind == db::JoinKind::inner || kind == db::JoinKind::left_outer) {
        node->output = right->output;
    }
    node->children.push_back(std::move(right));
    if (left != nullptr) {
        return attach_dependent(std::move(left), std::move(node));
    }
    return node;
}

LogicalPtr attach_dependent(LogicalPtr tree, LogicalPtr join) {
    MX_ASSERT(join->kind == LogicalKind::dependent_join && join->children.size() == 1,
              "only a dependent join without a left input gets one");
    join->output.insert(join->output.begin(), tree->output.begin(), tree->output.end());
    // The left input first: appended, then swapped with the subquery.
    join->children.push_back(std::move(tree));
    std::swap(join->children.front(), join->children.back());
    return join;
}

bool any_column_read(const LogicalNode &node, const std::function<bool(ColumnId)> &test) {
    const auto expression_reads = [&](const db::ExprPtr &e) {
        if (e == nullptr) {
            return false;
        }
        const auto columns = columns_of(*e);
        return std::any_of(columns.begin(), columns.end(), test);
    };
    const auto list_reads = [&](const std::vector<db::ExprPtr> &list) {
        return std::any_of(list.begin(), list.end(), expression_reads);
    };
    return list_reads(node.conjuncts) || list_reads(node.expressions) || list_reads(node.groups) ||
           list_reads(node.left_keys) || list_reads(node.right_keys) ||
           std::any_of(node.aggregates.begin(), node.aggregates.end(),
                       [&](const LogicalAggregate &a) { return expression_reads(a.argument); }) ||
           std::any_of(node.partition.begin(), node.partition.end(), test) ||
           std::any_of(node.windows.begin(), node.windows.end(), [&](const LogicalWindowFunction &w) {
               return (w.argument.has_value() && test(*w.argument)) ||
                      (w.default_value.has_value() && test(*w.default_value));
           });
}

bool node_reads_any(const LogicalNode &node, const std::set<ColumnId> &ids) {
    return any_column_read(node, [&](ColumnId id) { return ids.count(id) > 0; });
}

bool plan_reads_any(const LogicalNode &node, const std::set<ColumnId> &ids) {
    return node_reads_any(node, ids) ||
           std::any_of(node.children.begin(), node.children.end(),
                       [&](const LogicalPtr &child) { return plan_reads_any(*child, ids); });
}

bool contains_dependent_join(const LogicalNode &node) noexcept {
    return node.kind == LogicalKind::dependent_join ||
           std::any_of(node.children.begin(), node.children.end(),
                       [](const LogicalPtr &child) { return contains_dependent_join(*child); });
}

LogicalPtr clone_plan(const LogicalNode &node) {
    auto copy = std::make_unique<LogicalNode>();
    copy->kind = node.kind;
    for (const auto &child : node.children) {
        copy->children.push_back(clone_plan(*child));
    }
    copy->output = node.output;
    copy->table = node.table;
    copy->table_columns = node.table_columns;
    copy->alias = node.alias;
    copy->conjuncts = node.conjuncts;
    copy->expressions = node.expressions;
    copy->join_kind = node.join_kind;
    copy->left_keys = node.left_keys;
    copy->right_keys = node.right_keys;
    copy->mark = node.mark;
    copy->bloom_filter = node.bloom_filter;
    copy->build_left = node.build_left;
    copy->magic_set = node.magic_set;
    copy->optimized = node.optimized;
    copy->groups = node.groups;
    copy->aggregates = node.aggregates;
    copy->count_join = node.count_join;
    copy->sort_keys = node.sort_keys;
    copy->partition = node.partition;
    copy->windows = node.windows;
    copy->limit = node.limit;
    copy->offset = node.offset;
    copy->rows = node.rows;
    copy->prefetch_whole = node.prefetch_whole;
    copy->cte = node.cte;
    copy->shared = node.shared;
    return copy;
}

LogicalPtr make_shared_scan(std::shared_ptr<SharedPlan> shared, std::vector<ColumnId> output) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::shared_scan;
    node->shared = std::move(shared);
    node->output = std::move(output);
    return node;
}

LogicalPtr make_aggregate(LogicalPtr child, std::vector<db::ExprPtr> groups, std::vector<ColumnId> group_ids,
                          std::vector<LogicalAggregate> aggregates) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::aggregate;
    node->children.push_back(std::move(child));
    node->groups = std::move(groups);
    node->output = std::move(group_ids);
    for (const auto &aggregate : aggregates) {
        node->output.push_back(aggregate.output);
    }
    node->aggregates = std::move(aggregates);
    return node;
}

LogicalPtr make_sort(LogicalPtr child, std::vector<LogicalSortKey> keys) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::sort;
    node->output = child->output;
    node->children.push_back(std::move(child));
    node->sort_keys = std::move(keys);
    return node;
}

LogicalPtr make_limit(LogicalPtr child, std::optional<std::uint64_t> limit, std::uint64_t offset) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::limit;
    node->output = child->output;
    node->children.push_back(std::move(child));
    node->limit = limit;
    node->offset = offset;
    return node;
}

LogicalPtr make_union_all(std::vector<LogicalPtr> children, std::vector<ColumnId> output) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::union_all;
    node->output = std::move(output);
    node->children = std::move(children);
    return node;
}

LogicalPtr make_repeat(LogicalPtr child, db::ExprPtr count) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::repeat;
    node->output = child->output;
    node->children.push_back(std::move(child));
    node->expressions.push_back(std::move(count));
    return node;
}

LogicalPtr make_window(LogicalPtr child, std::vector<ColumnId> partition, std::vector<LogicalSortKey> order,
                       std::vector<LogicalWindowFunction> functions) {
    auto node = std::make_unique<LogicalNode>();
    node->kind = LogicalKind::window;
    node->output = child->output;
    for (const auto &function : functions) {
        node->output.push_back(function.output);
    }
    node->children.push_back(std::move(child));
    node->partition = std::move(partition);
    node->sort_keys = std::move(order);
    node->windows = std::move(functions);
    return node;
}

std::vector<ColumnId> columns_of(const db::Expr &expression) {
    std::vector<std::uint32_t> ids;
    db::expr::collect_columns(expression, ids);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

void split_conjuncts(const db::ExprPtr &expression, std::vector<db::ExprPtr> &out) {
    if (expression->kind() == db::ExprKind::logical_and) {
        for (const auto &child : expression->children()) {
            split_conjuncts(child, out);
        }
        return;
    }
    out.push_back(expression);
}

namespace {

bool same_value(const db::Value &a, const db::Value &b) {
    if (!(a.type == b.type) || a.null != b.null) {
        return false;
    }
    if (a.null) {
        return true;
    }
    switch (a.type.physical()) {
    case db::PhysicalType::u8:
    case db::PhysicalType::i64:
        return a.i64 == b.i64;
    case db::PhysicalType::i128:
        return a.i128 == b.i128;
    case db::PhysicalType::f64:
        return a.f64 == b.f64;
    case db::PhysicalType::string:
        return a.str == b.str;
    }
    return false;
}

} // namespace

bool same_expression(const db::Expr &a, const db::Expr &b) {
    if (a.kind() != b.kind() || !(a.type() == b.type()) || a.children().size() != b.children().size()) {
        return false;
    }
    switch (a.kind()) {
    case db::ExprKind::column:
        if (a.column_index() != b.column_index()) {
            return false;
        }
        break;
    case db::ExprKind::constant:
        if (!same_value(a.value(), b.value())) {
            return false;
        }
        break;
    case db::ExprKind::arithmetic:
        if (a.arithmetic_op() != b.arithmetic_op()) {
            return false;
        }
        break;
    case db::ExprKind::compare:
        if (a.compare_op() != b.compare_op()) {
            return false;
        }
        break;
    case db::ExprKind::is_null:
    case db::ExprKind::case_when:
        if (a.negated() != b.negated()) {
            return false;
        }
        break;
    case db::ExprKind::in_list:
        if (a.negated() != b.negated() || a.list().size() != b.list().size()) {
            return false;
        }
        for (std::size_t i = 0; i < a.list().size(); ++i) {
            if (!same_value(a.list()[i], b.list()[i])) {
                return false;
            }
        }
        break;
    case db::ExprKind::like:
        if (a.negated() != b.negated() || a.pattern() != b.pattern() || a.escape() != b.escape()) {
            return false;
        }
        break;
    case db::ExprKind::extract:
        if (a.date_part() != b.date_part()) {
            return false;
        }
        break;
    case db::ExprKind::add_interval:
        if (!(a.interval() == b.interval())) {
            return false;
        }
        break;
    case db::ExprKind::function:
        if (a.function() != b.function() || a.digits() != b.digits() || a.date_part() != b.date_part() ||
            db::to_string(a) != db::to_string(b)) {
            return false; // the text covers what is not a child (regexp_matches' pattern)
        }
        break;
    default:
        break;
    }
    for (std::size_t i = 0; i < a.children().size(); ++i) {
        if (!same_expression(a.child(i), b.child(i))) {
            return false;
        }
    }
    return true;
}

bool is_true(const db::Expr &expression) noexcept {
    return expression.kind() == db::ExprKind::constant && expression.type().id == db::TypeId::boolean &&
           !expression.value().null && expression.value().i64 != 0;
}

bool is_false_or_null(const db::Expr &expression) noexcept {
    return expression.kind() == db::ExprKind::constant &&
           (expression.value().null ||
            (expression.type().id == db::TypeId::boolean && expression.value().i64 == 0));
}

} // namespace mx::sql::detail
