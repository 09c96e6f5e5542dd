// The optimizer pass decorrelate: unnests the binder's dependent joins (correlated scalar
// subqueries, and correlated EXISTS / IN / ANY / ALL whose subquery aggregates: dependent semi,
// anti and mark joins) into ordinary joins, after Neumann and Kemper, "Unnesting Arbitrary Queries"
// (BTW 2015). The dependent join is pushed down the subquery's plan to the filter that reads the
// outer columns; on the way up every node carries the correlation along as extra columns (the
// keys): an aggregation groups by them as well, a projection passes them through. At the filter:
//   - when its conditions on the outer columns are equalities outer expression = inner
//     expression, the inner expressions are the keys (the domain of the outer values is
//     implied by them, no copy of the outer side is needed),
//   - otherwise the keys are the distinct values of the outer columns the subquery reads,
//     computed from a copy of the outer side (the magic set / domain), joined to the filter's
//     input, and the conditions read them in place of the outer columns; as a NULL outer value
//     can have rows (u.c < t.c OR u.b = t.a), these keys compare NULL-safe.
// The outer side is then joined with the result on outer expression = key: an inner join where
// the binder says a row without a value may be dropped and no value is lost, else a left outer
// join, whose rows without a group read the subquery's value over no rows (count() is 0, not
// NULL: the count bug). A dependent semi, anti or mark join becomes the same join on the keys and
// its own conditions (the IN / ANY comparisons).
// A subquery nested in the subquery that reads the outer side as well (a reference two or more
// levels up) leaves the outer columns in several places once the inner dependent join is unnested
// (for which they are free variables): in join conditions, on both sides of joins, below an
// aggregate. Then the dependent join goes down to every node that reads them (unnest_domain): the
// domain is crossed with each subtree that stops reading them, and every node above carries it
// (aggregations group by it, joins match their sides' domains NULL-safe).

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <mx/util/assert.h>

#include "optimizer.h"

namespace mx::sql::detail {

namespace {

/// The correlation carried up the subquery's plan: `outer` over the outer side's columns
/// equals `inner` over the plan's output.
struct Key {
    db::ExprPtr outer;
    db::ExprPtr inner;
};

struct Unnested {
    LogicalPtr plan;
    std::vector<Key> keys;
    /// The keys compare NULL-safe; the last one is the constant TRUE (a row met a group).
    bool null_safe{false};
    /// The plan yields at most one row per key.
    bool one_row{false};
};

/// The distinct values of the outer columns a subquery reads (a DISTINCT over a copy of the outer
/// side) and the constant TRUE, which tells an outer join's rows that met a group.
struct Domain {
    LogicalPtr plan;
    /// Outer column -> its domain column.
    std::map<ColumnId, ColumnId> to_domain;
    ColumnId present{0};

    /// The keys of a plan that carries the domain: outer column = domain column, then TRUE.
    [[nodiscard]] std::vector<Key> keys(const ColumnRegistry &columns) const {
        std::vector<Key> result;
        for (const auto &[outer, column] : to_domain) {
            result.push_back(Key{columns.ref(outer), columns.ref(column)});
        }
        result.push_back(Key{db::expr::constant(db::Value::boolean(true)), columns.ref(present)});
        return result;
    }
};

/// A column's values of one row, for the subquery's value over no rows.
using Row = std::map<ColumnId, db::Value>;

db::Vector one_value(const db::Value &value) {
    db::Vector column(value.type, 1);
    switch (value.type.physical()) {
    case db::PhysicalType::u8:
        column.mutable_data<std::uint8_t>()[0] = static_cast<std::uint8_t>(value.i64);
        break;
    case db::PhysicalType::i64:
        column.mutable_data<std::int64_t>()[0] = value.i64;
        break;
    case db::PhysicalType::f64:
        column.mutable_data<double>()[0] = value.f64;
        break;
    case db::PhysicalType::i128:
        column.mutable_data<db::Int128>()[0] = value.i128;
        break;
    case db::PhysicalType::string:
        column.mutable_data<db::StringRef>()[0] = value.null ? db::StringRef{} : column.heap().add(value.str);
        break;
    }
    if (value.null) {
        column.set_null(0);
    }
    return column;
}

class Decorrelator {
public:
    explicit Decorrelator(ColumnRegistry &columns) : _columns(columns) {}

    LogicalPtr run(LogicalPtr node) {
        for (auto &child : node->children) {
            child = run(std::move(child));
        }
        if (node->kind != LogicalKind::dependent_join) {
            return node;
        }
        ++_unnested;
        return unnest_join(std::move(node));
    }

    [[nodiscard]] std::size_t unnested() const noexcept { return _unnested; }

private:
    [[noreturn]] static void unsupported(const std::string &what) {
        throw SqlError(what + " (in a correlated subquery) is not supported");
    }
    /// The end of both unnesting walks for a node they cannot push the correlation through:
    /// names the construct where it has a name, `otherwise` for the rest.
    [[noreturn]] static void refuse(LogicalKind kind, const std::string &otherwise) {
        switch (kind) {
        case LogicalKind::limit:
            unsupported("LIMIT or OFFSET");
        case LogicalKind::window:
            unsupported("a window function");
        case LogicalKind::union_all:
        case LogicalKind::repeat:
            unsupported("a set operation");
        default:
            unsupported(otherwise);
        }
    }

    [[nodiscard]] bool reads_outer(const db::Expr &expression) const {
        const auto ids = columns_of(expression);
        return std::any_of(ids.begin(), ids.end(), [&](ColumnId id) { return _outer.count(id) > 0; });
    }
    /// Whether the node itself (not its children) reads an outer column.
    [[nodiscard]] bool node_reads_outer(const LogicalNode &node) const {
        return node_reads_any(node, _outer);
    }
    [[nodiscard]] bool subtree_reads_outer(const LogicalNode &node) const {
        return plan_reads_any(node, _outer);
    }

    /// The columns the subquery's plan reads from the outer side (whose output is `left`).
    void collect_outer(const LogicalNode &node, const std::set<ColumnId> &left) {
        any_column_read(node, [&](ColumnId id) {
            if (left.count(id) > 0) {
                _outer.insert(id);
            }
            return false; // every column, not the first
        });
        for (const auto &child : node.children) {
            collect_outer(*child, left);
        }
    }

    db::ExprPtr evaluate_over(const db::ExprPtr &expression, const Row &row) const {
        const std::vector<ColumnId> ids = columns_of(*expression);
        db::Batch batch;
        batch.rows = 1;
        for (const ColumnId id : ids) {
            const auto it = row.find(id);
            batch.columns.push_back(
                one_value(it == row.end() ? db::Value::null_of(_columns[id].type) : it->second));
        }
        const db::ExprPtr local = db::expr::remap_columns(expression, [&](std::uint32_t id) {
            return static_cast<std::uint32_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
        });
        db::Vector out;
        if (const db::EvalStatus status = db::evaluate(*local, batch, out); !status) {
            throw SqlError("correlated subquery: its value over no rows fails: " +
                           std::string(status.message()));
        }
        return db::expr::constant(out.value(0));
    }

    /// An aggregate's value over no rows: count() 0, every other NULL.
    [[nodiscard]] db::Value over_no_rows(const LogicalAggregate &aggregate) const {
        const bool count = aggregate.function == db::AggregateFunction::count_star ||
                           aggregate.function == db::AggregateFunction::count ||
                           aggregate.function == db::AggregateFunction::count_distinct;
        return count ? db::Value::bigint(0) : db::Value::null_of(_columns[aggregate.output].type);
    }

    /// The row of a projection or of a DISTINCT's groups: each expression over the child's row.
    Row evaluate_row(const std::vector<db::ExprPtr> &expressions, const std::vector<ColumnId> &output,
                     const Row &child) const {
        Row row;
        for (std::size_t i = 0; i < expressions.size(); ++i) {
            row[output[i]] = evaluate_over(expressions[i], child)->value();
        }
        return row;
    }

    /// The row the subquery's plan yields for an outer row without inner rows (count() 0, every
    /// other aggregate NULL), or none. Columns not in the row read NULL.
    std::optional<Row> row_over_no_input(const LogicalNode &node) const {
        switch (node.kind) {
        case LogicalKind::aggregate: {
            if (node.groups.empty()) {
                Row row;
                for (const auto &aggregate : node.aggregates) {
                    row[aggregate.output] = over_no_rows(aggregate);
                }
                return row;
            }
            if (!node.aggregates.empty()) {
                return std::nullopt;
            }
            // DISTINCT: its one row has the child's values.
            auto child = row_over_no_input(*node.children[0]);
            if (!child.has_value()) {
                return std::nullopt;
            }
            return evaluate_row(node.groups, node.output, *child);
        }
        case LogicalKind::project: {
            auto child = row_over_no_input(*node.children[0]);
            if (!child.has_value()) {
                return std::nullopt;
            }
            return evaluate_row(node.expressions, node.output, *child);
        }
        case LogicalKind::filter: {
            auto child = row_over_no_input(*node.children[0]);
            for (const auto &conjunct : node.conjuncts) {
                if (child.has_value() && !is_true(*evaluate_over(conjunct, *child))) {
                    return std::nullopt;
                }
            }
            return child;
        }
        case LogicalKind::join:
        case LogicalKind::sort:
            // Joins above the aggregation (scalar subqueries of its select list) keep its row; the
            // joined columns read NULL.
            return row_over_no_input(*node.children[0]);
        default:
            return std::nullopt;
        }
    }

    /// The domain of the outer columns the subquery reads, from a copy of `left`, with fresh
    /// column ids (every copy of it in one plan has its own).
    Domain make_domain(const LogicalNode &left) {
        Domain domain;
        std::vector<db::ExprPtr> groups;
        std::vector<ColumnId> group_ids;
        for (const ColumnId id : _outer) {
            groups.push_back(_columns.ref(id));
            group_ids.push_back(_columns.add(_columns[id].name, _columns[id].type, true));
            domain.to_domain[id] = group_ids.back();
        }
        domain.present = _columns.add("present", db::Type::boolean(), true);
        groups.push_back(db::expr::constant(db::Value::boolean(true)));
        group_ids.push_back(domain.present);
        domain.plan = make_aggregate(clone_plan(left), std::move(groups), std::move(group_ids), {});
        return domain;
    }

    /// x = y where NULL equals NULL, still as hash keys: coalesce(x, zero) = coalesce(y, zero)
    /// AND (x IS NULL) = (y IS NULL).
    static void null_safe_equal(const db::ExprPtr &x, const db::ExprPtr &y, std::vector<db::ExprPtr> &out) {
        db::Value zero = db::Value::null_of(x->type());
        zero.null = false;
        out.push_back(db::expr::equal(db::expr::coalesce({x, db::expr::constant(zero)}),
                                      db::expr::coalesce({y, db::expr::constant(zero)})));
        out.push_back(db::expr::equal(db::expr::is_null(x), db::expr::is_null(y)));
    }

    /// Whether the subquery reads the outer columns where unnest cannot take them out (a filter
    /// over a plan that reads them as well, a join condition, both sides of a join, the inner
    /// side of a semi, anti, mark or outer join, an expression): correlated subqueries nested in
    /// the subquery that read the outer side too. The domain of the outer values then goes
    /// where they are read (unnest_domain).
    [[nodiscard]] bool needs_domain(const LogicalNode &node, bool root = true) const {
        if (!subtree_reads_outer(node)) {
            return false;
        }
        switch (node.kind) {
        case LogicalKind::filter:
            if (node_reads_outer(node)) {
                return subtree_reads_outer(*node.children[0]);
            }
            return needs_domain(*node.children[0], root);
        case LogicalKind::aggregate:
            // Grouped by the keys, an aggregate without GROUP BY has no row for an outer value
            // without input rows; only at the top does the join with the outer side give it one.
            return node_reads_outer(node) || (!root && node.groups.empty()) ||
                   needs_domain(*node.children[0], false);
        case LogicalKind::project:
            return node_reads_outer(node) || needs_domain(*node.children[0], root);
        case LogicalKind::sort:
            return needs_domain(*node.children[0], root);
        case LogicalKind::join: {
            const bool left_reads = subtree_reads_outer(*node.children[0]);
            const bool right_reads = subtree_reads_outer(*node.children[1]);
            if (node_reads_outer(node) || (left_reads && right_reads) ||
                (right_reads && node.join_kind != db::JoinKind::inner)) {
                return true;
            }
            return left_reads ? needs_domain(*node.children[0], root)
                              : needs_domain(*node.children[1], false);
        }
        default:
            return false;
        }
    }

    /// A plan that carries a domain of the outer values: its output has the domain's columns,
    /// and it reads them in place of the outer columns.
    struct Carried {
        LogicalPtr plan;
        Domain domain; // its plan is part of `plan`
        bool one_row{false};
    };

    static db::ExprPtr read_domain(const db::ExprPtr &expression, const Domain &domain) {
        return db::expr::remap_columns(expression, [&](std::uint32_t id) {
            const auto it = domain.to_domain.find(id);
            return it == domain.to_domain.end() ? id : it->second;
        });
    }
    static std::vector<db::ExprPtr> read_domain(std::vector<db::ExprPtr> expressions, const Domain &domain) {
        for (auto &expression : expressions) {
            expression = read_domain(expression, domain);
        }
        return expressions;
    }

    /// Neumann and Kemper's general unnesting: the dependent join pushed down the subquery's plan
    /// to every node that reads the outer side, where the domain of the outer values is joined
    /// to the node's input (a cross product: every input row for every outer value), and above
    /// which every node carries the domain along (an aggregation groups by it, a join matches
    /// its inputs' domains).
    Carried unnest_domain(LogicalPtr node, const LogicalNode &left, bool root) {
        if (!subtree_reads_outer(*node)) {
            Carried result;
            result.domain = make_domain(left);
            result.one_row = always_one_row(*node);
            result.plan = make_join(db::JoinKind::inner, std::move(node), std::move(result.domain.plan), {});
            return result;
        }
        switch (node->kind) {
        case LogicalKind::filter: {
            Carried below = unnest_domain(std::move(node->children[0]), left, root);
            below.plan =
                make_filter(std::move(below.plan), read_domain(std::move(node->conjuncts), below.domain));
            return below;
        }
        case LogicalKind::project: {
            Carried below = unnest_domain(std::move(node->children[0]), left, root);
            std::vector<db::ExprPtr> expressions = read_domain(std::move(node->expressions), below.domain);
            std::vector<ColumnId> ids = node->output;
            for (const auto &entry : below.domain.to_domain) {
                expressions.push_back(_columns.ref(entry.second));
                ids.push_back(entry.second);
            }
            expressions.push_back(_columns.ref(below.domain.present));
            ids.push_back(below.domain.present);
            below.plan = make_project(std::move(below.plan), std::move(expressions), std::move(ids));
            return below;
        }
        case LogicalKind::aggregate: {
            Carried below = unnest_domain(std::move(node->children[0]), left, false);
            // The domain groups first, under new ids (an aggregation's outputs are its own).
            std::vector<db::ExprPtr> groups;
            std::vector<ColumnId> ids;
            const auto group_by = [&](ColumnId &column) {
                groups.push_back(_columns.ref(column));
                column = _columns.add(_columns[column].name, _columns[column].type, true);
                ids.push_back(column);
            };
            std::vector<db::ExprPtr> own = read_domain(std::move(node->groups), below.domain);
            for (auto &aggregate : node->aggregates) {
                if (aggregate.argument != nullptr) {
                    aggregate.argument = read_domain(aggregate.argument, below.domain);
                }
            }
            for (auto &entry : below.domain.to_domain) {
                group_by(entry.second);
            }
            group_by(below.domain.present);
            below.one_row = own.empty();
            groups.insert(groups.end(), own.begin(), own.end());
            ids.insert(ids.end(), node->output.begin(),
                       node->output.begin() + static_cast<std::ptrdiff_t>(own.size()));
            if (root || !below.one_row) {
                below.plan = make_aggregate(std::move(below.plan), std::move(groups), std::move(ids),
                                            std::move(node->aggregates));
                return below;
            }
            return complete(std::move(below), std::move(groups), std::move(ids), std::move(node->aggregates),
                            left);
        }
        case LogicalKind::sort: {
            if (node->limit.has_value() || node->offset > 0) {
                unsupported("LIMIT or OFFSET");
            }
            Carried below = unnest_domain(std::move(node->children[0]), left, root);
            below.plan = make_sort(std::move(below.plan), std::move(node->sort_keys));
            return below;
        }
        case LogicalKind::join:
            return unnest_domain_join(std::move(node), left, root);
        case LogicalKind::limit:
        case LogicalKind::window:
        case LogicalKind::union_all:
        case LogicalKind::repeat:
        case LogicalKind::get:
        case LogicalKind::dependent_join:
        case LogicalKind::shared_scan:
            break;
        }
        refuse(node->kind, "a reference to a column of the enclosing query here");
    }

    /// An aggregate without GROUP BY below the top of the subquery: a row for every outer value,
    /// also one without input rows (count() 0, every other aggregate NULL), which grouping by
    /// the domain alone leaves out: a fresh domain left outer joined with the groups.
    Carried complete(Carried below, std::vector<db::ExprPtr> groups, std::vector<ColumnId> ids,
                     std::vector<LogicalAggregate> aggregates, const LogicalNode &left) {
        std::vector<db::ExprPtr> expressions;
        std::vector<ColumnId> outputs;
        const ColumnId met = below.domain.present;
        Domain all = make_domain(left);
        for (const auto &[outer, column] : all.to_domain) {
            expressions.push_back(_columns.ref(column));
            outputs.push_back(column);
        }
        expressions.push_back(_columns.ref(all.present));
        outputs.push_back(all.present);
        for (auto &aggregate : aggregates) {
            const db::Value empty = over_no_rows(aggregate);
            const ColumnId value = aggregate.output;
            aggregate.output = _columns.add(_columns[value].name, _columns[value].type, true);
            _columns[value].nullable = _columns[value].nullable || empty.null;
            expressions.push_back(empty.null ? _columns.ref(aggregate.output)
                                             : db::expr::case_when({{db::expr::is_null(_columns.ref(met)),
                                                                     db::expr::constant(empty)}},
                                                                   _columns.ref(aggregate.output)));
            outputs.push_back(value);
        }
        std::vector<db::ExprPtr> condition;
        for (const auto &[outer, column] : all.to_domain) {
            null_safe_equal(_columns.ref(column), _columns.ref(below.domain.to_domain.at(outer)), condition);
        }
        LogicalPtr groups_plan =
            make_aggregate(std::move(below.plan), std::move(groups), std::move(ids), std::move(aggregates));
        Carried result;
        result.plan = make_project(make_join(db::JoinKind::left_outer, std::move(all.plan),
                                             std::move(groups_plan), std::move(condition)),
                                   std::move(expressions), std::move(outputs));
        result.domain = std::move(all);
        result.one_row = true;
        return result;
    }

    /// A join under the domain: the side that reads the outer columns carries it; where both do
    /// (or the preserved side of a semi, anti, mark or left outer join must, to tell the inner
    /// side's rows of each outer value apart), each carries its own copy and the join matches
    /// them, NULL-safe. The condition reads the left side's.
    Carried unnest_domain_join(LogicalPtr node, const LogicalNode &left, bool root) {
        const bool left_reads = subtree_reads_outer(*node->children[0]);
        const bool right_reads = subtree_reads_outer(*node->children[1]);
        const db::JoinKind kind = node->join_kind;
        if (kind == db::JoinKind::full_outer) {
            unsupported("a FULL JOIN over a correlated input");
        }
        std::vector<db::ExprPtr> condition = std::move(node->conjuncts);
        if (kind == db::JoinKind::inner && !left_reads && right_reads && !node_reads_outer(*node)) {
            Carried right = unnest_domain(std::move(node->children[1]), left, false);
            right.one_row = right.one_row && always_one_row(*node->children[0]);
            right.plan = make_join(kind, std::move(node->children[0]), std::move(right.plan),
                                   read_domain(std::move(condition), right.domain));
            return right;
        }
        Carried result = unnest_domain(std::move(node->children[0]), left, root);
        condition = read_domain(std::move(condition), result.domain);
        LogicalPtr right_plan = std::move(node->children[1]);
        bool right_one_row = always_one_row(*right_plan);
        if (right_reads) {
            Carried right = unnest_domain(std::move(right_plan), left, false);
            for (const auto &[outer, column] : result.domain.to_domain) {
                null_safe_equal(_columns.ref(column), _columns.ref(right.domain.to_domain.at(outer)),
                                condition);
            }
            right_plan = std::move(right.plan);
            right_one_row = right.one_row;
        }
        // Joins above an aggregation are the binder's: scalar subqueries (at most one row per
        // row) and marks, which keep its rows.
        result.one_row = result.one_row && (kind != db::JoinKind::inner || right_one_row);
        result.plan =
            kind == db::JoinKind::mark
                ? make_mark_join(std::move(result.plan), std::move(right_plan), std::move(condition),
                                 node->mark)
                : make_join(kind, std::move(result.plan), std::move(right_plan), std::move(condition));
        return result;
    }

    /// The subquery's plan with the correlation as extra output columns (the keys), no longer
    /// reading the outer side. `left`: the outer side (copied for a domain).
    Unnested unnest(LogicalPtr node, const LogicalNode &left) {
        switch (node->kind) {
        case LogicalKind::filter:
            return unnest_filter(std::move(node), left);
        case LogicalKind::aggregate: {
            if (node_reads_outer(*node)) {
                unsupported("an aggregate or GROUP BY key over a column of the enclosing query");
            }
            Unnested below = unnest(std::move(node->children[0]), left);
            // The keys group first; a GROUP BY key that is a correlation key is that key.
            std::vector<db::ExprPtr> groups;
            std::vector<ColumnId> ids;
            std::vector<bool> matched(node->groups.size(), false);
            for (auto &key : below.keys) {
                std::optional<ColumnId> id;
                for (std::size_t g = 0; g < node->groups.size() && !id.has_value(); ++g) {
                    if (!matched[g] && same_expression(*node->groups[g], *key.inner)) {
                        matched[g] = true;
                        id = node->output[g];
                    }
                }
                if (!id.has_value()) {
                    const auto key_ids = columns_of(*key.inner);
                    id = _columns.add(key_ids.empty() ? "key" : _columns[key_ids.front()].name,
                                      key.inner->type(), true);
                }
                groups.push_back(key.inner);
                ids.push_back(*id);
                key.inner = _columns.ref(*id);
            }
            const bool key_groups_only =
                std::all_of(matched.begin(), matched.end(), [](bool m) { return m; });
            for (std::size_t g = 0; g < node->groups.size(); ++g) {
                if (!matched[g]) {
                    groups.push_back(node->groups[g]);
                    ids.push_back(node->output[g]);
                }
            }
            below.plan = make_aggregate(std::move(below.plan), std::move(groups), std::move(ids),
                                        std::move(node->aggregates));
            below.one_row = below.one_row || key_groups_only;
            return below;
        }
        case LogicalKind::project: {
            if (node_reads_outer(*node)) {
                unsupported("a select expression over a column of the enclosing query");
            }
            Unnested below = unnest(std::move(node->children[0]), left);
            std::vector<db::ExprPtr> expressions;
            std::vector<ColumnId> ids;
            for (auto &key : below.keys) {
                const auto key_ids = columns_of(*key.inner);
                const ColumnId id = _columns.add(key_ids.empty() ? "key" : _columns[key_ids.front()].name,
                                                 key.inner->type(), true);
                expressions.push_back(key.inner);
                ids.push_back(id);
                key.inner = _columns.ref(id);
            }
            expressions.insert(expressions.end(), node->expressions.begin(), node->expressions.end());
            ids.insert(ids.end(), node->output.begin(), node->output.end());
            below.plan = make_project(std::move(below.plan), std::move(expressions), std::move(ids));
            return below;
        }
        case LogicalKind::join: {
            const bool left_reads = subtree_reads_outer(*node->children[0]);
            const bool right_reads = subtree_reads_outer(*node->children[1]);
            if (node_reads_outer(*node) || (left_reads && right_reads) ||
                (right_reads && node->join_kind != db::JoinKind::inner)) {
                unsupported("a join condition over a column of the enclosing query");
            }
            const std::size_t side = left_reads ? 0 : 1;
            Unnested below = unnest(std::move(node->children[side]), left);
            node->children[side] = std::move(below.plan);
            node->output = node->children[0]->output;
            if (node->join_kind == db::JoinKind::inner || node->join_kind == db::JoinKind::left_outer ||
                node->join_kind == db::JoinKind::full_outer) {
                node->output.insert(node->output.end(), node->children[1]->output.begin(),
                                    node->children[1]->output.end());
            } else if (node->join_kind == db::JoinKind::mark) {
                node->output.push_back(node->mark);
            }
            below.plan = std::move(node);
            return below;
        }
        case LogicalKind::sort: {
            if (node->limit.has_value() || node->offset > 0) {
                unsupported("LIMIT or OFFSET");
            }
            Unnested below = unnest(std::move(node->children[0]), left);
            below.plan = make_sort(std::move(below.plan), std::move(node->sort_keys));
            return below;
        }
        case LogicalKind::limit:
        case LogicalKind::window:
        case LogicalKind::union_all:
        case LogicalKind::repeat:
        case LogicalKind::get:
        case LogicalKind::dependent_join:
        case LogicalKind::shared_scan:
            break;
        }
        refuse(node->kind, "a reference to a column of the enclosing query outside WHERE");
    }

    Unnested unnest_filter(LogicalPtr node, const LogicalNode &left) {
        std::vector<db::ExprPtr> local;
        std::vector<db::ExprPtr> correlated;
        for (auto &conjunct : node->conjuncts) {
            (reads_outer(*conjunct) ? correlated : local).push_back(std::move(conjunct));
        }
        if (subtree_reads_outer(*node->children[0])) {
            if (!correlated.empty()) {
                unsupported("a correlation in two places");
            }
            Unnested below = unnest(std::move(node->children[0]), left);
            below.plan = make_filter(std::move(below.plan), std::move(local));
            return below;
        }
        const auto outer_only = [&](const std::vector<ColumnId> &ids) {
            return !ids.empty() &&
                   std::all_of(ids.begin(), ids.end(), [&](ColumnId id) { return _outer.count(id) > 0; });
        };
        const auto inner_only = [&](const std::vector<ColumnId> &ids) {
            return !ids.empty() &&
                   std::none_of(ids.begin(), ids.end(), [&](ColumnId id) { return _outer.count(id) > 0; });
        };
        Unnested result;
        bool equalities = true;
        for (const auto &conjunct : correlated) {
            bool ok =
                conjunct->kind() == db::ExprKind::compare && conjunct->compare_op() == db::CompareOp::equal;
            if (ok) {
                const auto a = columns_of(conjunct->child(0));
                const auto b = columns_of(conjunct->child(1));
                if (outer_only(a) && inner_only(b)) {
                    result.keys.push_back(Key{conjunct->children()[0], conjunct->children()[1]});
                } else if (outer_only(b) && inner_only(a)) {
                    result.keys.push_back(Key{conjunct->children()[1], conjunct->children()[0]});
                } else {
                    ok = false;
                }
            }
            equalities = equalities && ok;
        }
        LogicalPtr input = std::move(node->children[0]);
        if (!equalities) {
            // The domain: the distinct outer values the subquery reads (and TRUE, which tells the
            // outer join's rows that met a group), joined to the filter's input; the conditions
            // read them in place of the outer columns.
            Domain domain = make_domain(left);
            result.keys = domain.keys(_columns);
            result.null_safe = true;
            input = make_join(db::JoinKind::inner, std::move(input), std::move(domain.plan), {});
            for (const auto &conjunct : correlated) {
                local.push_back(read_domain(conjunct, domain));
            }
        }
        result.plan = local.empty() ? std::move(input) : make_filter(std::move(input), std::move(local));
        return result;
    }

    /// The subquery's plan unnested: by unnest where it reads the outer columns in one filter
    /// (and the joins above it), else by unnest_domain.
    Unnested unnest_any(LogicalPtr right, const LogicalNode &left) {
        if (!needs_domain(*right)) {
            return unnest(std::move(right), left);
        }
        Carried carried = unnest_domain(std::move(right), left, true);
        Unnested result;
        result.plan = std::move(carried.plan);
        result.keys = carried.domain.keys(_columns);
        result.null_safe = true;
        result.one_row = carried.one_row;
        return result;
    }

    /// The join condition on the keys: outer expression = key, NULL-safe where the keys are a
    /// domain of the outer values.
    static std::vector<db::ExprPtr> key_condition(const Unnested &unnested) {
        std::vector<db::ExprPtr> condition;
        for (const Key &key : unnested.keys) {
            try {
                if (unnested.null_safe && key.outer->kind() != db::ExprKind::constant) {
                    null_safe_equal(key.outer, key.inner, condition);
                } else {
                    condition.push_back(db::expr::equal(key.outer, key.inner));
                }
            } catch (const db::TypeError &error) {
                throw SqlError(std::string("correlated subquery: ") + error.what());
            }
        }
        return condition;
    }

    /// Whether the plan yields exactly one row whatever its input (an aggregate without GROUP BY
    /// under projections and sorts only).
    static bool always_one_row(const LogicalNode &node) {
        switch (node.kind) {
        case LogicalKind::aggregate:
            return node.groups.empty();
        case LogicalKind::project:
        case LogicalKind::sort:
            return !node.limit.has_value() && node.offset == 0 && always_one_row(*node.children[0]);
        default:
            return false;
        }
    }

    /// The join (semi, anti or mark) of `left` with `right` on `conjuncts`.
    static LogicalPtr quantified_join(const LogicalNode &node, LogicalPtr left, LogicalPtr right,
                                      std::vector<db::ExprPtr> conjuncts) {
        if (node.join_kind == db::JoinKind::mark) {
            return make_mark_join(std::move(left), std::move(right), std::move(conjuncts), node.mark);
        }
        return make_join(node.join_kind, std::move(left), std::move(right), std::move(conjuncts));
    }

    /// A dependent semi, anti or mark join ([NOT] EXISTS, IN, ANY/ALL whose subquery aggregates or
    /// limits the rows of one outer row): the unnested subquery joined on its keys and the
    /// comparisons (the dependent join's conjuncts).
    LogicalPtr unnest_quantified(LogicalPtr node, LogicalPtr left, LogicalPtr right) {
        if (row_over_no_input(*right).has_value()) {
            // An outer row without inner rows still has a subquery row, which no group of the
            // unnested plan stands for. An aggregate without GROUP BY and HAVING has exactly one
            // row for every outer row: EXISTS holds.
            if (!always_one_row(*right) || !node->conjuncts.empty()) {
                unsupported("EXISTS, IN or ANY/ALL over an aggregate without GROUP BY whose HAVING holds for "
                            "no rows");
            }
            switch (node->join_kind) {
            case db::JoinKind::semi:
                return left;
            case db::JoinKind::anti:
                return make_filter(std::move(left), {db::expr::constant(db::Value::boolean(false))});
            default: {
                std::vector<db::ExprPtr> expressions;
                for (const ColumnId id : left->output) {
                    expressions.push_back(_columns.ref(id));
                }
                expressions.push_back(db::expr::constant(db::Value::boolean(true)));
                return make_project(std::move(left), std::move(expressions), node->output);
            }
            }
        }
        Unnested unnested = unnest_any(std::move(right), *left);
        std::vector<db::ExprPtr> condition = key_condition(unnested);
        condition.insert(condition.end(), node->conjuncts.begin(), node->conjuncts.end());
        return quantified_join(*node, std::move(left), std::move(unnested.plan), std::move(condition));
    }

    LogicalPtr unnest_join(LogicalPtr node) {
        MX_ASSERT(node->children.size() == 2, "a dependent join has its outer side");
        LogicalPtr left = std::move(node->children[0]);
        LogicalPtr right = std::move(node->children[1]);
        _outer.clear();
        collect_outer(*right, id_set(left->output));
        const db::JoinKind kind = node->join_kind;
        const bool quantified =
            kind == db::JoinKind::semi || kind == db::JoinKind::anti || kind == db::JoinKind::mark;
        if (_outer.empty()) {
            // Nothing to unnest: the subquery's rows are the same for every outer row.
            if (quantified) {
                return quantified_join(*node, std::move(left), std::move(right), std::move(node->conjuncts));
            }
            return make_join(kind, std::move(left), std::move(right), {});
        }
        if (quantified) {
            return unnest_quantified(std::move(node), std::move(left), std::move(right));
        }
        const std::optional<Row> empty = row_over_no_input(*right);
        const ColumnId value = right->output.back();
        db::ExprPtr empty_value;
        if (empty.has_value()) {
            const auto it = empty->find(value);
            if (it != empty->end() && !it->second.null) {
                empty_value = db::expr::constant(it->second);
            }
        }
        Unnested unnested = unnest_any(std::move(right), *left);
        if (!unnested.one_row) {
            // Several rows per correlation value would be an error, which TunaDB does not check.
            throw SqlError("correlated scalar subqueries may GROUP BY only their correlation columns");
        }
        std::vector<db::ExprPtr> condition = key_condition(unnested);
        if (kind == db::JoinKind::inner && empty_value == nullptr) {
            // A row without a group reads NULL, which drops it: an inner join on the keys.
            return make_join(db::JoinKind::inner, std::move(left), std::move(unnested.plan),
                             std::move(condition));
        }
        for (ColumnId id : unnested.plan->output) {
            _columns[id].nullable = true;
        }
        const db::ExprPtr met = unnested.null_safe ? unnested.keys.back().inner : unnested.keys.front().inner;
        if (empty_value == nullptr) {
            return make_join(db::JoinKind::left_outer, std::move(left), std::move(unnested.plan),
                             std::move(condition));
        }
        // The count bug: an outer row without a group reads the value over no rows (count() 0),
        // computed above the join under the value's column.
        const ColumnId inner_value = _columns.add(_columns[value].name, _columns[value].type, true);
        LogicalPtr plan = std::move(unnested.plan);
        if (plan->kind != LogicalKind::project) {
            std::vector<db::ExprPtr> passed;
            for (ColumnId id : plan->output) {
                passed.push_back(_columns.ref(id));
            }
            const std::vector<ColumnId> ids = plan->output;
            plan = make_project(std::move(plan), std::move(passed), ids);
        }
        std::replace(plan->output.begin(), plan->output.end(), value, inner_value);
        LogicalPtr join =
            make_join(db::JoinKind::left_outer, std::move(left), std::move(plan), std::move(condition));
        std::vector<db::ExprPtr> expressions;
        std::vector<ColumnId> ids;
        for (ColumnId id : join->output) {
            if (id == inner_value) {
                expressions.push_back(
                    db::expr::case_when({{db::expr::is_null(met), empty_value}}, _columns.ref(inner_value)));
                ids.push_back(value);
            } else {
                expressions.push_back(_columns.ref(id));
                ids.push_back(id);
            }
        }
        return make_project(std::move(join), std::move(expressions), std::move(ids));
    }

    static std::set<ColumnId> id_set(const std::vector<ColumnId> &ids) { return {ids.begin(), ids.end()}; }

    ColumnRegistry &_columns;
    /// The columns of the dependent join's outer side its subquery reads.
    std::set<ColumnId> _outer;
    std::size_t _unnested{0};
};

} // namespace

std::size_t decorrelate(LogicalPtr &root, ColumnRegistry &columns) {
    Decorrelator decorrelator(columns);
    root = decorrelator.run(std::move(root));
    return decorrelator.unnested();
}

} // namespace mx::sql::detail
