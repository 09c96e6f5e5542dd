#pragma once

// The catalog: table name -> current table version. Readers get a std::shared_ptr<const Table>
// and keep that snapshot for as long as they hold it, whatever DDL, INSERT or a load publish
// meanwhile. Thread-safe; one mutex, because DDL is rare and lookups are one per query and table.
//
// Names compare case-insensitively (unquoted SQL identifiers); Table::name() keeps the spelling
// of CREATE TABLE.

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <mx/db/table.h>

namespace mx::db {

/// Thrown by catalog changes that cannot be done: the message is meant for the user
/// ("table lineitem already exists").
class CatalogError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Catalog {
public:
    /// Creates an empty table. Throws CatalogError when the name is taken or the schema or
    /// options are invalid.
    std::shared_ptr<const Table> create_table(std::string_view name, Schema schema,
                                              TableOptions options = {});
    /// Registers a complete table under its name (CREATE TABLE AS, tests). Throws CatalogError
    /// when the name is taken.
    void add_table(std::shared_ptr<const Table> table);
    /// Removes a table. Returns false when it did not exist and `if_exists`; throws CatalogError
    /// when it did not exist otherwise. Queries holding the table keep their snapshot.
    bool drop_table(std::string_view name, bool if_exists = false);
    /// The current version, or nullptr.
    [[nodiscard]] std::shared_ptr<const Table> find(std::string_view name) const;
    /// Names of all tables, sorted case-insensitively.
    [[nodiscard]] std::vector<std::string> names() const;
    /// Publishes `next` as the new version of the table `expected` is a version of, if
    /// `expected` is still the current version (compare-and-swap): an INSERT or load that raced
    /// with another writer or with DROP TABLE fails instead of losing rows. Returns whether it
    /// was published.
    bool replace(const std::shared_ptr<const Table> &expected, std::shared_ptr<const Table> next);

private:
    static std::string key(std::string_view name);

    // Guarded by _mutex; read and written by any thread.
    mutable std::mutex _mutex;
    std::map<std::string, std::shared_ptr<const Table>> _tables;
};

} // namespace mx::db
