#pragma once

// The check of TunaDB's TPC-H results against DuckDB's answers (scripts/tpch.py answers), shared
// by the engine's query tests (tests/db/engine), the SQL end-to-end test (tests/sql) and the
// benchmark driver (benchmarks/tpch), so that all three accept exactly the same results.
//
// An answer is two files per query: STEM.csv (header line, then one line per row: ',' separated,
// '"' quoted with doubled quotes, an unquoted empty field is NULL) and STEM.types (one
// "name<TAB>DuckDB type" line per column).
//
// A cell matches when both are NULL, or
//   - DuckDB's type is DOUBLE or FLOAT: ours is a DOUBLE within 1e-9 relative of DuckDB's value
//     (the last bits depend on the order of additions);
//   - DuckDB's type is DECIMAL(p,s): ours is a DECIMAL of the same scale s with the same text;
//   - otherwise (integers, HUGEINT, DATE, VARCHAR): ours prints as DuckDB's text.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/types.h>

namespace mx::tpch {

/// The eight tables in dbgen's load order: every table after the ones its keys refer to.
inline constexpr const char *tables[] = {"region", "nation",   "supplier", "customer",
                                         "part",   "partsupp", "orders",   "lineitem"};

/// The whole file; throws std::runtime_error naming the path when it cannot be read.
[[nodiscard]] std::string read_file(const std::string &path);

/// DuckDB's answer of a query: column names and types, rows of fields (nullopt = NULL).
struct Answer {
    std::vector<std::string> names;
    std::vector<std::string> types;
    std::vector<std::vector<std::optional<std::string>>> rows;
};

/// DIRECTORY/STEM.csv and DIRECTORY/STEM.types (STEM as in "q6", "q6_2"); nullopt when either is
/// missing.
[[nodiscard]] std::optional<Answer> read_answer(const std::string &directory, const std::string &stem);

enum class Order : std::uint8_t {
    exact, ///< the query's ORDER BY fixes the order of every row
    any,   ///< compare as multisets (no ORDER BY, or ties in it)
};

/// "" when our cell matches DuckDB's text of the given type (see the top of this file), else why
/// not.
[[nodiscard]] std::string compare_cell(const db::Value &ours, const std::optional<std::string> &theirs,
                                       const std::string &type);

/// "" when the result matches DuckDB's answer, else its first difference: same column count,
/// same row count, every cell matching, row by row (Order::exact) or as multisets (Order::any:
/// rows are paired in order if that matches, else by the text of their non-DOUBLE cells).
[[nodiscard]] std::string compare_result(const db::QueryResult &result, const Answer &answer, Order order);

} // namespace mx::tpch
