#pragma once

// Splits SQL text into statements at top-level semicolons, skipping semicolons inside string
// literals (E'...' escape strings too), quoted identifiers, dollar quotes and comments, so that
// each statement can run (and print its result) before the next one is read, and errors can be
// mapped back to the line and column of the whole script.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tunadb {

struct Piece {
    /// The statement text without its terminating ';' (leading whitespace kept so that positions
    /// inside it map 1:1 to the source).
    std::string sql;
    /// 1-based line and column (in characters) of the first character of `sql` in the text.
    std::uint32_t line{1};
    std::uint32_t column{1};
    /// 1-based line of the first non-blank character (where the statement "is").
    std::uint32_t first_line{1};
};

struct SplitResult {
    /// Statements with content (pieces holding only whitespace and comments are dropped).
    std::vector<Piece> pieces;
    /// Bytes of the text that were consumed: everything up to and including the last ';', or
    /// the whole text when `final`.
    std::size_t consumed{0};
    /// The text after `consumed` holds something other than whitespace and complete comments.
    bool rest_has_content{false};
};

/// Splits `text`; with `final` the text after the last ';' is a statement too. Positions start at
/// `line`/`column` (for text that continues earlier input).
SplitResult split_statements(std::string_view text, bool final, std::uint32_t line = 1,
                             std::uint32_t column = 1);

} // namespace tunadb
