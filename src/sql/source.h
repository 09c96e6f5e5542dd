#pragma once

// The source text's position arithmetic every error of the front end needs, and SQL's
// case-insensitive names.

#include <cstdint>
#include <string>
#include <string_view>

#include <mx/sql/database.h>

namespace mx::sql::detail {

/// The text being compiled: turns libpg_query's byte offsets into the 1-based character
/// positions, lines and columns users see.
class Source {
public:
    explicit Source(std::string_view text) noexcept : _text(text) {}

    [[nodiscard]] std::string_view text() const noexcept { return _text; }
    /// An error at byte offset `offset` of the text (negative: no position).
    [[nodiscard]] SqlError error(std::string message, std::int64_t offset) const;
    /// An error at a 1-based character position (0: no position).
    [[nodiscard]] SqlError error_at_character(std::string message, std::uint32_t position) const;

private:
    std::string_view _text;
};

/// SQL names are case-insensitive (unquoted, PostgreSQL folds them to lower case).
[[nodiscard]] std::string lower(std::string text);
[[nodiscard]] inline bool equal_names(const std::string &a, const std::string &b) {
    return lower(a) == lower(b);
}

} // namespace mx::sql::detail
