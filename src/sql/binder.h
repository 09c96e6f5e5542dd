#pragma once

// The binder: parse trees (ast.h) of SELECT statements -> typed logical plans. Resolves
// table and column names (scopes, aliases, CTEs, correlation with the enclosing query), types
// every expression with the engine's factories (DuckDB's rules), and rewrites subqueries:
//   - uncorrelated scalar subqueries become one-row relations joined to the query,
//   - correlated scalar subqueries become dependent joins (LogicalKind::dependent_join): the
//     subquery's plan reads the enclosing block's columns in its WHERE, and the optimizer pass
//     decorrelate (decorrelate.cpp) unnests it into an aggregation grouped by the correlation
//     and joined on it,
//   - [NOT] EXISTS and [NOT] IN subqueries that are WHERE conjuncts become semi and anti joins,
//   - EXISTS, IN and x op ANY/ALL elsewhere (under OR, in CASE, SELECT, HAVING) become mark
//     joins: a BOOLEAN column per subquery, combined into SQL's three-valued answer; ANY/ALL
//     with an ordering operator over an uncorrelated subquery compare with its min/max instead,
//   - correlated EXISTS, IN and ANY/ALL whose subquery aggregates or limits its rows, or holds a
//     subquery that reads a column two or more levels up, become dependent semi, anti and mark
//     joins, which decorrelate unnests like the scalar ones,
//   - a correlated scalar subquery that is an operand of a WHERE comparison may drop the outer
//     rows without a value (an inner dependent join); elsewhere every outer row is kept (a left
//     outer one).
// Every error is an SqlError with the position of the offending name or operator. The work is
// split by clause and expression kind: binder.cpp (query blocks), binder_from.cpp,
// binder_where.cpp, binder_setop.cpp, binder_expression.cpp, binder_function.cpp and
// binder_subquery.cpp.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mx/db/catalog.h>

#include "ast.h"
#include "logical.h"
#include "source.h"

namespace mx::sql::detail {

/// One FROM item as seen by name resolution.
struct RangeEntry {
    std::string alias; // as written (compared case-insensitively)
    std::vector<std::string> names;
    std::vector<ColumnId> ids;
    /// JOIN ... USING / NATURAL JOIN: how unqualified names and SELECT * see column i. The
    /// right side's copy of a join column is hidden; the left side's stands for the merged
    /// column (`merged[i]`: the left's, the right's for RIGHT JOIN). Qualified names and t.*
    /// see every column as it is. Empty vectors: nothing hidden or merged.
    std::vector<bool> hidden;
    std::vector<ColumnId> merged;

    [[nodiscard]] bool is_hidden(std::size_t i) const { return i < hidden.size() && hidden[i]; }
    [[nodiscard]] ColumnId unqualified_id(std::size_t i) const { return merged.empty() ? ids[i] : merged[i]; }
};

struct CteDefinition {
    const ast::SelectStmt *query{nullptr}; // null: not a SELECT
    std::vector<std::string> column_aliases;
    std::string name;
    /// Statement-wide number of the definition (LogicalNode::cte of every reference's plan).
    std::uint32_t id{0};
};

/// The names visible in one query block.
struct Scope {
    Scope *parent{nullptr};
    std::vector<RangeEntry> entries;
    std::map<std::string, CteDefinition> ctes; // lower-case name
    /// Columns of enclosing blocks this block referenced (correlation), also those that a
    /// subquery nested in it references further up.
    std::vector<ColumnId> outer_references;
    /// Where outer references may appear (only WHERE, whose conjuncts can be decorrelated).
    bool outer_allowed{false};
    /// Set while binding the CTE of that name (a CTE cannot refer to itself).
    std::vector<std::string> binding_ctes;
};

enum class Correlation : std::uint8_t {
    none,      ///< the block may not reference the enclosing query
    semi_join, ///< WHERE conjuncts referencing the enclosing query are returned (EXISTS, IN)
    dependent, ///< WHERE conjuncts may read the enclosing query (a scalar subquery: dependent join)
};

struct BoundQuery {
    LogicalPtr plan;
    std::vector<std::string> names; // of plan->output
    /// semi_join: conjuncts over this block's and the enclosing block's columns.
    std::vector<db::ExprPtr> correlated;
    /// dependent: the enclosing block's columns the plan reads (empty: uncorrelated).
    std::vector<ColumnId> correlation;
    /// The block yields exactly one row (aggregate without GROUP BY and HAVING, or no FROM).
    bool single_row{false};
};

/// Where a bound expression stands, for typing rules that look at the SQL text (DuckDB lets a
/// string literal take the type of whatever it is compared with; intervals exist only as
/// operands of date arithmetic).
struct Bound {
    db::ExprPtr expr;
    std::optional<db::Interval> interval;
    bool string_literal{false};
    std::int64_t location{-1};
};

/// A NULL constant where a condition is expected (WHERE NULL, x > 5 AND NULL) is a BOOLEAN NULL,
/// as in DuckDB and PostgreSQL: the untyped NULL literal is INTEGER elsewhere.
inline db::ExprPtr null_as_boolean(db::ExprPtr condition) {
    if (condition->kind() == db::ExprKind::constant && condition->value().null &&
        condition->type().id != db::TypeId::boolean) {
        return db::expr::null(db::Type::boolean());
    }
    return condition;
}

class Binder {
public:
    /// `statement_location`: where errors without a place of their own point (the statement).
    Binder(const Source &source, db::Catalog &catalog, ColumnRegistry &columns,
           std::int64_t statement_location = 0)
        : _source(source), _catalog(catalog), _columns(columns), _statement_location(statement_location) {}

    /// Binds a query block in `outer`'s scope (nullptr for a top-level query).
    BoundQuery bind_select(const ast::SelectStmt &select, Scope *outer,
                           Correlation correlation = Correlation::none, bool exists = false);

    /// Binds a constant expression (INSERT VALUES): no columns, no subqueries.
    db::ExprPtr bind_constant(const ast::Expr &node);

    [[nodiscard]] ColumnRegistry &columns() noexcept { return _columns; }
    [[nodiscard]] const Source &source() const noexcept { return _source; }

    /// Maps a CREATE TABLE / CAST type name to a TunaDB type.
    db::Type bind_type(const ast::TypeName &type_name);

    /// Throws the SqlError for `message` at byte offset `location` (the statement when < 0).
    [[noreturn]] void fail(const std::string &message, std::int64_t location) const;

private:
    /// bind_select without its check for a semi-join subquery that must be a dependent one.
    BoundQuery bind_block(const ast::SelectStmt &select, Scope *outer, Correlation correlation, bool exists);

    struct AggregateState {
        std::vector<db::ExprPtr> groups;
        std::vector<ColumnId> group_ids;
        std::vector<LogicalAggregate> aggregates;
    };

    /// A window function of the block as bound: expressions over the block's columns (after the
    /// aggregation in an aggregate query); the planner computes them into columns below the
    /// window nodes.
    struct BoundWindow {
        std::vector<db::ExprPtr> partition;
        std::vector<db::ExprPtr> order;
        std::vector<LogicalSortKey> order_keys; // column unused: directions and NULL placement
        db::WindowFunction function{db::WindowFunction::row_number};
        db::ExprPtr argument;
        db::ExprPtr default_value;
        std::int64_t offset{1};
        bool rows{false};
        db::FrameBound start{db::FrameBoundKind::unbounded_preceding, 0};
        db::FrameBound end{db::FrameBoundKind::current_row, 0};
        ColumnId output{0};
    };

    /// A semi, anti, left outer or mark join of a subquery onto the block, or a dependent join
    /// (`right` is the dependent join without its left input, as in Block::leaves).
    struct SemiJoin {
        db::JoinKind kind{db::JoinKind::semi};
        LogicalPtr right;
        std::vector<db::ExprPtr> conjuncts;
        ColumnId mark{0}; // mark join: the BOOLEAN column
    };

    /// State of one query block while it is bound.
    struct Block {
        Scope scope;
        std::vector<LogicalPtr> leaves; // joined below WHERE (scalar subqueries)
        std::vector<db::ExprPtr> where_conjuncts;
        std::vector<SemiJoin> semi_joins;
        std::vector<SemiJoin> outer_leaves;            // left and mark joins after the semi joins, in order
        std::vector<LogicalPtr> post_aggregate_leaves; // scalar subqueries of SELECT/HAVING
        std::vector<SemiJoin> post_aggregate_joins;    // left and mark joins of SELECT/HAVING
        bool aggregate{false};
    };

    /// Joins the block's scalar-subquery leaves, semi joins and left-joined subqueries onto
    /// `tree` and applies WHERE.
    static LogicalPtr join_and_filter(LogicalPtr tree, Block &block);

    struct Context {
        /// Where names are resolved (nullptr: no columns, e.g. LIMIT).
        Scope *scope{nullptr};
        /// Where subqueries go (nullptr: subqueries are not allowed here).
        Block *block{nullptr};
        AggregateState *aggregates{nullptr};
        /// Where window functions go (nullptr: not allowed here).
        std::vector<BoundWindow> *windows{nullptr};
        const char *clause{"expression"};
        /// The scalar subquery node whose NULL drops the row (operand of a WHERE comparison).
        const ast::Expr *decorrelatable{nullptr};
        /// Scalar subqueries go above the aggregation (SELECT, HAVING of an aggregate query).
        bool after_aggregate{false};
        int depth{0};
    };

    // binder_from.cpp: FROM
    LogicalPtr bind_from(const ast::FromItem &item, Block &block);
    LogicalPtr bind_table_reference(const ast::RangeVar &range_var, ast::Location location, Block &block);
    /// [INNER | LEFT | RIGHT | FULL] JOIN with ON, USING or NATURAL.
    LogicalPtr bind_join(const ast::JoinExpr &join, ast::Location location, Block &block);
    /// The column names unqualified references see in entries [from, to).
    static std::vector<std::string> visible_names(const Block &block, std::size_t from, std::size_t to);
    /// The one visible column `name` of entries [from, to) as (entry, column); `side` names
    /// them in errors ("left", "right").
    std::pair<std::size_t, std::size_t> join_column(const Block &block, std::size_t from, std::size_t to,
                                                    const std::string &name, const char *side,
                                                    std::int64_t location);
    /// A subquery in FROM, or a reference to the CTE `cte` defined in `cte_scope` (its name is
    /// the alias, its column names apply where the alias gives none; its query sees the CTEs
    /// visible where it is defined). `alias`: nullptr when none is written.
    LogicalPtr bind_derived_table(const ast::SelectStmt *subquery, const ast::Alias *alias,
                                  std::int64_t location, Block &block, const CteDefinition *cte = nullptr,
                                  const Scope *cte_scope = nullptr);
    LogicalPtr one_row_relation();

    // binder_where.cpp: WHERE
    void bind_where_conjunct(const ast::Expr &node, Block &block);
    /// A WHERE conjunct [NOT] EXISTS / [NOT] IN as a semi or anti join; false when it needs the
    /// general form (a mark join: NOT IN over a correlated or row subquery with NULLs).
    bool bind_subquery_conjunct(const ast::SubLink &sublink, ast::Location location, bool negated,
                                Block &block);
    /// Applies left and mark joins `joins` to `tree` in order.
    static LogicalPtr apply_joins(LogicalPtr tree, std::vector<SemiJoin> &joins);
    std::vector<const ast::Expr *> split_and(const ast::Expr &node, int depth);

    // binder_setop.cpp: UNION / INTERSECT / EXCEPT and VALUES
    BoundQuery bind_set_operation(const ast::SelectStmt &select, Scope *outer);
    BoundQuery bind_values(const ast::SelectStmt &select);
    /// The type both sides of a set operation are cast to (DuckDB's rules); TypeError if none.
    static db::Type set_operation_type(const db::Type &a, const db::Type &b);

    // binder_expression.cpp: expressions, operators, constants, casts, CASE
    Bound bind(const ast::Expr &node, Context &context);
    db::ExprPtr bind_value(const ast::Expr &node, Context &context);
    Bound bind_column_ref(const ast::ColumnRef &ref, ast::Location location, Context &context);
    Bound bind_constant_node(const ast::Constant &constant, ast::Location location);
    Bound bind_operator(const ast::Operator &op, ast::Location location, Context &context);
    Bound bind_in_list(const ast::InList &in, ast::Location location, Context &context);
    Bound bind_like(const ast::Like &like, ast::Location location, Context &context);
    Bound bind_between(const ast::Between &between, ast::Location location, Context &context);
    Bound bind_bool(const ast::BoolExpr &expression, ast::Location location, Context &context);
    Bound bind_type_cast(const ast::TypeCast &cast, ast::Location location, Context &context);
    Bound bind_case(const ast::CaseExpr &expression, ast::Location location, Context &context);
    Bound bind_nullif(const ast::Expr &left, const ast::Expr &right, ast::Location location,
                      Context &context);
    db::ExprPtr compare(db::CompareOp op, Bound left, Bound right, std::int64_t location);
    Bound arithmetic(db::ArithmeticOp op, Bound left, Bound right, std::int64_t location);
    /// A string literal compared with a non-string takes the other type (DuckDB).
    void coerce_literals(Bound &a, Bound &b);
    db::ExprPtr cast_literal(const Bound &literal, db::Type type);
    db::ExprPtr checked(db::ExprPtr expression, std::int64_t location);
    std::optional<db::ExprPtr> match_group(const db::ExprPtr &expression, const AggregateState &state);
    std::string column_name(const ast::Expr &node);
    db::Interval parse_interval(const std::string &text, std::int64_t mask, std::int64_t location);

    // binder_function.cpp: scalar functions, aggregates and window functions
    Bound bind_function(const ast::FuncCall &call, ast::Location location, Context &context);
    Bound bind_aggregate(const ast::FuncCall &call, ast::Location location, Context &context);
    Bound bind_window(const ast::FuncCall &call, ast::Location location, Context &context);
    /// The window nodes (one per distinct PARTITION BY / ORDER BY) over `tree`, with a projection
    /// below them computing the keys and arguments that are not plain columns.
    LogicalPtr plan_windows(LogicalPtr tree, std::vector<BoundWindow> &windows);
    static bool contains_window(const ast::Expr &node, int depth);
    static bool contains_aggregate(const ast::Expr &node, int depth);
    /// Whether an aggregate occurs in the query block (outside its subquery expressions).
    static bool contains_aggregate(const ast::SelectStmt &select);

    // binder_subquery.cpp: subqueries in expressions
    Bound bind_sublink(const ast::Expr &node, Context &context);
    /// A scalar subquery (`node` is its SubLink) as a value: a one-row relation, or a dependent
    /// join when it is correlated.
    Bound bind_scalar_subquery(const ast::Expr &node, Context &context);
    /// SELECT agg(...) without GROUP BY, HAVING, LIMIT: exactly one row.
    static bool single_row_aggregate(const ast::SelectStmt &select);
    /// x op ANY/ALL (SELECT ...), x IN (SELECT ...) and (x, y) IN (SELECT a, b ...) as a value.
    Bound bind_quantified(const ast::Expr &node, bool all, Context &context);
    /// Adds a mark join of `right` on `conjuncts` to the block (above the aggregation when the
    /// context is) and returns the mark column. `dependent`: `right` reads the block's columns
    /// (bound with Correlation::dependent), the mark join is a dependent one.
    db::ExprPtr add_mark(Context &context, LogicalPtr right, std::vector<db::ExprPtr> conjuncts,
                         bool dependent = false);
    /// A subquery bound with Correlation::dependent in `context`: after the aggregation the
    /// filters of its plan that read the enclosing block read its GROUP BY keys (correlate).
    void regroup(LogicalNode &plan, Context &context, std::int64_t location);
    /// Correlation conjuncts of a subquery bound in `context`: after the aggregation they read
    /// the enclosing block's columns as its GROUP BY keys.
    std::vector<db::ExprPtr> correlate(std::vector<db::ExprPtr> conjuncts, Context &context,
                                       std::int64_t location);

    const Source &_source;
    db::Catalog &_catalog;
    ColumnRegistry &_columns;
    std::shared_ptr<const db::Table> _one_row;
    std::int64_t _statement_location{0};
    int _query_depth{0};         // nesting of query blocks being bound
    std::uint32_t _cte_count{0}; // CTE definitions numbered so far
};

using ast::max_expression_depth;
using ast::max_query_depth;

} // namespace mx::sql::detail
