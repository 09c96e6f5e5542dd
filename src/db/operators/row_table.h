#pragma once

// Row storage for hash aggregation: fixed-width rows of a group key and aggregate states in
// blocks that never move (so pointers into them stay valid while the table grows), found through
// an open-addressing index of (hash, row pointer) slots. Keys are encoded by a KeyLayout: a NULL
// mask and one 16-byte slot per key column, strings as references into an arena of the operator.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include <mx/db/types.h>
#include <mx/db/vector.h>
#include <mx/util/assert.h>

#include "cells.h"
#include "large_buffer.h"

namespace mx::db::detail {

/// Encoding of a group key: [u64 NULL mask][u64 unused][16-byte slot per column]. A slot holds the
/// physical value (zero-padded) or a StringRef; NULL columns have their mask bit set and a zero
/// slot. A layout with more columns whose first columns are those of another layout shares its
/// encoding as a prefix (the count-distinct sets extend the group key by the argument).
class KeyLayout {
public:
    static constexpr std::uint32_t slot_size = 16;
    static constexpr std::uint32_t max_columns = 63;
    static constexpr std::uint64_t seed = 0x2545f4914f6cdd1dULL;

    KeyLayout() = default;
    explicit KeyLayout(std::vector<PhysicalType> columns) : _columns(std::move(columns)) {
        MX_ASSERT(_columns.size() <= max_columns, "too many key columns");
    }

    [[nodiscard]] std::uint32_t columns() const noexcept {
        return static_cast<std::uint32_t>(_columns.size());
    }
    [[nodiscard]] std::uint32_t width() const noexcept { return 16U + slot_size * columns(); }
    [[nodiscard]] PhysicalType physical(std::uint32_t column) const noexcept { return _columns[column]; }

    [[nodiscard]] static std::uint64_t mask(const std::byte *key) noexcept {
        std::uint64_t value = 0;
        std::memcpy(&value, key, 8);
        return value;
    }
    [[nodiscard]] static bool is_null(const std::byte *key, std::uint32_t column) noexcept {
        return ((mask(key) >> column) & 1U) != 0;
    }
    [[nodiscard]] static const std::byte *slot(const std::byte *key, std::uint32_t column) noexcept {
        return key + 16 + std::size_t{slot_size} * column;
    }

    /// hashes[i] = seed folded with the cells of live row i (batch.row(i)) of `columns`.
    static void hash_rows(const ColumnData *columns, std::uint32_t column_count, const Batch &batch,
                          std::uint32_t count, std::uint64_t *hashes) noexcept {
        for (std::uint32_t i = 0; i < count; ++i) {
            hashes[i] = seed;
        }
        for (std::uint32_t c = 0; c < column_count; ++c) {
            fold_column(columns[c], batch, count, hashes);
        }
    }
    /// hashes[i] = combine(hashes[i], cell of live row i) for one column.
    static void fold_column(const ColumnData &column, const Batch &batch, std::uint32_t count,
                            std::uint64_t *hashes) noexcept {
        // One loop per physical type: with the type a constant, hash_cell() inlines to its case.
        switch (column.physical) {
        case PhysicalType::u8:
            return fold_column_as<PhysicalType::u8>(column, batch, count, hashes);
        case PhysicalType::i64:
            return fold_column_as<PhysicalType::i64>(column, batch, count, hashes);
        case PhysicalType::i128:
            return fold_column_as<PhysicalType::i128>(column, batch, count, hashes);
        case PhysicalType::f64:
            return fold_column_as<PhysicalType::f64>(column, batch, count, hashes);
        case PhysicalType::string:
            return fold_column_as<PhysicalType::string>(column, batch, count, hashes);
        }
    }

    /// Writes the key of `row` (strings copied into `arena`).
    void store(std::byte *key, const ColumnData *columns, std::uint32_t row, StringHeap &arena) const {
        std::uint64_t nulls = 0;
        std::memset(key, 0, width());
        for (std::uint32_t c = 0; c < this->columns(); ++c) {
            if (columns[c].is_null(row)) {
                nulls |= std::uint64_t{1} << c;
                continue;
            }
            std::byte *target = key + 16 + std::size_t{slot_size} * c;
            const std::byte *cell = columns[c].cell(row);
            switch (_columns[c]) {
            case PhysicalType::string: {
                StringRef text;
                std::memcpy(&text, cell, sizeof(StringRef));
                const StringRef copy = arena.add(text.view());
                std::memcpy(target, &copy, sizeof(StringRef));
                break;
            }
            case PhysicalType::f64: {
                double value = 0;
                std::memcpy(&value, cell, 8);
                value = normalize_double(value);
                std::memcpy(target, &value, 8);
                break;
            }
            default:
                std::memcpy(target, cell, physical_size(_columns[c]));
                break;
            }
        }
        std::memcpy(key, &nulls, 8);
    }

    /// Whether the stored key equals the key of `row`.
    [[nodiscard]] bool equals(const std::byte *key, const ColumnData *columns,
                              std::uint32_t row) const noexcept {
        if (_columns.size() == 1) {
            // The common one-column key (Q18's order key) without the loops over columns.
            const bool null = columns[0].is_null(row);
            return mask(key) == (null ? 1U : 0U) &&
                   (null || equal_cells(_columns[0], slot(key, 0), columns[0].cell(row)));
        }
        std::uint64_t nulls = 0;
        for (std::uint32_t c = 0; c < this->columns(); ++c) {
            if (columns[c].is_null(row)) {
                nulls |= std::uint64_t{1} << c;
            }
        }
        if (nulls != mask(key)) {
            return false;
        }
        for (std::uint32_t c = 0; c < this->columns(); ++c) {
            if (((nulls >> c) & 1U) == 0 && !equal_cells(_columns[c], slot(key, c), columns[c].cell(row))) {
                return false;
            }
        }
        return true;
    }

    /// Whether two stored keys agree on this layout's columns (a longer key may extend them).
    [[nodiscard]] bool equals_stored(const std::byte *a, const std::byte *b) const noexcept {
        const std::uint64_t low = columns() == 0 ? 0 : (~std::uint64_t{0} >> (64U - columns()));
        if (((mask(a) ^ mask(b)) & low) != 0) {
            return false;
        }
        for (std::uint32_t c = 0; c < columns(); ++c) {
            if (!is_null(a, c) && !equal_cells(_columns[c], slot(a, c), slot(b, c))) {
                return false;
            }
        }
        return true;
    }

private:
    template <PhysicalType Physical>
    static void fold_column_as(const ColumnData &column, const Batch &batch, std::uint32_t count,
                               std::uint64_t *hashes) noexcept {
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::uint32_t row = batch.row(i);
            const std::uint64_t h = column.is_null(row) ? null_hash : hash_cell(Physical, column.cell(row));
            hashes[i] = combine_hash(hashes[i], h);
        }
    }

    std::vector<PhysicalType> _columns;
};

/// Rows of `row_width` bytes: [u64 hash][u64 aux][key][payload], zero-initialized on insert. Not
/// thread-safe: each table is used by one task at a time (worker-local, or one finalize part).
class RowTable {
public:
    static constexpr std::uint32_t header = 16;

    explicit RowTable(std::uint32_t row_width) : _row_width((row_width + 15U) & ~15U) {}

    /// Keys in the index: its own rows and the adopted ones (find_or_adopt()).
    [[nodiscard]] std::uint64_t size() const noexcept { return _size; }
    [[nodiscard]] std::uint32_t row_width() const noexcept { return _row_width; }
    /// Bytes of its index and row blocks.
    [[nodiscard]] std::uint64_t bytes() const noexcept {
        std::uint64_t total = _capacity * sizeof(Slot);
        for (const Block &block : _blocks) {
            total += std::uint64_t{block.capacity} * _row_width;
        }
        return total;
    }

    [[nodiscard]] static std::uint64_t hash_of(const std::byte *row) noexcept {
        std::uint64_t value = 0;
        std::memcpy(&value, row, 8);
        return value;
    }
    [[nodiscard]] static std::uint64_t aux_of(const std::byte *row) noexcept {
        std::uint64_t value = 0;
        std::memcpy(&value, row + 8, 8);
        return value;
    }
    static void set_aux(std::byte *row, std::uint64_t aux) noexcept { std::memcpy(row + 8, &aux, 8); }
    [[nodiscard]] static std::byte *key_of(std::byte *row) noexcept { return row + header; }
    [[nodiscard]] static const std::byte *key_of(const std::byte *row) noexcept { return row + header; }

    /// The row whose key `equal(row)` accepts, or a new zeroed row with `hash` on which
    /// `init(row)` ran. Returns the row and whether it was inserted.
    template <class Equal, class Init>
    std::pair<std::byte *, bool> find_or_insert(std::uint64_t hash, Equal &&equal, Init &&init) {
        Slot &slot = probe(hash, equal);
        if (slot.row != nullptr) {
            return {slot.row, false};
        }
        std::byte *row = allocate_row();
        std::memcpy(row, &hash, 8);
        init(row);
        slot.hash = hash;
        slot.row = row;
        ++_size;
        return {row, true};
    }

    /// The row whose key `equal(row)` accepts; without one, indexes `row` (a row of another
    /// table with the same layout, which must outlive this index) under its stored hash and
    /// returns it. A merge of tables thus moves no row: the index points into every table's
    /// blocks, and for_each() still walks only this table's own rows.
    template <class Equal>
    std::byte *find_or_adopt(std::byte *row, Equal &&equal) {
        const std::uint64_t hash = hash_of(row);
        Slot &slot = probe(hash, equal);
        if (slot.row == nullptr) {
            slot.hash = hash;
            slot.row = row;
            ++_size;
        }
        return slot.row;
    }

    /// Sizes the index for `rows` keys now (one rehash instead of one per doubling).
    void reserve(std::uint64_t rows) {
        if (rows * 2 > _capacity) {
            rehash(std::bit_ceil(std::max<std::uint64_t>(rows * 2, 16)));
        }
    }

    /// Keys the table is expected to hold (an estimate): once it outgrows a small index, the
    /// index grows to this size in one step instead of doubling through every size in between,
    /// on the thread that fills it. A table that stays small never allocates for an estimate
    /// that was too high.
    void expect(std::uint64_t rows) noexcept { _expected = rows; }

    /// Starts loading the index slot of `hash`: a caller that knows the hashes of the next rows
    /// overlaps their cache misses (a table of a million groups lives in DRAM). A slot of an index
    /// that grows before the lookup was prefetched for nothing, which is harmless.
    void prefetch(std::uint64_t hash) const noexcept {
        if (_capacity != 0) {
            __builtin_prefetch(slots() + (hash & _mask));
        }
    }

    /// The row whose key `equal(row)` accepts, or nullptr.
    template <class Equal>
    [[nodiscard]] std::byte *find(std::uint64_t hash, Equal &&equal) const {
        if (_capacity == 0) {
            return nullptr;
        }
        std::uint64_t position = hash & _mask;
        while (true) {
            const Slot &slot = slots()[position];
            if (slot.row == nullptr) {
                return nullptr;
            }
            if (slot.hash == hash && equal(static_cast<const std::byte *>(slot.row))) {
                return slot.row;
            }
            position = (position + 1) & _mask;
        }
    }

    /// Calls f(row) for every row, in insertion order.
    template <class F>
    void for_each(F &&f) const {
        for (const Block &block : _blocks) {
            for (std::uint32_t i = 0; i < block.used; ++i) {
                f(block.memory.data() + std::size_t{i} * _row_width);
            }
        }
    }

private:
    /// Index slots from which a growing index takes the expected keys into account (4 k keys).
    static constexpr std::uint64_t expected_from_slots = 8192;

    struct Slot {
        std::uint64_t hash{0};
        std::byte *row{nullptr};
    };
    struct Block {
        LargeBuffer memory;
        std::uint32_t capacity{0};
        std::uint32_t used{0};
    };

    std::byte *allocate_row() {
        if (_blocks.empty() || _blocks.back().used == _blocks.back().capacity) {
            // Doubling blocks: small tables stay small, big ones allocate rarely and fill a huge
            // page each.
            const auto largest = std::max<std::uint32_t>(
                16U, static_cast<std::uint32_t>(LargeBuffer::huge_page_bytes / _row_width));
            const std::uint32_t capacity =
                _blocks.empty() ? 16U : std::min<std::uint32_t>(_blocks.back().capacity * 2U, largest);
            Block block;
            block.memory = LargeBuffer(std::size_t{capacity} * _row_width);
            block.capacity = capacity;
            _blocks.push_back(std::move(block));
        }
        Block &block = _blocks.back();
        std::byte *row = block.memory.data() + std::size_t{block.used} * _row_width; // zeroed
        ++block.used;
        return row;
    }

    /// The slot holding the key `equal` accepts, or the empty slot where it goes (the index has
    /// room for one more key).
    template <class Equal>
    Slot &probe(std::uint64_t hash, Equal &equal) {
        if ((_size + 1) * 2 > _capacity) {
            std::uint64_t capacity = _capacity == 0 ? 16 : _capacity * 2;
            if (capacity >= expected_from_slots) {
                capacity = std::max(capacity, std::bit_ceil(_expected * 2));
            }
            rehash(capacity);
        }
        std::uint64_t position = hash & _mask;
        while (true) {
            Slot &slot = slots()[position];
            if (slot.row == nullptr ||
                (slot.hash == hash && equal(static_cast<const std::byte *>(slot.row)))) {
                return slot;
            }
            position = (position + 1) & _mask;
        }
    }

    void rehash(std::uint64_t capacity) {
        LargeBuffer memory(capacity * sizeof(Slot));
        auto *fresh = reinterpret_cast<Slot *>(memory.data()); // zeroed: every slot empty
        const std::uint64_t mask = capacity - 1;
        for (std::uint64_t i = 0; i < _capacity; ++i) {
            const Slot &slot = slots()[i];
            if (slot.row == nullptr) {
                continue;
            }
            std::uint64_t position = slot.hash & mask;
            while (fresh[position].row != nullptr) {
                position = (position + 1) & mask;
            }
            fresh[position] = slot;
        }
        _index = std::move(memory);
        _capacity = capacity;
        _mask = mask;
    }

    [[nodiscard]] Slot *slots() const noexcept { return reinterpret_cast<Slot *>(_index.data()); }

    std::uint32_t _row_width;
    std::uint64_t _size{0};
    std::uint64_t _mask{0};
    std::uint64_t _expected{0};
    LargeBuffer _index; // _capacity slots
    std::uint64_t _capacity{0};
    std::vector<Block> _blocks;
};

} // namespace mx::db::detail
