// Scalar function kernels (ExprKind::function), EXTRACT's date fields, and the names of both.
// Semantics follow DuckDB 1.5, checked by experiment (tests/sql/logic/functions_*.test hold the
// answers): strict functions are NULL when an argument is, concat/greatest/least skip NULLs,
// IS [NOT] DISTINCT FROM is never NULL. Each kernel is one loop over the live rows of a batch.

#include "expression_internal.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mx::db {

const char *name_of(Function function) noexcept {
    switch (function) {
    case Function::upper:
        return "upper";
    case Function::lower:
        return "lower";
    case Function::length:
        return "length";
    case Function::trim:
        return "trim";
    case Function::ltrim:
        return "ltrim";
    case Function::rtrim:
        return "rtrim";
    case Function::replace:
        return "replace";
    case Function::concat:
        return "concat";
    case Function::concat_strict:
        return "||";
    case Function::starts_with:
        return "starts_with";
    case Function::regexp_matches:
        return "regexp_matches";
    case Function::abs:
        return "abs";
    case Function::ceil:
        return "ceil";
    case Function::floor:
        return "floor";
    case Function::round:
        return "round";
    case Function::sqrt:
        return "sqrt";
    case Function::power:
        return "power";
    case Function::ln:
        return "ln";
    case Function::exp:
        return "exp";
    case Function::greatest:
        return "greatest";
    case Function::least:
        return "least";
    case Function::distinct_from:
        return "IS DISTINCT FROM";
    case Function::not_distinct_from:
        return "IS NOT DISTINCT FROM";
    case Function::date_trunc:
        return "date_trunc";
    case Function::strftime:
        return "strftime";
    }
    return "?";
}

namespace {
struct PartName {
    const char *name;
    DatePart part;
};
// The first entry of each part is its name; the others are DuckDB's synonyms.
constexpr std::array<PartName, 50> part_names{{
    {"year", DatePart::year},
    {"month", DatePart::month},
    {"day", DatePart::day},
    {"quarter", DatePart::quarter},
    {"week", DatePart::week},
    {"dow", DatePart::dow},
    {"isodow", DatePart::isodow},
    {"doy", DatePart::doy},
    {"isoyear", DatePart::isoyear},
    {"yearweek", DatePart::yearweek},
    {"decade", DatePart::decade},
    {"century", DatePart::century},
    {"millennium", DatePart::millennium},
    {"era", DatePart::era},
    {"hour", DatePart::hour},
    {"minute", DatePart::minute},
    {"second", DatePart::second},
    {"millisecond", DatePart::millisecond},
    {"microsecond", DatePart::microsecond},
    {"epoch", DatePart::epoch},
    {"julian", DatePart::julian},
    {"years", DatePart::year},
    {"y", DatePart::year},
    {"yr", DatePart::year},
    {"yrs", DatePart::year},
    {"months", DatePart::month},
    {"mon", DatePart::month},
    {"mons", DatePart::month},
    {"days", DatePart::day},
    {"d", DatePart::day},
    {"dayofmonth", DatePart::day},
    {"quarters", DatePart::quarter},
    {"weeks", DatePart::week},
    {"w", DatePart::week},
    {"weekofyear", DatePart::week},
    {"dayofweek", DatePart::dow},
    {"weekday", DatePart::dow},
    {"dayofyear", DatePart::doy},
    {"decades", DatePart::decade},
    {"centuries", DatePart::century},
    {"millennia", DatePart::millennium},
    {"hours", DatePart::hour},
    {"h", DatePart::hour},
    {"minutes", DatePart::minute},
    {"m", DatePart::minute},
    {"seconds", DatePart::second},
    {"s", DatePart::second},
    {"milliseconds", DatePart::millisecond},
    {"ms", DatePart::millisecond},
    {"microseconds", DatePart::microsecond},
}};
} // namespace

const char *name_of(DatePart part) noexcept {
    for (const PartName &entry : part_names) {
        if (entry.part == part) {
            return entry.name;
        }
    }
    return "?";
}

std::optional<DatePart> parse_date_part(std::string_view name) noexcept {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
    for (const PartName &entry : part_names) {
        if (lower == entry.name) {
            return entry.part;
        }
    }
    return std::nullopt;
}

} // namespace mx::db

namespace mx::db::detail {

std::shared_ptr<const CompiledRegex> CompiledRegex::compile(const std::string &pattern,
                                                            std::string_view options) {
    auto flags = std::regex::ECMAScript;
    for (const char option : options) {
        if (option == 'i') {
            flags |= std::regex::icase;
        } else if (option == 'c') {
            flags &= ~std::regex::icase;
        } else {
            throw TypeError(std::string("unknown regexp_matches() option '") + option +
                            "' (i and c are supported)");
        }
    }
    try {
        auto compiled = std::make_shared<CompiledRegex>();
        compiled->regex = std::regex(pattern, flags);
        compiled->pattern = pattern;
        compiled->options = std::string(options);
        return compiled;
    } catch (const std::regex_error &error) {
        throw TypeError("invalid regular expression \"" + pattern + "\": " + error.what());
    }
}

namespace {

constexpr std::int64_t unix_epoch_julian_day = 2440588; // Julian day number of 1970-01-01

/// Sunday = 0 .. Saturday = 6 (1970-01-01 was a Thursday).
std::int64_t day_of_week(std::int64_t days) noexcept { return ((days % 7) + 7 + 4) % 7; }
std::int64_t iso_day_of_week(std::int64_t days) noexcept {
    const std::int64_t dow = day_of_week(days);
    return dow == 0 ? 7 : dow;
}
std::int64_t day_of_year(std::int64_t days, std::int64_t year) noexcept {
    return days - date::from_civil(year, 1, 1) + 1;
}
/// The ISO year and week: the week (Monday to Sunday) belongs to the year of its Thursday.
std::pair<std::int64_t, std::int64_t> iso_year_week(std::int64_t days) noexcept {
    const std::int64_t thursday = days - (iso_day_of_week(days) - 1) + 3;
    const std::int64_t year = date::to_civil(thursday).year;
    return {year, (day_of_year(thursday, year) - 1) / 7 + 1};
}

} // namespace

std::int64_t extract_part(DatePart part, std::int64_t days) noexcept {
    const date::Civil civil = date::to_civil(days);
    const std::int64_t year = civil.year;
    switch (part) {
    case DatePart::year:
        return year;
    case DatePart::month:
        return civil.month;
    case DatePart::day:
        return civil.day;
    case DatePart::quarter:
        return (civil.month - 1) / 3 + 1;
    case DatePart::week:
        return iso_year_week(days).second;
    case DatePart::dow:
        return day_of_week(days);
    case DatePart::isodow:
        return iso_day_of_week(days);
    case DatePart::doy:
        return day_of_year(days, year);
    case DatePart::isoyear:
        return iso_year_week(days).first;
    case DatePart::yearweek: {
        const auto [iso_year, week] = iso_year_week(days);
        return iso_year * 100 + (iso_year < 0 ? -week : week);
    }
    case DatePart::decade:
        return year / 10;
    case DatePart::century:
        return year > 0 ? (year - 1) / 100 + 1 : year / 100 - 1;
    case DatePart::millennium:
        return year > 0 ? (year - 1) / 1000 + 1 : year / 1000 - 1;
    case DatePart::era:
        return year > 0 ? 1 : 0;
    case DatePart::hour:
    case DatePart::minute:
    case DatePart::second:
    case DatePart::millisecond:
    case DatePart::microsecond:
        return 0;
    case DatePart::epoch:
        return days * 86400;
    case DatePart::julian:
        return days + unix_epoch_julian_day;
    }
    return 0;
}

double extract_fractional(DatePart part, std::int64_t days) noexcept {
    return static_cast<double>(extract_part(part, days));
}

namespace {

constexpr std::array<const char *, 7> weekday_names{"Sunday",   "Monday", "Tuesday", "Wednesday",
                                                    "Thursday", "Friday", "Saturday"};
constexpr std::array<const char *, 12> month_names{"January",   "February", "March",    "April",
                                                   "May",       "June",     "July",     "August",
                                                   "September", "October",  "November", "December"};

std::int64_t truncate_date(DatePart part, std::int64_t days) noexcept {
    const date::Civil civil = date::to_civil(days);
    switch (part) {
    case DatePart::year:
        return date::from_civil(civil.year, 1, 1);
    case DatePart::quarter:
        return date::from_civil(civil.year, (civil.month - 1) / 3 * 3 + 1, 1);
    case DatePart::month:
        return date::from_civil(civil.year, civil.month, 1);
    case DatePart::week:
        return days - (iso_day_of_week(days) - 1);
    case DatePart::decade:
        return date::from_civil(civil.year / 10 * 10, 1, 1);
    case DatePart::century:
        return date::from_civil(civil.year / 100 * 100, 1, 1);
    case DatePart::millennium:
        return date::from_civil(civil.year / 1000 * 1000, 1, 1);
    default:
        return days; // day and the time parts: a date is already at midnight
    }
}

void append_number(std::string &out, std::int64_t value, int width) {
    std::string digits = std::to_string(value < 0 ? -value : value);
    if (value < 0) {
        out.push_back('-');
    }
    if (static_cast<int>(digits.size()) < width) {
        out.append(static_cast<std::size_t>(width) - digits.size(), '0');
    }
    out.append(digits);
}

/// strftime of a date; the format was checked by the factory (valid_strftime_format).
std::string format_date(std::int64_t days, std::string_view format) {
    const date::Civil civil = date::to_civil(days);
    const std::int64_t dow = day_of_week(days);
    const std::int64_t doy = day_of_year(days, civil.year);
    std::string out;
    for (std::size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 == format.size()) {
            out.push_back(format[i]);
            continue;
        }
        char spec = format[++i];
        int width = 2;
        if (spec == '-' && i + 1 < format.size()) {
            spec = format[++i];
            width = 1;
        }
        switch (spec) {
        case 'a':
            out.append(weekday_names[static_cast<std::size_t>(dow)], 3);
            break;
        case 'A':
            out.append(weekday_names[static_cast<std::size_t>(dow)]);
            break;
        case 'b':
            out.append(month_names[civil.month - 1], 3);
            break;
        case 'B':
            out.append(month_names[civil.month - 1]);
            break;
        case 'd':
            append_number(out, civil.day, width);
            break;
        case 'm':
            append_number(out, civil.month, width);
            break;
        case 'y':
            append_number(out, ((civil.year % 100) + 100) % 100, width);
            break;
        case 'Y':
            append_number(out, civil.year, 4);
            break;
        case 'j':
            append_number(out, doy, width == 1 ? 1 : 3);
            break;
        case 'H':
        case 'M':
        case 'S':
            append_number(out, 0, width);
            break;
        case 'I':
            append_number(out, 12, width);
            break;
        case 'p':
            out.append("AM");
            break;
        case 'w':
            append_number(out, dow, 1);
            break;
        case 'u':
            append_number(out, iso_day_of_week(days), 1);
            break;
        case 'U':
            append_number(out, (doy - 1 + 7 - dow) / 7, 2);
            break;
        case 'W':
            append_number(out, (doy - 1 + 7 - (dow + 6) % 7) / 7, 2);
            break;
        case 'V':
            append_number(out, iso_year_week(days).second, 2);
            break;
        case 'G':
            append_number(out, iso_year_week(days).first, 4);
            break;
        default:
            out.push_back(spec); // %%
            break;
        }
    }
    return out;
}

bool is_continuation(char c) noexcept { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

/// upper/lower of ASCII letters and of the Latin-1 letters (U+00C0..U+00FE, UTF-8 C3 80..C3 BE,
/// without the signs U+00D7 and U+00F7); every other byte is copied.
std::string change_case(std::string_view text, bool upper) {
    std::string out(text);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const auto c = static_cast<unsigned char>(out[i]);
        if (c < 0x80U) {
            out[i] = static_cast<char>(upper ? std::toupper(c) : std::tolower(c));
        } else if (c == 0xC3U && i + 1 < out.size()) {
            const auto next = static_cast<unsigned char>(out[i + 1]);
            if (upper && next >= 0xA0U && next <= 0xBEU && next != 0xB7U) {
                out[i + 1] = static_cast<char>(next - 0x20U);
            } else if (!upper && next >= 0x80U && next <= 0x9EU && next != 0x97U) {
                out[i + 1] = static_cast<char>(next + 0x20U);
            }
            ++i;
        }
    }
    return out;
}

/// The characters (UTF-8 code points) of `set`.
std::vector<std::string_view> characters_of(std::string_view set) {
    std::vector<std::string_view> characters;
    std::size_t begin = 0;
    for (std::size_t i = 1; i <= set.size(); ++i) {
        if (i == set.size() || !is_continuation(set[i])) {
            characters.push_back(set.substr(begin, i - begin));
            begin = i;
        }
    }
    return characters;
}

std::string_view trim_text(std::string_view text, std::string_view set, bool left, bool right) {
    const auto characters = characters_of(set);
    bool changed = true;
    while (left && changed && !text.empty()) {
        changed = false;
        for (const std::string_view c : characters) {
            if (text.starts_with(c)) {
                text.remove_prefix(c.size());
                changed = true;
                break;
            }
        }
    }
    changed = true;
    while (right && changed && !text.empty()) {
        changed = false;
        for (const std::string_view c : characters) {
            if (text.ends_with(c)) {
                text.remove_suffix(c.size());
                changed = true;
                break;
            }
        }
    }
    return text;
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    if (from.empty()) {
        return std::string(text);
    }
    std::string out;
    std::size_t begin = 0;
    for (std::size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, begin)) {
        out.append(text.substr(begin, at - begin)).append(to);
        begin = at + from.size();
    }
    out.append(text.substr(begin));
    return out;
}

/// Three-way comparison of two values of one physical type; NaN is the largest double (DuckDB).
int compare_at(const Operand &a, std::uint32_t ia, const Operand &b, std::uint32_t ib, PhysicalType type) {
    const auto order = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
    switch (type) {
    case PhysicalType::u8:
        return order(a.at<std::uint8_t>(ia), b.at<std::uint8_t>(ib));
    case PhysicalType::i64:
        return order(a.at<std::int64_t>(ia), b.at<std::int64_t>(ib));
    case PhysicalType::i128:
        return order(a.at<Int128>(ia), b.at<Int128>(ib));
    case PhysicalType::f64: {
        const double x = a.at<double>(ia);
        const double y = b.at<double>(ib);
        if (std::isnan(x) || std::isnan(y)) {
            return std::isnan(x) ? (std::isnan(y) ? 0 : 1) : -1;
        }
        return order(x, y);
    }
    case PhysicalType::string:
        return order(a.at<StringRef>(ia).view(), b.at<StringRef>(ib).view());
    }
    return 0;
}

/// Copies row `from` of `source` into row `i` of `out` (same type; strings into out's heap).
void copy_value(Vector &out, std::uint32_t i, const Operand &source, std::uint32_t from) {
    switch (out.type().physical()) {
    case PhysicalType::u8:
        out.mutable_data<std::uint8_t>()[i] = source.at<std::uint8_t>(from);
        return;
    case PhysicalType::i64:
        out.mutable_data<std::int64_t>()[i] = source.at<std::int64_t>(from);
        return;
    case PhysicalType::i128:
        out.mutable_data<Int128>()[i] = source.at<Int128>(from);
        return;
    case PhysicalType::f64:
        out.mutable_data<double>()[i] = source.at<double>(from);
        return;
    case PhysicalType::string:
        out.mutable_data<StringRef>()[i] = out.heap().add(source.at<StringRef>(from).view());
        return;
    }
}

/// 10^n as Int128 for n in 0..38, 0 beyond (rounding to more digits than exist gives 0).
Int128 power_of_ten(std::int64_t n) noexcept {
    return n < 0 || n > 38 ? Int128{0} : decimal::pow10(static_cast<std::uint8_t>(n));
}

/// Rounds an exact value to a multiple of 10^shift, half away from zero.
Int128 round_to(Int128 value, std::int64_t shift) noexcept {
    if (shift <= 0) {
        return value;
    }
    const Int128 unit = power_of_ten(shift);
    if (unit == 0) {
        return 0;
    }
    return decimal::divide_round(value, unit) * unit;
}

} // namespace

bool ExprEvaluator::eval_function(const Expr &e, Context &ctx, Rows rows, Vector &out) {
    const auto &children = e.children();
    std::vector<Operand> args(children.size());
    for (std::size_t k = 0; k < children.size(); ++k) {
        if (!eval_operand(*children[k], ctx, rows, args[k])) {
            return false;
        }
    }
    const Function function = e.function();
    const Type type = e.type();
    std::uint8_t *nulls = out.mutable_nulls();
    const std::size_t width = physical_size(type.physical());
    auto *values = static_cast<std::byte *>(const_cast<void *>(raw_data(out)));
    const auto set_null = [&](std::uint32_t i) {
        nulls[i] = 1;
        std::memset(values + std::size_t{i} * width, 0, width);
    };
    const auto any_null = [&](std::uint32_t i) {
        return std::any_of(args.begin(), args.end(), [&](const Operand &a) { return a.is_null(i); });
    };
    std::string error;
    // Runs body(i) on the rows where no argument is NULL (the others become NULL); body returns
    // false after setting `error`, which stops the work.
    const auto strict = [&](auto &&body) {
        for_each_row(rows, [&](std::uint32_t i) {
            if (!error.empty()) {
                return;
            }
            if (any_null(i)) {
                set_null(i);
                return;
            }
            nulls[i] = 0;
            body(i);
        });
        return error.empty() ? true : ctx.fail(error);
    };
    const auto text = [&](std::size_t k, std::uint32_t i) { return args[k].at<StringRef>(i).view(); };
    const auto put_text = [&](std::uint32_t i, std::string_view s) {
        out.mutable_data<StringRef>()[i] = out.heap().add(s);
    };

    switch (function) {
    case Function::upper:
    case Function::lower:
        return strict(
            [&](std::uint32_t i) { put_text(i, change_case(text(0, i), function == Function::upper)); });
    case Function::length:
        return strict([&](std::uint32_t i) {
            const std::string_view s = text(0, i);
            out.mutable_data<std::int64_t>()[i] = static_cast<std::int64_t>(
                std::count_if(s.begin(), s.end(), [](char c) { return !is_continuation(c); }));
        });
    case Function::trim:
    case Function::ltrim:
    case Function::rtrim:
        return strict([&](std::uint32_t i) {
            const std::string_view set = args.size() > 1 ? text(1, i) : std::string_view(" ");
            put_text(i, trim_text(text(0, i), set, function != Function::rtrim, function != Function::ltrim));
        });
    case Function::replace:
        return strict([&](std::uint32_t i) { put_text(i, replace_all(text(0, i), text(1, i), text(2, i))); });
    case Function::concat_strict:
        return strict([&](std::uint32_t i) {
            std::string joined(text(0, i));
            joined.append(text(1, i));
            put_text(i, joined);
        });
    case Function::concat:
        for_each_row(rows, [&](std::uint32_t i) {
            std::string joined;
            for (std::size_t k = 0; k < args.size(); ++k) {
                if (!args[k].is_null(i)) {
                    joined.append(text(k, i));
                }
            }
            nulls[i] = 0;
            put_text(i, joined);
        });
        return true;
    case Function::starts_with:
        return strict([&](std::uint32_t i) {
            out.mutable_data<std::uint8_t>()[i] = text(0, i).starts_with(text(1, i)) ? 1 : 0;
        });
    case Function::regexp_matches:
        return strict([&](std::uint32_t i) {
            const std::string_view s = text(0, i);
            out.mutable_data<std::uint8_t>()[i] =
                std::regex_search(s.data(), s.data() + s.size(), e._regex->regex) ? 1 : 0;
        });
    case Function::abs: {
        const Type input = children[0]->type();
        if (input.physical() == PhysicalType::f64) {
            return strict(
                [&](std::uint32_t i) { out.mutable_data<double>()[i] = std::fabs(args[0].at<double>(i)); });
        }
        if (input.physical() == PhysicalType::i128) {
            return strict([&](std::uint32_t i) {
                const Int128 v = args[0].at<Int128>(i);
                out.mutable_data<Int128>()[i] = v < 0 ? -v : v;
            });
        }
        const std::int64_t lowest = input.id == TypeId::integer ? std::numeric_limits<std::int32_t>::min()
                                                                : std::numeric_limits<std::int64_t>::min();
        return strict([&](std::uint32_t i) {
            const std::int64_t v = args[0].at<std::int64_t>(i);
            if (input.id != TypeId::decimal && v == lowest) {
                error = "Overflow in abs(): " + std::to_string(v) + " has no positive " + input.to_string();
                return;
            }
            out.mutable_data<std::int64_t>()[i] = v < 0 ? -v : v;
        });
    }
    case Function::ceil:
    case Function::floor: {
        const bool up = function == Function::ceil;
        if (type.id == TypeId::float64) {
            return strict([&](std::uint32_t i) {
                const double v = args[0].at<double>(i);
                out.mutable_data<double>()[i] = up ? std::ceil(v) : std::floor(v);
            });
        }
        const Type input = children[0]->type();
        const Int128 unit = power_of_ten(input.scale);
        return strict([&](std::uint32_t i) {
            const Int128 v = input.physical() == PhysicalType::i128 ? args[0].at<Int128>(i)
                                                                    : Int128{args[0].at<std::int64_t>(i)};
            Int128 q = v / unit;
            const Int128 r = v % unit;
            q += up ? (r > 0 ? 1 : 0) : (r < 0 ? -1 : 0);
            if (type.physical() == PhysicalType::i128) {
                out.mutable_data<Int128>()[i] = q;
            } else {
                out.mutable_data<std::int64_t>()[i] = static_cast<std::int64_t>(q);
            }
        });
    }
    case Function::round: {
        const std::int64_t digits = e.digits();
        if (type.id == TypeId::float64) {
            return strict([&](std::uint32_t i) {
                const double v = args[0].at<double>(i);
                double r = v;
                if (digits >= 0) {
                    const double m = std::pow(10.0, static_cast<double>(digits));
                    const double scaled = v * m;
                    r = std::isfinite(scaled) ? std::round(scaled) / m : v;
                } else {
                    const double m = std::pow(10.0, static_cast<double>(-digits));
                    r = std::round(v / m) * m;
                }
                out.mutable_data<double>()[i] = r;
            });
        }
        const Type input = children[0]->type();
        const std::int64_t input_scale = input.id == TypeId::decimal ? input.scale : 0;
        // Drop (input scale - result scale) digits, then round to 10^-digits when digits < 0.
        const std::int64_t drop = input_scale - (type.id == TypeId::decimal ? type.scale : 0);
        const std::int64_t shift = digits < 0 ? -digits : 0;
        Int128 high = 0;
        Int128 low = 0;
        if (type.id == TypeId::decimal) {
            high = decimal::pow10(type.precision) - 1;
            low = -high;
        } else {
            high = type.id == TypeId::integer ? std::numeric_limits<std::int32_t>::max()
                                              : std::numeric_limits<std::int64_t>::max();
            low = type.id == TypeId::integer ? std::numeric_limits<std::int32_t>::min()
                                             : std::numeric_limits<std::int64_t>::min();
        }
        return strict([&](std::uint32_t i) {
            const Int128 v = input.physical() == PhysicalType::i128 ? args[0].at<Int128>(i)
                                                                    : Int128{args[0].at<std::int64_t>(i)};
            Int128 r = drop > 0 ? decimal::divide_round(v, power_of_ten(drop)) : v;
            r = round_to(r, shift);
            if (r > high || r < low) {
                error = "Overflow in round(): the result does not fit " + type.to_string();
                return;
            }
            if (type.physical() == PhysicalType::i128) {
                out.mutable_data<Int128>()[i] = r;
            } else {
                out.mutable_data<std::int64_t>()[i] = static_cast<std::int64_t>(r);
            }
        });
    }
    case Function::sqrt:
        return strict([&](std::uint32_t i) {
            const double v = args[0].at<double>(i);
            if (v < 0) {
                error = "cannot take square root of a negative number";
                return;
            }
            out.mutable_data<double>()[i] = std::sqrt(v);
        });
    case Function::ln:
        return strict([&](std::uint32_t i) {
            const double v = args[0].at<double>(i);
            if (v <= 0) {
                error =
                    v == 0 ? "cannot take logarithm of zero" : "cannot take logarithm of a negative number";
                return;
            }
            out.mutable_data<double>()[i] = std::log(v);
        });
    case Function::exp:
        return strict(
            [&](std::uint32_t i) { out.mutable_data<double>()[i] = std::exp(args[0].at<double>(i)); });
    case Function::power:
        return strict([&](std::uint32_t i) {
            out.mutable_data<double>()[i] = std::pow(args[0].at<double>(i), args[1].at<double>(i));
        });
    case Function::greatest:
    case Function::least: {
        const int wanted = function == Function::greatest ? 1 : -1;
        const PhysicalType physical = type.physical();
        for_each_row(rows, [&](std::uint32_t i) {
            std::size_t best = args.size();
            for (std::size_t k = 0; k < args.size(); ++k) {
                if (!args[k].is_null(i) &&
                    (best == args.size() || compare_at(args[k], i, args[best], i, physical) * wanted > 0)) {
                    best = k;
                }
            }
            if (best == args.size()) {
                set_null(i);
                return;
            }
            nulls[i] = 0;
            copy_value(out, i, args[best], i);
        });
        return true;
    }
    case Function::distinct_from:
    case Function::not_distinct_from: {
        const PhysicalType physical = children[0]->type().physical();
        const bool want_distinct = function == Function::distinct_from;
        for_each_row(rows, [&](std::uint32_t i) {
            const bool null_a = args[0].is_null(i);
            const bool null_b = args[1].is_null(i);
            const bool distinct =
                null_a || null_b ? null_a != null_b : compare_at(args[0], i, args[1], i, physical) != 0;
            nulls[i] = 0;
            out.mutable_data<std::uint8_t>()[i] = distinct == want_distinct ? 1 : 0;
        });
        return true;
    }
    case Function::date_trunc:
        return strict([&](std::uint32_t i) {
            out.mutable_data<std::int64_t>()[i] = truncate_date(e.date_part(), args[0].at<std::int64_t>(i));
        });
    case Function::strftime:
        return strict(
            [&](std::uint32_t i) { put_text(i, format_date(args[0].at<std::int64_t>(i), text(1, i))); });
    }
    return ctx.fail("unknown function");
}

} // namespace mx::db::detail
