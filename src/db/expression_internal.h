#pragma once

// Private pieces shared by the expression sources: the compiled LIKE matcher, the factory that
// may touch Expr's private fields, and helpers the factories and the kernels both need.

#include <mx/db/expression.h>

#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace mx::db::detail {

/// A LIKE pattern compiled once at bind time. Shapes without '_' use substring search; the
/// general shape backtracks over the last '%' (linear in practice, quadratic at worst).
struct LikeMatcher {
    enum class Shape : std::uint8_t { never, any, exact, prefix, suffix, contains, segments, general };
    struct Token {
        bool any_char; // '_': one UTF-8 code point
        bool any_run;  // '%': any sequence
        char byte;     // the literal byte when neither
    };

    Shape shape{Shape::never};
    std::string needle;                // exact, prefix, suffix, contains
    std::vector<std::string> segments; // segments: literal parts between '%'
    bool anchored_start{false};        // segments: the first segment starts the text
    bool anchored_end{false};          // segments: the last segment ends the text
    std::vector<Token> tokens;         // general

    static std::shared_ptr<const LikeMatcher> compile(std::string_view pattern, std::optional<char> escape);
    [[nodiscard]] bool match(std::string_view text) const noexcept;
};

/// The first position at or after `from` where `needle` occurs in `text` (npos if none), as
/// std::string_view::find returns it. Faster on short texts of common letters (TPC-H comments):
/// a window is compared only where its first and last bytes both agree with the needle's, and
/// 16 windows are tested at once where SSE2 is available.
[[nodiscard]] std::size_t find_substring(std::string_view text, std::string_view needle,
                                         std::size_t from = 0) noexcept;

/// A regexp_matches pattern compiled once at bind time (ECMAScript syntax). std::regex_search
/// only reads the compiled regex, so any number of tasks may match with it at once.
struct CompiledRegex {
    std::regex regex;
    std::string pattern; // as written, for EXPLAIN
    std::string options;

    /// Options: 'i' case-insensitive, 'c' case-sensitive (the default); TypeError for a bad
    /// pattern or option.
    static std::shared_ptr<const CompiledRegex> compile(const std::string &pattern, std::string_view options);
};

/// EXTRACT(part FROM days) of a valid date, as BIGINT (epoch and julian: see extract_fractional).
[[nodiscard]] std::int64_t extract_part(DatePart part, std::int64_t days) noexcept;
[[nodiscard]] double extract_fractional(DatePart part, std::int64_t days) noexcept;

/// Builds nodes; the only code that writes Expr's private fields.
struct ExprFactory {
    static std::shared_ptr<Expr> make(ExprKind kind, Type type);
    static std::shared_ptr<Expr> copy(const Expr &node) { return std::shared_ptr<Expr>(new Expr(node)); }
    static void set_column_index(Expr &node, std::uint32_t index) noexcept { node._column_index = index; }
    static void set_children(Expr &node, std::vector<ExprPtr> children);
    static void set_value(Expr &node, Value value) { node._value = std::move(value); }
    static void set_name(Expr &node, std::string name) { node._name = std::move(name); }
    static void set_arithmetic(Expr &node, ArithmeticOp op, bool check_overflow) noexcept {
        node._arithmetic_op = op;
        node._check_overflow = check_overflow;
    }
    static void set_check_overflow(Expr &node, bool check) noexcept { node._check_overflow = check; }
    static void set_compare(Expr &node, CompareOp op) noexcept { node._compare_op = op; }
    static void set_negated(Expr &node, bool negated) noexcept { node._negated = negated; }
    static void set_date_part(Expr &node, DatePart part) noexcept { node._date_part = part; }
    static void set_function(Expr &node, Function function, std::int64_t digits,
                             std::shared_ptr<const CompiledRegex> regex) noexcept {
        node._function = function;
        node._digits = digits;
        node._regex = std::move(regex);
    }
    static void set_interval(Expr &node, Interval interval) noexcept { node._interval = interval; }
    static void set_like(Expr &node, std::string pattern, std::optional<char> escape);
    static void set_list(Expr &node, std::vector<Value> list);
};

/// Whether vectors of the two types hold the same bits for the same SQL value, so that one can
/// be read as the other without a cast (INTEGER as BIGINT, DECIMAL(12,2) as DECIMAL(15,2)).
[[nodiscard]] bool same_representation(const Type &a, const Type &b) noexcept;

/// Folds a constant tree; false (and no exception) on a runtime error.
[[nodiscard]] bool try_evaluate_constant(const Expr &expression, Value &out, std::string *error);

/// A DOUBLE as DuckDB casts it to VARCHAR: shortest round-trip digits, fixed notation with at
/// least one decimal for exponents -4..15 ("100.0", "0.0001"), scientific otherwise ("1e-05").
[[nodiscard]] std::string double_to_text(double value);

/// DuckDB's name of a type in overflow messages ("INTEGER", "DECIMAL(18)").
[[nodiscard]] std::string overflow_type_name(const Type &type);

/// The rows a kernel works on: ascending row indices, or all of [0, count) when `sel` is null.
struct Rows {
    const std::uint32_t *sel{nullptr};
    std::uint32_t count{0};
};
using Selection = std::vector<std::uint32_t>;
inline Rows rows_of(const Selection &selection) noexcept {
    return {selection.data(), static_cast<std::uint32_t>(selection.size())};
}

template <class F>
inline void for_each_row(Rows rows, F &&f) {
    if (rows.sel == nullptr) {
        for (std::uint32_t i = 0; i < rows.count; ++i) {
            f(i);
        }
    } else {
        for (std::uint32_t i = 0; i < rows.count; ++i) {
            f(rows.sel[i]);
        }
    }
}

/// State of one evaluate/filter call; never shared between calls (hence thread safety).
struct Context {
    const Batch *batch{nullptr};
    std::string error; // the first runtime error

    bool fail(std::string message) {
        if (error.empty()) {
            error = std::move(message);
        }
        return false;
    }
};

/// An evaluated child: a view of a batch column, a constant, or a temporary result.
struct Operand {
    const void *data{nullptr};
    const std::uint8_t *nulls{nullptr}; // per row, or nullptr when no row is NULL
    bool constant{false};
    bool constant_null{false};
    std::uint8_t c_u8{0};
    std::int64_t c_i64{0};
    Int128 c_i128{0};
    double c_f64{0.0};
    StringRef c_str;
    std::shared_ptr<Vector> owner; // the temporary behind `data`, if any

    template <class T>
    [[nodiscard]] const T *values() const noexcept {
        if (!constant) {
            return static_cast<const T *>(data);
        }
        if constexpr (std::is_same_v<T, std::uint8_t>) {
            return &c_u8;
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
            return &c_i64;
        } else if constexpr (std::is_same_v<T, Int128>) {
            return &c_i128;
        } else if constexpr (std::is_same_v<T, double>) {
            return &c_f64;
        } else {
            static_assert(std::is_same_v<T, StringRef>);
            return &c_str;
        }
    }
    /// Row i of a vector operand, or the constant.
    template <class T>
    [[nodiscard]] T at(std::uint32_t i) const noexcept {
        return values<T>()[constant ? 0 : i];
    }
    [[nodiscard]] bool is_null(std::uint32_t i) const noexcept {
        return constant ? constant_null : nulls != nullptr && nulls[i] != 0;
    }
};

/// The evaluation kernels; a struct so that Expr can befriend all of them at once.
struct ExprEvaluator {
    /// Computes `e` for `rows` into `out` (owning, e.type(), batch.rows entries): the value and,
    /// when the row is NULL or out already has NULL bytes, the NULL byte of every row in rows.
    static bool eval_into(const Expr &e, Context &ctx, Rows rows, Vector &out);
    /// `e` for `rows` without copying columns or constants.
    static bool eval_operand(const Expr &e, Context &ctx, Rows rows, Operand &operand);
    /// Appends the rows of `rows` where the BOOLEAN `e` is TRUE to `out` (ascending).
    static bool filter_rows(const Expr &e, Context &ctx, Rows rows, Selection &out);

    static bool eval_arithmetic(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_negate(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_compare(const Expr &e, Context &ctx, Rows rows, Vector *out, Selection *selected);
    static bool eval_conjunction(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_in_list(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_like(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_case(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_coalesce(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_cast(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_extract(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_substring(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_add_interval(const Expr &e, Context &ctx, Rows rows, Vector &out);
    static bool eval_function(const Expr &e, Context &ctx, Rows rows, Vector &out);
};

// Helpers shared by the kernel files.

/// Sets out's NULL bytes of `rows` to the OR of `a` and `b` (nullptr: no NULLs).
void set_nulls(Vector &out, Rows rows, const std::uint8_t *a, const std::uint8_t *b);
/// Marks every row NULL (values zeroed, so later kernels read defined bits).
void set_all_null(Vector &out, Rows rows);
/// The frame of a kernel whose result is NULL wherever its one input, e's first child, is:
/// evaluates the child and returns `kernel(input)`, except that a constant NULL child makes every
/// row of `out` NULL without calling it. False on an error (recorded in ctx).
template <class Kernel>
bool with_input(const Expr &e, Context &ctx, Rows rows, Vector &out, Kernel &&kernel) {
    Operand input;
    if (!ExprEvaluator::eval_operand(e.child(0), ctx, rows, input)) {
        return false;
    }
    if (input.constant_null) {
        set_all_null(out, rows);
        return true;
    }
    return kernel(input);
}
/// Makes the strings of `source` live as long as `out`: a constant's string is copied into out's
/// heap (and `source` repointed there), a temporary is kept alive by out.
void retain_strings(Vector &out, Operand &source);
/// Pointer to a vector's values regardless of type.
[[nodiscard]] const void *raw_data(const Vector &v) noexcept;

inline constexpr std::int64_t min_date_days = -2147483647; // DuckDB's DATE is 32 bits of days
inline constexpr std::int64_t max_date_days = 2147483647;

} // namespace mx::db::detail
