#pragma once

// Table storage of TunaDB. A table is immutable once built and shared as
// std::shared_ptr<const Table>: a query holds the version it started with while INSERT, a load or
// DROP TABLE publish or remove newer versions (copy-on-write, see TableBuilder).
//
// A table is a sequence of fragments of a fixed capacity (the last one may be partial). Each
// fragment is one allocation in PAX layout: one cache-line-aligned block per column (physical
// values as in types.h, or uint32 dictionary codes), a NULL byte block per column only where the
// fragment has NULLs in that column, and a string heap for the plain string columns. A fragment
// lives on one NUMA region (region()); scans dispatch its tasks there.
//
// String columns with few distinct values are dictionary encoded: each row stores a uint32 code
// into a sorted table-level dictionary, so code order is string order (comparisons and grouping
// work on codes). See docs/design/storage.md.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <mx/db/types.h>
#include <mx/db/vector.h>

namespace mx::tasking {
class Runtime;
}

namespace mx::db {

struct ColumnDef {
    std::string name;
    Type type{};
    bool nullable{true};
};

/// The columns of a table. Column names compare case-insensitively (SQL identifiers).
class Schema {
public:
    Schema() = default;
    explicit Schema(std::vector<ColumnDef> columns) : _columns(std::move(columns)) {}

    [[nodiscard]] std::size_t size() const noexcept { return _columns.size(); }
    [[nodiscard]] const ColumnDef &operator[](std::size_t column) const noexcept { return _columns[column]; }
    [[nodiscard]] const std::vector<ColumnDef> &columns() const noexcept { return _columns; }
    /// Index of the column called `name` (case-insensitive), if any.
    [[nodiscard]] std::optional<std::size_t> find(std::string_view name) const noexcept;
    /// Empty when the schema is usable; otherwise why not (no columns, empty or duplicate names,
    /// DECIMAL precision outside 1..38 or scale above precision).
    [[nodiscard]] std::string validate() const;

private:
    std::vector<ColumnDef> _columns;
};

/// How string columns are stored.
enum class StringEncoding : std::uint8_t {
    automatic,  ///< dictionary when it pays (few distinct values, see TableOptions), else plain
    plain,      ///< always StringRefs into the fragment's heap
    dictionary, ///< dictionary whenever the distinct count is <= max_dictionary_size
};

struct TableOptions {
    static constexpr std::uint32_t default_fragment_capacity = 16384;
    static constexpr std::uint32_t max_fragment_capacity = 1U << 20U;

    /// Rows per fragment, 1..max_fragment_capacity. Every fragment but the last is full.
    std::uint32_t fragment_capacity{default_fragment_capacity};
    StringEncoding string_encoding{StringEncoding::automatic};
    /// A dictionary never has more entries than this.
    std::uint32_t max_dictionary_size{1U << 16U};
    /// automatic: dictionary only when rows >= distinct values * this (the codes and the shared
    /// strings must be clearly smaller than a StringRef and a copy per row).
    std::uint32_t min_rows_per_distinct{4};
};

/// Per-fragment summary of one column, for pruning fragments against predicates.
struct ZoneMap {
    std::uint64_t null_count{0};
    /// Smallest and largest non-NULL value (NULL Values when every row is NULL or for DOUBLE
    /// columns holding only NaN).
    Value min{};
    Value max{};
};

/// Table-level statistics of one column, for the optimizer.
struct ColumnStatistics {
    std::uint64_t null_count{0};
    Value min{};
    Value max{};
    /// Number of distinct non-NULL values: exact for dictionary-encoded columns, otherwise a
    /// HyperLogLog estimate (about 1.6 % standard error).
    std::uint64_t distinct_count{0};
    bool distinct_exact{false};
    /// Longest string in bytes (string columns only).
    std::uint32_t max_length{0};
};

/// The sorted distinct strings of a dictionary-encoded column; code i is entries()[i], so code
/// order is string order (bytewise, as StringRef's operator<=>).
class Dictionary {
public:
    Dictionary() = default;
    Dictionary(const Dictionary &) = delete;
    Dictionary &operator=(const Dictionary &) = delete;

    [[nodiscard]] std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(_entries.size()); }
    [[nodiscard]] std::span<const StringRef> entries() const noexcept { return _entries; }
    [[nodiscard]] const StringRef &operator[](std::uint32_t code) const noexcept { return _entries[code]; }
    /// The code of `text`, if it occurs.
    [[nodiscard]] std::optional<std::uint32_t> find(std::string_view text) const noexcept;
    /// The first code whose string is >= `text` (size() if none): `x < text` is `code < lower_bound`.
    [[nodiscard]] std::uint32_t lower_bound(std::string_view text) const noexcept;
    /// The first code whose string is > `text` (size() if none).
    [[nodiscard]] std::uint32_t upper_bound(std::string_view text) const noexcept;

    /// Builds a dictionary from distinct strings (any order; copied).
    static std::shared_ptr<const Dictionary> make(std::vector<std::string_view> distinct);

private:
    std::unique_ptr<char[]> _bytes;
    std::vector<StringRef> _entries;
};

/// Where fragments are placed: one memory node per NUMA region of the runtime.
struct Placement {
    /// Memory node of each region; empty = one region in ordinary memory.
    std::vector<std::uint8_t> memory_nodes{};
    /// Allocate with libnuma on the region's node (several regions and libnuma available).
    bool use_numa{false};

    [[nodiscard]] std::uint16_t regions() const noexcept {
        return memory_nodes.empty() ? std::uint16_t{1} : static_cast<std::uint16_t>(memory_nodes.size());
    }
    /// The runtime's regions and the memory node behind each (real or simulated topology,
    /// e.g. MX_TOPOLOGY=2x1 puts two regions on node 0 of a one-node machine).
    static Placement of(const tasking::Runtime &runtime);
};

namespace detail {
class FragmentWriter;
class TableAssembler;
} // namespace detail

/// A horizontal slice of a table: up to `capacity` rows, all columns in one allocation.
class Fragment {
public:
    ~Fragment();
    Fragment(const Fragment &) = delete;
    Fragment &operator=(const Fragment &) = delete;

    [[nodiscard]] std::uint32_t size() const noexcept { return _size; }
    [[nodiscard]] std::uint32_t capacity() const noexcept { return _capacity; }
    /// The NUMA region (runtime numbering) whose memory node holds this fragment.
    [[nodiscard]] std::uint8_t region() const noexcept { return _region; }
    [[nodiscard]] std::size_t column_count() const noexcept { return _columns.size(); }
    [[nodiscard]] Type type(std::size_t column) const noexcept { return _columns[column].type; }

    /// Rows [begin, end) of a column. A view (no copy) of the column block for every column that
    /// is not dictionary encoded; for a dictionary-encoded column an owning vector of decoded
    /// StringRefs that point into the dictionary (valid as long as the table). NULL bytes are
    /// present only when some row of the fragment is NULL in this column.
    [[nodiscard]] Vector column(std::size_t column, std::uint32_t begin, std::uint32_t end) const;
    [[nodiscard]] Vector column(std::size_t column) const { return this->column(column, 0, _size); }

    /// The raw column block: physical values (types.h), or uint32 codes if dictionary encoded.
    [[nodiscard]] const void *data(std::size_t column) const noexcept { return _columns[column].data; }
    /// One byte per row (1 = NULL), or nullptr when no row of this fragment is NULL here.
    [[nodiscard]] const std::uint8_t *nulls(std::size_t column) const noexcept {
        return _columns[column].nulls;
    }
    [[nodiscard]] bool dictionary_encoded(std::size_t column) const noexcept {
        return _columns[column].dictionary != nullptr;
    }
    /// Codes of a dictionary-encoded column (asserts otherwise). NULL rows hold code 0.
    [[nodiscard]] const std::uint32_t *codes(std::size_t column) const noexcept;
    /// The column's dictionary (empty span when not dictionary encoded).
    [[nodiscard]] std::span<const StringRef> dictionary(std::size_t column) const noexcept;
    [[nodiscard]] const std::shared_ptr<const Dictionary> &dictionary_ptr(std::size_t column) const noexcept {
        return _columns[column].dictionary;
    }
    [[nodiscard]] const ZoneMap &zone_map(std::size_t column) const noexcept { return _columns[column].zone; }

    /// One cell as a Value (slow path: tests, results).
    [[nodiscard]] Value value(std::size_t column, std::uint32_t row) const;
    /// Bytes of the fragment's allocation.
    [[nodiscard]] std::size_t memory_bytes() const noexcept { return _bytes; }

private:
    friend class detail::FragmentWriter;
    Fragment() = default;

    struct Column {
        Type type{};
        const void *data{nullptr};
        const std::uint8_t *nulls{nullptr};
        std::shared_ptr<const Dictionary> dictionary{};
        ZoneMap zone{};
    };
    std::vector<Column> _columns;
    std::byte *_memory{nullptr};
    std::size_t _bytes{0};
    std::uint32_t _size{0};
    std::uint32_t _capacity{0};
    std::uint8_t _region{0};
    bool _numa{false};
};

/// An immutable table version.
class Table {
public:
    [[nodiscard]] const std::string &name() const noexcept { return _name; }
    [[nodiscard]] const Schema &schema() const noexcept { return _schema; }
    [[nodiscard]] const TableOptions &options() const noexcept { return _options; }
    [[nodiscard]] std::uint64_t row_count() const noexcept { return _row_count; }
    /// 0 for a new table; each TableBuilder::finish on a table adds one.
    [[nodiscard]] std::uint64_t version() const noexcept { return _version; }

    [[nodiscard]] std::size_t fragment_count() const noexcept { return _fragments.size(); }
    [[nodiscard]] const Fragment &fragment(std::size_t index) const noexcept { return *_fragments[index]; }
    [[nodiscard]] std::span<const std::shared_ptr<const Fragment>> fragments() const noexcept {
        return _fragments;
    }
    /// Table row number of the fragment's first row.
    [[nodiscard]] std::uint64_t fragment_offset(std::size_t index) const noexcept {
        return std::uint64_t{index} * _options.fragment_capacity;
    }

    [[nodiscard]] const ColumnStatistics &statistics(std::size_t column) const noexcept {
        return _statistics[column];
    }
    [[nodiscard]] bool dictionary_encoded(std::size_t column) const noexcept {
        return _dictionaries[column] != nullptr;
    }
    /// The dictionary of a dictionary-encoded column, nullptr otherwise.
    [[nodiscard]] const Dictionary *dictionary(std::size_t column) const noexcept {
        return _dictionaries[column].get();
    }

    /// One cell as a Value (slow path: tests).
    [[nodiscard]] Value value(std::uint64_t row, std::size_t column) const;
    [[nodiscard]] std::size_t memory_bytes() const noexcept;

    /// An empty table (version 0). The schema must be valid (Schema::validate) and the options
    /// in range; asserts otherwise.
    static std::shared_ptr<const Table> empty(std::string name, Schema schema, TableOptions options = {});

private:
    friend class detail::TableAssembler;
    Table() = default;

    std::string _name;
    Schema _schema;
    TableOptions _options;
    std::uint64_t _row_count{0};
    std::uint64_t _version{0};
    std::vector<std::shared_ptr<const Fragment>> _fragments;
    std::vector<ColumnStatistics> _statistics;
    std::vector<std::shared_ptr<const Dictionary>> _dictionaries; // nullptr = plain
    // HyperLogLog registers per column, kept so an append can extend the estimate.
    std::vector<std::shared_ptr<const std::vector<std::uint8_t>>> _sketches;
};

namespace detail {
class TableBuild;
}

/// Builds a new table, or a new version of a table with rows appended (copy-on-write: the old
/// version stays valid and unchanged; full fragments are shared, a partial last fragment and
/// fragments whose dictionary changed are rebuilt). Used by INSERT INTO ... VALUES and the loader.
class TableBuilder {
public:
    TableBuilder(std::string name, Schema schema, TableOptions options = {});
    explicit TableBuilder(std::shared_ptr<const Table> base);
    ~TableBuilder();
    TableBuilder(TableBuilder &&) noexcept;
    TableBuilder &operator=(TableBuilder &&) noexcept;

    /// Appends one row, converting each value to its column's type as an INSERT would: integers
    /// into BIGINT, DECIMAL (exact) or DOUBLE; decimals rescaled with rounding; strings into
    /// DATE, DECIMAL, numbers and BOOLEAN by parsing them. Returns "" on success, otherwise why
    /// the row was rejected (nothing of it is appended): wrong number of values, NULL in a NOT
    /// NULL column, a value out of range or too long, a type that does not convert.
    [[nodiscard]] std::string append_row(std::span<const Value> row);
    [[nodiscard]] std::uint64_t appended_rows() const noexcept;

    /// The new table version: the base's rows, then the appended ones. With a runtime, the
    /// fragments are built by tasks on the regions they are placed on (round-robin) and the
    /// call blocks until they are done (call it from outside the runtime's workers); without,
    /// on this thread in ordinary memory. The builder then appends to the new version. Throws
    /// std::bad_alloc when memory for the fragments cannot be had (nothing is built then).
    std::shared_ptr<const Table> finish(tasking::Runtime *runtime = nullptr);

private:
    std::unique_ptr<detail::TableBuild> _build;
};

} // namespace mx::db
