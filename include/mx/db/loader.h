#pragma once

// Bulk loading of delimited text files (dbgen .tbl, CSV) into a table, in parallel tasks on the
// runtime. The file is split into chunks at line boundaries; each task parses one chunk; as soon
// as a fragment's rows are parsed, a task builds it on the NUMA region it is placed on, and the
// chunks it came from are freed, so only a few parsed chunks are held at any time (memory stays
// bounded for any file size). The load appends to the table's current rows and publishes a new
// table version atomically (Catalog::replace); on any error nothing is published and the table
// stays exactly as it was.
//
// Errors are returned as values (LoadResult::error), never thrown, in the form
//   lineitem.tbl:1234:17: column l_quantity: expected DECIMAL(15,2), got "12x"
// (file, 1-based line, 1-based character position of the field in the line).
//
// Limitation: quoted fields may not contain line breaks (chunks are split at '\n' without
// looking at quotes); such a field is reported as an unterminated quote.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <mx/db/catalog.h>
#include <mx/db/table.h>

namespace mx::tasking {
class Runtime;
}

namespace mx::db {

enum class ProgressMode : std::uint8_t {
    automatic, ///< a progress bar on stderr when stderr is a terminal
    never,
};

struct CsvOptions {
    /// Field separator; unset = '|' for files ending in .tbl (or .tbl.N), ',' otherwise.
    std::optional<char> delimiter{};
    /// The first line holds column names and is skipped.
    bool header{false};
    /// Quote character; a quoted field may hold delimiters, and a doubled quote stands for one.
    /// A quoted empty field is an empty string, never NULL. nullopt switches quoting off.
    std::optional<char> quote{'"'};
    /// An unquoted field equal to this is NULL in a nullable column. In a NOT NULL column it is
    /// an error, except that an empty field in a VARCHAR column is the empty string.
    std::string null_string{};
    /// A delimiter may end a line (dbgen writes one after the last field).
    bool trailing_delimiter{true};
    ProgressMode progress{ProgressMode::automatic};
    /// Bytes per parse task (split at the next line break); small values for tests only.
    std::size_t chunk_bytes{std::size_t{4} << 20U};
    /// Parsed chunks held at a time, besides those whose rows wait for the fragment being
    /// filled: bounds the memory of a load. 0 = four per runtime worker (room for every worker
    /// to parse while fragments are built).
    std::size_t staged_chunks{0};
};

struct LoadResult {
    /// Empty on success, otherwise the one error the user sees.
    std::string error{};
    /// Rows and bytes of the file (0 on error).
    std::uint64_t rows{0};
    std::uint64_t bytes{0};
    double seconds{0.0};
    /// The most parsed chunks held at one time (at most staged_chunks plus the chunks of one
    /// fragment and one more); 0 on error.
    std::size_t peak_staged_chunks{0};
    /// The table version the load built (published by load(); nullptr on error).
    std::shared_ptr<const Table> table{};

    [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

/// Appends the rows of `path` to the catalog table `table` and publishes the new version.
/// Blocks until done; call it from outside the runtime's workers.
LoadResult load(tasking::Runtime &runtime, Catalog &catalog, std::string_view table, const std::string &path,
                const CsvOptions &options = {});

/// Builds a new version of `base` with the rows of `path` appended, without publishing it.
LoadResult load_into(tasking::Runtime &runtime, const std::shared_ptr<const Table> &base,
                     const std::string &path, const CsvOptions &options = {});

} // namespace mx::db
