#pragma once

// SQL types of TunaDB and their physical representation in storage and in vectors, plus the
// scalar helpers every operator needs: exact decimal arithmetic with rounding, and dates.
//
// Physical representation (one per type, so operators switch on four cases, not seven):
//   BOOLEAN                  -> std::uint8_t (0 or 1)
//   INTEGER, BIGINT, DATE    -> std::int64_t (DATE = days since 1970-01-01)
//   DECIMAL(p,s), p <= 18    -> std::int64_t, the value times 10^s
//   DECIMAL(p,s), p 19..38   -> Int128, the value times 10^s (results of SUM over decimals)
//   DOUBLE                   -> double
//   VARCHAR/CHAR(n)          -> StringRef into memory owned by a table, a vector or an operator
// NULLs are a separate byte per row (1 = NULL), never an in-band value.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace mx::db {

__extension__ using Int128 = __int128; // GCC and Clang both have it; -Wpedantic does not know

enum class TypeId : std::uint8_t { boolean, integer, bigint, decimal, float64, date, varchar };

/// The SQL name of a type without its parameters ("DECIMAL", "VARCHAR").
[[nodiscard]] const char *type_id_name(TypeId id) noexcept;
enum class PhysicalType : std::uint8_t { u8, i64, i128, f64, string };

struct Type {
    TypeId id{TypeId::integer};
    std::uint8_t precision{0}; // DECIMAL: total digits, 1..38
    std::uint8_t scale{0};     // DECIMAL: digits after the point, <= precision
    std::uint32_t length{0};   // CHAR/VARCHAR: declared maximum length, 0 = unbounded

    static constexpr Type boolean() noexcept { return {TypeId::boolean, 0, 0, 0}; }
    static constexpr Type integer() noexcept { return {TypeId::integer, 0, 0, 0}; }
    static constexpr Type bigint() noexcept { return {TypeId::bigint, 0, 0, 0}; }
    static constexpr Type float64() noexcept { return {TypeId::float64, 0, 0, 0}; }
    static constexpr Type date() noexcept { return {TypeId::date, 0, 0, 0}; }
    static constexpr Type varchar(std::uint32_t length = 0) noexcept {
        return {TypeId::varchar, 0, 0, length};
    }
    static constexpr Type decimal(std::uint8_t precision, std::uint8_t scale) noexcept {
        return {TypeId::decimal, precision, scale, 0};
    }

    [[nodiscard]] constexpr PhysicalType physical() const noexcept {
        switch (id) {
        case TypeId::boolean:
            return PhysicalType::u8;
        case TypeId::float64:
            return PhysicalType::f64;
        case TypeId::varchar:
            return PhysicalType::string;
        case TypeId::decimal:
            return precision > 18 ? PhysicalType::i128 : PhysicalType::i64;
        default:
            return PhysicalType::i64;
        }
    }
    [[nodiscard]] constexpr bool is_numeric() const noexcept {
        return id == TypeId::integer || id == TypeId::bigint || id == TypeId::decimal ||
               id == TypeId::float64;
    }
    /// SQL spelling: INTEGER, BIGINT, DECIMAL(15,2), DOUBLE, DATE, VARCHAR(25), BOOLEAN.
    [[nodiscard]] std::string to_string() const;

    friend constexpr bool operator==(const Type &, const Type &) noexcept = default;
};

/// Bytes of one value in a vector of this physical type.
[[nodiscard]] constexpr std::size_t physical_size(PhysicalType type) noexcept {
    switch (type) {
    case PhysicalType::u8:
        return 1;
    case PhysicalType::i64:
    case PhysicalType::f64:
        return 8;
    case PhysicalType::i128:
        return 16;
    case PhysicalType::string:
        return 16;
    }
    return 0;
}

/// A string that lives elsewhere (table storage, a vector's heap, an operator's arena).
struct StringRef {
    const char *data{nullptr};
    std::uint32_t size{0};

    StringRef() noexcept = default;
    StringRef(const char *bytes, std::uint32_t length) noexcept : data(bytes), size(length) {}
    explicit StringRef(std::string_view text) noexcept
        : data(text.data()), size(static_cast<std::uint32_t>(text.size())) {}
    [[nodiscard]] std::string_view view() const noexcept { return {data, size}; }
    friend bool operator==(const StringRef &a, const StringRef &b) noexcept { return a.view() == b.view(); }
    friend auto operator<=>(const StringRef &a, const StringRef &b) noexcept { return a.view() <=> b.view(); }
};
static_assert(sizeof(StringRef) == 16);

/// Equality of two strings without a library call for short ones.
[[nodiscard]] inline bool equal_strings(const StringRef &a, const StringRef &b) noexcept {
    if (a.size != b.size) {
        return false;
    }
    if (a.size <= 16) {
        for (std::uint32_t i = 0; i < a.size; ++i) {
            if (a.data[i] != b.data[i]) {
                return false;
            }
        }
        return true;
    }
    return std::memcmp(a.data, b.data, a.size) == 0;
}

/// One value of any type, possibly NULL: constants in expressions and cells of query results.
struct Value {
    Type type{};
    bool null{true};
    std::int64_t i64{0}; // integer, bigint, date, boolean, decimal with precision <= 18
    Int128 i128{0};      // decimal with precision > 18
    double f64{0.0};
    std::string str; // varchar (owned)

    static Value null_of(Type type) {
        Value v;
        v.type = type;
        return v;
    }
    static Value boolean(bool b) { return make(Type::boolean(), b ? 1 : 0); }
    static Value integer(std::int64_t v) { return make(Type::integer(), v); }
    static Value bigint(std::int64_t v) { return make(Type::bigint(), v); }
    static Value date(std::int64_t days) { return make(Type::date(), days); }
    static Value float64(double v) {
        Value value = make(Type::float64(), 0);
        value.f64 = v;
        return value;
    }
    /// `unscaled` is the value times 10^scale.
    static Value decimal(Int128 unscaled, std::uint8_t precision, std::uint8_t scale) {
        Value value = make(Type::decimal(precision, scale), 0);
        if (precision > 18) {
            value.i128 = unscaled;
        } else {
            value.i64 = static_cast<std::int64_t>(unscaled);
        }
        return value;
    }
    static Value varchar(std::string text) {
        Value value = make(Type::varchar(), 0);
        value.str = std::move(text);
        return value;
    }

    /// The decimal's unscaled value (either width), or an integer widened.
    [[nodiscard]] Int128 wide() const noexcept { return type.physical() == PhysicalType::i128 ? i128 : i64; }
    /// Text as DuckDB prints it: decimals with exactly `scale` digits, dates YYYY-MM-DD,
    /// doubles with 17 significant digits trimmed, booleans true/false, NULL as "NULL".
    [[nodiscard]] std::string to_string() const;

private:
    static Value make(Type type, std::int64_t v) {
        Value value;
        value.type = type;
        value.null = false;
        value.i64 = v;
        return value;
    }
};

namespace decimal {
inline constexpr std::uint8_t max_precision = 38;
inline constexpr std::uint8_t max_int64_precision = 18;

/// 10^n for n in 0..38.
[[nodiscard]] Int128 pow10(std::uint8_t n) noexcept;
/// Parses "-12.345", "+7", ".5", "3." into value * 10^scale; digits beyond `scale` are rounded
/// half away from zero. Returns nullopt on bad syntax or when the result needs more than
/// `precision` digits.
[[nodiscard]] std::optional<Int128> parse(std::string_view text, std::uint8_t precision,
                                          std::uint8_t scale) noexcept;
/// "-12.35" for (-1235, 2); "0.05" for (5, 2); "12" for (12, 0).
[[nodiscard]] std::string format(Int128 unscaled, std::uint8_t scale);
/// Changes the scale; reducing it rounds half away from zero.
[[nodiscard]] Int128 rescale(Int128 unscaled, std::uint8_t from_scale, std::uint8_t to_scale) noexcept;
/// Divides rounding half away from zero (divisor != 0).
[[nodiscard]] Int128 divide_round(Int128 dividend, Int128 divisor) noexcept;
/// Whether |unscaled| fits in `precision` digits.
[[nodiscard]] bool fits(Int128 unscaled, std::uint8_t precision) noexcept;
} // namespace decimal

namespace date {
/// Days since 1970-01-01 of a proleptic Gregorian date.
[[nodiscard]] std::int64_t from_civil(std::int64_t year, unsigned month, unsigned day) noexcept;
struct Civil {
    std::int64_t year;
    unsigned month;
    unsigned day;
};
[[nodiscard]] Civil to_civil(std::int64_t days) noexcept;
/// Parses [-]Y-M-D with one or two digit month and day and '-', '/' or ' ' as the (one)
/// separator, as DuckDB does (validating month and day); a leading '-' is a year before 1 in
/// astronomical numbering (year 0 = 1 BC). nullopt on anything else.
[[nodiscard]] std::optional<std::int64_t> parse(std::string_view text) noexcept;
/// YYYY-MM-DD; years before 1 as ISO 8601 expanded years with a sign (-0010-12-25).
[[nodiscard]] std::string format(std::int64_t days);
/// Adds months, clamping the day to the end of the target month (as PostgreSQL and DuckDB do).
[[nodiscard]] std::int64_t add_months(std::int64_t days, std::int64_t months) noexcept;
} // namespace date

/// Formats a double as DuckDB prints it (CSV, CAST to VARCHAR): the shortest digits that
/// round-trip, positional with ".0" for integral values from 1e-4 up to 1e16, scientific outside.
[[nodiscard]] std::string format_double(double value);

} // namespace mx::db
