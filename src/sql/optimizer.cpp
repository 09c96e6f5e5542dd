#include "optimizer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include <mx/util/assert.h>

namespace mx::sql {

namespace {

// In the order they run; the index of each entry is its detail::Pass value.
constexpr std::array<OptimizerPass, detail::pass_count> passes{{
    {"decorrelate", true,
     "unnest correlated subqueries (dependent joins: scalar ones, and EXISTS/IN/ANY/ALL ones that "
     "aggregate or limit) into plans grouped by the correlation and joined on it (off: such queries fail)"},
    {"shared_subplans", true,
     "compute a CTE that is referenced more than once only once; every reference reads its result"},
    {"fold", true, "split conjunctions, factor conditions shared by all branches of an OR, drop TRUE"},
    {"pushdown", true, "move conditions and semi/anti joins as close to the scans as their columns allow"},
    {"magic_sets", true,
     "restrict grouped subqueries and large semi/anti join build sides to the keys "
     "the other join side supplies"},
    {"equivalences", true,
     "join keys implied by chains of column equalities (a = b AND b = c gives a = c), one per class "
     "and join"},
    {"join_order", true, "order a region's inner joins by estimated intermediate results (off: FROM order)"},
    {"estimates", false, "estimate every node's rows from the tables' statistics"},
    {"right_semi_joins", true,
     "hash the outer side of a semi/anti join that is much smaller than its subquery"},
    {"right_outer_joins", true,
     "hash the preserved side of a left outer join that is much smaller than its nullable side"},
    {"count_joins", true,
     "count the probe rows per build row in a right outer join whose aggregation groups by build "
     "columns and counts a probe column (a group join; the aggregation then sums one count per "
     "build row)"},
    {"bloom_filters", true, "give a join whose probe rows mostly miss a Bloom filter"},
    {"scan_prefetch", true,
     "prefetch a highly selective scan's predicate columns entirely, the others per row"},
}};

static_assert(passes[static_cast<std::size_t>(detail::Pass::decorrelate)].name == "decorrelate");
static_assert(passes[static_cast<std::size_t>(detail::Pass::shared_subplans)].name == "shared_subplans");
static_assert(passes[static_cast<std::size_t>(detail::Pass::fold)].name == "fold");
static_assert(passes[static_cast<std::size_t>(detail::Pass::estimates)].name == "estimates");
static_assert(passes[static_cast<std::size_t>(detail::Pass::scan_prefetch)].name == "scan_prefetch");

std::string optional_pass_names() {
    std::string names;
    for (const OptimizerPass &pass : passes) {
        if (pass.optional) {
            names.append(names.empty() ? "" : ", ").append(pass.name);
        }
    }
    return names;
}

} // namespace

std::span<const OptimizerPass> optimizer_passes() noexcept { return passes; }

bool OptimizerOptions::enabled(std::string_view name) const {
    if ((name == "magic_sets" && !magic_sets) || (name == "right_semi_joins" && !right_semi_joins) ||
        (name == "right_outer_joins" && !right_outer_joins)) {
        return false;
    }
    return disabled_passes.find(name) == disabled_passes.end();
}

void OptimizerOptions::validate() const {
    for (const std::string &name : disabled_passes) {
        const auto *pass = std::find_if(passes.begin(), passes.end(), [&](const OptimizerPass &candidate) {
            return candidate.name == name;
        });
        if (pass == passes.end()) {
            throw SqlError("unknown optimizer pass '" + name +
                           "' (passes that can be switched off: " + optional_pass_names() + ")");
        }
        if (!pass->optional) {
            throw SqlError("optimizer pass '" + name + "' cannot be switched off: later passes need it " +
                           "(passes that can be switched off: " + optional_pass_names() + ")");
        }
    }
}

} // namespace mx::sql

namespace mx::sql::detail {

namespace {

/// Default selectivity of a predicate nothing is known about (DuckDB uses 0.2 as well).
constexpr double unknown_selectivity = 0.2;

bool subset(const std::vector<ColumnId> &ids, const std::set<ColumnId> &of) {
    return std::all_of(ids.begin(), ids.end(), [&](ColumnId id) { return of.count(id) > 0; });
}

std::set<ColumnId> id_set(const std::vector<ColumnId> &ids) { return {ids.begin(), ids.end()}; }

/// A column reference, also when wrapped in a cast (comparisons cast to a common type).
std::optional<ColumnId> column_of(const db::Expr &expression) {
    if (expression.kind() == db::ExprKind::column) {
        return expression.column_index();
    }
    if (expression.kind() == db::ExprKind::cast && expression.child(0).kind() == db::ExprKind::column) {
        return expression.child(0).column_index();
    }
    return std::nullopt;
}

std::optional<double> as_number(const db::Value &value) {
    if (value.null) {
        return std::nullopt;
    }
    switch (value.type.id) {
    case db::TypeId::integer:
    case db::TypeId::bigint:
    case db::TypeId::date:
    case db::TypeId::boolean:
        return static_cast<double>(value.i64);
    case db::TypeId::decimal:
        return static_cast<double>(value.wide()) / std::pow(10.0, value.type.scale);
    case db::TypeId::float64:
        return value.f64;
    case db::TypeId::varchar:
        return std::nullopt;
    }
    return std::nullopt;
}

db::ExprPtr conjunction_of(const std::vector<db::ExprPtr> &conjuncts) {
    return conjuncts.size() == 1 ? conjuncts.front() : db::expr::logical_and(conjuncts);
}

bool contains_expression(const std::vector<db::ExprPtr> &list, const db::Expr &expression) {
    return std::any_of(list.begin(), list.end(),
                       [&](const db::ExprPtr &e) { return same_expression(*e, expression); });
}

/// (a AND b) OR (a AND c) -> a AND (b OR c): conditions every branch of an OR shares become
/// conjuncts of their own, so that a join key hidden in an OR (TPC-H Q19) is found.
void factor_or(const db::ExprPtr &expression, std::vector<db::ExprPtr> &out) {
    if (expression->kind() != db::ExprKind::logical_or) {
        out.push_back(expression);
        return;
    }
    std::vector<std::vector<db::ExprPtr>> branches;
    for (const auto &child : expression->children()) {
        branches.emplace_back();
        split_conjuncts(child, branches.back());
    }
    std::vector<db::ExprPtr> common;
    for (const auto &candidate : branches.front()) {
        bool everywhere = true;
        for (std::size_t b = 1; b < branches.size() && everywhere; ++b) {
            everywhere = contains_expression(branches[b], *candidate);
        }
        if (everywhere && !contains_expression(common, *candidate)) {
            common.push_back(candidate);
        }
    }
    if (common.empty()) {
        out.push_back(expression);
        return;
    }
    std::vector<db::ExprPtr> rest;
    for (const auto &branch : branches) {
        std::vector<db::ExprPtr> remaining;
        for (const auto &conjunct : branch) {
            if (!contains_expression(common, *conjunct)) {
                remaining.push_back(conjunct);
            }
        }
        if (remaining.empty()) {
            // This branch is the common part alone: the OR adds nothing to it.
            out.insert(out.end(), common.begin(), common.end());
            return;
        }
        rest.push_back(conjunction_of(remaining));
    }
    out.insert(out.end(), common.begin(), common.end());
    out.push_back(db::expr::logical_or(std::move(rest)));
}

/// From an OR over several relations, the condition it implies on the relation `columns`:
/// the OR of each branch's conjuncts over those columns alone (nullptr when some branch has
/// none). Pushed into the relation, it filters early while the OR itself stays in the join.
db::ExprPtr implied_by_or(const db::Expr &expression, const std::set<ColumnId> &columns) {
    if (expression.kind() != db::ExprKind::logical_or) {
        return nullptr;
    }
    std::vector<db::ExprPtr> branches;
    for (const auto &child : expression.children()) {
        std::vector<db::ExprPtr> conjuncts;
        split_conjuncts(child, conjuncts);
        std::vector<db::ExprPtr> local;
        for (const auto &conjunct : conjuncts) {
            const auto ids = columns_of(*conjunct);
            if (!ids.empty() && subset(ids, columns)) {
                local.push_back(conjunct);
            }
        }
        if (local.empty()) {
            return nullptr;
        }
        branches.push_back(conjunction_of(local));
    }
    return db::expr::logical_or(std::move(branches));
}

void reset_estimates(LogicalNode &node) {
    node.rows = -1.0;
    for (auto &child : node.children) {
        reset_estimates(*child);
    }
}

/// The rows of all tables a plan scans (each scan counted).
double scanned_rows(const LogicalNode &node) {
    double rows = node.kind == LogicalKind::get ? static_cast<double>(node.table->row_count()) : 0.0;
    for (const auto &child : node.children) {
        rows += scanned_rows(*child);
    }
    return rows;
}

/// Estimated rows of an inner join of `left` and `right` rows whose keys have `left_distinct`
/// and `right_distinct` distinct combinations: every key value of the side with fewer values
/// meets one of the other side (containment), and the residual conditions keep `residual` of
/// the pairs.
double inner_join_rows(double left, double right, double left_distinct, double right_distinct,
                       double residual) {
    return left * right / std::max(left_distinct, right_distinct) * residual;
}

/// The tables a plan reads, for EXPLAIN's notes.
void table_names(const LogicalNode &node, std::string &out) {
    if (node.kind == LogicalKind::get) {
        out.append(out.empty() ? "" : ", ").append(node.alias.empty() ? node.table->name() : node.alias);
    }
    for (const auto &child : node.children) {
        table_names(*child, out);
    }
}

} // namespace

void Optimizer::register_base(const LogicalNode &node) {
    for (const auto &child : node.children) {
        register_base(*child);
    }
    if (node.kind == LogicalKind::shared_scan) {
        const LogicalNode &plan = *node.shared->plan;
        if (!node.shared->registered) {
            node.shared->registered = true;
            register_base(plan);
        }
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            const auto it = _base.find(plan.output[i]);
            if (it != _base.end()) {
                _base[node.output[i]] = it->second;
            }
        }
    } else if (node.kind == LogicalKind::get) {
        for (std::size_t i = 0; i < node.table_columns.size(); ++i) {
            _base[node.table_columns[i]] = BaseColumn{node.table.get(), i};
        }
    } else if (node.kind == LogicalKind::project) {
        for (std::size_t i = 0; i < node.expressions.size(); ++i) {
            const auto source = column_of(*node.expressions[i]);
            if (node.expressions[i]->kind() == db::ExprKind::column && source.has_value()) {
                const auto it = _base.find(*source);
                if (it != _base.end()) {
                    _base[node.output[i]] = it->second;
                }
            }
        }
    } else if (node.kind == LogicalKind::aggregate) {
        for (std::size_t i = 0; i < node.groups.size(); ++i) {
            if (node.groups[i]->kind() == db::ExprKind::column) {
                const auto it = _base.find(node.groups[i]->column_index());
                if (it != _base.end()) {
                    _base[node.output[i]] = it->second;
                }
            }
        }
    }
}

const db::ColumnStatistics *Optimizer::statistics(ColumnId id) const {
    const auto it = _base.find(id);
    if (it == _base.end() || it->second.table->row_count() == 0) {
        return nullptr;
    }
    return &it->second.table->statistics(it->second.column);
}

double Optimizer::distinct(ColumnId id, double rows) const {
    double estimate = _columns[id].distinct;
    if (estimate < 0) {
        estimate = rows;
    }
    return std::max(1.0, std::min(estimate, std::max(rows, 1.0)));
}

double Optimizer::key_distinct(const std::vector<db::ExprPtr> &keys, double rows,
                               const std::function<double(ColumnId)> *cap) const {
    double product = 1.0;
    for (const auto &key : keys) {
        const auto ids = columns_of(*key);
        if (ids.size() != 1) {
            product *= rows;
        } else if (cap != nullptr) {
            product *= std::max(1.0, std::min(distinct(ids.front(), rows), (*cap)(ids.front())));
        } else {
            product *= distinct(ids.front(), rows);
        }
    }
    return std::max(1.0, std::min(product, std::max(rows, 1.0)));
}

std::pair<double, double>
Optimizer::join_key_distincts(const std::vector<db::ExprPtr> &left_keys, double left_rows,
                              const std::vector<db::ExprPtr> &right_keys, double right_rows,
                              const std::function<double(ColumnId)> *left_cap,
                              const std::function<double(ColumnId)> *right_cap) const {
    double left = key_distinct(left_keys, left_rows, left_cap);
    double right = key_distinct(right_keys, right_rows, right_cap);
    if (left_keys.size() < 2 || left_keys.size() != right_keys.size()) {
        return {left, right};
    }
    const auto column_distinct = [this](const db::Expr &key, double rows,
                                        const std::function<double(ColumnId)> *cap) -> std::optional<double> {
        const auto ids = columns_of(key);
        if (ids.size() != 1) {
            return std::nullopt;
        }
        const double d = distinct(ids.front(), rows);
        return cap != nullptr ? std::min(d, (*cap)(ids.front())) : d;
    };
    const bool left_larger = left_rows >= right_rows;
    for (std::size_t i = 0; i < left_keys.size(); ++i) {
        const auto l = column_distinct(*left_keys[i], left_rows, left_cap);
        const auto r = column_distinct(*right_keys[i], right_rows, right_cap);
        if (!l || !r || (left_larger ? *l > *r : *r > *l)) {
            return {left, right};
        }
    }
    if (left_larger) {
        left = std::min(left, right);
    } else {
        right = std::min(left, right);
    }
    return {left, right};
}

Optimizer::Optimizer(ColumnRegistry &columns, OptimizerOptions options)
    : _columns(columns), _options(std::move(options)) {
    for (std::size_t i = 0; i < pass_count; ++i) {
        _enabled[i] = _options.enabled(passes[i].name);
        MX_ASSERT(_enabled[i] || passes[i].optional, "required optimizer passes cannot be switched off");
    }
}

std::string Optimizer::passes_note() const {
    std::string ran;
    std::string off;
    for (std::size_t i = 0; i < pass_count; ++i) {
        std::string &list = _enabled[i] ? ran : off;
        list.append(list.empty() ? "" : ", ").append(passes[i].name);
    }
    return "optimizer passes: " + ran + (off.empty() ? "" : " (off: " + off + ")");
}

LogicalPtr Optimizer::optimize(LogicalPtr root) {
    _notes.push_back(passes_note());
    if (enabled(Pass::join_order) && _options.join_order == JoinOrder::greedy) {
        _notes.emplace_back("join order: greedy");
    }
    // decorrelate: before everything else, which sees ordinary joins only.
    if (contains_dependent_join(*root)) {
        if (!enabled(Pass::decorrelate)) {
            throw SqlError("a correlated subquery (a dependent join) needs the optimizer pass "
                           "'decorrelate', which is switched off");
        }
        const std::size_t unnested = decorrelate(root, _columns);
        _notes.push_back("decorrelate: unnested " + std::to_string(unnested) + " dependent join" +
                         (unnested == 1 ? "" : "s"));
    }
    std::vector<std::shared_ptr<SharedPlan>> shared;
    if (enabled(Pass::shared_subplans)) {
        shared = share_subplans(root);
        for (const auto &subplan : shared) {
            _notes.push_back("shared subplan #" + std::to_string(subplan->id) + ": CTE " + subplan->name +
                             " is computed once for all its references");
        }
    }
    register_base(*root);
    // fold, pushdown, magic_sets, equivalences, join_order: per join region, bottom-up. A shared
    // subplan is rewritten when the walk meets its first reader.
    root = rewrite(std::move(root));
    for (const auto &subplan : shared) {
        rewrite_shared(*subplan); // its readers sit where the walk does not rewrite
    }
    // estimates: the nodes the region walk has not estimated yet.
    estimate(*root);
    // right_semi_joins, right_outer_joins, bloom_filters, scan_prefetch.
    decide(*root);
    return root;
}

// ---------------------------------------------------------------------------------------------
// Selectivity

std::optional<double> Optimizer::range_fraction(const db::Expr &conjunct) {
    if (conjunct.kind() != db::ExprKind::compare) {
        return std::nullopt;
    }
    auto column = column_of(conjunct.child(0));
    const db::Expr *constant = &conjunct.child(1);
    db::CompareOp op = conjunct.compare_op();
    if (!column.has_value() || constant->kind() != db::ExprKind::constant) {
        column = column_of(conjunct.child(1));
        constant = &conjunct.child(0);
        op = db::mirrored(op);
    }
    if (!column.has_value() || constant->kind() != db::ExprKind::constant) {
        return std::nullopt;
    }
    const auto value = as_number(constant->value());
    const auto *stats = statistics(*column);
    if (!value.has_value() || stats == nullptr || !as_number(stats->min) || !as_number(stats->max)) {
        return std::nullopt;
    }
    const double min = *as_number(stats->min);
    const double max = *as_number(stats->max);
    const bool discrete = _columns[*column].type.id != db::TypeId::float64;
    const double width = max - min + (discrete ? 1.0 : 0.0);
    if (width <= 0) {
        return 1.0;
    }
    double fraction = 0.0;
    if (op == db::CompareOp::greater || op == db::CompareOp::greater_equal) {
        fraction = (max - std::max(min, *value) + (discrete ? 1.0 : 0.0)) / width;
    } else {
        fraction = (std::min(max, *value) - min + (discrete ? 1.0 : 0.0)) / width;
    }
    return std::clamp(fraction, 0.0, 1.0);
}

double Optimizer::conjunct_selectivity(const db::Expr &conjunct) {
    switch (conjunct.kind()) {
    case db::ExprKind::constant:
        return conjunct.value().null || conjunct.value().i64 == 0 ? 0.0 : 1.0;
    case db::ExprKind::logical_and: {
        std::vector<db::ExprPtr> parts(conjunct.children().begin(), conjunct.children().end());
        return selectivity(parts);
    }
    case db::ExprKind::logical_or: {
        double none = 1.0;
        for (const auto &child : conjunct.children()) {
            none *= 1.0 - conjunct_selectivity(*child);
        }
        return 1.0 - none;
    }
    case db::ExprKind::logical_not:
        return 1.0 - conjunct_selectivity(conjunct.child(0));
    case db::ExprKind::compare: {
        const auto left = column_of(conjunct.child(0));
        const auto right = column_of(conjunct.child(1));
        const bool left_constant = conjunct.child(0).kind() == db::ExprKind::constant;
        const bool right_constant = conjunct.child(1).kind() == db::ExprKind::constant;
        const auto column = left.has_value() ? left : right;
        const bool with_constant =
            (left.has_value() && right_constant) || (right.has_value() && left_constant);
        if (conjunct.compare_op() == db::CompareOp::equal) {
            if (with_constant) {
                return 1.0 / distinct(*column, 1e18);
            }
            if (left.has_value() && right.has_value()) {
                return 1.0 / std::max(distinct(*left, 1e18), distinct(*right, 1e18));
            }
            return unknown_selectivity;
        }
        if (conjunct.compare_op() == db::CompareOp::not_equal) {
            return with_constant ? 1.0 - 1.0 / distinct(*column, 1e18) : 1.0 - unknown_selectivity;
        }
        if (with_constant) {
            // A range nested in OR or NOT: estimated alone against the column's min and max.
            const auto fraction = range_fraction(conjunct);
            return fraction.value_or(1.0 / 3.0);
        }
        return 1.0 / 3.0;
    }
    case db::ExprKind::in_list: {
        const auto column = column_of(conjunct.child(0));
        const double values = static_cast<double>(conjunct.list().size());
        const double fraction = column.has_value() ? std::min(1.0, values / distinct(*column, 1e18))
                                                   : std::min(1.0, values * 0.1);
        return conjunct.negated() ? 1.0 - fraction : fraction;
    }
    case db::ExprKind::like: {
        const std::string &pattern = conjunct.pattern();
        double fraction = 0.1;
        if (pattern.find_first_of("%_") == std::string::npos) {
            const auto column = column_of(conjunct.child(0));
            fraction = column.has_value() ? 1.0 / distinct(*column, 1e18) : 0.05;
        } else if (!pattern.empty() && pattern.front() != '%' && pattern.front() != '_') {
            fraction = 0.05; // a prefix
        }
        return conjunct.negated() ? 1.0 - fraction : fraction;
    }
    case db::ExprKind::is_null: {
        const auto column = column_of(conjunct.child(0));
        double fraction = 0.05;
        if (column.has_value()) {
            const auto *stats = statistics(*column);
            const auto it = _base.find(*column);
            if (stats != nullptr && it != _base.end()) {
                fraction = static_cast<double>(stats->null_count) /
                           static_cast<double>(std::max<std::uint64_t>(1, it->second.table->row_count()));
            } else if (!_columns[*column].nullable) {
                fraction = 0.0;
            }
        }
        return conjunct.negated() ? 1.0 - fraction : fraction;
    }
    default:
        return unknown_selectivity;
    }
}

double Optimizer::selectivity(const std::vector<db::ExprPtr> &conjuncts) {
    // Range conditions on one column (BETWEEN, >= and <) are combined into one interval and
    // estimated against the column's min and max; everything else is assumed independent.
    struct Range {
        std::optional<double> low;
        std::optional<double> high;
    };
    std::map<ColumnId, Range> ranges;
    double result = 1.0;
    for (const auto &conjunct : conjuncts) {
        bool handled = false;
        if (conjunct->kind() == db::ExprKind::compare && conjunct->compare_op() != db::CompareOp::equal &&
            conjunct->compare_op() != db::CompareOp::not_equal) {
            auto column = column_of(conjunct->child(0));
            const db::Expr *constant = &conjunct->child(1);
            db::CompareOp op = conjunct->compare_op();
            if (!column.has_value() || constant->kind() != db::ExprKind::constant) {
                column = column_of(conjunct->child(1));
                constant = &conjunct->child(0);
                op = db::mirrored(op);
            }
            if (column.has_value() && constant->kind() == db::ExprKind::constant) {
                const auto value = as_number(constant->value());
                const auto *stats = statistics(*column);
                if (value.has_value() && stats != nullptr && as_number(stats->min) && as_number(stats->max)) {
                    Range &range = ranges[*column];
                    if (op == db::CompareOp::greater || op == db::CompareOp::greater_equal) {
                        range.low = range.low ? std::max(*range.low, *value) : *value;
                    } else {
                        range.high = range.high ? std::min(*range.high, *value) : *value;
                    }
                    handled = true;
                } else if (constant->value().null) {
                    result = 0.0;
                    handled = true;
                }
            }
        }
        if (!handled) {
            result *= conjunct_selectivity(*conjunct);
        }
    }
    for (const auto &[column, range] : ranges) {
        const auto *stats = statistics(column);
        const double min = *as_number(stats->min);
        const double max = *as_number(stats->max);
        const double low = std::max(min, range.low.value_or(min));
        const double high = std::min(max, range.high.value_or(max));
        double fraction = 0.0;
        if (high >= low) {
            // Integers and dates: a closed range of n values out of (max - min + 1).
            const bool discrete = _columns[column].type.id != db::TypeId::float64;
            const double width = max - min + (discrete ? 1.0 : 0.0);
            fraction = width > 0 ? (high - low + (discrete ? 1.0 : 0.0)) / width : 1.0;
        }
        result *= std::clamp(fraction, 0.0, 1.0);
    }
    return std::clamp(result, 0.0, 1.0);
}

// ---------------------------------------------------------------------------------------------
// Pushdown and join ordering

LogicalPtr Optimizer::rewrite(LogicalPtr node) {
    switch (node->kind) {
    case LogicalKind::filter:
        return rewrite_region(std::move(node));
    case LogicalKind::join:
        if (node->join_kind == db::JoinKind::left_outer || node->join_kind == db::JoinKind::mark) {
            // A mark join preserves its left side like a left outer join.
            return rewrite_outer_join(std::move(node));
        }
        if (node->join_kind == db::JoinKind::full_outer) {
            // Both sides are preserved: no condition moves across the join.
            for (auto &child : node->children) {
                child = rewrite(std::move(child));
            }
            return node;
        }
        return rewrite_region(std::move(node));
    case LogicalKind::get:
        return node;
    case LogicalKind::shared_scan:
        rewrite_shared(*node->shared);
        node->rows = -1.0;
        return node;
    default:
        for (auto &child : node->children) {
            child = rewrite(std::move(child));
        }
        return node;
    }
}

void Optimizer::rewrite_shared(SharedPlan &shared) {
    // Optimized on its own, once, as the root of its own plan: nothing above one reader may move
    // into it.
    if (!shared.rewritten) {
        shared.rewritten = true;
        shared.plan = rewrite(std::move(shared.plan));
        reset_estimates(*shared.plan);
        estimate(*shared.plan);
    }
}

void Optimizer::place_through(LogicalNode &leaf, const std::vector<db::ExprPtr> &sources,
                              std::vector<db::ExprPtr> conjuncts, std::vector<db::ExprPtr> &above,
                              bool keep_constants) {
    std::map<ColumnId, ColumnId> through;
    for (std::size_t i = 0; i < sources.size(); ++i) {
        if (sources[i]->kind() == db::ExprKind::column) {
            through[leaf.output[i]] = sources[i]->column_index();
        }
    }
    std::vector<db::ExprPtr> below;
    for (auto &conjunct : conjuncts) {
        const auto ids = columns_of(*conjunct);
        if (!(keep_constants && ids.empty()) &&
            std::all_of(ids.begin(), ids.end(), [&](ColumnId id) { return through.count(id) > 0; })) {
            below.push_back(
                db::expr::remap_columns(conjunct, [&](std::uint32_t id) { return through.at(id); }));
        } else {
            above.push_back(std::move(conjunct));
        }
    }
    if (!below.empty()) {
        leaf.children[0] = make_filter(std::move(leaf.children[0]), std::move(below));
    }
    leaf.children[0] = rewrite(std::move(leaf.children[0]));
}

LogicalPtr Optimizer::place(LogicalPtr leaf, std::vector<db::ExprPtr> conjuncts) {
    std::vector<db::ExprPtr> above;
    switch (leaf->kind) {
    case LogicalKind::get:
        leaf->conjuncts.insert(leaf->conjuncts.end(), conjuncts.begin(), conjuncts.end());
        return leaf;
    case LogicalKind::project:
        // Through a projection when every referenced output is a plain column of the input.
        place_through(*leaf, leaf->expressions, std::move(conjuncts), above, false);
        break;
    case LogicalKind::aggregate:
        // Below an aggregation when the condition only reads group keys that are columns.
        place_through(*leaf, leaf->groups, std::move(conjuncts), above, true);
        break;
    case LogicalKind::join: {
        // Only outer joins are leaves of a region: conditions on the preserved side go below
        // (a full outer join preserves both: they stay above).
        if (leaf->join_kind == db::JoinKind::full_outer) {
            above = std::move(conjuncts);
            leaf = rewrite(std::move(leaf));
            break;
        }
        const std::set<ColumnId> left = id_set(leaf->children[0]->output);
        std::vector<db::ExprPtr> below;
        for (auto &conjunct : conjuncts) {
            const auto ids = columns_of(*conjunct);
            if (!ids.empty() && subset(ids, left)) {
                below.push_back(std::move(conjunct));
            } else {
                above.push_back(std::move(conjunct));
            }
        }
        if (!below.empty()) {
            leaf->children[0] = make_filter(std::move(leaf->children[0]), std::move(below));
        }
        leaf = rewrite(std::move(leaf));
        break;
    }
    case LogicalKind::union_all: {
        // A condition on the concatenation's columns holds for each input's rows: every input
        // filters its own (in its columns).
        const std::set<ColumnId> outputs = id_set(leaf->output);
        std::vector<db::ExprPtr> below;
        for (auto &conjunct : conjuncts) {
            const auto ids = columns_of(*conjunct);
            (!ids.empty() && subset(ids, outputs) ? below : above).push_back(std::move(conjunct));
        }
        for (auto &child : leaf->children) {
            std::map<ColumnId, ColumnId> through;
            for (std::size_t i = 0; i < leaf->output.size(); ++i) {
                through[leaf->output[i]] = child->output[i];
            }
            std::vector<db::ExprPtr> remapped;
            for (const auto &conjunct : below) {
                remapped.push_back(
                    db::expr::remap_columns(conjunct, [&](std::uint32_t id) { return through.at(id); }));
            }
            child = rewrite(remapped.empty() ? std::move(child)
                                             : make_filter(std::move(child), std::move(remapped)));
        }
        break;
    }
    default:
        above = std::move(conjuncts);
        leaf = rewrite(std::move(leaf));
        break;
    }
    if (!above.empty()) {
        leaf = make_filter(std::move(leaf), std::move(above));
    }
    return leaf;
}

LogicalPtr Optimizer::rewrite_outer_join(LogicalPtr node) {
    // ON conditions that read only the build (nullable) side filter it before the join.
    const std::set<ColumnId> right = id_set(node->children[1]->output);
    std::vector<db::ExprPtr> keep;
    std::vector<db::ExprPtr> below;
    for (auto &conjunct : node->conjuncts) {
        const auto ids = columns_of(*conjunct);
        if (enabled(Pass::pushdown) && !ids.empty() && subset(ids, right)) {
            below.push_back(std::move(conjunct));
        } else {
            keep.push_back(std::move(conjunct));
        }
    }
    node->conjuncts = std::move(keep);
    if (!below.empty()) {
        node->children[1] = make_filter(std::move(node->children[1]), std::move(below));
    }
    node->children[0] = rewrite(std::move(node->children[0]));
    node->children[1] = rewrite(std::move(node->children[1]));
    choose_keys(*node);
    return node;
}

void Optimizer::choose_keys(LogicalNode &join) {
    const std::set<ColumnId> left = id_set(join.children[0]->output);
    const std::set<ColumnId> right = id_set(join.children[1]->output);
    std::vector<db::ExprPtr> residual;
    for (auto &conjunct : join.conjuncts) {
        if (conjunct->kind() == db::ExprKind::compare && conjunct->compare_op() == db::CompareOp::equal) {
            const auto a = columns_of(conjunct->child(0));
            const auto b = columns_of(conjunct->child(1));
            if (!a.empty() && !b.empty() && subset(a, left) && subset(b, right)) {
                join.left_keys.push_back(conjunct->children()[0]);
                join.right_keys.push_back(conjunct->children()[1]);
                continue;
            }
            if (!a.empty() && !b.empty() && subset(b, left) && subset(a, right)) {
                join.left_keys.push_back(conjunct->children()[1]);
                join.right_keys.push_back(conjunct->children()[0]);
                continue;
            }
        }
        residual.push_back(std::move(conjunct));
    }
    join.conjuncts = std::move(residual);
    join.optimized = true;
}

void Optimizer::connecting_keys(const std::vector<JoinPredicate> &predicates, const std::set<ColumnId> &left,
                                const std::set<ColumnId> &right, std::vector<db::ExprPtr> &left_keys,
                                std::vector<db::ExprPtr> &right_keys) {
    std::set<int> classes;
    for (const auto &predicate : predicates) {
        const db::Expr &e = *predicate.expression;
        if (predicate.used || e.kind() != db::ExprKind::compare || e.compare_op() != db::CompareOp::equal) {
            continue;
        }
        const auto a = columns_of(e.child(0));
        const auto b = columns_of(e.child(1));
        if (a.empty() || b.empty()) {
            continue;
        }
        const bool forward = subset(a, left) && subset(b, right);
        if (!forward && !(subset(b, left) && subset(a, right))) {
            continue;
        }
        if (!first_of_its_class(predicate, classes)) {
            continue;
        }
        left_keys.push_back(e.children()[forward ? 0 : 1]);
        right_keys.push_back(e.children()[forward ? 1 : 0]);
    }
}

void Optimizer::add_implied_equalities(const std::vector<std::set<ColumnId>> &leaf_columns,
                                       std::vector<JoinPredicate> &predicates) {
    std::map<ColumnId, std::size_t> leaf_of;
    for (std::size_t i = 0; i < leaf_columns.size(); ++i) {
        for (ColumnId id : leaf_columns[i]) {
            leaf_of[id] = i;
        }
    }
    // Equalities of two plain columns of different relations and of one type: the implied ones
    // need no cast (a cast would make a side no plain column, and such equalities stay alone).
    std::map<ColumnId, ColumnId> parent;
    std::map<ColumnId, db::ExprPtr> column_expr;
    const auto find = [&](ColumnId id) {
        while (parent[id] != id) {
            parent[id] = parent[parent[id]];
            id = parent[id];
        }
        return id;
    };
    std::vector<std::size_t> equalities;
    for (std::size_t p = 0; p < predicates.size(); ++p) {
        const db::Expr &e = *predicates[p].expression;
        if (predicates[p].used || e.kind() != db::ExprKind::compare ||
            e.compare_op() != db::CompareOp::equal || e.child(0).kind() != db::ExprKind::column ||
            e.child(1).kind() != db::ExprKind::column || e.child(0).type() != e.child(1).type()) {
            continue;
        }
        const ColumnId a = e.child(0).column_index();
        const ColumnId b = e.child(1).column_index();
        const auto la = leaf_of.find(a);
        const auto lb = leaf_of.find(b);
        if (la == leaf_of.end() || lb == leaf_of.end() || la->second == lb->second) {
            continue;
        }
        for (std::size_t side = 0; side < 2; ++side) {
            const ColumnId id = side == 0 ? a : b;
            if (parent.emplace(id, id).second) {
                column_expr[id] = e.children()[side];
            }
        }
        parent[find(a)] = find(b);
        equalities.push_back(p);
    }
    // Classes of three or more columns only: a single equality implies nothing. Not a class with
    // two columns of one relation either: the one key per class and join would leave their
    // equality unchecked (a.x = b.z AND a.y = b.z joins a and b on one of the two).
    std::map<ColumnId, std::vector<ColumnId>> members;
    for (const auto &[id, unused] : parent) {
        members[find(id)].push_back(id);
    }
    std::map<ColumnId, int> class_of;
    for (const auto &[root, ids] : members) {
        std::set<std::size_t> relations;
        for (ColumnId id : ids) {
            relations.insert(leaf_of[id]);
        }
        if (ids.size() >= 3 && relations.size() == ids.size()) {
            const int index = static_cast<int>(class_of.size());
            class_of[root] = index;
        }
    }
    if (class_of.empty()) {
        return;
    }
    std::set<std::pair<ColumnId, ColumnId>> equated;
    for (const std::size_t p : equalities) {
        const db::Expr &e = *predicates[p].expression;
        const ColumnId a = e.child(0).column_index();
        const ColumnId b = e.child(1).column_index();
        if (const auto it = class_of.find(find(a)); it != class_of.end()) {
            predicates[p].equivalence = it->second;
            equated.emplace(std::min(a, b), std::max(a, b));
        }
    }
    for (const auto &[root, index] : class_of) {
        const std::vector<ColumnId> &ids = members[root];
        for (std::size_t i = 0; i < ids.size(); ++i) {
            for (std::size_t j = i + 1; j < ids.size(); ++j) {
                if (equated.count({ids[i], ids[j]}) != 0) {
                    continue;
                }
                db::ExprPtr implied = db::expr::equal(column_expr[ids[i]], column_expr[ids[j]]);
                predicates.push_back(JoinPredicate{implied, columns_of(*implied), false, index});
            }
        }
    }
}

Optimizer::JoinComponent Optimizer::join_components(JoinComponent a, JoinComponent b,
                                                    std::vector<JoinPredicate> &predicates) {
    // The smaller input is the build side (right); the larger one streams through.
    const bool a_builds = a.tree->rows < b.tree->rows;
    LogicalPtr probe = a_builds ? std::move(b.tree) : std::move(a.tree);
    LogicalPtr build = a_builds ? std::move(a.tree) : std::move(b.tree);
    std::set<ColumnId> ids = std::move(a.ids);
    ids.insert(b.ids.begin(), b.ids.end());
    std::vector<db::ExprPtr> condition;
    std::set<int> classes;
    for (auto &predicate : predicates) {
        if (!predicate.used && subset(predicate.ids, ids)) {
            predicate.used = true;
            if (first_of_its_class(predicate, classes)) {
                condition.push_back(predicate.expression);
            }
        }
    }
    LogicalPtr join =
        make_join(db::JoinKind::inner, std::move(probe), std::move(build), std::move(condition));
    choose_keys(*join);
    estimate(*join);
    JoinComponent merged;
    merged.tree = std::move(join);
    merged.ids = std::move(ids);
    return merged;
}

// Join ordering by dynamic programming: DPsub (subset enumeration, Vance and Maier) restricted
// to connected splits, the variant Moerkotte and Neumann compare DPccp with. The subsets S of a
// region's n relations are visited as bit masks in increasing order, so every subset of S comes
// before S. Each split of S into S1 and S2 = S \ S1 whose halves both have a plan and which a
// join key connects (an equality with one side over S1's columns and the other over S2's) is a
// candidate for S costing cost(S1) + cost(S2) + rows(S): C_out, the sum of the estimated rows
// of all joins. A subset no condition connects gets no plan, so the trees have no cross
// products. DPsub tries all 3^n splits and drops the unconnected ones (DPccp would generate
// only connected ones); that is at most 3^10 = 59049 cheap tests here, and the same connection
// test handles conditions over more than two relations (a.x + b.y = c.z), which DPccp's graph
// enumeration does not.
//
// rows(S) is the estimate estimate() gives that join: the distinct counts of the key columns
// (distinct(), also bounded by the rows of every join below that produces the column, as
// estimate() caps them) and the selectivity of the other conditions that the join applies. It
// depends on the split, so each entry keeps the rows of its best plan and those bounds.
std::vector<Optimizer::JoinComponent> Optimizer::order_by_dp(std::vector<JoinComponent> leaves,
                                                             std::vector<JoinPredicate> &predicates) {
    using Mask = std::uint32_t;
    const std::size_t n = leaves.size();
    MX_ASSERT(n >= 2 && n <= dp_join_max_relations, "dynamic programming orders 2 to 10 relations");
    const Mask all = (Mask{1} << n) - 1;
    std::map<ColumnId, std::size_t> leaf_of;
    for (std::size_t i = 0; i < n; ++i) {
        for (ColumnId id : leaves[i].ids) {
            leaf_of[id] = i;
        }
    }
    // The relations whose columns `ids` reads; none when a column is from outside the region.
    auto mask_of = [&](const std::vector<ColumnId> &ids) -> std::optional<Mask> {
        Mask mask = 0;
        for (ColumnId id : ids) {
            const auto it = leaf_of.find(id);
            if (it == leaf_of.end()) {
                return std::nullopt;
            }
            mask |= Mask{1} << it->second;
        }
        return mask;
    };
    struct Condition {
        const JoinPredicate *predicate{nullptr};
        Mask relations{0};
        /// An equality usable as a join key: the relations of its two sides (both non-zero).
        Mask left{0};
        Mask right{0};
        double selectivity{1.0};
    };
    std::vector<Condition> conditions;
    for (const auto &predicate : predicates) {
        const auto relations = mask_of(predicate.ids);
        if (predicate.used || !relations.has_value()) {
            continue; // applied already, or above the region's joins
        }
        Condition condition;
        condition.predicate = &predicate;
        condition.relations = *relations;
        const db::Expr &e = *predicate.expression;
        if (e.kind() == db::ExprKind::compare && e.compare_op() == db::CompareOp::equal) {
            const auto left = mask_of(columns_of(e.child(0)));
            const auto right = mask_of(columns_of(e.child(1)));
            if (left.has_value() && right.has_value() && *left != 0 && *right != 0) {
                condition.left = *left;
                condition.right = *right;
            }
        }
        condition.selectivity = selectivity({predicate.expression});
        conditions.push_back(condition);
    }

    struct Entry {
        /// C_out of the best plan found; negative while there is none.
        double cost{-1.0};
        double rows{0.0};
        /// The relations of the best plan's left input.
        Mask left{0};
        /// Per relation, the bound on its columns' distinct counts (the smallest join result
        /// above it in the plan).
        std::array<double, dp_join_max_relations> cap{};
    };
    std::vector<Entry> table(std::size_t{all} + 1);
    for (std::size_t i = 0; i < n; ++i) {
        Entry &entry = table[Mask{1} << i];
        entry.cost = 0.0;
        entry.rows = std::max(leaves[i].tree->rows, 0.0);
        entry.cap.fill(std::numeric_limits<double>::infinity());
    }
    std::vector<db::ExprPtr> left_keys;
    std::vector<db::ExprPtr> right_keys;
    std::set<int> classes;
    for (Mask set = 1; set <= all; ++set) {
        if ((set & (set - 1)) == 0) {
            continue; // one relation
        }
        const Mask lowest = set & (~set + 1);
        // The left half takes the set's lowest relation: every unordered split is tried once
        // (the estimate is symmetric; join_components chooses the build side).
        for (Mask left = (set - 1) & set; left != 0; left = (left - 1) & set) {
            const Mask right = set ^ left;
            const Entry &a = table[left];
            const Entry &b = table[right];
            if ((left & lowest) == 0 || a.cost < 0 || b.cost < 0) {
                continue;
            }
            left_keys.clear();
            right_keys.clear();
            classes.clear();
            double residual = 1.0;
            for (const auto &condition : conditions) {
                if ((condition.relations & ~set) != 0 || (condition.relations & ~left) == 0 ||
                    (condition.relations & ~right) == 0) {
                    continue; // not applied by this join
                }
                if (!first_of_its_class(*condition.predicate, classes)) {
                    continue;
                }
                const db::Expr &e = *condition.predicate->expression;
                if (condition.left != 0 && (condition.left & ~left) == 0 && (condition.right & ~right) == 0) {
                    left_keys.push_back(e.children()[0]);
                    right_keys.push_back(e.children()[1]);
                } else if (condition.left != 0 && (condition.right & ~left) == 0 &&
                           (condition.left & ~right) == 0) {
                    left_keys.push_back(e.children()[1]);
                    right_keys.push_back(e.children()[0]);
                } else {
                    residual *= condition.selectivity;
                }
            }
            if (left_keys.empty()) {
                continue; // not connected: no cross products inside the tree
            }
            const std::function<double(ColumnId)> cap_a = [&](ColumnId id) { return a.cap[leaf_of.at(id)]; };
            const std::function<double(ColumnId)> cap_b = [&](ColumnId id) { return b.cap[leaf_of.at(id)]; };
            const auto [left_distinct, right_distinct] =
                join_key_distincts(left_keys, a.rows, right_keys, b.rows, &cap_a, &cap_b);
            const double rows = inner_join_rows(a.rows, b.rows, left_distinct, right_distinct, residual);
            const double cost = a.cost + b.cost + rows;
            Entry &entry = table[set];
            if (entry.cost < 0 || cost < entry.cost) {
                entry.cost = cost;
                entry.rows = rows;
                entry.left = left;
                for (std::size_t i = 0; i < n; ++i) {
                    const double below = ((left >> i) & 1U) != 0 ? a.cap[i] : b.cap[i];
                    entry.cap[i] = std::min(below, std::max(rows, 1.0));
                }
            }
        }
    }

    // Builds the best plan of `set` bottom-up; every join takes the predicates that become
    // applicable there, as the estimate above assumed.
    std::function<JoinComponent(Mask)> build = [&](Mask set) -> JoinComponent {
        if ((set & (set - 1)) == 0) {
            return std::move(leaves[static_cast<std::size_t>(std::countr_zero(set))]);
        }
        JoinComponent left = build(table[set].left);
        JoinComponent right = build(set ^ table[set].left);
        return join_components(std::move(left), std::move(right), predicates);
    };
    std::vector<JoinComponent> components;
    Mask rest = all;
    while (rest != 0) {
        // The largest subset with a plan (all relations when the graph is connected), then the
        // cheapest: the greedy ordering combines what is left.
        Mask best = 0;
        for (Mask set = 1; set <= all; ++set) {
            if ((set & ~rest) != 0 || table[set].cost < 0) {
                continue;
            }
            const int size = std::popcount(set);
            const int best_size = std::popcount(best);
            if (best == 0 || size > best_size || (size == best_size && table[set].cost < table[best].cost)) {
                best = set;
            }
        }
        components.push_back(build(best));
        rest &= ~best;
    }
    return components;
}

void Optimizer::join_in_from_order(std::vector<JoinComponent> &components,
                                   std::vector<JoinPredicate> &predicates) {
    while (components.size() > 1) {
        std::size_t partner = 1;
        for (std::size_t j = 1; j < components.size(); ++j) {
            std::vector<db::ExprPtr> left_keys;
            std::vector<db::ExprPtr> right_keys;
            connecting_keys(predicates, components[0].ids, components[j].ids, left_keys, right_keys);
            if (!left_keys.empty()) {
                partner = j;
                break;
            }
        }
        components[0] = join_components(std::move(components[0]), std::move(components[partner]), predicates);
        components.erase(components.begin() + static_cast<std::ptrdiff_t>(partner));
    }
}

LogicalPtr Optimizer::rewrite_region(LogicalPtr node) {
    // Collect the region: inner joins, cross products and filters over leaves, and the semi and
    // anti joins applied to it.
    struct Semi {
        LogicalPtr join; // children[0] is replaced when the semi join is placed
    };
    std::vector<LogicalPtr> leaves;
    std::vector<db::ExprPtr> conjuncts;
    std::vector<LogicalPtr> semis;
    std::vector<LogicalPtr> pending{};
    pending.push_back(std::move(node));
    while (!pending.empty()) {
        LogicalPtr current = std::move(pending.back());
        pending.pop_back();
        if (current->kind == LogicalKind::filter) {
            conjuncts.insert(conjuncts.end(), current->conjuncts.begin(), current->conjuncts.end());
            pending.push_back(std::move(current->children[0]));
        } else if (current->kind == LogicalKind::join && current->join_kind == db::JoinKind::inner &&
                   !current->optimized) {
            conjuncts.insert(conjuncts.end(), current->conjuncts.begin(), current->conjuncts.end());
            pending.push_back(std::move(current->children[0]));
            pending.push_back(std::move(current->children[1]));
        } else if (current->kind == LogicalKind::join &&
                   (current->join_kind == db::JoinKind::semi || current->join_kind == db::JoinKind::anti) &&
                   !current->optimized) {
            pending.push_back(std::move(current->children[0]));
            semis.push_back(std::move(current));
        } else {
            leaves.push_back(std::move(current));
        }
    }
    std::reverse(leaves.begin(), leaves.end()); // FROM order, for stable plans
    std::reverse(semis.begin(), semis.end());

    // fold: split conjunctions, factor ORs, drop TRUE.
    if (enabled(Pass::fold)) {
        std::vector<db::ExprPtr> split;
        for (const auto &conjunct : conjuncts) {
            split_conjuncts(conjunct, split);
        }
        std::vector<db::ExprPtr> factored;
        for (const auto &conjunct : split) {
            factor_or(conjunct, factored);
        }
        conjuncts.clear();
        for (auto &conjunct : factored) {
            if (!is_true(*conjunct)) {
                conjuncts.push_back(std::move(conjunct));
            }
        }
    }

    // pushdown: a conjunct over one leaf's columns goes to that leaf. Off, every conjunct is a
    // condition of the region's joins (or of a filter above them).
    std::vector<std::set<ColumnId>> leaf_columns;
    for (const auto &leaf : leaves) {
        leaf_columns.push_back(id_set(leaf->output));
    }
    std::vector<std::vector<db::ExprPtr>> assigned(leaves.size());
    std::vector<JoinPredicate> predicates;
    for (auto &conjunct : conjuncts) {
        const auto ids = columns_of(*conjunct);
        bool placed = false;
        for (std::size_t i = 0; i < leaves.size() && !placed && enabled(Pass::pushdown); ++i) {
            if (subset(ids, leaf_columns[i])) {
                assigned[i].push_back(conjunct);
                placed = true;
            }
        }
        if (!placed) {
            predicates.push_back(JoinPredicate{conjunct, ids, false});
            for (std::size_t i = 0; i < leaves.size() && enabled(Pass::pushdown); ++i) {
                if (db::ExprPtr implied = implied_by_or(*conjunct, leaf_columns[i])) {
                    assigned[i].push_back(std::move(implied));
                }
            }
        }
    }
    for (std::size_t i = 0; i < leaves.size(); ++i) {
        leaves[i] = place(std::move(leaves[i]), std::move(assigned[i]));
        estimate(*leaves[i]);
    }

    // pushdown: semi and anti joins go onto the one leaf whose columns they read, else on top.
    std::vector<LogicalPtr> top_semis;
    for (auto &semi : semis) {
        const std::set<ColumnId> right = id_set(semi->children[1]->output);
        std::vector<db::ExprPtr> keep;
        std::vector<db::ExprPtr> inner_only;
        std::set<ColumnId> outer_ids;
        for (auto &conjunct : semi->conjuncts) {
            const auto ids = columns_of(*conjunct);
            if (enabled(Pass::pushdown) && !ids.empty() && subset(ids, right)) {
                inner_only.push_back(std::move(conjunct));
                continue;
            }
            for (ColumnId id : ids) {
                if (right.count(id) == 0) {
                    outer_ids.insert(id);
                }
            }
            keep.push_back(std::move(conjunct));
        }
        semi->conjuncts = std::move(keep);
        if (!inner_only.empty()) {
            semi->children[1] = make_filter(std::move(semi->children[1]), std::move(inner_only));
        }
        semi->children[1] = rewrite(std::move(semi->children[1]));
        std::optional<std::size_t> target;
        for (std::size_t i = 0; i < leaves.size() && enabled(Pass::pushdown); ++i) {
            if (subset(std::vector<ColumnId>(outer_ids.begin(), outer_ids.end()),
                       id_set(leaves[i]->output))) {
                target = i;
                break;
            }
        }
        // A build side at least as large as the leaf filters it at a high price: with magic sets
        // the semi join waits for the joins, which usually shrink its probe side, and its build
        // side is then restricted to their keys (Q21's EXISTS over all of lineitem).
        if (target.has_value() && enabled(Pass::magic_sets) && leaves.size() > 1) {
            if (semi->children[1]->rows < 0) {
                estimate(*semi->children[1]);
            }
            if (semi->children[1]->rows >= leaves[*target]->rows) {
                target.reset();
            }
        }
        if (target.has_value()) {
            semi->children[0] = std::move(leaves[*target]);
            semi->output = semi->children[0]->output;
            choose_keys(*semi);
            estimate(*semi);
            leaves[*target] = std::move(semi);
        } else {
            top_semis.push_back(std::move(semi));
        }
    }

    if (enabled(Pass::magic_sets) && leaves.size() > 1) {
        std::vector<db::ExprPtr> joining;
        joining.reserve(predicates.size());
        for (const auto &predicate : predicates) {
            joining.push_back(predicate.expression);
        }
        apply_magic_sets(leaves, joining);
    }

    if (enabled(Pass::equivalences) && leaves.size() > 2) {
        std::vector<std::set<ColumnId>> columns;
        columns.reserve(leaves.size());
        for (const auto &leaf : leaves) {
            columns.push_back(id_set(leaf->output));
        }
        add_implied_equalities(columns, predicates);
    }

    // join_order: dynamic programming chooses the tree of joins for regions it can handle
    // (order_by_dp); the greedy loop orders larger regions and combines what the dynamic
    // programming leaves unconnected (by cross products, or by conditions over several of them).
    std::vector<JoinComponent> components;
    for (auto &leaf : leaves) {
        JoinComponent component;
        component.ids = id_set(leaf->output);
        component.tree = std::move(leaf);
        components.push_back(std::move(component));
    }
    if (!enabled(Pass::join_order)) {
        join_in_from_order(components, predicates);
    } else if (components.size() > 1 && _options.join_order == JoinOrder::dynamic_programming) {
        if (components.size() <= dp_join_max_relations) {
            components = order_by_dp(std::move(components), predicates);
        } else {
            _notes.push_back("join order: greedy for a region of " + std::to_string(components.size()) +
                             " relations (dynamic programming takes up to " +
                             std::to_string(dp_join_max_relations) + ")");
        }
    }
    while (components.size() > 1) {
        std::optional<std::pair<std::size_t, std::size_t>> best;
        double best_rows = 0.0;
        double best_inputs = 0.0;
        for (std::size_t i = 0; i < components.size(); ++i) {
            for (std::size_t j = i + 1; j < components.size(); ++j) {
                std::vector<db::ExprPtr> left_keys;
                std::vector<db::ExprPtr> right_keys;
                connecting_keys(predicates, components[i].ids, components[j].ids, left_keys, right_keys);
                if (left_keys.empty()) {
                    continue;
                }
                const double rows_i = std::max(components[i].tree->rows, 0.0);
                const double rows_j = std::max(components[j].tree->rows, 0.0);
                const auto [left_distinct, right_distinct] =
                    join_key_distincts(left_keys, rows_i, right_keys, rows_j);
                const double rows = inner_join_rows(rows_i, rows_j, left_distinct, right_distinct, 1.0);
                const double inputs = rows_i + rows_j;
                if (!best.has_value() || rows < best_rows || (rows == best_rows && inputs < best_inputs)) {
                    best = std::make_pair(i, j);
                    best_rows = rows;
                    best_inputs = inputs;
                }
            }
        }
        if (!best.has_value()) {
            // No join condition connects the rest: a cross product of the two smallest inputs.
            std::vector<std::size_t> order(components.size());
            for (std::size_t i = 0; i < order.size(); ++i) {
                order[i] = i;
            }
            std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return components[a].tree->rows < components[b].tree->rows;
            });
            best = std::make_pair(std::min(order[0], order[1]), std::max(order[0], order[1]));
        }
        auto [i, j] = *best;
        components[i] = join_components(std::move(components[i]), std::move(components[j]), predicates);
        components.erase(components.begin() + static_cast<std::ptrdiff_t>(j));
    }
    LogicalPtr tree = std::move(components.front().tree);
    const LogicalNode *joined =
        tree.get(); // the joins alone: every semi join's probe keys are among its keys
    for (auto &semi : top_semis) {
        if (enabled(Pass::magic_sets)) {
            restrict_semi_build(*semi, *joined);
        }
        semi->children[0] = std::move(tree);
        semi->output = semi->children[0]->output;
        choose_keys(*semi);
        estimate(*semi);
        tree = std::move(semi);
    }
    std::vector<db::ExprPtr> rest;
    for (auto &predicate : predicates) {
        if (!predicate.used) {
            rest.push_back(predicate.expression);
        }
    }
    if (!rest.empty()) {
        tree = make_filter(std::move(tree), std::move(rest));
        estimate(*tree);
    }
    return tree;
}

// ---------------------------------------------------------------------------------------------
// Magic sets
//
// Neumann and Kemper's unnesting ("Unnesting Arbitrary Queries", BTW 2015) evaluates a
// correlated subquery once per distinct value of the outer side's correlation columns (the magic
// set) instead of once per group of its whole input. The binder has already turned such a
// subquery into an aggregation grouped by the correlation columns, inner-joined on them; here
// the aggregation's input is restricted to the keys the join can use. Any leaf L of the same
// join region connected to the aggregation's group keys by equalities supplies a superset of
// those keys (every result row combines one row of each leaf), so a semi join of the input with
// a copy of L keeps every group that can find a partner, each with all of its rows (the
// restriction is on the group keys), and drops the rest before they are aggregated. L is scanned
// twice instead of the outer side being materialized once; that pays when L is much smaller
// than the number of groups.

void Optimizer::apply_magic_sets(std::vector<LogicalPtr> &leaves,
                                 const std::vector<db::ExprPtr> &predicates) {
    for (std::size_t a = 0; a < leaves.size(); ++a) {
        // The aggregation under projections and filters (a HAVING filter, the subquery's select
        // list); `through` follows each leaf output down to the node at hand.
        LogicalNode *node = leaves[a].get();
        std::map<ColumnId, ColumnId> through;
        for (ColumnId id : node->output) {
            through[id] = id;
        }
        while (node->kind == LogicalKind::project || node->kind == LogicalKind::filter) {
            if (node->kind == LogicalKind::project) {
                std::map<ColumnId, ColumnId> next;
                for (const auto &[leaf_id, current] : through) {
                    for (std::size_t i = 0; i < node->output.size(); ++i) {
                        if (node->output[i] == current &&
                            node->expressions[i]->kind() == db::ExprKind::column) {
                            next[leaf_id] = node->expressions[i]->column_index();
                        }
                    }
                }
                through = std::move(next);
            }
            node = node->children[0].get();
        }
        if (node->kind != LogicalKind::aggregate || node->groups.empty()) {
            continue;
        }
        LogicalNode &aggregate = *node;
        // Leaf outputs that are group keys, mapped to the input column they group by.
        std::map<ColumnId, ColumnId> to_input;
        for (const auto &[leaf_id, current] : through) {
            for (std::size_t i = 0; i < aggregate.groups.size(); ++i) {
                if (aggregate.output[i] == current && aggregate.groups[i]->kind() == db::ExprKind::column) {
                    to_input[leaf_id] = aggregate.groups[i]->column_index();
                }
            }
        }
        if (to_input.empty()) {
            continue;
        }
        // Equalities between group keys and the columns of one other leaf, rewritten onto the
        // aggregation's input: the semi join's conditions, per other leaf.
        std::vector<std::vector<db::ExprPtr>> conditions(leaves.size());
        std::vector<std::set<ColumnId>> needed(leaves.size());
        for (const auto &predicate : predicates) {
            if (predicate->kind() != db::ExprKind::compare ||
                predicate->compare_op() != db::CompareOp::equal) {
                continue;
            }
            for (std::size_t side = 0; side < 2; ++side) {
                const auto mine = columns_of(predicate->child(side));
                const auto other = columns_of(predicate->child(1 - side));
                const bool keys = !mine.empty() && std::all_of(mine.begin(), mine.end(), [&](ColumnId id) {
                    return to_input.count(id) > 0;
                });
                if (!keys || other.empty()) {
                    continue;
                }
                for (std::size_t b = 0; b < leaves.size(); ++b) {
                    if (b != a && subset(other, id_set(leaves[b]->output))) {
                        conditions[b].push_back(db::expr::remap_columns(predicate, [&](std::uint32_t id) {
                            const auto it = to_input.find(id);
                            return it != to_input.end() ? it->second : id;
                        }));
                        for (ColumnId id : mine) {
                            needed[b].insert(to_input.at(id));
                        }
                        break;
                    }
                }
                break;
            }
        }
        // The leaf with the most key equalities, if it is small enough to pay for its copy.
        std::optional<std::size_t> best;
        for (std::size_t b = 0; b < leaves.size(); ++b) {
            if (!conditions[b].empty() &&
                (!best.has_value() || conditions[b].size() > conditions[*best].size())) {
                best = b;
            }
        }
        if (!best.has_value()) {
            continue;
        }
        // The copy of L must yield far fewer keys than there are groups, and scanning it again
        // must cost less than scanning the aggregation's input (L may itself be an expensive
        // derived table).
        const double groups = aggregate.rows >= 0 ? aggregate.rows : aggregate.children[0]->rows;
        const double magic_rows = leaves[*best]->rows;
        if (!(magic_rows >= 0 && magic_rows * magic_set_min_ratio < groups) ||
            scanned_rows(*leaves[*best]) >= magic_set_max_rescan * scanned_rows(*aggregate.children[0])) {
            continue;
        }
        std::string groups_text;
        for (const auto &group : aggregate.groups) {
            groups_text.append(groups_text.empty() ? "" : ", ").append(db::to_string(*group));
        }
        std::string source;
        table_names(*leaves[*best], source);
        LogicalPtr magic = clone_plan(*leaves[*best]);
        aggregate.children[0] =
            push_magic_set(std::move(aggregate.children[0]), needed[*best], magic, conditions[*best]);
        MX_ASSERT(magic == nullptr, "push_magic_set places the semi join");
        reset_estimates(*leaves[a]);
        estimate(*leaves[a]);
        _notes.push_back("magic set: the aggregation grouped by [" + groups_text +
                         "] reads only the keys of [" + source + "]");
    }
}

namespace {

bool has_magic_set(const LogicalNode &node) {
    return node.magic_set || std::any_of(node.children.begin(), node.children.end(),
                                         [](const LogicalPtr &child) { return has_magic_set(*child); });
}

} // namespace

bool Optimizer::hashes_outer_side(double outer_rows, const LogicalNode &subquery) const {
    // Not when a magic set restricts the subquery side already (TPC-H Q20's grouped subquery):
    // it copies the outer side into the subquery, and hashing the outer side again would only
    // repeat that work.
    return enabled(Pass::right_semi_joins) && outer_rows >= 0 &&
           outer_rows * right_join_build_ratio < subquery.rows && !has_magic_set(subquery);
}

void Optimizer::restrict_semi_build(LogicalNode &semi, const LogicalNode &probe) {
    // The equalities between build-side and probe-side columns: a build row whose keys no probe
    // row has can match nothing, whether the join is a semi or an anti join, with or without a
    // residual (it applies only to rows with equal keys).
    const std::set<ColumnId> build = id_set(semi.children[1]->output);
    const std::set<ColumnId> probe_ids = id_set(probe.output);
    std::vector<db::ExprPtr> conditions;
    std::set<ColumnId> needed_build;
    std::set<ColumnId> needed_probe;
    for (const auto &conjunct : semi.conjuncts) {
        if (conjunct->kind() != db::ExprKind::compare || conjunct->compare_op() != db::CompareOp::equal) {
            continue;
        }
        const auto a = columns_of(conjunct->child(0));
        const auto b = columns_of(conjunct->child(1));
        if (a.empty() || b.empty()) {
            continue;
        }
        if (subset(a, build) && subset(b, probe_ids)) {
            needed_build.insert(a.begin(), a.end());
            needed_probe.insert(b.begin(), b.end());
        } else if (subset(b, build) && subset(a, probe_ids)) {
            needed_build.insert(b.begin(), b.end());
            needed_probe.insert(a.begin(), a.end());
        } else {
            continue;
        }
        conditions.push_back(conjunct);
    }
    if (conditions.empty()) {
        return;
    }
    const double build_rows = semi.children[1]->rows;
    // A join that decide() makes a right semi/anti join hashes the probe rows as they are and
    // reads the build side once. A magic set would compute part of the probe side a second time
    // to restrict a build side that is then not hashed at all (TPC-H Q21: 76 k outer rows against
    // two lineitem scans).
    if (hashes_outer_side(probe.rows, *semi.children[1])) {
        return;
    }
    // The keys come from the smallest subtree of the probe side that has the key columns (the
    // deeper one on a tie: fewer tables to scan again).
    const std::vector<ColumnId> keys(needed_probe.begin(), needed_probe.end());
    const LogicalNode *source = &probe;
    for (const LogicalNode *node = &probe;;) {
        const LogicalNode *next = nullptr;
        if (node->kind == LogicalKind::filter ||
            (node->kind == LogicalKind::join && node->join_kind != db::JoinKind::left_outer)) {
            const std::size_t sides =
                node->kind == LogicalKind::join && node->join_kind == db::JoinKind::inner ? 2 : 1;
            for (std::size_t side = 0; side < sides && next == nullptr; ++side) {
                if (subset(keys, id_set(node->children[side]->output))) {
                    next = node->children[side].get();
                }
            }
        }
        if (next == nullptr) {
            break;
        }
        if (next->rows >= 0 && next->rows <= source->rows) {
            source = next;
        }
        node = next;
    }
    if (!(source->rows >= 0 && source->rows * magic_set_min_ratio < build_rows) ||
        scanned_rows(*source) >= magic_set_max_rescan * scanned_rows(*semi.children[1])) {
        return;
    }
    std::string build_text;
    table_names(*semi.children[1], build_text);
    std::string source_text;
    table_names(*source, source_text);
    LogicalPtr magic = clone_plan(*source);
    semi.children[1] = push_magic_set(std::move(semi.children[1]), needed_build, magic, conditions);
    MX_ASSERT(magic == nullptr, "push_magic_set places the semi join");
    reset_estimates(*semi.children[1]);
    estimate(*semi.children[1]);
    _notes.push_back("magic set: the build side of the " + std::string(db::join_kind_name(semi.join_kind)) +
                     " join [" + build_text + "] reads only the keys of [" + source_text + "]");
}

LogicalPtr Optimizer::push_magic_set(LogicalPtr node, const std::set<ColumnId> &needed, LogicalPtr &magic,
                                     std::vector<db::ExprPtr> &conjuncts) {
    const std::vector<ColumnId> ids(needed.begin(), needed.end());
    switch (node->kind) {
    case LogicalKind::filter:
        node->children[0] = push_magic_set(std::move(node->children[0]), needed, magic, conjuncts);
        return node;
    case LogicalKind::join: {
        // Into the side that has the keys: the build side of an inner join, the probe side of
        // any join (a left join's preserved side: rows with other keys are dropped above).
        const std::size_t sides = node->join_kind == db::JoinKind::inner ? 2 : 1;
        for (std::size_t side = 0; side < sides; ++side) {
            if (subset(ids, id_set(node->children[side]->output))) {
                node->children[side] =
                    push_magic_set(std::move(node->children[side]), needed, magic, conjuncts);
                return node;
            }
        }
        break;
    }
    default:
        break;
    }
    LogicalPtr semi = make_join(db::JoinKind::semi, std::move(node), std::move(magic), std::move(conjuncts));
    semi->magic_set = true;
    choose_keys(*semi);
    return semi;
}

// ---------------------------------------------------------------------------------------------
// Cardinality estimates

void Optimizer::estimate(LogicalNode &node) {
    for (auto &child : node.children) {
        if (child->rows < 0) {
            estimate(*child);
        }
    }
    auto cap_distinct = [&](const std::vector<ColumnId> &ids, double rows) {
        for (ColumnId id : ids) {
            double &d = _columns[id].distinct;
            d = d < 0 ? rows : std::min(d, std::max(rows, 1.0));
        }
    };
    switch (node.kind) {
    case LogicalKind::get: {
        const double rows = static_cast<double>(node.table->row_count());
        for (std::size_t i = 0; i < node.table_columns.size(); ++i) {
            const auto &stats = node.table->statistics(i);
            double d = static_cast<double>(stats.distinct_count);
            if (d <= 0) {
                d = rows > 0 ? rows : 1.0;
            }
            _columns[node.table_columns[i]].distinct = std::min(d, std::max(rows, 1.0));
        }
        node.rows = rows * selectivity(node.conjuncts);
        // An equality with a constant leaves one distinct value.
        for (const auto &conjunct : node.conjuncts) {
            if (conjunct->kind() == db::ExprKind::compare && conjunct->compare_op() == db::CompareOp::equal) {
                const auto column = column_of(conjunct->child(0));
                const bool constant = conjunct->child(1).kind() == db::ExprKind::constant;
                if (column.has_value() && constant) {
                    _columns[*column].distinct = 1.0;
                }
            }
        }
        cap_distinct(node.output, node.rows);
        break;
    }
    case LogicalKind::filter:
        node.rows = node.children[0]->rows * selectivity(node.conjuncts);
        cap_distinct(node.output, node.rows);
        break;
    case LogicalKind::project: {
        node.rows = node.children[0]->rows;
        for (std::size_t i = 0; i < node.expressions.size(); ++i) {
            const auto ids = columns_of(*node.expressions[i]);
            double d = node.rows;
            if (ids.empty()) {
                d = 1.0;
            } else if (ids.size() == 1) {
                d = distinct(ids.front(), node.rows);
            }
            _columns[node.output[i]].distinct = std::max(1.0, std::min(d, std::max(node.rows, 1.0)));
        }
        break;
    }
    case LogicalKind::join: {
        const double left = node.children[0]->rows;
        const double right = node.children[1]->rows;
        const auto [left_distinct, right_distinct] =
            join_key_distincts(node.left_keys, left, node.right_keys, right);
        const double inner =
            inner_join_rows(left, right, left_distinct, right_distinct, selectivity(node.conjuncts));
        // Fraction of left rows with a partner (containment of the smaller key set).
        const double matched =
            std::min(1.0, right_distinct / left_distinct) * (node.conjuncts.empty() ? 1.0 : 0.5);
        switch (node.join_kind) {
        case db::JoinKind::inner:
            node.rows = inner;
            break;
        case db::JoinKind::left_outer:
            node.rows = std::max(left, inner);
            break;
        case db::JoinKind::mark:
            node.rows = left;
            _columns[node.mark].distinct = 2.0;
            break;
        case db::JoinKind::full_outer:
            node.rows = std::max({left, right, inner});
            break;
        case db::JoinKind::semi:
            node.rows = right > 0 ? left * matched : 0.0;
            break;
        case db::JoinKind::anti:
            node.rows = right > 0 ? left * std::max(0.05, 1.0 - matched) : left;
            break;
        case db::JoinKind::right_semi:
        case db::JoinKind::right_anti:
        case db::JoinKind::right_outer:
            MX_ASSERT(false,
                      "logical plans have semi, anti and left outer joins; the physical planner swaps them");
            break;
        }
        cap_distinct(node.output, node.rows);
        break;
    }
    case LogicalKind::aggregate: {
        const double input = node.children[0]->rows;
        double groups = 1.0;
        for (const auto &group : node.groups) {
            const auto ids = columns_of(*group);
            groups *= ids.size() == 1 ? distinct(ids.front(), input) : input;
        }
        node.rows = node.groups.empty() ? 1.0 : std::min(groups, input);
        for (std::size_t i = 0; i < node.groups.size(); ++i) {
            const auto ids = columns_of(*node.groups[i]);
            _columns[node.output[i]].distinct = std::max(
                1.0, std::min(ids.size() == 1 ? distinct(ids.front(), input) : node.rows, node.rows));
        }
        for (std::size_t i = node.groups.size(); i < node.output.size(); ++i) {
            _columns[node.output[i]].distinct = std::max(node.rows, 1.0);
        }
        break;
    }
    case LogicalKind::union_all:
        node.rows = 0.0;
        for (const auto &child : node.children) {
            node.rows += child->rows;
        }
        break;
    case LogicalKind::repeat:
        node.rows = node.children[0]->rows;
        break;
    case LogicalKind::window:
        node.rows = node.children[0]->rows;
        for (const auto &function : node.windows) {
            _columns[function.output].distinct = std::max(node.rows, 1.0);
        }
        break;
    case LogicalKind::dependent_join:
        MX_ASSERT(false, "the pass decorrelate replaces every dependent join");
        break;
    case LogicalKind::shared_scan: {
        LogicalNode &plan = *node.shared->plan;
        if (plan.rows < 0) {
            estimate(plan);
        }
        node.rows = plan.rows;
        for (std::size_t i = 0; i < node.output.size(); ++i) {
            _columns[node.output[i]].distinct = _columns[plan.output[i]].distinct;
        }
        break;
    }
    case LogicalKind::sort:
    case LogicalKind::limit: {
        double rows = node.children[0]->rows;
        rows = std::max(0.0, rows - static_cast<double>(node.offset));
        if (node.limit.has_value()) {
            rows = std::min(rows, static_cast<double>(*node.limit));
        }
        node.rows = rows;
        break;
    }
    }
}

void Optimizer::decide(LogicalNode &node) {
    for (auto &child : node.children) {
        decide(*child);
    }
    if (node.kind == LogicalKind::shared_scan && !node.shared->decided) {
        node.shared->decided = true;
        decide(*node.shared->plan);
    }
    if (node.kind == LogicalKind::aggregate) {
        node.count_join = enabled(Pass::count_joins);
    }
    if (node.kind == LogicalKind::join) {
        if (!node.optimized) {
            choose_keys(node);
        }
        const double build = node.children[1]->rows;
        const double probe = node.children[0]->rows;
        // A Bloom filter pays when it lets most probe rows skip the hash table.
        double matched = 1.0;
        if (probe > 0) {
            matched = node.join_kind == db::JoinKind::anti ? 1.0 - node.rows / probe : node.rows / probe;
        }
        node.bloom_filter = enabled(Pass::bloom_filters) && !node.left_keys.empty() && matched < 0.5;
        // Hashing the smaller side: a semi/anti join with an outer side well under its subquery
        // side hashes the outer rows and marks those the subquery's rows meet. The subquery's
        // rows then mostly miss, so they pass a Bloom filter of the outer keys first.
        node.build_left = !node.left_keys.empty() &&
                          (node.join_kind == db::JoinKind::semi || node.join_kind == db::JoinKind::anti) &&
                          hashes_outer_side(probe, *node.children[1]);
        if (node.build_left) {
            node.bloom_filter = enabled(Pass::bloom_filters);
        }
        // Likewise a left outer join with a preserved side well under its nullable side hashes
        // the preserved rows (a right outer join, TPC-H Q13: 150 k customers against 1.5 M
        // orders), marks those the nullable rows meet and emits the others NULL-padded. The
        // nullable rows pass a Bloom filter when most of them are estimated to miss (the join's
        // rows bound the nullable rows with a partner from above).
        if (enabled(Pass::right_outer_joins) && !node.left_keys.empty() &&
            node.join_kind == db::JoinKind::left_outer && probe * right_join_build_ratio < build &&
            !has_magic_set(*node.children[1])) {
            node.build_left = true;
            node.bloom_filter = node.rows < build * 0.5;
        }
    } else if (node.kind == LogicalKind::get) {
        const double rows = static_cast<double>(node.table->row_count());
        const double fraction = rows > 0 ? node.rows / rows : 1.0;
        node.prefetch_whole.clear();
        if (enabled(Pass::scan_prefetch) && !node.conjuncts.empty() && fraction <= selective_scan_fraction) {
            std::set<ColumnId> ids;
            for (const auto &conjunct : node.conjuncts) {
                for (ColumnId id : columns_of(*conjunct)) {
                    ids.insert(id);
                }
            }
            node.prefetch_whole.assign(ids.begin(), ids.end());
        }
    }
}

} // namespace mx::sql::detail
