#pragma once

// libpg_query's JSON parse tree -> the typed parse tree (ast.h). The only code that knows
// libpg_query's node names and keys.

#include "ast.h"
#include "parser.h"

namespace mx::sql::detail {

/// Converts one parsed statement. Never fails: constructs TunaDB rejects become nodes that
/// carry their error (ast::Unsupported, ast::UnsupportedFrom, ast::OtherStatement, flags), and
/// expressions nested deeper than max_expression_depth end in an Unsupported node.
[[nodiscard]] ast::Statement to_ast(const Statement &statement);

} // namespace mx::sql::detail
