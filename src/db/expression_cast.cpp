// CAST, EXTRACT, SUBSTRING and DATE + INTERVAL kernels, plus the text conversions they need.
// Conversions follow DuckDB 1.5 (checked by experiment, see docs/design/expressions.md):
// decimals round half away from zero, DOUBLE to integer rounds half to even, DOUBLE to DECIMAL
// rounds the scaled double half away from zero, strings accept surrounding spaces and exponents.

#include "expression_internal.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace mx::db::detail {

namespace {

/// 10^n as the nearest double (the literals are correctly rounded, repeated products are not).
constexpr double powers_of_ten_f64[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,
                                        1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                        1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29,
                                        1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38};

std::string_view trim(std::string_view text) noexcept {
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!text.empty() && space(text.front())) {
        text.remove_prefix(1);
    }
    while (!text.empty() && space(text.back())) {
        text.remove_suffix(1);
    }
    return text;
}

/// Parses an exact number ("-12.5", "1e3", ".5", "5.") into value * 10^scale, rounding half
/// away from zero. False on bad syntax or more than 38 digits.
bool parse_exact(std::string_view text, std::uint8_t scale, Int128 &out) noexcept {
    text = trim(text);
    std::size_t i = 0;
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
        negative = text[i] == '-';
        ++i;
    }
    char digits[80];
    int significant = 0;
    int fraction_digits = 0;
    bool any_digit = false;
    bool seen_point = false;
    for (; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '.') {
            if (seen_point) {
                return false;
            }
            seen_point = true;
        } else if (c >= '0' && c <= '9') {
            any_digit = true;
            if (seen_point) {
                ++fraction_digits;
            }
            if (significant == 0 && c == '0') {
                continue; // leading zeros change nothing
            }
            if (significant == static_cast<int>(sizeof(digits))) {
                return false;
            }
            digits[significant++] = c;
        } else {
            break;
        }
    }
    if (!any_digit) {
        return false;
    }
    int exponent = 0;
    if (i < text.size()) {
        if (text[i] != 'e' && text[i] != 'E') {
            return false;
        }
        ++i;
        bool exponent_negative = false;
        if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
            exponent_negative = text[i] == '-';
            ++i;
        }
        if (i == text.size()) {
            return false;
        }
        for (; i < text.size(); ++i) {
            if (text[i] < '0' || text[i] > '9') {
                return false;
            }
            exponent = std::min(exponent * 10 + (text[i] - '0'), 100000);
        }
        exponent = exponent_negative ? -exponent : exponent;
    }
    if (significant == 0) {
        out = 0;
        return true;
    }
    const int shift = exponent - fraction_digits + scale; // value = digits * 10^shift
    int keep = significant;
    int round_digit = 0;
    if (shift < 0) {
        keep = significant + shift;
        round_digit = keep >= 0 && keep < significant ? digits[keep] - '0' : 0;
        keep = std::max(keep, 0);
    }
    const int total = keep + std::max(shift, 0);
    if (total > decimal::max_precision) {
        return false;
    }
    Int128 value = 0;
    for (int d = 0; d < keep; ++d) {
        value = value * 10 + (digits[d] - '0');
    }
    for (int d = 0; d < shift; ++d) {
        value *= 10;
    }
    if (round_digit >= 5) {
        value += 1;
    }
    out = negative ? -value : value;
    return true;
}

bool parse_double(std::string_view text, double &out) noexcept {
    text = trim(text);
    if (text.size() > 1 && text.front() == '+' && text[1] != '-' && text[1] != '+') {
        text.remove_prefix(1);
    }
    if (text.empty()) {
        return false;
    }
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (end != text.data() + text.size()) {
        return false;
    }
    if (error == std::errc::result_out_of_range) {
        // Beyond DOUBLE's range: infinity, or zero below the smallest subnormal, as in DuckDB
        // ('1e400' is inf). strtod rounds such texts that way; from_chars has checked the syntax.
        const std::string copy(text);
        out = std::strtod(copy.c_str(), nullptr);
        return true;
    }
    return error == std::errc{};
}

bool equals_lower(std::string_view text, std::string_view lower) noexcept {
    if (text.size() != lower.size()) {
        return false;
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i] >= 'A' && text[i] <= 'Z' ? static_cast<char>(text[i] - 'A' + 'a') : text[i];
        if (c != lower[i]) {
            return false;
        }
    }
    return true;
}

bool parse_boolean(std::string_view text, std::uint8_t &out) noexcept {
    for (const char *word : {"true", "t", "yes", "y", "1"}) {
        if (equals_lower(text, word)) {
            out = 1;
            return true;
        }
    }
    for (const char *word : {"false", "f", "no", "n", "0"}) {
        if (equals_lower(text, word)) {
            out = 0;
            return true;
        }
    }
    return false;
}

/// Bounds of an exact target type as unscaled values.
void exact_bounds(const Type &type, Int128 &low, Int128 &high) noexcept {
    switch (type.id) {
    case TypeId::integer:
        low = std::numeric_limits<std::int32_t>::min();
        high = std::numeric_limits<std::int32_t>::max();
        return;
    case TypeId::bigint:
        low = std::numeric_limits<std::int64_t>::min();
        high = std::numeric_limits<std::int64_t>::max();
        return;
    default:
        high = decimal::pow10(type.precision) - 1;
        low = -high;
        return;
    }
}

/// Writes exact results of the target type, checking its range.
struct ExactTarget {
    Int128 low{0};
    Int128 high{0};
    std::int64_t *narrow{nullptr};
    Int128 *wide{nullptr};

    ExactTarget(const Type &type, Vector &out) {
        exact_bounds(type, low, high);
        if (type.physical() == PhysicalType::i128) {
            wide = out.mutable_data<Int128>();
        } else {
            narrow = out.mutable_data<std::int64_t>();
        }
    }
    bool store(std::uint32_t i, Int128 value) const noexcept {
        if (value < low || value > high) {
            return false;
        }
        if (wide != nullptr) {
            wide[i] = value;
        } else {
            narrow[i] = static_cast<std::int64_t>(value);
        }
        return true;
    }
};

/// Runs convert(i) on the non-NULL rows; the first failing row is described in the error.
template <class Convert, class Describe>
bool convert_rows(Context &ctx, Rows rows, const Operand &o, Convert convert, Describe describe) {
    bool failed = false;
    std::uint32_t failed_row = 0;
    for_each_row(rows, [&](std::uint32_t i) {
        if (failed || o.is_null(i)) {
            return;
        }
        if (!convert(i)) {
            failed = true;
            failed_row = i;
        }
    });
    return failed ? ctx.fail(describe(failed_row)) : true;
}

std::string cast_failure(const std::string &value, const Type &to) {
    std::string message("Could not cast value ");
    message.append(value).append(" to ").append(to.to_string());
    return message;
}

std::string convert_failure(StringRef text, const Type &to) {
    std::string message("Could not convert string '");
    message.append(text.view()).append("' to ").append(to.to_string());
    return message;
}

bool cast_from_exact(Context &ctx, Rows rows, const Operand &o, const Type &from, const Type &to,
                     Vector &out) {
    const std::uint8_t from_scale = from.id == TypeId::decimal ? from.scale : 0;
    const bool from_wide = from.physical() == PhysicalType::i128;
    auto get = [&](std::uint32_t i) -> Int128 {
        return from_wide ? o.at<Int128>(i) : Int128{o.at<std::int64_t>(i)};
    };
    auto describe = [&](std::uint32_t i) { return cast_failure(decimal::format(get(i), from_scale), to); };
    switch (to.id) {
    case TypeId::integer:
    case TypeId::bigint:
    case TypeId::decimal: {
        const ExactTarget target(to, out);
        const std::uint8_t to_scale = to.id == TypeId::decimal ? to.scale : 0;
        if (to_scale >= from_scale) {
            const Int128 factor = decimal::pow10(static_cast<std::uint8_t>(to_scale - from_scale));
            // Values beyond these cannot be scaled up; the range is asymmetric (the minimum of
            // INTEGER and BIGINT is one further from zero than the maximum).
            const Int128 high = target.high / factor;
            const Int128 low = target.low / factor;
            return convert_rows(
                ctx, rows, o,
                [&](std::uint32_t i) {
                    const Int128 v = get(i);
                    return v <= high && v >= low && target.store(i, v * factor);
                },
                describe);
        }
        const Int128 divisor = decimal::pow10(static_cast<std::uint8_t>(from_scale - to_scale));
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) { return target.store(i, decimal::divide_round(get(i), divisor)); },
            describe);
    }
    case TypeId::float64: {
        double *result = out.mutable_data<double>();
        const double divisor = powers_of_ten_f64[from_scale];
        for_each_row(rows, [&](std::uint32_t i) { result[i] = static_cast<double>(get(i)) / divisor; });
        return true;
    }
    case TypeId::boolean: {
        std::uint8_t *result = out.mutable_data<std::uint8_t>();
        for_each_row(rows, [&](std::uint32_t i) { result[i] = get(i) != 0 ? 1 : 0; });
        return true;
    }
    case TypeId::varchar: {
        StringRef *result = out.mutable_data<StringRef>();
        StringHeap &heap = out.heap();
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) {
                result[i] = heap.add(decimal::format(get(i), from_scale));
                return true;
            },
            describe);
    }
    case TypeId::date:
        break;
    }
    return ctx.fail(cast_failure(from.to_string(), to));
}

bool cast_from_double(Context &ctx, Rows rows, const Operand &o, const Type &to, Vector &out) {
    auto describe = [&](std::uint32_t i) { return cast_failure(double_to_text(o.at<double>(i)), to); };
    switch (to.id) {
    case TypeId::integer:
    case TypeId::bigint: {
        // DuckDB rounds half to even here (nearbyint), unlike the decimal casts
        const double low = to.id == TypeId::integer ? -2147483648.0 : -9223372036854775808.0;
        const double high = to.id == TypeId::integer ? 2147483648.0 : 9223372036854775808.0;
        std::int64_t *result = out.mutable_data<std::int64_t>();
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) {
                const double r = std::nearbyint(o.at<double>(i));
                if (!(r >= low && r < high)) {
                    return false; // also NaN
                }
                result[i] = static_cast<std::int64_t>(r);
                return true;
            },
            describe);
    }
    case TypeId::decimal: {
        const ExactTarget target(to, out);
        const double scale = powers_of_ten_f64[to.scale];
        const double limit = powers_of_ten_f64[to.precision];
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) {
                const double r = std::round(o.at<double>(i) * scale);
                return r > -limit && r < limit && target.store(i, static_cast<Int128>(r));
            },
            describe);
    }
    case TypeId::boolean: {
        std::uint8_t *result = out.mutable_data<std::uint8_t>();
        for_each_row(rows, [&](std::uint32_t i) { result[i] = o.at<double>(i) != 0.0 ? 1 : 0; });
        return true;
    }
    case TypeId::varchar: {
        StringRef *result = out.mutable_data<StringRef>();
        StringHeap &heap = out.heap();
        for_each_row(rows, [&](std::uint32_t i) {
            if (!o.is_null(i)) {
                result[i] = heap.add(double_to_text(o.at<double>(i)));
            }
        });
        return true;
    }
    default:
        break;
    }
    return ctx.fail(cast_failure("DOUBLE", to));
}

bool cast_from_boolean(Context &ctx, Rows rows, const Operand &o, const Type &to, Vector &out) {
    switch (to.id) {
    case TypeId::integer:
    case TypeId::bigint:
    case TypeId::decimal: {
        const ExactTarget target(to, out);
        const Int128 one = to.id == TypeId::decimal ? decimal::pow10(to.scale) : 1;
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) { return target.store(i, o.at<std::uint8_t>(i) != 0 ? one : 0); },
            [&](std::uint32_t) { return cast_failure("true", to); });
    }
    case TypeId::float64: {
        double *result = out.mutable_data<double>();
        for_each_row(rows, [&](std::uint32_t i) { result[i] = o.at<std::uint8_t>(i) != 0 ? 1.0 : 0.0; });
        return true;
    }
    case TypeId::varchar: {
        static constexpr std::string_view true_text = "true";
        static constexpr std::string_view false_text = "false";
        StringRef *result = out.mutable_data<StringRef>();
        for_each_row(rows, [&](std::uint32_t i) {
            result[i] = StringRef(o.at<std::uint8_t>(i) != 0 ? true_text : false_text); // static storage
        });
        return true;
    }
    default:
        break;
    }
    return ctx.fail(cast_failure("BOOLEAN", to));
}

bool cast_from_string(Context &ctx, Rows rows, Operand &o, const Type &to, Vector &out) {
    auto describe = [&](std::uint32_t i) { return convert_failure(o.at<StringRef>(i), to); };
    switch (to.id) {
    case TypeId::varchar: {
        retain_strings(out, o);
        StringRef *result = out.mutable_data<StringRef>();
        for_each_row(rows, [&](std::uint32_t i) { result[i] = o.at<StringRef>(i); });
        return true;
    }
    case TypeId::integer:
    case TypeId::bigint:
    case TypeId::decimal: {
        const ExactTarget target(to, out);
        const std::uint8_t scale = to.id == TypeId::decimal ? to.scale : 0;
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) {
                Int128 value = 0;
                return parse_exact(o.at<StringRef>(i).view(), scale, value) && target.store(i, value);
            },
            describe);
    }
    case TypeId::float64: {
        double *result = out.mutable_data<double>();
        return convert_rows(
            ctx, rows, o, [&](std::uint32_t i) { return parse_double(o.at<StringRef>(i).view(), result[i]); },
            describe);
    }
    case TypeId::date: {
        std::int64_t *result = out.mutable_data<std::int64_t>();
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) {
                const auto days = date::parse(o.at<StringRef>(i).view());
                if (!days.has_value() || *days < min_date_days || *days > max_date_days) {
                    return false;
                }
                result[i] = *days;
                return true;
            },
            describe);
    }
    case TypeId::boolean: {
        std::uint8_t *result = out.mutable_data<std::uint8_t>();
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) { return parse_boolean(o.at<StringRef>(i).view(), result[i]); }, describe);
    }
    }
    return ctx.fail(cast_failure("VARCHAR", to));
}

bool valid_date(std::int64_t days) noexcept { return days >= min_date_days && days <= max_date_days; }

std::string date_range_failure(std::int64_t days) {
    std::string message("Date out of range: ");
    message.append(std::to_string(days)).append(" days since 1970-01-01");
    return message;
}

/// convert_rows over a DATE operand: convert(i, days) sees only days in DATE's range; a row out
/// of it fails with DuckDB's message.
template <class Convert>
bool convert_dates(Context &ctx, Rows rows, const Operand &o, Convert convert) {
    return convert_rows(
        ctx, rows, o,
        [&](std::uint32_t i) {
            const std::int64_t days = o.at<std::int64_t>(i);
            return valid_date(days) && convert(i, days);
        },
        [&](std::uint32_t i) { return date_range_failure(o.at<std::int64_t>(i)); });
}

// SUBSTRING positions over `size` characters, as DuckDB 1.5 computes them (checked by
// experiment): the 0-based start is from - 1, or size + from for a negative from, or -1 for 0;
// the range [start, start + length) (or [start + length, start) for a negative length) is then
// clipped to the string. False for an empty result.
bool substring_bounds(std::int64_t size, std::int64_t offset, std::int64_t length, std::int64_t &start,
                      std::int64_t &end) noexcept {
    std::int64_t first = offset > 0 ? offset - 1 : (offset < 0 ? size + offset : -1);
    std::int64_t last = first + length;
    if (length < 0) {
        last = first;
        first += length;
    }
    start = std::max<std::int64_t>(first, 0);
    end = std::min(last, size);
    return start < end;
}

bool is_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

StringRef substring_of(StringRef input, std::int64_t offset, std::int64_t length) noexcept {
    // clamping keeps the position arithmetic far from overflow; strings are below 4 GiB
    constexpr std::int64_t limit = std::int64_t{1} << 34;
    offset = std::clamp(offset, -limit, limit);
    length = std::clamp(length, -limit, limit);
    const std::string_view text = input.view();
    if (offset >= 1 && length >= 0) {
        // From a position for a length (SUBSTRING(c_phone, 1, 2)): the characters up to the end
        // of the result are walked, not the whole string.
        const std::int64_t first = offset - 1;
        const std::int64_t last = first + length;
        std::size_t byte_start = text.size();
        std::size_t byte_end = text.size();
        std::int64_t character = 0;
        for (std::size_t b = 0; b < text.size(); ++b) {
            if (is_continuation(text[b])) {
                continue;
            }
            if (character == last) {
                byte_end = b;
                break;
            }
            if (character == first) {
                byte_start = b;
            }
            ++character;
        }
        if (byte_start >= byte_end) {
            return {};
        }
        return {text.data() + byte_start, static_cast<std::uint32_t>(byte_end - byte_start)};
    }
    bool ascii = true;
    std::int64_t characters = 0;
    for (const char c : text) {
        ascii = ascii && static_cast<unsigned char>(c) < 0x80;
        characters += is_continuation(c) ? 0 : 1;
    }
    std::int64_t start = 0;
    std::int64_t end = 0;
    if (!substring_bounds(characters, offset, length, start, end)) {
        return {};
    }
    if (ascii) {
        return {text.data() + start, static_cast<std::uint32_t>(end - start)};
    }
    // map code point positions to byte offsets
    std::size_t byte_start = text.size();
    std::size_t byte_end = text.size();
    std::int64_t character = -1;
    for (std::size_t b = 0; b < text.size(); ++b) {
        if (is_continuation(text[b])) {
            continue;
        }
        ++character;
        if (character == start) {
            byte_start = b;
        }
        if (character == end) {
            byte_end = b;
            break;
        }
    }
    return {text.data() + byte_start, static_cast<std::uint32_t>(byte_end - byte_start)};
}

} // namespace

std::string double_to_text(double value) { return format_double(value); }

bool ExprEvaluator::eval_cast(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    const Expr &child = e.child(0);
    return with_input(e, ctx, rows, out, [&](Operand &o) {
        set_nulls(out, rows, o.nulls, nullptr);
        const Type &from = child.type();
        const Type &to = e.type();
        switch (from.id) {
        case TypeId::integer:
        case TypeId::bigint:
        case TypeId::decimal:
            return cast_from_exact(ctx, rows, o, from, to, out);
        case TypeId::float64:
            return cast_from_double(ctx, rows, o, to, out);
        case TypeId::boolean:
            return cast_from_boolean(ctx, rows, o, to, out);
        case TypeId::varchar:
            return cast_from_string(ctx, rows, o, to, out);
        case TypeId::date:
            if (to.id == TypeId::varchar) {
                StringRef *result = out.mutable_data<StringRef>();
                StringHeap &heap = out.heap();
                return convert_dates(ctx, rows, o, [&](std::uint32_t i, std::int64_t days) {
                    result[i] = heap.add(date::format(days));
                    return true;
                });
            }
            break;
        }
        return ctx.fail(cast_failure(from.to_string(), to));
    });
}

bool ExprEvaluator::eval_extract(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    return with_input(e, ctx, rows, out, [&](Operand &o) {
        set_nulls(out, rows, o.nulls, nullptr);
        const DatePart part = e.date_part();
        if (e.type().id == TypeId::float64) {
            double *result = out.mutable_data<double>();
            return convert_dates(ctx, rows, o, [&](std::uint32_t i, std::int64_t days) {
                result[i] = extract_fractional(part, days);
                return true;
            });
        }
        std::int64_t *result = out.mutable_data<std::int64_t>();
        return convert_dates(ctx, rows, o, [&](std::uint32_t i, std::int64_t days) {
            result[i] = extract_part(part, days);
            return true;
        });
    });
}

bool ExprEvaluator::eval_add_interval(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    return with_input(e, ctx, rows, out, [&](Operand &o) {
        set_nulls(out, rows, o.nulls, nullptr);
        const Interval interval = e.interval();
        constexpr std::int64_t interval_limit = std::int64_t{1} << 40; // far beyond any valid date
        if (interval.months > interval_limit || interval.months < -interval_limit ||
            interval.days > interval_limit || interval.days < -interval_limit) {
            return ctx.fail("INTERVAL out of range");
        }
        std::int64_t *result = out.mutable_data<std::int64_t>();
        return convert_rows(
            ctx, rows, o,
            [&](std::uint32_t i) {
                std::int64_t days = o.at<std::int64_t>(i);
                if (!valid_date(days)) {
                    return false;
                }
                if (interval.months != 0) {
                    // months beyond the date range would overflow the civil arithmetic
                    if (interval.months > 12 * 6000000 || interval.months < -12 * 6000000) {
                        return false;
                    }
                    days = date::add_months(days, interval.months);
                }
                days += interval.days;
                result[i] = days;
                return valid_date(days);
            },
            [&](std::uint32_t i) {
                std::string message("Date out of range in ");
                message.append(date::format(o.at<std::int64_t>(i)))
                    .append(" + INTERVAL '")
                    .append(std::to_string(interval.months))
                    .append(" months ")
                    .append(std::to_string(interval.days))
                    .append(" days'");
                return message;
            });
    });
}

bool ExprEvaluator::eval_substring(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    Operand text;
    Operand from;
    Operand length;
    const bool has_length = e.children().size() == 3;
    if (!eval_operand(e.child(0), ctx, rows, text) || !eval_operand(e.child(1), ctx, rows, from) ||
        (has_length && !eval_operand(e.child(2), ctx, rows, length))) {
        return false;
    }
    if (text.constant_null || from.constant_null || length.constant_null) {
        set_all_null(out, rows);
        return true;
    }
    set_nulls(out, rows, text.nulls, from.nulls);
    if (length.nulls != nullptr) {
        std::uint8_t *nulls = out.mutable_nulls();
        for_each_row(
            rows, [&](std::uint32_t i) { nulls[i] = static_cast<std::uint8_t>(nulls[i] | length.nulls[i]); });
    }
    retain_strings(out, text); // results point into the input strings
    StringRef *result = out.mutable_data<StringRef>();
    const std::uint8_t *nulls = out.nulls();
    constexpr std::int64_t to_the_end = std::int64_t{1} << 34;
    for_each_row(rows, [&](std::uint32_t i) {
        if (nulls != nullptr && nulls[i] != 0) {
            result[i] = StringRef();
            return;
        }
        const std::int64_t n = has_length ? length.at<std::int64_t>(i) : to_the_end;
        result[i] = substring_of(text.at<StringRef>(i), from.at<std::int64_t>(i), n);
    });
    return true;
}

} // namespace mx::db::detail
