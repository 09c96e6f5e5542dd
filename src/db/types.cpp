#include <mx/db/types.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace mx::db {

namespace {
constexpr std::array<Int128, 39> make_powers() noexcept {
    std::array<Int128, 39> powers{};
    Int128 p = 1;
    for (std::size_t i = 0; i < powers.size(); ++i) {
        powers[i] = p;
        if (i + 1 < powers.size()) {
            p *= 10; // 10^38 is the last power that fits
        }
    }
    return powers;
}
constexpr std::array<Int128, 39> powers_of_ten = make_powers();

Int128 absolute(Int128 v) noexcept { return v < 0 ? -v : v; }

std::string digits_of(Int128 magnitude) {
    if (magnitude == 0) {
        return "0";
    }
    std::string out;
    while (magnitude > 0) {
        out.push_back(static_cast<char>('0' + static_cast<int>(magnitude % 10)));
        magnitude /= 10;
    }
    return {out.rbegin(), out.rend()};
}
} // namespace

const char *type_id_name(TypeId id) noexcept {
    switch (id) {
    case TypeId::boolean:
        return "BOOLEAN";
    case TypeId::integer:
        return "INTEGER";
    case TypeId::bigint:
        return "BIGINT";
    case TypeId::decimal:
        return "DECIMAL";
    case TypeId::float64:
        return "DOUBLE";
    case TypeId::date:
        return "DATE";
    case TypeId::varchar:
        return "VARCHAR";
    }
    return "?";
}

std::string Type::to_string() const {
    std::string text = type_id_name(id);
    if (id == TypeId::decimal) {
        text.append("(")
            .append(std::to_string(precision))
            .append(",")
            .append(std::to_string(scale))
            .append(")");
    } else if (id == TypeId::varchar && length != 0) {
        text.append("(").append(std::to_string(length)).append(")");
    }
    return text;
}

std::string Value::to_string() const {
    if (null) {
        return "NULL";
    }
    switch (type.id) {
    case TypeId::boolean:
        return i64 != 0 ? "true" : "false";
    case TypeId::integer:
    case TypeId::bigint:
        return std::to_string(i64);
    case TypeId::decimal:
        return decimal::format(wide(), type.scale);
    case TypeId::float64:
        return format_double(f64);
    case TypeId::date:
        return date::format(i64);
    case TypeId::varchar:
        return str;
    }
    return "?";
}

namespace decimal {

Int128 pow10(std::uint8_t n) noexcept { return powers_of_ten[n < 39 ? n : 38]; }

bool fits(Int128 unscaled, std::uint8_t precision) noexcept {
    return absolute(unscaled) < pow10(precision > max_precision ? max_precision : precision);
}

std::optional<Int128> parse(std::string_view text, std::uint8_t precision, std::uint8_t scale) noexcept {
    std::size_t i = 0;
    while (i < text.size() && text[i] == ' ') {
        ++i;
    }
    while (!text.empty() && text.back() == ' ') {
        text.remove_suffix(1);
    }
    bool negative = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
        negative = text[i] == '-';
        ++i;
    }
    Int128 value = 0;
    std::uint32_t integer_digits = 0;
    std::uint32_t fraction_digits = 0;
    bool round_up = false;
    bool seen_point = false;
    bool any_digit = false;
    for (; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '.') {
            if (seen_point) {
                return std::nullopt;
            }
            seen_point = true;
            continue;
        }
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
        any_digit = true;
        const int digit = c - '0';
        if (!seen_point) {
            if (value == 0 && digit == 0) {
                continue; // leading zeros do not count against the precision
            }
            if (++integer_digits > max_precision) {
                return std::nullopt;
            }
            value = value * 10 + digit;
        } else if (fraction_digits < scale) {
            ++fraction_digits;
            value = value * 10 + digit;
        } else if (fraction_digits == scale) {
            round_up = digit >= 5; // only the first dropped digit decides (half away from zero)
            ++fraction_digits;
        }
    }
    if (!any_digit) {
        return std::nullopt;
    }
    for (std::uint32_t f = fraction_digits; f < scale; ++f) {
        value *= 10;
    }
    if (round_up) {
        value += 1;
    }
    if (!fits(value, precision)) {
        return std::nullopt;
    }
    return negative ? -value : value;
}

std::string format(Int128 unscaled, std::uint8_t scale) {
    const bool negative = unscaled < 0;
    std::string digits = digits_of(absolute(unscaled));
    if (scale > 0) {
        if (digits.size() <= scale) {
            digits.insert(0, scale + 1 - digits.size(), '0');
        }
        digits.insert(digits.size() - scale, 1, '.');
    }
    if (negative) {
        digits.insert(0, 1, '-');
    }
    return digits;
}

Int128 divide_round(Int128 dividend, Int128 divisor) noexcept {
    Int128 quotient = dividend / divisor;
    const Int128 remainder = dividend % divisor;
    if (absolute(remainder) * 2 >= absolute(divisor)) {
        quotient += ((dividend < 0) != (divisor < 0)) ? -1 : 1;
    }
    return quotient;
}

Int128 rescale(Int128 unscaled, std::uint8_t from_scale, std::uint8_t to_scale) noexcept {
    if (to_scale >= from_scale) {
        return unscaled * pow10(static_cast<std::uint8_t>(to_scale - from_scale));
    }
    return divide_round(unscaled, pow10(static_cast<std::uint8_t>(from_scale - to_scale)));
}

} // namespace decimal

namespace date {

// Howard Hinnant's well-known civil-date algorithm, restated: eras of 400 years, March-based years.
std::int64_t from_civil(std::int64_t year, unsigned month, unsigned day) noexcept {
    year -= month <= 2 ? 1 : 0;
    const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
    const auto year_of_era = static_cast<unsigned>(year - era * 400);
    const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

Civil to_civil(std::int64_t days) noexcept {
    days += 719468;
    const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    const auto day_of_era = static_cast<unsigned>(days - era * 146097);
    const unsigned year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    const std::int64_t year = static_cast<std::int64_t>(year_of_era) + era * 400;
    const unsigned day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    const unsigned mp = (5 * day_of_year + 2) / 153;
    const unsigned day = day_of_year - (153 * mp + 2) / 5 + 1;
    const unsigned month = mp < 10 ? mp + 3 : mp - 9;
    return {year + (month <= 2 ? 1 : 0), month, day};
}

namespace {
bool leap(std::int64_t year) noexcept { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }
unsigned days_in_month(std::int64_t year, unsigned month) noexcept {
    static constexpr std::array<unsigned, 12> lengths{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return month == 2 && leap(year) ? 29 : lengths[month - 1];
}
} // namespace

std::optional<std::int64_t> parse(std::string_view text) noexcept {
    while (!text.empty() && text.front() == ' ') {
        text.remove_prefix(1);
    }
    while (!text.empty() && text.back() == ' ') {
        text.remove_suffix(1);
    }
    // [-]Y...Y<sep>M[M]<sep>D[D] with one separator, '-', '/' or ' ', used twice (DuckDB's
    // forms); a leading '-' is a year before year 1 (astronomical numbering, year 0 = 1 BC).
    std::size_t i = 0;
    auto number = [&](std::size_t max_digits, std::int64_t &out) {
        const std::size_t begin = i;
        out = 0;
        while (i < text.size() && i - begin < max_digits && text[i] >= '0' && text[i] <= '9') {
            out = out * 10 + (text[i] - '0');
            ++i;
        }
        return i > begin && (i == text.size() || text[i] < '0' || text[i] > '9');
    };
    const bool negative = !text.empty() && text.front() == '-';
    i = negative ? 1 : 0;
    std::int64_t year = 0;
    std::int64_t month = 0;
    std::int64_t day = 0;
    if (!number(6, year) || i >= text.size()) {
        return std::nullopt;
    }
    const char separator = text[i];
    if (separator != '-' && separator != '/' && separator != ' ') {
        return std::nullopt;
    }
    ++i;
    if (!number(2, month) || i >= text.size() || text[i] != separator) {
        return std::nullopt;
    }
    ++i;
    if (!number(2, day) || i != text.size()) {
        return std::nullopt;
    }
    year = negative ? -year : year;
    if (month < 1 || month > 12 || day < 1 ||
        day > static_cast<std::int64_t>(days_in_month(year, static_cast<unsigned>(month)))) {
        return std::nullopt;
    }
    return from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
}

std::string format(std::int64_t days) {
    const Civil c = to_civil(days);
    char buffer[32];
    // ISO 8601 expanded years: at least four digits after the sign, so it reads back (-0010-12-25).
    std::snprintf(buffer, sizeof(buffer), "%s%04lld-%02u-%02u", c.year < 0 ? "-" : "",
                  static_cast<long long>(c.year < 0 ? -c.year : c.year), c.month, c.day);
    return buffer;
}

std::int64_t add_months(std::int64_t days, std::int64_t months) noexcept {
    const Civil c = to_civil(days);
    std::int64_t total = c.year * 12 + (c.month - 1) + months;
    std::int64_t year = total >= 0 ? total / 12 : (total - 11) / 12;
    const auto month = static_cast<unsigned>(total - year * 12 + 1);
    const unsigned day = std::min(c.day, days_in_month(year, month));
    return from_civil(year, month, day);
}

} // namespace date

std::string format_double(double value) {
    if (std::isnan(value)) {
        return "nan";
    }
    if (std::isinf(value)) {
        return value > 0 ? "inf" : "-inf";
    }
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
    std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
    std::string out;
    if (text.front() == '-') {
        out.push_back('-');
        text.remove_prefix(1);
    }
    const std::size_t e = text.find('e');
    std::string digits;
    for (const char c : text.substr(0, e)) {
        if (c != '.') {
            digits.push_back(c);
        }
    }
    std::string_view exponent_text = text.substr(e + 1);
    const bool exponent_negative = exponent_text.front() == '-';
    exponent_text.remove_prefix(1); // the sign
    int exponent = 0;
    std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
    exponent = exponent_negative ? -exponent : exponent;

    if (exponent >= -4 && exponent < 16) {
        if (exponent >= 0) {
            const auto integer_digits = static_cast<std::size_t>(exponent) + 1;
            if (digits.size() <= integer_digits) {
                out.append(digits).append(integer_digits - digits.size(), '0').append(".0");
            } else {
                out.append(digits, 0, integer_digits).append(".").append(digits, integer_digits);
            }
        } else {
            out.append("0.").append(static_cast<std::size_t>(-exponent - 1), '0').append(digits);
        }
        return out;
    }
    out.push_back(digits.front());
    if (digits.size() > 1) {
        out.append(".").append(digits, 1);
    }
    out.push_back('e');
    out.push_back(exponent < 0 ? '-' : '+');
    const int magnitude = exponent < 0 ? -exponent : exponent;
    if (magnitude < 10) {
        out.push_back('0');
    }
    out.append(std::to_string(magnitude));
    return out;
}

} // namespace mx::db
