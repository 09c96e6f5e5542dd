#pragma once

// The typed parse tree between the parser and the binder. ast_from_json.cpp builds it from
// libpg_query's JSON (the only code that reads libpg_query's keys); the binder reads only these
// structs. It holds the statements and expressions TunaDB implements plus, for the constructs it
// rejects, nodes that carry the error the binder reports when it reaches them (so errors keep
// the order in which binding meets them). Every location is a byte offset into the SQL text,
// -1 where the parser records none.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mx::sql::ast {

using Location = std::int64_t;

/// Expressions nested deeper than this (per query block) are refused: binding recurses per level.
inline constexpr int max_expression_depth = 256;
/// Query blocks nested deeper (subqueries in subqueries ...) are refused.
inline constexpr int max_query_depth = 64;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
struct SelectStmt;
using SelectPtr = std::unique_ptr<SelectStmt>;

enum class SortDirection : std::uint8_t { default_order, ascending, descending };
enum class NullsOrder : std::uint8_t { default_order, first, last };

/// ORDER BY key (of a query, a window or an aggregate).
struct SortBy {
    ExprPtr value;
    SortDirection direction{SortDirection::default_order};
    NullsOrder nulls{NullsOrder::default_order};
    bool using_operator{false}; ///< ORDER BY x USING <
};

/// A type name as written (CAST, CREATE TABLE): `names` with their qualifier (pg_catalog.int4
/// for INTEGER), the modifiers as expressions (DECIMAL(15, 2)).
struct TypeName {
    std::vector<std::string> names;
    std::vector<ExprPtr> modifiers;
    bool array{false};
    Location location{-1};
};

// ---- Expressions ----

/// a, t.a, t.* and * (`star`: the last part is *; `names` holds the parts before it).
struct ColumnRef {
    std::vector<std::string> names;
    bool star{false};
    /// A * before the last part (t.*.a): no column TunaDB can name.
    bool inner_star{false};
};

/// A literal. `text` holds string literals and the numbers that are no 32-bit integer (decimals,
/// exponents, larger integers) as written.
struct Constant {
    enum class Kind : std::uint8_t { null, integer, string, boolean, number, bit_string, unknown };
    Kind kind{Kind::null};
    std::int64_t integer{0};
    bool boolean{false};
    std::string text;
};

/// A prefix or binary operator: 1 + 2, -x, a = b, a || b (`left` is null for prefix operators).
struct Operator {
    std::string name;
    ExprPtr left;
    ExprPtr right;
};

/// x [NOT] IN (a, b, ...)
struct InList {
    ExprPtr operand;
    std::vector<ExprPtr> items;
    bool negated{false};
};

/// x [NOT] [I]LIKE pattern [ESCAPE e]
struct Like {
    ExprPtr operand;
    ExprPtr pattern;
    ExprPtr escape;             ///< null without ESCAPE
    bool invalid_escape{false}; ///< the ESCAPE clause has no single argument
    bool negated{false};
    bool insensitive{false}; ///< ILIKE
};

/// x [NOT] BETWEEN low AND high (`bounds` holds what the parser gave, normally two).
struct Between {
    ExprPtr operand;
    std::vector<ExprPtr> bounds;
    bool negated{false};
};

/// a IS [NOT] DISTINCT FROM b
struct DistinctFrom {
    ExprPtr left;
    ExprPtr right;
    bool negated{false}; ///< IS NOT DISTINCT FROM
};

/// NULLIF(a, b)
struct NullIf {
    ExprPtr left;
    ExprPtr right;
};

enum class BoolOperator : std::uint8_t { and_op, or_op, not_op };

struct BoolExpr {
    BoolOperator op{BoolOperator::and_op};
    std::vector<ExprPtr> arguments;
};

/// x IS [NOT] NULL
struct NullTest {
    ExprPtr argument;
    bool negated{false};
};

struct CaseWhen {
    ExprPtr condition;
    ExprPtr result;
    Location location{-1};
};

/// CASE [operand] WHEN ... THEN ... [ELSE ...] END
struct CaseExpr {
    ExprPtr operand;
    std::vector<CaseWhen> branches;
    ExprPtr otherwise;
};

struct Coalesce {
    std::vector<ExprPtr> arguments;
};

/// GREATEST(...) and LEAST(...)
struct MinMax {
    bool greatest{false};
    std::vector<ExprPtr> arguments;
};

/// CAST(x AS type), x::type, and typed literals (DATE '1998-12-01', INTERVAL '3' MONTH).
struct TypeCast {
    ExprPtr argument;
    TypeName type;
};

/// OVER (PARTITION BY ... ORDER BY ... frame). `frame_options` holds PostgreSQL's
/// FRAMEOPTION_* bits, the offsets the frame's n PRECEDING / FOLLOWING.
struct WindowSpec {
    std::string name;    ///< WINDOW w AS (...)
    std::string refname; ///< OVER w
    std::vector<ExprPtr> partition;
    std::vector<SortBy> order;
    std::int64_t frame_options{0};
    ExprPtr start_offset;
    ExprPtr end_offset;
};

/// f(args): scalar functions, aggregates (DISTINCT, *, FILTER, ORDER BY) and window functions.
struct FuncCall {
    /// Lower case, without a schema qualifier (pg_catalog.date_part is date_part).
    std::string name;
    std::vector<ExprPtr> arguments;
    bool star{false};
    bool distinct{false};
    bool within_group{false};
    std::vector<SortBy> order; ///< f(x ORDER BY ...)
    ExprPtr filter;            ///< FILTER (WHERE ...)
    std::unique_ptr<WindowSpec> over;
};

enum class SubLinkKind : std::uint8_t { exists, any, all, expression, other };

/// A subquery in an expression: EXISTS (...), x op ANY/ALL (...), x IN (...), (SELECT ...).
struct SubLink {
    SubLinkKind kind{SubLinkKind::expression};
    std::string kind_name;              ///< libpg_query's name of an `other` kind, for its error
    ExprPtr test;                       ///< the left side of ANY/ALL/IN
    std::vector<std::string> operators; ///< ANY/ALL: the operator (qualified: several parts)
    SelectPtr query;
};

/// ROW(a, b) and (a, b)
struct Row {
    std::vector<ExprPtr> arguments;
};

struct CurrentDate {};

/// DEFAULT in INSERT ... VALUES
struct SetToDefault {};

/// GROUPING SETS, ROLLUP, CUBE
struct GroupingSet {};

/// A construct TunaDB does not implement: binding it fails with `message`; `children` are the
/// operands the parser gave (their aggregates and window functions still count for the query).
struct Unsupported {
    std::string message;
    std::vector<ExprPtr> children;
};

struct Expr {
    std::variant<ColumnRef, Constant, Operator, InList, Like, Between, DistinctFrom, NullIf, BoolExpr,
                 NullTest, CaseExpr, Coalesce, MinMax, TypeCast, FuncCall, SubLink, Row, CurrentDate,
                 SetToDefault, GroupingSet, Unsupported>
        node;
    Location location{-1};

    template <class T>
    [[nodiscard]] const T *as() const noexcept {
        return std::get_if<T>(&node);
    }
    template <class T>
    [[nodiscard]] bool is() const noexcept {
        return std::holds_alternative<T>(node);
    }
    /// The node as a T where the caller knows its kind (std::bad_variant_access otherwise).
    template <class T>
    [[nodiscard]] const T &get() const {
        return std::get<T>(node);
    }
};

/// Calls `visit` on each direct child expression of `expression` (operands, arguments, window
/// keys, filters), not on subqueries.
template <class Visit>
void for_each_child(const Expr &expression, Visit &&visit);

// ---- FROM ----

struct Alias {
    std::string name;
    std::vector<std::string> columns;
};

struct FromItem;
using FromPtr = std::unique_ptr<FromItem>;

/// A table (or CTE) name.
struct RangeVar {
    std::string catalog;
    std::string schema;
    std::string name;
    std::optional<Alias> alias;
};

/// (SELECT ...) AS alias
struct RangeSubselect {
    SelectPtr query; ///< null: not a SELECT
    std::optional<Alias> alias;
    bool lateral{false};
};

enum class JoinType : std::uint8_t { inner, left, right, full, other };

struct JoinExpr {
    JoinType type{JoinType::inner};
    std::string type_name; ///< libpg_query's name, for the error of an `other` type
    bool natural{false};
    FromPtr left;
    FromPtr right;
    std::vector<std::string> using_columns;
    ExprPtr condition; ///< ON
    bool has_alias{false};
};

/// A FROM item TunaDB rejects (table functions and the like).
struct UnsupportedFrom {
    std::string message;
};

struct FromItem {
    std::variant<RangeVar, RangeSubselect, JoinExpr, UnsupportedFrom> node;
    Location location{-1};
};

// ---- SELECT ----

struct ResTarget {
    std::string name; ///< AS name ("" without)
    ExprPtr value;
    Location location{-1};
};

struct CommonTableExpr {
    std::string name;
    std::vector<std::string> columns;
    SelectPtr query; ///< null: not a SELECT
    Location location{-1};
};

struct WithClause {
    bool recursive{false};
    std::vector<CommonTableExpr> ctes;
    Location location{-1};
};

enum class SetOperator : std::uint8_t { union_op, intersect, except };

/// One operator of a chain `first op right op right ...` (left-deep, as SQL groups it).
struct SetStep {
    SetOperator op{SetOperator::union_op};
    bool all{false};
    SelectPtr right;
};

/// A query block: a plain SELECT, a VALUES list, or a chain of set operations. ORDER BY,
/// LIMIT, OFFSET and WITH of a VALUES list or set operation apply to its result: the converter
/// writes them as SELECT * FROM (<it>) AS unnamed_subquery ORDER BY ... (a plain SELECT).
struct SelectStmt {
    enum class Kind : std::uint8_t { select, values, set_operation };
    Kind kind{Kind::select};

    // set_operation
    SelectPtr first;
    std::vector<SetStep> steps;

    // values
    std::vector<std::vector<ExprPtr>> values;

    // select
    std::unique_ptr<WithClause> with;
    bool distinct{false};
    bool distinct_on{false};
    std::vector<ResTarget> targets;
    std::vector<FromPtr> from;
    ExprPtr where;
    std::vector<ExprPtr> group_by;
    ExprPtr having;
    std::vector<SortBy> order_by;
    ExprPtr limit;  ///< LIMIT (LIMIT ALL: a NULL constant)
    ExprPtr offset; ///< OFFSET
    bool with_ties{false};
    /// A clause TunaDB rejects (WINDOW, FOR UPDATE, INTO, GROUP BY DISTINCT): its name.
    std::string unsupported_clause;
    /// Nested deeper than max_query_depth: left empty (binding refuses it before reading it).
    bool too_deep{false};
};

// ---- Other statements ----

struct ColumnDefinition {
    enum class Constraint : std::uint8_t {
        not_null,
        null,
        primary_key,
        unique,
        foreign_key,
        default_value,
        check,
        other
    };
    struct ColumnConstraint {
        Constraint kind{Constraint::other};
        Location location{-1}; ///< the column's where the constraint has none
    };
    std::string name;
    TypeName type;
    std::vector<ColumnConstraint> constraints;
    bool collate{false};
    Location location{-1};
};

struct TableConstraint {
    enum class Kind : std::uint8_t { primary_key, unique, foreign_key, other };
    Kind kind{Kind::other};
    std::vector<std::string> keys; ///< PRIMARY KEY (a, b)
    Location location{-1};
};

/// A table element that is neither a column nor a constraint (LIKE other_table).
struct OtherTableElement {
    std::string kind; ///< libpg_query's node name
    Location location{-1};
};

struct CreateTable {
    RangeVar table;
    Location table_location{-1};
    std::vector<std::variant<ColumnDefinition, TableConstraint, OtherTableElement>> elements;
    bool inherits_or_partitioned{false};
    bool if_not_exists{false};
};

struct DropTable {
    bool tables{true}; ///< DROP TABLE (false: DROP VIEW, INDEX, ...)
    bool if_exists{false};
    std::vector<std::vector<std::string>> names; ///< each qualified name's parts
};

/// A COPY option's argument: absent, a word or string, an integer or a Boolean.
struct CopyOption {
    enum class Kind : std::uint8_t { none, string, integer, boolean, other };
    std::string name;
    Kind kind{Kind::none};
    std::string text;
    std::int64_t integer{0};
    bool boolean{false};
    Location location{-1};
};

struct Copy {
    std::optional<RangeVar> table; ///< empty: COPY (query)
    Location table_location{-1};
    bool from{false};
    bool has_columns{false};
    bool has_where{false};
    std::string file;
    std::vector<CopyOption> options;
};

struct InsertColumn {
    std::string name;
    Location location{-1};
};

struct Insert {
    RangeVar table;
    Location table_location{-1};
    bool unsupported_clauses{false}; ///< ON CONFLICT, RETURNING or WITH
    std::vector<InsertColumn> columns;
    SelectPtr query; ///< VALUES or SELECT
};

struct Statement;

struct ExplainOption {
    std::string name;
    Location location{-1};
};

struct Explain {
    std::vector<ExplainOption> options;
    std::unique_ptr<Statement> statement;
    Location statement_location{-1};
};

/// A statement TunaDB does not run: libpg_query's node name ("TransactionStmt").
struct OtherStatement {
    std::string kind;
};

struct Statement {
    std::variant<SelectPtr, CreateTable, DropTable, Copy, Insert, Explain, OtherStatement> node;
    std::int64_t location{0}; ///< byte offset of the statement in the text
    std::int64_t length{0};   ///< bytes (0: up to the end)
};

template <class Visit>
void for_each_child(const Expr &expression, Visit &&visit) {
    const auto each = [&](const std::vector<ExprPtr> &list) {
        for (const auto &item : list) {
            if (item != nullptr) {
                visit(*item);
            }
        }
    };
    const auto one = [&](const ExprPtr &item) {
        if (item != nullptr) {
            visit(*item);
        }
    };
    std::visit(
        [&](const auto &node) {
            using T = std::decay_t<decltype(node)>;
            if constexpr (std::is_same_v<T, Operator> || std::is_same_v<T, DistinctFrom> ||
                          std::is_same_v<T, NullIf>) {
                one(node.left);
                one(node.right);
            } else if constexpr (std::is_same_v<T, InList>) {
                one(node.operand);
                each(node.items);
            } else if constexpr (std::is_same_v<T, Like>) {
                one(node.operand);
                one(node.pattern);
                one(node.escape);
            } else if constexpr (std::is_same_v<T, Between>) {
                one(node.operand);
                each(node.bounds);
            } else if constexpr (std::is_same_v<T, BoolExpr> || std::is_same_v<T, Coalesce> ||
                                 std::is_same_v<T, MinMax> || std::is_same_v<T, Row>) {
                each(node.arguments);
            } else if constexpr (std::is_same_v<T, NullTest>) {
                one(node.argument);
            } else if constexpr (std::is_same_v<T, CaseExpr>) {
                one(node.operand);
                for (const auto &branch : node.branches) {
                    one(branch.condition);
                    one(branch.result);
                }
                one(node.otherwise);
            } else if constexpr (std::is_same_v<T, TypeCast>) {
                one(node.argument);
                each(node.type.modifiers);
            } else if constexpr (std::is_same_v<T, FuncCall>) {
                each(node.arguments);
                for (const auto &key : node.order) {
                    one(key.value);
                }
                one(node.filter);
                if (node.over != nullptr) {
                    each(node.over->partition);
                    for (const auto &key : node.over->order) {
                        one(key.value);
                    }
                    one(node.over->start_offset);
                    one(node.over->end_offset);
                }
            } else if constexpr (std::is_same_v<T, SubLink>) {
                one(node.test);
            } else if constexpr (std::is_same_v<T, Unsupported>) {
                each(node.children);
            }
        },
        expression.node);
}

} // namespace mx::sql::ast
