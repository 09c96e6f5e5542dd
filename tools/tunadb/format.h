#pragma once

// How tunadb prints statement results: aligned tables (psql style, numbers right-aligned, NULL as
// NULL) or RFC 4180 CSV with a header row (NULL as an empty field); --null TEXT prints NULL as
// TEXT in both.

#include <optional>
#include <ostream>
#include <string>

#include <mx/db/executor.h>
#include <mx/sql/database.h>

namespace tunadb {

/// Rows as an aligned table followed by "(N rows)"; NULL prints as `null_text`.
void print_table(std::ostream &out, const mx::db::QueryResult &rows, const std::string &null_text = "NULL");

/// One statement's result: queries as a table or CSV; EXPLAIN as its text; commands as their tag
/// (tables only: CSV output holds query results alone so that it can be piped on).
/// `null_text`: how NULL prints (default: NULL in tables, an empty field in CSV).
void print_result(std::ostream &out, const mx::sql::StatementResult &result, bool csv,
                  const std::optional<std::string> &null_text = std::nullopt);

} // namespace tunadb
