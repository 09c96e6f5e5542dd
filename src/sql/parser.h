#pragma once

// The parser step: SQL text -> PostgreSQL parse trees (libpg_query's JSON, read with
// nlohmann/json), and the accessors ast_from_json.cpp reads them with.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "source.h"

namespace mx::sql::detail {

using Json = nlohmann::json;

struct Statement {
    Json node;                // {"SelectStmt": {...}} and the like
    std::int64_t location{0}; // byte offset of the statement in the text
    std::int64_t length{0};   // bytes (0 = up to the end)
};

/// Upper bound for the text of one execute call: the parser's recursion depth grows with the
/// text, so it runs on a thread whose stack is sized from the text's length.
inline constexpr std::size_t max_text_bytes = std::size_t{4} << 20U;

/// Parses a script of statements. Throws SqlError on syntax errors (with libpg_query's exact
/// position), texts over max_text_bytes, NUL bytes, and a nesting the parser cannot handle.
[[nodiscard]] std::vector<Statement> parse(const Source &source);

// Accessors for libpg_query's JSON, where fields with default values are left out.

/// The node's single key ("SelectStmt") and its body; empty name for anything else.
[[nodiscard]] std::string_view node_name(const Json &node) noexcept;
[[nodiscard]] const Json &node_body(const Json &node);
/// node[key] or a shared null value when missing.
[[nodiscard]] const Json &field(const Json &node, std::string_view key);
[[nodiscard]] std::string string_field(const Json &node, std::string_view key);
[[nodiscard]] std::int64_t int_field(const Json &node, std::string_view key, std::int64_t otherwise = 0);
[[nodiscard]] bool bool_field(const Json &node, std::string_view key);
/// The "location" field of a node body (or of the single-key node itself); -1 when missing.
[[nodiscard]] std::int64_t location_of(const Json &node);
/// A list field as a vector of pointers (empty when missing).
[[nodiscard]] std::vector<const Json *> list_field(const Json &node, std::string_view key);
/// The text of a {"String": {"sval": ...}} node ("" otherwise).
[[nodiscard]] std::string string_value(const Json &node);

} // namespace mx::sql::detail
