#pragma once

// Scalar SQL expressions of TunaDB and their vectorized evaluation over batches.
//
// An expression is an immutable tree of Expr nodes shared through ExprPtr. The factories in
// mx::db::expr compute every node's result type by DuckDB's rules (TPC-H answers are compared
// against DuckDB, so DECIMAL precisions and scales must agree exactly), insert the implicit casts
// the rules imply, fold constant subtrees, and throw TypeError for invalid combinations with a
// message the binder shows to users ("cannot compare DATE with VARCHAR").
//
// Evaluation (evaluate, filter) is const and thread-safe: any number of tasks may evaluate the
// same tree at once, every call keeps its scratch vectors to itself. It never throws: runtime
// errors (integer or decimal overflow, a string CAST cannot convert) come back as an EvalStatus
// with a message, so the operator can fail the query instead of crashing a worker.
//
// Result vectors follow the vectorwise style: a result has batch.rows entries, but only the live
// rows (Batch::row(i)) are computed; the other entries are unspecified. Results may reference
// memory of the batch's columns (a column reference yields a view of the column, SUBSTRING of a
// column points into the column's strings), so keep whatever the batch's columns point to alive
// as long as the result is used. Strings an expression creates live in the result's heap.
//
// Deliberate deviations from DuckDB, all invisible in comparisons and TPC-H answers:
//   - DATE +/- INTERVAL yields DATE (DuckDB: TIMESTAMP at midnight; TunaDB has no timestamps).
//   - Interval literals carry months and days only (no time part).
// See docs/design/expressions.md for the type rules and the experiments that confirmed them.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <mx/db/types.h>
#include <mx/db/vector.h>

namespace mx::db {

/// An expression that cannot be typed (invalid operand types, bad LIKE escape, ...). Thrown by
/// the factories at bind time only; the message is meant for the user.
class TypeError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

/// A runtime error of evaluate_constant (constant folding at optimize time); evaluate and filter
/// return errors as EvalStatus instead.
class EvalError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class ExprKind : std::uint8_t {
    column,       // reference to batch.columns[column_index()]
    constant,     // value(), possibly a typed NULL
    arithmetic,   // children: left, right; arithmetic_op()
    negate,       // children: operand (unary minus)
    compare,      // children: left, right (same type after implicit casts); compare_op()
    logical_and,  // children: two or more BOOLEAN operands, three-valued logic
    logical_or,   // children: two or more BOOLEAN operands, three-valued logic
    logical_not,  // children: operand
    is_null,      // children: operand; negated(): IS NOT NULL
    in_list,      // children: operand; list(): constants of the operand's type; negated(): NOT IN
    like,         // children: operand (VARCHAR); pattern(), escape(); negated(): NOT LIKE
    case_when,    // children: when1, then1, when2, then2, ..., [else]; has_else()
    cast,         // children: operand; type() is the target type
    extract,      // children: operand (DATE); date_part()
    substring,    // children: string, from, [length] (SQL/DuckDB 1-based positions)
    add_interval, // children: operand (DATE); interval() (already negated for date - interval)
    coalesce,     // children: two or more operands of the result type
    function,     // children: the arguments; function() names the scalar function
};

enum class ArithmeticOp : std::uint8_t { add, subtract, multiply, divide, modulo };
enum class CompareOp : std::uint8_t { equal, not_equal, less, less_equal, greater, greater_equal };
/// The operator that gives the same answer with the operands swapped (a < b  <=>  b > a).
[[nodiscard]] constexpr CompareOp mirrored(CompareOp op) noexcept {
    switch (op) {
    case CompareOp::less:
        return CompareOp::greater;
    case CompareOp::less_equal:
        return CompareOp::greater_equal;
    case CompareOp::greater:
        return CompareOp::less;
    case CompareOp::greater_equal:
        return CompareOp::less_equal;
    default:
        return op;
    }
}
/// Fields of EXTRACT/date_part (DuckDB's, for DATE; the time fields of a date are 0).
enum class DatePart : std::uint8_t {
    year,
    month,
    day,
    quarter,
    week,        // ISO week number 1..53
    dow,         // day of the week, Sunday = 0
    isodow,      // Monday = 1 .. Sunday = 7
    doy,         // day of the year 1..366
    isoyear,     // year of the ISO week
    yearweek,    // isoyear * 100 + week
    decade,      // year / 10
    century,     // 1 + (year - 1) / 100 (negative years count down)
    millennium,  // 1 + (year - 1) / 1000
    era,         // 1 from year 1 on, 0 before
    hour,        // always 0 for a DATE
    minute,      // always 0 for a DATE
    second,      // always 0 for a DATE
    millisecond, // always 0 for a DATE
    microsecond, // always 0 for a DATE
    epoch,       // seconds since 1970-01-01 (DOUBLE)
    julian,      // Julian day number (DOUBLE)
};
/// DuckDB's name of a field ("year", "isodow", ...); parse accepts the names and DuckDB's
/// synonyms ("years", "dayofweek", "doy", ...) case-insensitively.
[[nodiscard]] const char *name_of(DatePart part) noexcept;
[[nodiscard]] std::optional<DatePart> parse_date_part(std::string_view name) noexcept;

/// Scalar functions of ExprKind::function, typed by DuckDB's rules (see expr::function).
enum class Function : std::uint8_t {
    upper,
    lower,
    length,
    trim,  // trim(s [, characters])
    ltrim, // ltrim(s [, characters])
    rtrim, // rtrim(s [, characters])
    replace,
    concat,        // concat(a, ...): NULL arguments are skipped
    concat_strict, // a || b: NULL if either is
    starts_with,
    regexp_matches, // regexp_matches(s, constant pattern [, constant options])
    abs,
    ceil,
    floor,
    round, // round(x [, constant digits])
    sqrt,
    power,
    ln,
    exp,
    greatest,          // NULL arguments are skipped
    least,             // NULL arguments are skipped
    distinct_from,     // a IS DISTINCT FROM b: never NULL
    not_distinct_from, // a IS NOT DISTINCT FROM b: never NULL
    date_trunc,        // date_trunc(constant part, date) -> DATE
    strftime,          // strftime(date, constant format) -> VARCHAR
};
/// The SQL name of a function ("upper", "||", ...).
[[nodiscard]] const char *name_of(Function function) noexcept;

/// Calendar interval of an INTERVAL literal: months are added first (clamping the day to the end
/// of the month, as DuckDB does), then days.
struct Interval {
    std::int64_t months{0};
    std::int64_t days{0};

    static constexpr Interval of_days(std::int64_t n) noexcept { return {0, n}; }
    static constexpr Interval of_months(std::int64_t n) noexcept { return {n, 0}; }
    static constexpr Interval of_years(std::int64_t n) noexcept { return {n * 12, 0}; }
    friend constexpr bool operator==(const Interval &, const Interval &) noexcept = default;
};

class Expr;
using ExprPtr = std::shared_ptr<const Expr>;

namespace detail {
struct ExprFactory;   // builds Expr nodes (src/db/expression_build.cpp)
struct LikeMatcher;   // compiled LIKE pattern (src/db/expression_like.cpp)
struct ExprEvaluator; // evaluation kernels (src/db/expression_eval.cpp)
struct CompiledRegex; // regexp_matches pattern (src/db/expression_function.cpp)
} // namespace detail

/// One node of an expression tree, built only by mx::db::expr. Every field is written once by the
/// factory before the node is shared and only read afterwards (by any thread, without locks).
class Expr {
public:
    [[nodiscard]] ExprKind kind() const noexcept { return _kind; }
    [[nodiscard]] const Type &type() const noexcept { return _type; }
    [[nodiscard]] const std::vector<ExprPtr> &children() const noexcept { return _children; }
    [[nodiscard]] const Expr &child(std::size_t i) const noexcept { return *_children[i]; }

    /// column: index into Batch::columns, and the name EXPLAIN shows (may be empty).
    [[nodiscard]] std::uint32_t column_index() const noexcept { return _column_index; }
    [[nodiscard]] const std::string &name() const noexcept { return _name; }
    /// constant: the value, of type type().
    [[nodiscard]] const Value &value() const noexcept { return _value; }
    [[nodiscard]] ArithmeticOp arithmetic_op() const noexcept { return _arithmetic_op; }
    [[nodiscard]] CompareOp compare_op() const noexcept { return _compare_op; }
    /// is_null: IS NOT NULL; in_list: NOT IN; like: NOT LIKE.
    [[nodiscard]] bool negated() const noexcept { return _negated; }
    /// in_list: the constants, converted to the operand's type (NULL constants included).
    [[nodiscard]] const std::vector<Value> &list() const noexcept { return _list; }
    /// like: the pattern text and the ESCAPE character, if any.
    [[nodiscard]] const std::string &pattern() const noexcept { return _name; }
    [[nodiscard]] std::optional<char> escape() const noexcept { return _escape; }
    [[nodiscard]] bool has_else() const noexcept { return _negated; }
    [[nodiscard]] DatePart date_part() const noexcept { return _date_part; }
    /// function: which one; round: the digits (second argument) are in digits().
    [[nodiscard]] Function function() const noexcept { return _function; }
    [[nodiscard]] std::int64_t digits() const noexcept { return _digits; }
    /// regexp_matches: the compiled pattern (src/db/expression_internal.h).
    [[nodiscard]] const detail::CompiledRegex *regex() const noexcept { return _regex.get(); }
    [[nodiscard]] const Interval &interval() const noexcept { return _interval; }
    /// Whether the tree contains no column reference (so evaluate_constant can fold it).
    [[nodiscard]] bool is_constant_tree() const noexcept { return _constant_tree; }

private:
    friend struct detail::ExprFactory;
    friend struct detail::ExprEvaluator;
    Expr() = default;

    ExprKind _kind{ExprKind::constant};
    Type _type{};
    std::vector<ExprPtr> _children;
    std::uint32_t _column_index{0};
    std::string _name; // column name or LIKE pattern
    Value _value;
    std::vector<Value> _list;
    ArithmeticOp _arithmetic_op{ArithmeticOp::add};
    CompareOp _compare_op{CompareOp::equal};
    DatePart _date_part{DatePart::year}; // also date_trunc's part
    Function _function{Function::upper};
    std::int64_t _digits{0};                             // round
    std::shared_ptr<const detail::CompiledRegex> _regex; // regexp_matches
    bool _negated{false};                                // also has_else for case_when
    bool _constant_tree{true};
    bool _check_overflow{false}; // arithmetic/negate: results may exceed the result type's range
    std::optional<char> _escape;
    Interval _interval;
    std::shared_ptr<const detail::LikeMatcher> _like;
    // in_list: the non-NULL constants sorted for binary search (physical values, see evaluation)
    std::vector<std::int64_t> _sorted_i64;
    std::vector<Int128> _sorted_i128;
    std::vector<double> _sorted_f64;
    std::vector<std::string> _sorted_str;
    bool _list_has_null{false};
};

/// Factories. Each computes the node's type by DuckDB's rules and throws TypeError when the
/// operands do not fit. Nodes whose children are all constants are folded into a constant
/// unless folding hits a runtime error (which then surfaces when the node is evaluated).
namespace expr {

/// Reference to batch.columns[index], which must have type `type`.
[[nodiscard]] ExprPtr column(std::uint32_t index, Type type, std::string name = {});
[[nodiscard]] ExprPtr constant(Value value);
[[nodiscard]] ExprPtr null(Type type);

/// + - * / %. Types: INTEGER op INTEGER -> INTEGER; with BIGINT -> BIGINT (overflow is a
/// runtime error); with DOUBLE -> DOUBLE; with DECIMAL (integers as DECIMAL(10,0) and
/// DECIMAL(19,0)): + - -> scale max(s1,s2), precision max(p1-s1,p2-s2)+scale+1; * -> scale
/// s1+s2, precision p1+p2; both capped at 38, and at 18 (with an overflow check) when both inputs
/// fit 18 digits; % -> max(p1-s1,p2-s2)+max(s1,s2); / always DOUBLE. DATE - DATE -> BIGINT days,
/// DATE +/- INTEGER|BIGINT -> DATE.
[[nodiscard]] ExprPtr arithmetic(ArithmeticOp op, ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr add(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr subtract(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr multiply(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr divide(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr modulo(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr negate(ExprPtr operand);

/// Comparison after casting both sides to their common type (decimals of different scales are
/// compared exactly; a decimal against a DOUBLE compares as DOUBLE). Strings compare bytewise.
[[nodiscard]] ExprPtr compare(CompareOp op, ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr equal(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr not_equal(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr less(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr less_equal(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr greater(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr greater_equal(ExprPtr left, ExprPtr right);
/// x BETWEEN low AND high, desugared to x >= low AND x <= high (NOT: x < low OR x > high).
[[nodiscard]] ExprPtr between(ExprPtr operand, ExprPtr low, ExprPtr high, bool negated = false);

/// AND / OR of two or more BOOLEAN operands (three-valued logic); NOT.
[[nodiscard]] ExprPtr logical_and(std::vector<ExprPtr> operands);
[[nodiscard]] ExprPtr logical_and(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr logical_or(std::vector<ExprPtr> operands);
[[nodiscard]] ExprPtr logical_or(ExprPtr left, ExprPtr right);
[[nodiscard]] ExprPtr logical_not(ExprPtr operand);

/// operand IS NULL (negated: IS NOT NULL); never NULL itself.
[[nodiscard]] ExprPtr is_null(ExprPtr operand, bool negated = false);

/// operand [NOT] IN (constants...). The constants are cast to the common type with the operand
/// (the operand too, if needed). NULL if no constant matches and the list contains NULL.
[[nodiscard]] ExprPtr in_list(ExprPtr operand, std::vector<Value> list, bool negated = false);

/// operand [NOT] LIKE pattern [ESCAPE escape]: % matches any sequence, _ one character (UTF-8
/// code point); case sensitive; without ESCAPE a backslash is an ordinary character (DuckDB).
[[nodiscard]] ExprPtr like(ExprPtr operand, std::string pattern, bool negated = false,
                           std::optional<char> escape = std::nullopt);

/// Searched CASE WHEN c1 THEN r1 ... [ELSE e] END; the result type is the common type of the
/// results (DECIMALs: max integer digits + max scale). A NULL or FALSE condition does not match.
[[nodiscard]] ExprPtr case_when(std::vector<std::pair<ExprPtr, ExprPtr>> branches,
                                ExprPtr otherwise = nullptr);
/// Simple CASE x WHEN v1 THEN r1 ... END, desugared to x = v1 conditions.
[[nodiscard]] ExprPtr simple_case(ExprPtr operand, std::vector<std::pair<ExprPtr, ExprPtr>> branches,
                                  ExprPtr otherwise = nullptr);
/// COALESCE(a, b, ...): the first non-NULL operand, in their common type.
[[nodiscard]] ExprPtr coalesce(std::vector<ExprPtr> operands);

/// CAST(operand AS target). Numeric <-> numeric (decimal rounding half away from zero; DOUBLE
/// to integer rounds half to even like DuckDB), anything <-> VARCHAR, VARCHAR -> DATE and
/// BOOLEAN. Returns the operand itself when the types are equal. TypeError for DATE <-> numbers.
[[nodiscard]] ExprPtr cast(ExprPtr operand, Type target);
/// EXTRACT(part FROM date) -> BIGINT (epoch and julian: DOUBLE).
[[nodiscard]] ExprPtr extract(DatePart part, ExprPtr operand);
/// SUBSTRING(string FROM from [FOR length]) with DuckDB's semantics: 1-based; from 0 starts
/// before the first character; a negative from counts from the end; a negative length takes the
/// characters before from. Characters are UTF-8 code points.
[[nodiscard]] ExprPtr substring(ExprPtr string, ExprPtr from, ExprPtr length = nullptr);
/// A scalar function (DuckDB's semantics and NULL rules; most return NULL for a NULL argument,
/// concat/greatest/least skip NULLs, IS [NOT] DISTINCT FROM is never NULL):
///   upper, lower (ASCII and Latin-1 letters), trim/ltrim/rtrim, replace, concat, || -> VARCHAR
///   (non-string arguments of concat and || are cast to VARCHAR); length -> BIGINT (characters);
///   starts_with, regexp_matches (ECMAScript syntax; options 'i' and 'c') -> BOOLEAN;
///   abs -> the argument's type; ceil/floor -> DECIMAL(p,0) for DECIMAL(p,s), else DOUBLE;
///   round(x, n) -> INTEGER/BIGINT, DECIMAL(p, min(s, max(n, 0))), or DOUBLE (half away from
///   zero); sqrt, power, ln, exp -> DOUBLE (sqrt/ln of invalid values are errors as in DuckDB);
///   greatest/least -> the common type; date_trunc -> DATE (DuckDB: TIMESTAMP at midnight);
///   strftime -> VARCHAR. Constant arguments (round's digits, patterns, formats, date_trunc's
///   part) must be constants. Throws TypeError for other arguments.
[[nodiscard]] ExprPtr function(Function function, std::vector<ExprPtr> arguments);

/// date + interval and date - interval (the interval is negated). Result DATE.
[[nodiscard]] ExprPtr add_interval(ExprPtr date, Interval interval);
[[nodiscard]] ExprPtr subtract_interval(ExprPtr date, Interval interval);

/// The type both operands are cast to for comparisons, IN, CASE and COALESCE (DuckDB's rules);
/// TypeError if there is none. `what` names the context in the message, e.g. "compare".
[[nodiscard]] Type common_type(const Type &a, const Type &b, const char *what = "combine");

/// A copy of the tree with every column index replaced by map(index) (projection pushdown).
[[nodiscard]] ExprPtr remap_columns(const ExprPtr &root,
                                    const std::function<std::uint32_t(std::uint32_t)> &map);
/// Appends the column indices the tree references (with repetitions) to `out`.
void collect_columns(const Expr &root, std::vector<std::uint32_t> &out);

} // namespace expr

/// Outcome of evaluate and filter: ok, or the message of a runtime error to fail the query with.
class [[nodiscard]] EvalStatus {
public:
    EvalStatus() noexcept = default;
    static EvalStatus error(std::string message) {
        EvalStatus status;
        status._message = message.empty() ? std::string("evaluation error") : std::move(message);
        return status;
    }
    [[nodiscard]] bool ok() const noexcept { return _message.empty(); }
    explicit operator bool() const noexcept { return ok(); }
    /// Empty when ok.
    [[nodiscard]] const std::string &message() const noexcept { return _message; }

private:
    std::string _message;
};

/// Evaluates `expression` for the live rows of `batch` into `out`, which becomes a vector of
/// expression.type() with batch.rows entries (a view of the column for a column reference).
/// NULL bytes are set for NULL results (out.nulls() stays nullptr when no row can be NULL).
EvalStatus evaluate(const Expr &expression, const Batch &batch, Vector &out) noexcept;

/// Narrows the live rows of `batch` (selection, all_selected) to those where the BOOLEAN
/// `predicate` is TRUE; FALSE and NULL drop the row. Conjunctions narrow step by step, so later
/// conjuncts are evaluated only on rows that survived the earlier ones.
EvalStatus filter(const Expr &predicate, Batch &batch) noexcept;

/// Evaluates a tree without column references (is_constant_tree()) to a Value; throws EvalError
/// on runtime errors. For constant folding at optimize time.
[[nodiscard]] Value evaluate_constant(const Expr &expression);

/// SQL-like text for EXPLAIN, e.g. "(l_extendedprice * (1.00 - l_discount))".
[[nodiscard]] std::string to_string(const Expr &expression);

} // namespace mx::db
