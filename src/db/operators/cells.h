#pragma once

// Typed access to the cells of vectors and operator-owned row storage, shared by the aggregation
// and the sort: one description of a column (physical type, values, NULL bytes) that fits both a
// Vector and a column an operator materialized itself, plus hashing and ordering of cells.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string_view>

#include <mx/db/types.h>
#include <mx/db/vector.h>

namespace mx::db::detail {

/// A column's values: `data` holds physical values (types.h) of `width` bytes each; `nulls` one
/// byte per row (1 = NULL) or nullptr when no row is NULL.
struct ColumnData {
    PhysicalType physical{PhysicalType::i64};
    std::uint32_t width{8};
    const std::byte *data{nullptr};
    const std::uint8_t *nulls{nullptr};

    [[nodiscard]] bool is_null(std::uint32_t row) const noexcept {
        return nulls != nullptr && nulls[row] != 0;
    }
    [[nodiscard]] const std::byte *cell(std::uint32_t row) const noexcept {
        return data + std::size_t{row} * width;
    }
    template <class T>
    [[nodiscard]] T get(std::uint32_t row) const noexcept {
        T value;
        std::memcpy(&value, cell(row), sizeof(T));
        return value;
    }
};

/// The raw values of a vector, whatever its physical type.
[[nodiscard]] inline const std::byte *raw_data(const Vector &vector) noexcept {
    switch (vector.type().physical()) {
    case PhysicalType::u8:
        return reinterpret_cast<const std::byte *>(vector.data<std::uint8_t>());
    case PhysicalType::i64:
        return reinterpret_cast<const std::byte *>(vector.data<std::int64_t>());
    case PhysicalType::i128:
        return reinterpret_cast<const std::byte *>(vector.data<Int128>());
    case PhysicalType::f64:
        return reinterpret_cast<const std::byte *>(vector.data<double>());
    case PhysicalType::string:
        return reinterpret_cast<const std::byte *>(vector.data<StringRef>());
    }
    return nullptr;
}

[[nodiscard]] inline std::byte *raw_mutable_data(Vector &vector) noexcept {
    switch (vector.type().physical()) {
    case PhysicalType::u8:
        return reinterpret_cast<std::byte *>(vector.mutable_data<std::uint8_t>());
    case PhysicalType::i64:
        return reinterpret_cast<std::byte *>(vector.mutable_data<std::int64_t>());
    case PhysicalType::i128:
        return reinterpret_cast<std::byte *>(vector.mutable_data<Int128>());
    case PhysicalType::f64:
        return reinterpret_cast<std::byte *>(vector.mutable_data<double>());
    case PhysicalType::string:
        return reinterpret_cast<std::byte *>(vector.mutable_data<StringRef>());
    }
    return nullptr;
}

[[nodiscard]] inline ColumnData column_data(const Vector &vector) noexcept {
    const PhysicalType physical = vector.type().physical();
    return ColumnData{physical, static_cast<std::uint32_t>(physical_size(physical)), raw_data(vector),
                      vector.nulls()};
}

// ---- hashing ----------------------------------------------------------------------------------

[[nodiscard]] constexpr std::uint64_t mix_hash(std::uint64_t x) noexcept {
    x ^= x >> 33U;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33U;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33U;
    return x;
}

[[nodiscard]] constexpr std::uint64_t combine_hash(std::uint64_t seed, std::uint64_t value) noexcept {
    return mix_hash(seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6U) + (seed >> 2U)));
}

inline constexpr std::uint64_t null_hash = 0x5bd1e9955bd1e995ULL;

/// -0.0 equals 0.0 and every NaN equals every other NaN when grouping (as in DuckDB), so both
/// are mapped to one bit pattern before hashing and comparing.
[[nodiscard]] inline double normalize_double(double value) noexcept {
    if (value == 0.0) {
        return 0.0;
    }
    if (std::isnan(value)) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return value;
}

/// Short strings (flags, codes, names of a few letters are common group keys) are hashed inline
/// from one word; longer ones with the library's hash.
[[nodiscard]] inline std::uint64_t hash_string(std::string_view text) noexcept {
    if (text.size() <= 8) {
        std::uint64_t word = 0;
        for (std::size_t i = 0; i < text.size(); ++i) {
            word |= std::uint64_t{static_cast<unsigned char>(text[i])} << (8U * i);
        }
        return mix_hash(word ^ (std::uint64_t{text.size()} << 59U));
    }
    return std::hash<std::string_view>{}(text);
}

/// Hash of one non-NULL cell.
[[nodiscard]] inline std::uint64_t hash_cell(PhysicalType physical, const std::byte *cell) noexcept {
    switch (physical) {
    case PhysicalType::u8: {
        std::uint8_t value = 0;
        std::memcpy(&value, cell, 1);
        return mix_hash(value);
    }
    case PhysicalType::i64: {
        std::uint64_t value = 0;
        std::memcpy(&value, cell, 8);
        return mix_hash(value);
    }
    case PhysicalType::i128: {
        std::uint64_t parts[2];
        std::memcpy(parts, cell, 16);
        return combine_hash(mix_hash(parts[0]), parts[1]);
    }
    case PhysicalType::f64: {
        double value = 0;
        std::memcpy(&value, cell, 8);
        value = normalize_double(value);
        std::uint64_t bits = 0;
        std::memcpy(&bits, &value, 8);
        return mix_hash(bits);
    }
    case PhysicalType::string: {
        StringRef value;
        std::memcpy(&value, cell, sizeof(StringRef));
        return hash_string(value.view());
    }
    }
    return 0;
}

// ---- ordering ---------------------------------------------------------------------------------

template <class T>
[[nodiscard]] constexpr int three_way(const T &a, const T &b) noexcept {
    return a < b ? -1 : (b < a ? 1 : 0);
}

/// Total order of doubles used by MIN/MAX and ORDER BY: -0.0 equals 0.0, NaN is larger than
/// every other value and equal to itself (DuckDB's order).
[[nodiscard]] inline int compare_doubles(double a, double b) noexcept {
    const bool a_nan = std::isnan(a);
    const bool b_nan = std::isnan(b);
    if (a_nan || b_nan) {
        return a_nan == b_nan ? 0 : (a_nan ? 1 : -1);
    }
    return three_way(a, b);
}

/// Order of two non-NULL cells of the same physical type (strings bytewise).
[[nodiscard]] inline int compare_cells(PhysicalType physical, const std::byte *a,
                                       const std::byte *b) noexcept {
    switch (physical) {
    case PhysicalType::u8: {
        std::uint8_t x = 0;
        std::uint8_t y = 0;
        std::memcpy(&x, a, 1);
        std::memcpy(&y, b, 1);
        return three_way(x, y);
    }
    case PhysicalType::i64: {
        std::int64_t x = 0;
        std::int64_t y = 0;
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        return three_way(x, y);
    }
    case PhysicalType::i128: {
        Int128 x = 0;
        Int128 y = 0;
        std::memcpy(&x, a, 16);
        std::memcpy(&y, b, 16);
        return three_way(x, y);
    }
    case PhysicalType::f64: {
        double x = 0;
        double y = 0;
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        return compare_doubles(x, y);
    }
    case PhysicalType::string: {
        StringRef x;
        StringRef y;
        std::memcpy(&x, a, sizeof(StringRef));
        std::memcpy(&y, b, sizeof(StringRef));
        const int c = x.view().compare(y.view());
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    }
    return 0;
}

/// Equality of two non-NULL cells as grouping sees it (doubles normalized).
[[nodiscard]] inline bool equal_cells(PhysicalType physical, const std::byte *a,
                                      const std::byte *b) noexcept {
    switch (physical) {
    case PhysicalType::u8:
        return std::memcmp(a, b, 1) == 0;
    case PhysicalType::i64:
        return std::memcmp(a, b, 8) == 0;
    case PhysicalType::i128:
        return std::memcmp(a, b, 16) == 0;
    case PhysicalType::f64:
        return compare_cells(physical, a, b) == 0;
    case PhysicalType::string: {
        StringRef x;
        StringRef y;
        std::memcpy(&x, a, sizeof(StringRef));
        std::memcpy(&y, b, sizeof(StringRef));
        return equal_strings(x, y);
    }
    }
    return false;
}

/// Copies `width` bytes of a cell into an owning vector's row (strings as references).
inline void put_cell(Vector &out, std::uint32_t row, const std::byte *cell) noexcept {
    const std::size_t width = physical_size(out.type().physical());
    std::memcpy(raw_mutable_data(out) + std::size_t{row} * width, cell, width);
}

} // namespace mx::db::detail
