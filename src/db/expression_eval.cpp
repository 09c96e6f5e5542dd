// Vectorized evaluation: the kernel framework, arithmetic, comparisons, logic, IN, LIKE, CASE,
// COALESCE, filters and the public entry points. Casts, dates and strings are in
// expression_cast.cpp.
//
// Every kernel dispatches on types, operand shapes (vector or constant) and NULL presence once
// per batch, then runs a tight loop over the live rows. NULL rows are computed like the others
// (their input bits are arbitrary, so the arithmetic wraps instead of trapping) and checked only
// when a loop reports a problem, which keeps the hot loops free of NULL tests.

#include "expression_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace mx::db {
namespace detail {

__extension__ using UInt128 = unsigned __int128;

// ------------------------------------------------------------------------------------------
// Shared helpers

const void *raw_data(const Vector &v) noexcept {
    switch (v.type().physical()) {
    case PhysicalType::u8:
        return v.data<std::uint8_t>();
    case PhysicalType::i64:
        return v.data<std::int64_t>();
    case PhysicalType::i128:
        return v.data<Int128>();
    case PhysicalType::f64:
        return v.data<double>();
    case PhysicalType::string:
        return v.data<StringRef>();
    }
    return nullptr;
}

namespace {
void *raw_mutable(Vector &v) noexcept {
    switch (v.type().physical()) {
    case PhysicalType::u8:
        return v.mutable_data<std::uint8_t>();
    case PhysicalType::i64:
        return v.mutable_data<std::int64_t>();
    case PhysicalType::i128:
        return v.mutable_data<Int128>();
    case PhysicalType::f64:
        return v.mutable_data<double>();
    case PhysicalType::string:
        return v.mutable_data<StringRef>();
    }
    return nullptr;
}
} // namespace

void set_nulls(Vector &out, Rows rows, const std::uint8_t *a, const std::uint8_t *b) {
    if (a == nullptr && b == nullptr) {
        if (out.nulls() != nullptr) {
            std::uint8_t *nulls = out.mutable_nulls();
            for_each_row(rows, [&](std::uint32_t i) { nulls[i] = 0; });
        }
        return;
    }
    std::uint8_t *nulls = out.mutable_nulls();
    if (a != nullptr && b != nullptr) {
        for_each_row(rows, [&](std::uint32_t i) { nulls[i] = static_cast<std::uint8_t>(a[i] | b[i]); });
    } else {
        const std::uint8_t *source = a != nullptr ? a : b;
        for_each_row(rows, [&](std::uint32_t i) { nulls[i] = source[i]; });
    }
}

void set_all_null(Vector &out, Rows rows) {
    std::uint8_t *nulls = out.mutable_nulls();
    const std::size_t width = physical_size(out.type().physical());
    auto *values = static_cast<std::byte *>(raw_mutable(out));
    for_each_row(rows, [&](std::uint32_t i) {
        nulls[i] = 1;
        std::memset(values + std::size_t{i} * width, 0, width);
    });
}

void retain_strings(Vector &out, Operand &source) {
    if (source.constant) {
        source.c_str = out.heap().add(source.c_str.view());
    } else if (source.owner != nullptr) {
        out.keep_alive(source.owner);
    }
}

std::string overflow_type_name(const Type &type) {
    if (type.id == TypeId::decimal) {
        return std::string("DECIMAL(").append(std::to_string(type.precision)).append(")");
    }
    return type.to_string();
}

namespace {

/// Text of an exact value (integer, decimal, date days) for error messages.
std::string exact_text(Int128 value, const Type &type) {
    return decimal::format(value, type.id == TypeId::decimal ? type.scale : 0);
}

template <class T>
void copy_rows(const void *source, void *target, Rows rows) {
    const T *from = static_cast<const T *>(source);
    T *to = static_cast<T *>(target);
    for_each_row(rows, [&](std::uint32_t i) { to[i] = from[i]; });
}

void copy_values(PhysicalType type, const void *source, void *target, Rows rows) {
    switch (type) {
    case PhysicalType::u8:
        copy_rows<std::uint8_t>(source, target, rows);
        break;
    case PhysicalType::i64:
        copy_rows<std::int64_t>(source, target, rows);
        break;
    case PhysicalType::i128:
        copy_rows<Int128>(source, target, rows);
        break;
    case PhysicalType::f64:
        copy_rows<double>(source, target, rows);
        break;
    case PhysicalType::string:
        copy_rows<StringRef>(source, target, rows);
        break;
    }
}

template <class T>
void fill_rows(T value, Vector &out, Rows rows) {
    T *to = out.mutable_data<T>();
    for_each_row(rows, [&](std::uint32_t i) { to[i] = value; });
}

void fill_constant(Operand &constant, Rows rows, Vector &out) {
    if (constant.constant_null) {
        set_all_null(out, rows);
        return;
    }
    set_nulls(out, rows, nullptr, nullptr);
    switch (out.type().physical()) {
    case PhysicalType::u8:
        fill_rows(constant.c_u8, out, rows);
        break;
    case PhysicalType::i64:
        fill_rows(constant.c_i64, out, rows);
        break;
    case PhysicalType::i128:
        fill_rows(constant.c_i128, out, rows);
        break;
    case PhysicalType::f64:
        fill_rows(constant.c_f64, out, rows);
        break;
    case PhysicalType::string:
        retain_strings(out, constant);
        fill_rows(constant.c_str, out, rows);
        break;
    }
}

/// Calls fn(std::bool_constant<l_constant>, std::bool_constant<r_constant>) so kernels are
/// instantiated once per operand shape.
template <class Fn>
decltype(auto) with_shape(bool l_constant, bool r_constant, Fn &&fn) {
    if (l_constant) {
        return r_constant ? fn(std::true_type{}, std::true_type{}) : fn(std::true_type{}, std::false_type{});
    }
    return r_constant ? fn(std::false_type{}, std::true_type{}) : fn(std::false_type{}, std::false_type{});
}

Selection materialize(Rows rows) {
    Selection selection(rows.count);
    if (rows.sel == nullptr) {
        for (std::uint32_t i = 0; i < rows.count; ++i) {
            selection[i] = i;
        }
    } else {
        std::copy(rows.sel, rows.sel + rows.count, selection.begin());
    }
    return selection;
}

// ------------------------------------------------------------------------------------------
// Arithmetic

inline std::uint64_t to_unsigned(std::int64_t v) noexcept { return static_cast<std::uint64_t>(v); }
inline UInt128 to_unsigned(Int128 v) noexcept { return static_cast<UInt128>(v); }

/// Checked 128-bit multiplication without __builtin_mul_overflow, which Clang lowers to a
/// compiler-rt call that libgcc does not provide.
bool mul_overflow(Int128 a, Int128 b, Int128 &result) noexcept {
    constexpr Int128 int64_min = std::numeric_limits<std::int64_t>::min();
    constexpr Int128 int64_max = std::numeric_limits<std::int64_t>::max();
    if (a >= int64_min && a <= int64_max && b >= int64_min && b <= int64_max) {
        result = a * b; // |a*b| < 2^126
        return false;
    }
    const UInt128 ua = a < 0 ? UInt128(0) - static_cast<UInt128>(a) : static_cast<UInt128>(a);
    const UInt128 ub = b < 0 ? UInt128(0) - static_cast<UInt128>(b) : static_cast<UInt128>(b);
    constexpr UInt128 limit = ~UInt128(0) >> 1; // 2^127 - 1
    if (ua != 0 && ub > limit / ua) {
        result = static_cast<Int128>(ua * ub);
        return true;
    }
    const UInt128 magnitude = ua * ub;
    result = (a < 0) != (b < 0) ? -static_cast<Int128>(magnitude) : static_cast<Int128>(magnitude);
    return false;
}
bool mul_overflow(std::int64_t a, std::int64_t b, std::int64_t &result) noexcept {
    return __builtin_mul_overflow(a, b, &result);
}

struct AddOp {
    static constexpr const char *name = "addition";
    static constexpr const char *symbol = " + ";
    template <class T>
    static bool checked(T a, T b, T &result) noexcept {
        return __builtin_add_overflow(a, b, &result);
    }
    template <class T>
    static T wrapping(T a, T b) noexcept {
        return static_cast<T>(to_unsigned(a) + to_unsigned(b));
    }
    static double real(double a, double b) noexcept { return a + b; }
};
struct SubtractOp {
    static constexpr const char *name = "subtraction";
    static constexpr const char *symbol = " - ";
    template <class T>
    static bool checked(T a, T b, T &result) noexcept {
        return __builtin_sub_overflow(a, b, &result);
    }
    template <class T>
    static T wrapping(T a, T b) noexcept {
        return static_cast<T>(to_unsigned(a) - to_unsigned(b));
    }
    static double real(double a, double b) noexcept { return a - b; }
};
struct MultiplyOp {
    static constexpr const char *name = "multiplication";
    static constexpr const char *symbol = " * ";
    template <class T>
    static bool checked(T a, T b, T &result) noexcept {
        return mul_overflow(a, b, result);
    }
    template <class T>
    static T wrapping(T a, T b) noexcept {
        return static_cast<T>(to_unsigned(a) * to_unsigned(b));
    }
    static double real(double a, double b) noexcept { return a * b; }
};
struct DivideOp {
    static double real(double a, double b) noexcept { return a / b; } // IEEE: x/0 is inf or NaN (DuckDB 1.5)
};
struct ModuloOp {
    static double real(double a, double b) noexcept { return std::fmod(a, b); }
};

template <class O>
void bounds_of(const Type &type, O &low, O &high) noexcept {
    switch (type.id) {
    case TypeId::integer:
        low = std::numeric_limits<std::int32_t>::min();
        high = std::numeric_limits<std::int32_t>::max();
        return;
    case TypeId::date:
        low = min_date_days;
        high = max_date_days;
        return;
    case TypeId::decimal:
        high = static_cast<O>(decimal::pow10(type.precision) - 1);
        low = -high;
        return;
    default:
        low = std::numeric_limits<O>::min();
        high = std::numeric_limits<O>::max();
        return;
    }
}

template <class Op, bool Check, bool LConstant, bool RConstant, class L, class R, class O>
bool arithmetic_loop(Rows rows, const L *l, const R *r, O *o, O low, O high) noexcept {
    if constexpr (Check) {
        bool bad = false;
        for_each_row(rows, [&](std::uint32_t i) {
            const O a = static_cast<O>(l[LConstant ? 0 : i]);
            const O b = static_cast<O>(r[RConstant ? 0 : i]);
            O value;
            const bool overflow = Op::checked(a, b, value);
            o[i] = value;
            if (overflow || value < low || value > high) {
                bad = true;
            }
        });
        return !bad;
    } else {
        for_each_row(rows, [&](std::uint32_t i) {
            o[i] = Op::wrapping(static_cast<O>(l[LConstant ? 0 : i]), static_cast<O>(r[RConstant ? 0 : i]));
        });
        return true;
    }
}

/// Runs the exact kernel and, if it reports a problem, looks for the first non-NULL row that
/// really overflows (NULL rows may hold arbitrary bits) to name it in the error.
template <class Op, bool Check, class L, class R, class O>
bool exact_arithmetic(const Expr &e, Context &ctx, Rows rows, const Operand &l, const Operand &r,
                      Vector &out) {
    O low;
    O high;
    bounds_of(e.type(), low, high);
    const L *lv = l.values<L>();
    const R *rv = r.values<R>();
    O *ov = out.mutable_data<O>();
    const bool ok = with_shape(l.constant, r.constant, [&](auto lc, auto rc) {
        return arithmetic_loop<Op, Check, decltype(lc)::value, decltype(rc)::value>(rows, lv, rv, ov, low,
                                                                                    high);
    });
    if (ok) {
        return true;
    }
    bool failed = false;
    for_each_row(rows, [&](std::uint32_t i) {
        if (failed || l.is_null(i) || r.is_null(i)) {
            return;
        }
        const O a = static_cast<O>(l.at<L>(i));
        const O b = static_cast<O>(r.at<R>(i));
        O value;
        if (Op::checked(a, b, value) || value < low || value > high) {
            failed = true;
            std::string message(e.type().id == TypeId::date ? "Date out of range in " : "Overflow in ");
            message.append(Op::name)
                .append(" of ")
                .append(overflow_type_name(e.type()))
                .append(" (")
                .append(exact_text(a, e.child(0).type()))
                .append(Op::symbol)
                .append(exact_text(b, e.child(1).type()))
                .append(")");
            if (e.type().id == TypeId::decimal) {
                message.append(". You might want to add an explicit cast to a bigger decimal.");
            }
            ctx.fail(std::move(message));
        }
    });
    return !failed;
}

template <class Op>
void real_arithmetic(Rows rows, const Operand &l, const Operand &r, Vector &out) {
    const double *lv = l.values<double>();
    const double *rv = r.values<double>();
    double *ov = out.mutable_data<double>();
    with_shape(l.constant, r.constant, [&](auto lc, auto rc) {
        constexpr bool left_constant = decltype(lc)::value;
        constexpr bool right_constant = decltype(rc)::value;
        for_each_row(rows, [&](std::uint32_t i) {
            ov[i] = Op::real(lv[left_constant ? 0 : i], rv[right_constant ? 0 : i]);
        });
        return 0;
    });
}

template <class T>
void modulo_loop(Rows rows, const Operand &l, const Operand &r, Vector &out) {
    T *ov = out.mutable_data<T>();
    std::uint8_t *nulls = out.mutable_nulls();
    for_each_row(rows, [&](std::uint32_t i) {
        const T a = l.at<T>(i);
        const T b = r.at<T>(i);
        // x % 0 is NULL (DuckDB); x % -1 is 0 and must not trap on the minimum value
        nulls[i] = static_cast<std::uint8_t>(l.is_null(i) || r.is_null(i) || b == 0);
        ov[i] = b == 0 || b == -1 ? T(0) : static_cast<T>(a % b);
    });
}

template <class Op, class L, class R>
bool wide_arithmetic(const Expr &e, Context &ctx, Rows rows, const Operand &l, const Operand &r,
                     Vector &out) {
    return exact_arithmetic<Op, true, L, R, Int128>(e, ctx, rows, l, r, out);
}

template <class Op>
bool wide_dispatch(const Expr &e, Context &ctx, Rows rows, const Operand &l, const Operand &r, Vector &out) {
    const bool l_wide = e.child(0).type().physical() == PhysicalType::i128;
    const bool r_wide = e.child(1).type().physical() == PhysicalType::i128;
    if (l_wide) {
        return r_wide ? wide_arithmetic<Op, Int128, Int128>(e, ctx, rows, l, r, out)
                      : wide_arithmetic<Op, Int128, std::int64_t>(e, ctx, rows, l, r, out);
    }
    return r_wide ? wide_arithmetic<Op, std::int64_t, Int128>(e, ctx, rows, l, r, out)
                  : wide_arithmetic<Op, std::int64_t, std::int64_t>(e, ctx, rows, l, r, out);
}

template <class Op>
bool narrow_dispatch(const Expr &e, bool check, Context &ctx, Rows rows, const Operand &l, const Operand &r,
                     Vector &out) {
    return check
               ? exact_arithmetic<Op, true, std::int64_t, std::int64_t, std::int64_t>(e, ctx, rows, l, r, out)
               : exact_arithmetic<Op, false, std::int64_t, std::int64_t, std::int64_t>(e, ctx, rows, l, r,
                                                                                       out);
}

// ------------------------------------------------------------------------------------------
// Comparisons. DOUBLE follows DuckDB's total order: NaN equals NaN and is greater than all.

struct CmpEqual {
    template <class T>
    bool operator()(const T &a, const T &b) const noexcept {
        return a == b;
    }
    bool operator()(double a, double b) const noexcept { return a == b || (a != a && b != b); }
};
struct CmpNotEqual {
    template <class T>
    bool operator()(const T &a, const T &b) const noexcept {
        return !CmpEqual{}(a, b);
    }
};
struct CmpLess {
    template <class T>
    bool operator()(const T &a, const T &b) const noexcept {
        return a < b;
    }
    bool operator()(double a, double b) const noexcept { return a < b || (b != b && a == a); }
};
struct CmpLessEqual {
    template <class T>
    bool operator()(const T &a, const T &b) const noexcept {
        return a <= b;
    }
    bool operator()(double a, double b) const noexcept { return a <= b || b != b; }
};
struct CmpGreater {
    template <class T>
    bool operator()(const T &a, const T &b) const noexcept {
        return CmpLess{}(b, a);
    }
};
struct CmpGreaterEqual {
    template <class T>
    bool operator()(const T &a, const T &b) const noexcept {
        return CmpLessEqual{}(b, a);
    }
};

/// Compares l[i] with r[i] (or the constant r[0]) and writes a BOOLEAN or appends the row to a
/// selection. With `Nulls`, NULL rows count as not selected; strings skip them entirely since a
/// NULL row's StringRef may point anywhere.
template <bool RConstant, bool Select, bool Nulls, class T, class Cmp>
std::uint32_t compare_loop(Cmp cmp, Rows rows, const T *l, const T *r, const std::uint8_t *nulls,
                           std::uint8_t *out, std::uint32_t *selected) noexcept {
    std::uint32_t count = 0;
    for_each_row(rows, [&](std::uint32_t i) {
        bool match;
        if constexpr (!Nulls) {
            match = cmp(l[i], r[RConstant ? 0 : i]);
        } else if constexpr (std::is_same_v<T, StringRef>) {
            match = nulls[i] == 0 && cmp(l[i], r[RConstant ? 0 : i]);
        } else {
            match = (nulls[i] == 0) & cmp(l[i], r[RConstant ? 0 : i]);
        }
        if constexpr (Select) {
            selected[count] = i;
            count += match ? 1U : 0U;
        } else {
            out[i] = match ? 1 : 0;
        }
    });
    return count;
}

template <class T, class Cmp>
std::uint32_t compare_shaped(Cmp cmp, bool r_constant, Rows rows, const T *l, const T *r,
                             const std::uint8_t *nulls, std::uint8_t *out, std::uint32_t *selected) noexcept {
    const bool select = selected != nullptr;
    const bool with_nulls = nulls != nullptr;
    if (r_constant) {
        if (select) {
            return with_nulls ? compare_loop<true, true, true>(cmp, rows, l, r, nulls, out, selected)
                              : compare_loop<true, true, false>(cmp, rows, l, r, nulls, out, selected);
        }
        return with_nulls ? compare_loop<true, false, true>(cmp, rows, l, r, nulls, out, selected)
                          : compare_loop<true, false, false>(cmp, rows, l, r, nulls, out, selected);
    }
    if (select) {
        return with_nulls ? compare_loop<false, true, true>(cmp, rows, l, r, nulls, out, selected)
                          : compare_loop<false, true, false>(cmp, rows, l, r, nulls, out, selected);
    }
    return with_nulls ? compare_loop<false, false, true>(cmp, rows, l, r, nulls, out, selected)
                      : compare_loop<false, false, false>(cmp, rows, l, r, nulls, out, selected);
}

template <class T>
std::uint32_t compare_typed(CompareOp op, const Operand &l, const Operand &r, Rows rows,
                            const std::uint8_t *nulls, std::uint8_t *out, std::uint32_t *selected) noexcept {
    const T *lv = l.values<T>();
    const T *rv = r.values<T>();
    if (l.constant) { // both constant: one comparison for all rows
        MX_ASSERT(r.constant, "a constant left operand is swapped to the right");
        bool match = false;
        switch (op) {
        case CompareOp::equal:
            match = CmpEqual{}(lv[0], rv[0]);
            break;
        case CompareOp::not_equal:
            match = CmpNotEqual{}(lv[0], rv[0]);
            break;
        case CompareOp::less:
            match = CmpLess{}(lv[0], rv[0]);
            break;
        case CompareOp::less_equal:
            match = CmpLessEqual{}(lv[0], rv[0]);
            break;
        case CompareOp::greater:
            match = CmpGreater{}(lv[0], rv[0]);
            break;
        case CompareOp::greater_equal:
            match = CmpGreaterEqual{}(lv[0], rv[0]);
            break;
        }
        std::uint32_t count = 0;
        for_each_row(rows, [&](std::uint32_t i) {
            if (selected != nullptr) {
                if (match) {
                    selected[count++] = i;
                }
            } else {
                out[i] = match ? 1 : 0;
            }
        });
        return count;
    }
    switch (op) {
    case CompareOp::equal:
        return compare_shaped(CmpEqual{}, r.constant, rows, lv, rv, nulls, out, selected);
    case CompareOp::not_equal:
        return compare_shaped(CmpNotEqual{}, r.constant, rows, lv, rv, nulls, out, selected);
    case CompareOp::less:
        return compare_shaped(CmpLess{}, r.constant, rows, lv, rv, nulls, out, selected);
    case CompareOp::less_equal:
        return compare_shaped(CmpLessEqual{}, r.constant, rows, lv, rv, nulls, out, selected);
    case CompareOp::greater:
        return compare_shaped(CmpGreater{}, r.constant, rows, lv, rv, nulls, out, selected);
    case CompareOp::greater_equal:
        return compare_shaped(CmpGreaterEqual{}, r.constant, rows, lv, rv, nulls, out, selected);
    }
    return 0;
}

// ------------------------------------------------------------------------------------------
// LIKE: the pattern's shape is chosen once per batch.

template <class Match>
void like_loop(Rows rows, const Operand &o, bool negated, Vector &out, Match match) {
    const StringRef *strings = o.values<StringRef>();
    std::uint8_t *result = out.mutable_data<std::uint8_t>();
    const std::uint8_t *nulls = o.nulls;
    if (nulls == nullptr) {
        for_each_row(rows, [&](std::uint32_t i) { result[i] = match(strings[i].view()) != negated ? 1 : 0; });
    } else {
        for_each_row(rows, [&](std::uint32_t i) {
            result[i] = nulls[i] == 0 && match(strings[i].view()) != negated ? 1 : 0;
        });
    }
}

} // namespace

// ------------------------------------------------------------------------------------------
// Node kernels

bool ExprEvaluator::eval_operand(const Expr &e, Context &ctx, Rows rows, Operand &operand) {
    switch (e.kind()) {
    case ExprKind::column: {
        MX_ASSERT(e.column_index() < ctx.batch->columns.size(), "column reference out of range");
        const Vector &column = ctx.batch->columns[e.column_index()];
        MX_ASSERT(column.type().physical() == e.type().physical(), "column type differs from its reference");
        MX_ASSERT(column.size() >= ctx.batch->rows, "column shorter than the batch");
        operand.data = raw_data(column);
        operand.nulls = column.nulls();
        return true;
    }
    case ExprKind::constant: {
        const Value &value = e.value();
        operand.constant = true;
        operand.constant_null = value.null;
        operand.c_u8 = value.i64 != 0 ? 1 : 0;
        operand.c_i64 = value.i64;
        operand.c_i128 = value.type.physical() == PhysicalType::i128 ? value.i128 : Int128{value.i64};
        operand.c_f64 = value.f64;
        operand.c_str = StringRef(std::string_view(value.str));
        return true;
    }
    default: {
        auto result = std::make_shared<Vector>(e.type(), ctx.batch->rows);
        if (!eval_into(e, ctx, rows, *result)) {
            return false;
        }
        operand.data = raw_data(*result);
        operand.nulls = result->nulls();
        operand.owner = std::move(result);
        return true;
    }
    }
}

bool ExprEvaluator::eval_into(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    MX_ASSERT(out.type().physical() == e.type().physical(), "result vector of the wrong type");
    switch (e.kind()) {
    case ExprKind::column: {
        Operand column;
        eval_operand(e, ctx, rows, column);
        copy_values(e.type().physical(), column.data, raw_mutable(out), rows);
        set_nulls(out, rows, column.nulls, nullptr);
        return true; // strings stay in the batch's memory, which outlives the result by contract
    }
    case ExprKind::constant: {
        Operand constant;
        eval_operand(e, ctx, rows, constant);
        fill_constant(constant, rows, out);
        return true;
    }
    case ExprKind::arithmetic:
        return eval_arithmetic(e, ctx, rows, out);
    case ExprKind::negate:
        return eval_negate(e, ctx, rows, out);
    case ExprKind::compare:
        return eval_compare(e, ctx, rows, &out, nullptr);
    case ExprKind::logical_and:
    case ExprKind::logical_or:
        return eval_conjunction(e, ctx, rows, out);
    case ExprKind::logical_not: {
        Operand o;
        if (!eval_operand(e.child(0), ctx, rows, o)) {
            return false;
        }
        if (o.constant) {
            fill_constant(o, rows, out); // factories fold NOT constant; kept for completeness
            std::uint8_t *result = out.mutable_data<std::uint8_t>();
            for_each_row(rows, [&](std::uint32_t i) { result[i] = result[i] == 0 ? 1 : 0; });
            return true;
        }
        const std::uint8_t *input = o.values<std::uint8_t>();
        std::uint8_t *result = out.mutable_data<std::uint8_t>();
        for_each_row(rows, [&](std::uint32_t i) { result[i] = input[i] == 0 ? 1 : 0; });
        set_nulls(out, rows, o.nulls, nullptr);
        return true;
    }
    case ExprKind::is_null: {
        Operand o;
        if (!eval_operand(e.child(0), ctx, rows, o)) {
            return false;
        }
        std::uint8_t *result = out.mutable_data<std::uint8_t>();
        const std::uint8_t when_null = e.negated() ? 0 : 1;
        const std::uint8_t when_value = e.negated() ? 1 : 0;
        if (o.constant || o.nulls == nullptr) {
            const std::uint8_t value = o.constant && o.constant_null ? when_null : when_value;
            for_each_row(rows, [&](std::uint32_t i) { result[i] = value; });
        } else {
            const std::uint8_t *nulls = o.nulls;
            for_each_row(rows, [&](std::uint32_t i) { result[i] = nulls[i] != 0 ? when_null : when_value; });
        }
        set_nulls(out, rows, nullptr, nullptr);
        return true;
    }
    case ExprKind::in_list:
        return eval_in_list(e, ctx, rows, out);
    case ExprKind::like:
        return eval_like(e, ctx, rows, out);
    case ExprKind::case_when:
        return eval_case(e, ctx, rows, out);
    case ExprKind::cast:
        return eval_cast(e, ctx, rows, out);
    case ExprKind::extract:
        return eval_extract(e, ctx, rows, out);
    case ExprKind::substring:
        return eval_substring(e, ctx, rows, out);
    case ExprKind::add_interval:
        return eval_add_interval(e, ctx, rows, out);
    case ExprKind::coalesce:
        return eval_coalesce(e, ctx, rows, out);
    case ExprKind::function:
        return eval_function(e, ctx, rows, out);
    }
    return ctx.fail("unknown expression kind");
}

bool ExprEvaluator::eval_arithmetic(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    Operand l;
    Operand r;
    if (!eval_operand(e.child(0), ctx, rows, l) || !eval_operand(e.child(1), ctx, rows, r)) {
        return false;
    }
    if (l.constant_null || r.constant_null) {
        set_all_null(out, rows);
        return true;
    }
    const ArithmeticOp op = e._arithmetic_op;
    if (op == ArithmeticOp::modulo && e.type().physical() != PhysicalType::f64) {
        if (e.type().physical() == PhysicalType::i64) {
            modulo_loop<std::int64_t>(rows, l, r, out);
        } else {
            modulo_loop<Int128>(rows, l, r, out);
        }
        return true;
    }
    set_nulls(out, rows, l.nulls, r.nulls);
    switch (e.type().physical()) {
    case PhysicalType::f64:
        switch (op) {
        case ArithmeticOp::add:
            real_arithmetic<AddOp>(rows, l, r, out);
            break;
        case ArithmeticOp::subtract:
            real_arithmetic<SubtractOp>(rows, l, r, out);
            break;
        case ArithmeticOp::multiply:
            real_arithmetic<MultiplyOp>(rows, l, r, out);
            break;
        case ArithmeticOp::divide:
            real_arithmetic<DivideOp>(rows, l, r, out);
            break;
        case ArithmeticOp::modulo:
            real_arithmetic<ModuloOp>(rows, l, r, out);
            break;
        }
        return true;
    case PhysicalType::i64: {
        const bool check = e._check_overflow;
        switch (op) {
        case ArithmeticOp::add:
            return narrow_dispatch<AddOp>(e, check, ctx, rows, l, r, out);
        case ArithmeticOp::subtract:
            return narrow_dispatch<SubtractOp>(e, check, ctx, rows, l, r, out);
        case ArithmeticOp::multiply:
            return narrow_dispatch<MultiplyOp>(e, check, ctx, rows, l, r, out);
        default:
            break;
        }
        break;
    }
    case PhysicalType::i128:
        switch (op) {
        case ArithmeticOp::add:
            return wide_dispatch<AddOp>(e, ctx, rows, l, r, out);
        case ArithmeticOp::subtract:
            return wide_dispatch<SubtractOp>(e, ctx, rows, l, r, out);
        case ArithmeticOp::multiply:
            return wide_dispatch<MultiplyOp>(e, ctx, rows, l, r, out);
        default:
            break;
        }
        break;
    default:
        break;
    }
    MX_ASSERT(false, "arithmetic node with an unexpected result type");
    return ctx.fail("internal error: arithmetic on an unexpected type");
}

bool ExprEvaluator::eval_negate(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    return with_input(e, ctx, rows, out, [&](Operand &o) {
        set_nulls(out, rows, o.nulls, nullptr);
        switch (e.type().physical()) {
        case PhysicalType::f64: {
            double *result = out.mutable_data<double>();
            for_each_row(rows, [&](std::uint32_t i) { result[i] = -o.at<double>(i); });
            return true;
        }
        case PhysicalType::i128: {
            Int128 *result = out.mutable_data<Int128>();
            for_each_row(rows, [&](std::uint32_t i) {
                result[i] = static_cast<Int128>(UInt128(0) - to_unsigned(o.at<Int128>(i)));
            });
            return true;
        }
        case PhysicalType::i64: {
            std::int64_t *result = out.mutable_data<std::int64_t>();
            if (!e._check_overflow) { // decimals are symmetric; wrap so NULL rows' bits cannot trap
                for_each_row(rows, [&](std::uint32_t i) {
                    result[i] =
                        static_cast<std::int64_t>(std::uint64_t{0} - to_unsigned(o.at<std::int64_t>(i)));
                });
                return true;
            }
            std::int64_t low = 0;
            std::int64_t high = 0;
            bounds_of(e.type(), low, high);
            bool bad = false;
            for_each_row(rows, [&](std::uint32_t i) {
                std::int64_t value = 0;
                const bool overflow = __builtin_sub_overflow(std::int64_t{0}, o.at<std::int64_t>(i), &value);
                result[i] = value;
                if (overflow || value < low || value > high) {
                    bad = true;
                }
            });
            if (!bad) {
                return true;
            }
            bool failed = false;
            for_each_row(rows, [&](std::uint32_t i) {
                const std::int64_t input = o.at<std::int64_t>(i);
                if (failed || o.is_null(i) ||
                    (input != std::numeric_limits<std::int64_t>::min() && -input >= low && -input <= high)) {
                    return;
                }
                failed = true;
                std::string message("Overflow in negation of ");
                message.append(overflow_type_name(e.type()))
                    .append(" (")
                    .append(std::to_string(input))
                    .append(")");
                ctx.fail(std::move(message));
            });
            return !failed;
        }
        default:
            break;
        }
        MX_ASSERT(false, "negation of an unexpected type");
        return ctx.fail("internal error: negation of an unexpected type");
    });
}

bool ExprEvaluator::eval_compare(const Expr &e, Context &ctx, Rows rows, Vector *out, Selection *selected) {
    Operand l;
    Operand r;
    if (!eval_operand(e.child(0), ctx, rows, l) || !eval_operand(e.child(1), ctx, rows, r)) {
        return false;
    }
    if (l.constant_null || r.constant_null) {
        if (out != nullptr) {
            set_all_null(*out, rows);
        }
        return true;
    }
    CompareOp op = e.compare_op();
    if (l.constant && !r.constant) {
        std::swap(l, r);
        op = mirrored(op);
    }
    const PhysicalType physical = e.child(0).type().physical();
    std::vector<std::uint8_t> combined;
    const std::uint8_t *nulls = l.nulls != nullptr ? l.nulls : r.nulls;
    const bool need_nulls = selected != nullptr || physical == PhysicalType::string;
    if (need_nulls && l.nulls != nullptr && r.nulls != nullptr) {
        combined.resize(ctx.batch->rows);
        for_each_row(
            rows, [&](std::uint32_t i) { combined[i] = static_cast<std::uint8_t>(l.nulls[i] | r.nulls[i]); });
        nulls = combined.data();
    }
    if (!need_nulls) {
        nulls = nullptr; // the NULL bytes of the result are set apart; values of NULL rows do not matter
    }
    std::uint8_t *result = nullptr;
    std::uint32_t *target = nullptr;
    std::size_t base = 0;
    if (out != nullptr) {
        set_nulls(*out, rows, l.nulls, r.nulls);
        result = out->mutable_data<std::uint8_t>();
    } else {
        base = selected->size();
        selected->resize(base + rows.count);
        target = selected->data() + base;
    }
    std::uint32_t count = 0;
    switch (physical) {
    case PhysicalType::u8:
        count = compare_typed<std::uint8_t>(op, l, r, rows, nulls, result, target);
        break;
    case PhysicalType::i64:
        count = compare_typed<std::int64_t>(op, l, r, rows, nulls, result, target);
        break;
    case PhysicalType::i128:
        count = compare_typed<Int128>(op, l, r, rows, nulls, result, target);
        break;
    case PhysicalType::f64:
        count = compare_typed<double>(op, l, r, rows, nulls, result, target);
        break;
    case PhysicalType::string:
        count = compare_typed<StringRef>(op, l, r, rows, nulls, result, target);
        break;
    }
    if (selected != nullptr) {
        selected->resize(base + count);
    }
    return true;
}

bool ExprEvaluator::eval_conjunction(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    // Rows are decided by the first FALSE (AND) or TRUE (OR) operand; later operands only see
    // the undecided rows. A NULL operand makes the row NULL unless a later operand decides it.
    const bool is_and = e.kind() == ExprKind::logical_and;
    const std::uint8_t deciding = is_and ? 0 : 1;
    std::uint8_t *result = out.mutable_data<std::uint8_t>();
    std::uint8_t *nulls = out.nulls() != nullptr ? out.mutable_nulls() : nullptr;
    for_each_row(rows, [&](std::uint32_t i) {
        result[i] = is_and ? 1 : 0;
        if (nulls != nullptr) {
            nulls[i] = 0;
        }
    });
    Selection active = materialize(rows);
    Selection next;
    for (const ExprPtr &child : e.children()) {
        Operand o;
        if (!eval_operand(*child, ctx, rows_of(active), o)) {
            return false;
        }
        next.clear();
        for (const std::uint32_t i : active) {
            if (o.is_null(i)) {
                if (nulls == nullptr) {
                    nulls = out.mutable_nulls();
                }
                nulls[i] = 1;
                next.push_back(i);
            } else if ((o.at<std::uint8_t>(i) != 0 ? 1 : 0) == deciding) {
                result[i] = deciding;
                if (nulls != nullptr) {
                    nulls[i] = 0;
                }
            } else {
                next.push_back(i);
            }
        }
        active.swap(next);
        if (active.empty()) {
            break;
        }
    }
    return true;
}

bool ExprEvaluator::eval_in_list(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    return with_input(e, ctx, rows, out, [&](Operand &o) {
        const bool negated = e.negated();
        const bool list_has_null = e._list_has_null;
        std::uint8_t *result = out.mutable_data<std::uint8_t>();
        std::uint8_t *nulls =
            list_has_null || o.nulls != nullptr || out.nulls() != nullptr ? out.mutable_nulls() : nullptr;
        auto run = [&](auto contains) {
            for_each_row(rows, [&](std::uint32_t i) {
                if (o.is_null(i)) {
                    nulls[i] = 1;
                    result[i] = 0;
                    return;
                }
                const bool found = contains(i);
                if (!found && list_has_null) {
                    nulls[i] = 1; // x IN (..., NULL) is NULL unless x matches
                    result[i] = 0;
                    return;
                }
                if (nulls != nullptr) {
                    nulls[i] = 0;
                }
                result[i] = found != negated ? 1 : 0;
            });
        };
        constexpr std::size_t linear_limit = 8; // below this a scan beats the binary search
        switch (e.child(0).type().physical()) {
        case PhysicalType::u8:
        case PhysicalType::i64: {
            const auto &list = e._sorted_i64;
            const bool is_bool = e.child(0).type().physical() == PhysicalType::u8;
            auto get = [&](std::uint32_t i) {
                return is_bool ? std::int64_t{o.at<std::uint8_t>(i)} : o.at<std::int64_t>(i);
            };
            if (list.size() <= linear_limit) {
                run([&](std::uint32_t i) {
                    return std::find(list.begin(), list.end(), get(i)) != list.end();
                });
            } else {
                run([&](std::uint32_t i) { return std::binary_search(list.begin(), list.end(), get(i)); });
            }
            break;
        }
        case PhysicalType::i128: {
            const auto &list = e._sorted_i128;
            run([&](std::uint32_t i) {
                return std::binary_search(list.begin(), list.end(), o.at<Int128>(i));
            });
            break;
        }
        case PhysicalType::f64: {
            const auto &list = e._sorted_f64;
            const bool has_nan = !list.empty() && list.back() != list.back();
            const auto end = has_nan ? list.end() - 1 : list.end();
            run([&](std::uint32_t i) {
                const double v = o.at<double>(i);
                return v != v ? has_nan : std::binary_search(list.begin(), end, v);
            });
            break;
        }
        case PhysicalType::string: {
            const auto &list = e._sorted_str;
            if (list.size() <= linear_limit) {
                // Short lists of short codes (Q22's country codes, Q12's ship modes): lengths
                // first, then the bytes without a library call.
                run([&](std::uint32_t i) {
                    const StringRef value = o.at<StringRef>(i);
                    return std::any_of(list.begin(), list.end(), [&](const std::string &candidate) {
                        return equal_strings(StringRef{candidate}, value);
                    });
                });
            } else {
                run([&](std::uint32_t i) {
                    return std::binary_search(list.begin(), list.end(), o.at<StringRef>(i).view(),
                                              std::less<>{});
                });
            }
            break;
        }
        }
        return true;
    });
}

bool ExprEvaluator::eval_like(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    return with_input(e, ctx, rows, out, [&](Operand &o) {
        if (o.constant) { // factories fold constant LIKE; a plain loop suffices here
            const bool match = e._like->match(o.c_str.view()) != e.negated();
            std::uint8_t *result = out.mutable_data<std::uint8_t>();
            for_each_row(rows, [&](std::uint32_t i) { result[i] = match ? 1 : 0; });
            set_nulls(out, rows, nullptr, nullptr);
            return true;
        }
        const LikeMatcher &m = *e._like;
        const std::string_view needle = m.needle;
        const bool negated = e.negated();
        switch (m.shape) {
        case LikeMatcher::Shape::exact:
            like_loop(rows, o, negated, out, [&](std::string_view s) { return s == needle; });
            break;
        case LikeMatcher::Shape::prefix:
            like_loop(rows, o, negated, out, [&](std::string_view s) {
                return s.size() >= needle.size() && std::memcmp(s.data(), needle.data(), needle.size()) == 0;
            });
            break;
        case LikeMatcher::Shape::suffix:
            like_loop(rows, o, negated, out, [&](std::string_view s) {
                return s.size() >= needle.size() &&
                       std::memcmp(s.data() + s.size() - needle.size(), needle.data(), needle.size()) == 0;
            });
            break;
        case LikeMatcher::Shape::contains:
            like_loop(rows, o, negated, out, [&](std::string_view s) {
                return find_substring(s, needle) != std::string_view::npos;
            });
            break;
        default:
            like_loop(rows, o, negated, out, [&](std::string_view s) { return m.match(s); });
            break;
        }
        set_nulls(out, rows, o.nulls, nullptr);
        return true;
    });
}

bool ExprEvaluator::eval_case(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    // Each row takes the first branch whose condition is TRUE; the result of a branch is
    // evaluated only on its rows, so a branch cannot fail on rows it does not produce.
    const auto &children = e.children();
    const std::size_t pairs = (children.size() - (e.has_else() ? 1 : 0)) / 2;
    Selection remaining = materialize(rows);
    Selection matched;
    Selection rest;
    for (std::size_t p = 0; p < pairs && !remaining.empty(); ++p) {
        matched.clear();
        if (!filter_rows(*children[2 * p], ctx, rows_of(remaining), matched)) {
            return false;
        }
        if (matched.empty()) {
            continue;
        }
        if (!eval_into(*children[2 * p + 1], ctx, rows_of(matched), out)) {
            return false;
        }
        rest.clear();
        std::set_difference(remaining.begin(), remaining.end(), matched.begin(), matched.end(),
                            std::back_inserter(rest));
        remaining.swap(rest);
    }
    if (remaining.empty()) {
        return true;
    }
    if (e.has_else()) {
        return eval_into(*children.back(), ctx, rows_of(remaining), out);
    }
    set_all_null(out, rows_of(remaining));
    return true;
}

bool ExprEvaluator::eval_coalesce(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    Selection remaining = materialize(rows);
    Selection still_null;
    const auto &children = e.children();
    for (std::size_t k = 0; k < children.size(); ++k) {
        if (!eval_into(*children[k], ctx, rows_of(remaining), out)) {
            return false;
        }
        const std::uint8_t *nulls = out.nulls();
        if (k + 1 == children.size() || nulls == nullptr) {
            break;
        }
        still_null.clear();
        for (const std::uint32_t i : remaining) {
            if (nulls[i] != 0) {
                still_null.push_back(i);
            }
        }
        remaining.swap(still_null);
        if (remaining.empty()) {
            break;
        }
    }
    return true;
}

bool ExprEvaluator::filter_rows(const Expr &e, Context &ctx, Rows rows, Selection &out) {
    switch (e.kind()) {
    case ExprKind::logical_and: {
        Selection current;
        Selection next;
        Rows active = rows;
        for (const ExprPtr &child : e.children()) {
            next.clear();
            if (!filter_rows(*child, ctx, active, next)) {
                return false;
            }
            current.swap(next);
            active = rows_of(current);
            if (active.count == 0) {
                break;
            }
        }
        out.insert(out.end(), current.begin(), current.end());
        return true;
    }
    case ExprKind::logical_or: {
        Selection remaining = materialize(rows);
        Selection accepted;
        Selection passed;
        Selection scratch;
        for (const ExprPtr &child : e.children()) {
            passed.clear();
            if (!filter_rows(*child, ctx, rows_of(remaining), passed)) {
                return false;
            }
            if (passed.empty()) {
                continue;
            }
            scratch.clear();
            std::merge(accepted.begin(), accepted.end(), passed.begin(), passed.end(),
                       std::back_inserter(scratch));
            accepted.swap(scratch);
            scratch.clear();
            std::set_difference(remaining.begin(), remaining.end(), passed.begin(), passed.end(),
                                std::back_inserter(scratch));
            remaining.swap(scratch);
            if (remaining.empty()) {
                break;
            }
        }
        out.insert(out.end(), accepted.begin(), accepted.end());
        return true;
    }
    case ExprKind::compare:
        return eval_compare(e, ctx, rows, nullptr, &out);
    case ExprKind::constant:
        if (!e.value().null && e.value().i64 != 0) {
            for_each_row(rows, [&](std::uint32_t i) { out.push_back(i); });
        }
        return true;
    default: {
        Vector truth(Type::boolean(), ctx.batch->rows);
        if (!eval_into(e, ctx, rows, truth)) {
            return false;
        }
        const std::uint8_t *values = truth.data<std::uint8_t>();
        const std::uint8_t *nulls = truth.nulls();
        const std::size_t base = out.size();
        out.resize(base + rows.count);
        std::uint32_t *target = out.data() + base;
        std::uint32_t count = 0;
        if (nulls == nullptr) {
            for_each_row(rows, [&](std::uint32_t i) {
                target[count] = i;
                count += values[i] != 0 ? 1U : 0U;
            });
        } else {
            for_each_row(rows, [&](std::uint32_t i) {
                target[count] = i;
                count += values[i] != 0 && nulls[i] == 0 ? 1U : 0U;
            });
        }
        out.resize(base + count);
        return true;
    }
    }
}

bool try_evaluate_constant(const Expr &expression, Value &out, std::string *error) {
    if (!expression.is_constant_tree()) {
        if (error != nullptr) {
            *error = "expression references columns";
        }
        return false;
    }
    Batch batch;
    batch.rows = 1;
    Vector result;
    const EvalStatus status = evaluate(expression, batch, result);
    if (!status.ok()) {
        if (error != nullptr) {
            *error = status.message();
        }
        return false;
    }
    out = result.value(0);
    out.type = expression.type();
    return true;
}

} // namespace detail

// ------------------------------------------------------------------------------------------
// Public entry points

namespace {
detail::Rows live_rows(const Batch &batch) noexcept {
    if (batch.all_selected) {
        return {nullptr, batch.rows};
    }
    return detail::rows_of(batch.selection);
}
} // namespace

EvalStatus evaluate(const Expr &expression, const Batch &batch, Vector &out) noexcept {
    if (expression.kind() == ExprKind::column) {
        MX_ASSERT(expression.column_index() < batch.columns.size(), "column reference out of range");
        out = batch.columns[expression.column_index()].slice(0, batch.rows);
        return {};
    }
    detail::Context ctx;
    ctx.batch = &batch;
    out = Vector(expression.type(), batch.rows);
    if (!detail::ExprEvaluator::eval_into(expression, ctx, live_rows(batch), out)) {
        return EvalStatus::error(std::move(ctx.error));
    }
    return {};
}

EvalStatus filter(const Expr &predicate, Batch &batch) noexcept {
    MX_ASSERT(predicate.type().id == TypeId::boolean, "filter predicate must be BOOLEAN");
    detail::Context ctx;
    ctx.batch = &batch;
    detail::Selection selected;
    selected.reserve(batch.count());
    if (!detail::ExprEvaluator::filter_rows(predicate, ctx, live_rows(batch), selected)) {
        return EvalStatus::error(std::move(ctx.error));
    }
    if (batch.all_selected && selected.size() == batch.rows) {
        return {}; // nothing dropped: keep the cheaper dense form
    }
    batch.selection = std::move(selected);
    batch.all_selected = false;
    return {};
}

Value evaluate_constant(const Expr &expression) {
    Value value;
    std::string error;
    if (!detail::try_evaluate_constant(expression, value, &error)) {
        throw EvalError(error);
    }
    return value;
}

} // namespace mx::db
