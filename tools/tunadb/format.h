#pragma once

// How tunadb prints statement results: aligned tables (psql style, numbers right-aligned, NULL as
// NULL) or CSV with a header row.

#include <ostream>

#include <mx/db/executor.h>
#include <mx/sql/database.h>

namespace tunadb {

/// Rows as an aligned table followed by "(N rows)".
void print_table(std::ostream &out, const mx::db::QueryResult &rows);

/// One statement's result: queries as a table or CSV; EXPLAIN as its text; commands as their tag
/// (tables only: CSV output holds query results alone so that it can be piped on).
void print_result(std::ostream &out, const mx::sql::StatementResult &result, bool csv);

} // namespace tunadb
