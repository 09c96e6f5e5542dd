#pragma once

// The optimizer: rewrites a bound logical plan before physical planning, as a list of named
// passes that run in this order (optimizer_passes() in include/mx/sql/database.h lists them;
// OptimizerOptions::disabled_passes switches the optional ones off; EXPLAIN names the passes
// that ran and those that were off):
//   decorrelate      unnests the binder's dependent joins (correlated scalar subqueries) into
//                    aggregations grouped by the correlation and joined on it (decorrelate.cpp);
//                    off, a query with a correlated scalar subquery fails with an error,
//   shared_subplans  a CTE referenced more than once is computed once: its plan becomes a shared
//                    subplan, optimized on its own, whose result every reference reads
//                    (shared_subplans.cpp); off, every reference computes its own copy,
//   fold             splits conjunctions, factors conditions every branch of an OR shares (a
//                    join key hidden in an OR, TPC-H Q19) and drops TRUE conjuncts (the
//                    expression factories fold constant subtrees already),
//   pushdown         moves conditions into scans, through projections, below aggregations (on
//                    group keys), into the preserved side of outer joins, an outer join's ON
//                    conditions over its build side into that side, and semi/anti joins onto
//                    the one relation of a join region whose columns they read,
//   magic_sets       an aggregation that is joined on its group keys (a decorrelated correlated
//                    subquery, a grouped derived table) reads only the rows whose keys the other
//                    side of that join can supply: a semi join with a copy of that side
//                    restricts its input; likewise a semi/anti join with a large build side
//                    waits for the region's joins and its build side reads only the keys of the
//                    joined probe side (unless right_semi_joins will hash that probe side, which
//                    is cheaper than computing part of it again),
//   equivalences     column equalities of a join region form classes of columns that are equal in
//                    every result row (a = b AND b = c); each pair of a class's columns from
//                    different relations is a possible join key (a = c: TPC-H Q5 joins customer
//                    with nation directly), and a join applies one equality per class, so no
//                    redundant key is hashed or counted twice in the estimates,
//   join_order       inner joins and cross products of a query block form one region whose
//                    relations are joined in the order with the smallest sum of estimated
//                    intermediate results, found by dynamic programming over the connected
//                    subsets of the join graph (regions of up to dp_join_max_relations
//                    relations), or greedily, always the connected pair with the smallest
//                    estimated result (OptimizerOptions::join_order). Off: FROM order, each
//                    relation joined with the first later one a key connects it to. Either way
//                    the input estimated smaller becomes the build side,
//   estimates        cardinality estimates for every node from the tables' statistics
//                    (required: the passes after it and the physical plan read them),
//   right_semi_joins a semi/anti join with a much smaller outer side hashes that side,
//   right_outer_joins a left outer join with a much smaller preserved side hashes that side
//                    (a right outer join),
//   bloom_filters    a join whose probe rows mostly miss filters them with a Bloom filter,
//   scan_prefetch    a highly selective scan prefetches its predicate's columns entirely and the
//                    others for the qualifying rows only (dissertation 7.3).
// fold, pushdown, magic_sets, equivalences and join_order are steps of one walk over the join regions
// (rewrite): a region's join ordering needs its relations rewritten and estimated first, and
// pushing a condition into a relation rewrites that relation, so each region runs the five steps
// in order before the region above it. right_semi_joins, right_outer_joins, bloom_filters and
// scan_prefetch are steps of one walk over the estimated plan (decide). Whether a hash join is
// radix-partitioned is no optimizer choice: the executor picks it per join from the actual build rows
// (JoinStrategy::automatic, HashJoinTuning::radix_threshold_bytes).

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <mx/sql/database.h>

#include "logical.h"

namespace mx::sql::detail {

/// A semi/anti join hashes its outer side instead (a right semi/anti join) when the subquery
/// side is estimated at more than this many times the outer side's rows: building a row costs
/// a few times probing one, and the outer rows are stored whole (they are the output).
inline constexpr double right_join_build_ratio = 2.0;
/// A scan predicate keeping at most this fraction of rows is "highly selective": its columns
/// are prefetched entirely, the other columns are touched for few rows only.
inline constexpr double selective_scan_fraction = 0.05;
/// Magic sets: the other join side is copied into a semi join below an aggregation (or below a
/// semi join's build side) only when the aggregation is estimated to have more than this many
/// times as many groups (the build side as many rows) as that side has rows,
inline constexpr double magic_set_min_ratio = 2.0;
/// and only when that copy scans fewer than this many times the table rows the restricted
/// input scans: hashing a row (an aggregation, a join build) costs several times scanning it,
/// but the other side may be an expensive derived table.
inline constexpr double magic_set_max_rescan = 2.0;

/// Regions of up to this many relations are ordered by dynamic programming (JoinOrder::
/// dynamic_programming): its table has 2^n entries and it tests 3^n splits (59049 for ten
/// relations); larger regions are ordered greedily.
inline constexpr std::size_t dp_join_max_relations = 10;

/// The passes in the order they run; the values index optimizer_passes().
enum class Pass : std::uint8_t {
    decorrelate,
    shared_subplans,
    fold,
    pushdown,
    magic_sets,
    equivalences,
    join_order,
    estimates,
    right_semi_joins,
    right_outer_joins,
    count_joins,
    bloom_filters,
    scan_prefetch,
};
inline constexpr std::size_t pass_count = 13;

/// The pass decorrelate (decorrelate.cpp): replaces every dependent join of the plan by ordinary
/// joins and returns how many it replaced. Throws SqlError naming what a correlated subquery
/// uses that it cannot unnest.
std::size_t decorrelate(LogicalPtr &root, ColumnRegistry &columns);

/// The pass shared_subplans (shared_subplans.cpp): every CTE that `root` references more than
/// once becomes a SharedPlan that shared_scan nodes read; returns them in the order it made them.
std::vector<std::shared_ptr<SharedPlan>> share_subplans(LogicalPtr &root);

class Optimizer {
public:
    /// `options` must be valid (OptimizerOptions::validate).
    explicit Optimizer(ColumnRegistry &columns, OptimizerOptions options = {});

    LogicalPtr optimize(LogicalPtr root);

    /// The passes that ran and those that were off (the first line), then what the optional
    /// passes did, one line each (for EXPLAIN).
    [[nodiscard]] const std::vector<std::string> &notes() const noexcept { return _notes; }

    /// Estimated fraction of rows for which all `conjuncts` hold (exposed for tests).
    double selectivity(const std::vector<db::ExprPtr> &conjuncts);

private:
    struct BaseColumn {
        const db::Table *table{nullptr};
        std::size_t column{0};
    };

    /// A condition of a join region over the columns of several of its relations.
    struct JoinPredicate {
        db::ExprPtr expression;
        std::vector<ColumnId> ids;
        /// Set once a join of the region applies it.
        bool used{false};
        /// An equality of two columns: the index of their equivalence class (see
        /// add_implied_equalities); -1 for every other predicate.
        int equivalence{-1};
    };
    /// A subplan of a join region and the columns it produces.
    struct JoinComponent {
        LogicalPtr tree;
        std::set<ColumnId> ids;
    };

    LogicalPtr rewrite(LogicalPtr node);
    /// rewrite() of a shared subplan, and its estimates, unless done already.
    void rewrite_shared(SharedPlan &shared);
    LogicalPtr rewrite_region(LogicalPtr node);
    LogicalPtr rewrite_outer_join(LogicalPtr node);
    LogicalPtr place(LogicalPtr leaf, std::vector<db::ExprPtr> conjuncts);
    /// place() through a projection or aggregation: conjuncts that only read outputs which are
    /// plain input columns (`sources[i]` computes `leaf.output[i]`) go below as a filter on the
    /// input, the rest to `above`; a conjunct without columns stays above when `keep_constants`.
    void place_through(LogicalNode &leaf, const std::vector<db::ExprPtr> &sources,
                       std::vector<db::ExprPtr> conjuncts, std::vector<db::ExprPtr> &above,
                       bool keep_constants);
    void choose_keys(LogicalNode &join);
    /// Whether a join that applies `predicate` uses it: every predicate but the second and later
    /// equalities of one equivalence class in the same join (`classes`: those the join has seen;
    /// the class's other equalities hold once one does).
    static bool first_of_its_class(const JoinPredicate &predicate, std::set<int> &classes) {
        return predicate.equivalence < 0 || classes.insert(predicate.equivalence).second;
    }
    /// The pass equivalences: groups the region's equalities of two columns of different
    /// relations (`leaf_columns`) into classes (union-find) and adds, for every pair of a class's
    /// columns from different relations not yet equated, the implied equality.
    static void add_implied_equalities(const std::vector<std::set<ColumnId>> &leaf_columns,
                                       std::vector<JoinPredicate> &predicates);
    /// The equalities among the unused `predicates` whose sides read `left` and `right` alone:
    /// the keys a join of the two would use (left side first; one per equivalence class).
    static void connecting_keys(const std::vector<JoinPredicate> &predicates, const std::set<ColumnId> &left,
                                const std::set<ColumnId> &right, std::vector<db::ExprPtr> &left_keys,
                                std::vector<db::ExprPtr> &right_keys);
    /// Inner-joins two subplans of a region with every unused predicate over their columns (the
    /// predicates become used); the input estimated smaller is the build side.
    JoinComponent join_components(JoinComponent a, JoinComponent b, std::vector<JoinPredicate> &predicates);
    /// join_order off: joins the components in their order (FROM order), each time the first
    /// one with the first later one a key connects it to, or with the next one (a cross product)
    /// when none is connected.
    void join_in_from_order(std::vector<JoinComponent> &components, std::vector<JoinPredicate> &predicates);
    /// Join ordering by dynamic programming over `leaves` (at most dp_join_max_relations): the
    /// joined plan when a connected one exists, otherwise the largest connected subplans, which
    /// the greedy ordering then combines.
    std::vector<JoinComponent> order_by_dp(std::vector<JoinComponent> leaves,
                                           std::vector<JoinPredicate> &predicates);
    /// Magic sets over the leaves of one region (before join ordering): `predicates` are the
    /// region's conjuncts over several leaves.
    void apply_magic_sets(std::vector<LogicalPtr> &leaves, const std::vector<db::ExprPtr> &predicates);
    /// Magic set for a semi/anti join placed above the region's joins (`probe`): its build side
    /// reads only the keys of the smallest subtree of `probe` that has its probe keys.
    void restrict_semi_build(LogicalNode &semi, const LogicalNode &probe);
    /// Whether a semi/anti join with this many outer (probe) rows hashes its outer side instead
    /// of the subquery side (a right semi/anti join): decide() swaps it on this, and
    /// restrict_semi_build then adds no magic set.
    [[nodiscard]] bool hashes_outer_side(double outer_rows, const LogicalNode &subquery) const;
    /// Puts a semi join with `magic` on `conjuncts` as deep into `node` as the columns `needed`
    /// (which the conjuncts read on this side) allow.
    LogicalPtr push_magic_set(LogicalPtr node, const std::set<ColumnId> &needed, LogicalPtr &magic,
                              std::vector<db::ExprPtr> &conjuncts);
    void estimate(LogicalNode &node);
    /// The passes right_semi_joins, right_outer_joins, bloom_filters and scan_prefetch over the
    /// estimated plan.
    void decide(LogicalNode &node);
    [[nodiscard]] bool enabled(Pass pass) const noexcept { return _enabled[static_cast<std::size_t>(pass)]; }
    /// "optimizer passes: fold, pushdown, ... (off: magic_sets)".
    [[nodiscard]] std::string passes_note() const;

    double conjunct_selectivity(const db::Expr &conjunct);
    std::optional<double> range_fraction(const db::Expr &conjunct);
    double distinct(ColumnId id, double rows) const;
    /// Estimated distinct combinations of the join `keys` over `rows` rows: the product of the
    /// key columns' distinct counts (a key computed from several columns counts every row as
    /// distinct), at most `rows`. `cap`, when given, bounds a column's distinct count further.
    double key_distinct(const std::vector<db::ExprPtr> &keys, double rows,
                        const std::function<double(ColumnId)> *cap = nullptr) const;
    /// Both sides' key_distinct for an equi-join, with the foreign-key rule for keys of several
    /// columns: independence makes the larger side's combinations look as many as its rows (TPC-H
    /// Q9: lineitem's (partkey, suppkey) at 6 M, though they are partsupp's 800 k). When every key
    /// column of the larger side has at most as many distinct values as its partner column on
    /// the smaller side, its combinations are taken as a subset of the smaller side's.
    std::pair<double, double>
    join_key_distincts(const std::vector<db::ExprPtr> &left_keys, double left_rows,
                       const std::vector<db::ExprPtr> &right_keys, double right_rows,
                       const std::function<double(ColumnId)> *left_cap = nullptr,
                       const std::function<double(ColumnId)> *right_cap = nullptr) const;
    const db::ColumnStatistics *statistics(ColumnId id) const;
    void register_base(const LogicalNode &node);

    ColumnRegistry &_columns;
    OptimizerOptions _options;
    std::array<bool, pass_count> _enabled{};
    std::vector<std::string> _notes;
    std::map<ColumnId, BaseColumn> _base;
};

} // namespace mx::sql::detail
