#pragma once

// Row storage and key hashing of TunaDB's hash join (internal to src/db/operators/hash_join*.cpp).
//
// Both sides of a hash join are kept as fixed-width rows while they wait: the build side until
// the tables are built and probed, the probe side (radix-partitioned joins only) until its
// partition is probed. A row is
//
//   [next row pointer: 8][hash: 8][key slots][column slots][one NULL byte per column slot]
//
// rounded up to 8 bytes. Strings are StringRefs into the store's own arena. Every worker writes
// only its own RowStore (no latch, no false sharing); rows go straight into one of 2^bits micro
// partitions (the top hash bits) as in the radix join demonstrator (docs/design/radix-join.md):
// a chain of fragments per partition, each fragment a slice of the worker's bump arena. Rows
// never move, so a row pointer stays valid for the store's lifetime and tables chain rows
// through their `next` field instead of copying them.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include <mx/db/types.h>
#include <mx/db/vector.h>
#include <mx/util/assert.h>

#include "cells.h"

namespace mx::db::detail::join {

// ---------------------------------------------------------------------------------------------
// Hashing. Partitions use the top bits of a hash, buckets the low bits and the Bloom filter bits
// 8..43, so the function must spread every bit: murmur3's finalizer for fixed-width values and
// a word-at-a-time multiply-rotate loop for strings. The finalizer is cells.h's mix_hash.

[[nodiscard]] inline std::uint64_t hash_value(std::int64_t value) noexcept {
    return mix_hash(static_cast<std::uint64_t>(value) ^ 0x5851F42D4C957F2DULL);
}
[[nodiscard]] inline std::uint64_t hash_value(std::uint8_t value) noexcept {
    return hash_value(static_cast<std::int64_t>(value));
}
[[nodiscard]] inline std::uint64_t hash_value(Int128 value) noexcept {
    const auto low = static_cast<std::uint64_t>(value);
    const auto high = static_cast<std::uint64_t>(value >> 64); // arithmetic shift: sign bits, fine
    return mix_hash(low ^ mix_hash(high + 0x9E3779B97F4A7C15ULL));
}
// Keys equal under DuckDB's rules (-0.0 and 0.0; all NaNs) hash alike: cells.h's normalize_double.
[[nodiscard]] inline std::uint64_t hash_value(double value) noexcept {
    return hash_value(std::bit_cast<std::int64_t>(normalize_double(value)));
}
[[nodiscard]] inline std::uint64_t hash_value(const StringRef &value) noexcept {
    std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ value.size;
    const char *bytes = value.data;
    std::uint32_t remaining = value.size;
    while (remaining >= 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes, 8);
        h = std::rotl(h ^ (word * 0xC2B2AE3D27D4EB4FULL), 31) * 0x9E3779B97F4A7C15ULL;
        bytes += 8;
        remaining -= 8;
    }
    if (remaining > 0) {
        std::uint64_t word = 0;
        std::memcpy(&word, bytes, remaining);
        h = std::rotl(h ^ (word * 0xC2B2AE3D27D4EB4FULL), 31) * 0x9E3779B97F4A7C15ULL;
    }
    return mix_hash(h);
}
/// Folds the hash of the next key column into the hash of the previous ones.
[[nodiscard]] inline std::uint64_t combine_hash(std::uint64_t seed, std::uint64_t next) noexcept {
    return mix_hash(seed * 0x9E3779B97F4A7C15ULL + next);
}

[[nodiscard]] inline bool keys_equal(std::int64_t a, std::int64_t b) noexcept { return a == b; }
[[nodiscard]] inline bool keys_equal(std::uint8_t a, std::uint8_t b) noexcept { return a == b; }
[[nodiscard]] inline bool keys_equal(Int128 a, Int128 b) noexcept { return a == b; }
[[nodiscard]] inline bool keys_equal(double a, double b) noexcept {
    return a == b || (std::isnan(a) && std::isnan(b));
}
[[nodiscard]] inline bool keys_equal(const StringRef &a, const StringRef &b) noexcept {
    return a.size == b.size && (a.size == 0 || std::memcmp(a.data, b.data, a.size) == 0);
}

/// Calls f(T{}) with T the C++ type of a physical type.
template <class F>
decltype(auto) visit_physical(PhysicalType type, F &&f) {
    switch (type) {
    case PhysicalType::u8:
        return f(std::uint8_t{});
    case PhysicalType::i64:
        return f(std::int64_t{});
    case PhysicalType::i128:
        return f(Int128{});
    case PhysicalType::f64:
        return f(double{});
    case PhysicalType::string:
        break;
    }
    return f(StringRef{});
}

/// hashes[r] for every r in `rows`: the combined hash of the key vectors' values in row r (the
/// rows must have no NULL key). Column at a time, so each loop is one tight type-specific pass.
inline void hash_rows(std::span<const Vector> keys, std::span<const std::uint32_t> rows,
                      std::uint64_t *hashes) noexcept {
    for (std::size_t k = 0; k < keys.size(); ++k) {
        const Vector &key = keys[k];
        visit_physical(key.type().physical(), [&](auto tag) {
            using T = decltype(tag);
            const T *values = key.data<T>();
            if (k == 0) {
                for (const std::uint32_t r : rows) {
                    hashes[r] = hash_value(values[r]);
                }
            } else {
                for (const std::uint32_t r : rows) {
                    hashes[r] = combine_hash(hashes[r], hash_value(values[r]));
                }
            }
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Rows.

using Row = std::byte;

struct Slot {
    PhysicalType physical{PhysicalType::i64};
    std::uint32_t offset{0};
};

struct RowLayout {
    static constexpr std::uint32_t next_offset = 0;
    static constexpr std::uint32_t hash_offset = 8;
    static constexpr std::uint32_t header_size = 16;

    std::vector<Slot> keys;
    std::vector<Slot> columns;
    std::uint32_t null_offset{header_size}; // NULL byte of column slot c at null_offset + c
    std::uint32_t size{header_size};

    static RowLayout make(std::span<const PhysicalType> keys, std::span<const PhysicalType> columns) {
        RowLayout layout;
        std::uint32_t offset = header_size;
        const auto place = [&](PhysicalType type) {
            const auto width = static_cast<std::uint32_t>(physical_size(type));
            const std::uint32_t align = std::min<std::uint32_t>(width, 8);
            offset = (offset + align - 1) / align * align;
            const Slot slot{type, offset};
            offset += width;
            return slot;
        };
        for (const PhysicalType type : keys) {
            layout.keys.push_back(place(type));
        }
        for (const PhysicalType type : columns) {
            layout.columns.push_back(place(type));
        }
        layout.null_offset = offset;
        offset += static_cast<std::uint32_t>(columns.size());
        layout.size = (offset + 7U) / 8U * 8U;
        return layout;
    }
};

[[nodiscard]] inline const Row *row_next(const Row *row) noexcept {
    const Row *next = nullptr;
    std::memcpy(&next, row + RowLayout::next_offset, sizeof(next));
    return next;
}
inline void set_row_next(Row *row, const Row *next) noexcept {
    std::memcpy(row + RowLayout::next_offset, &next, sizeof(next));
}
[[nodiscard]] inline std::uint64_t row_hash(const Row *row) noexcept {
    std::uint64_t hash = 0;
    std::memcpy(&hash, row + RowLayout::hash_offset, sizeof(hash));
    return hash;
}
template <class T>
[[nodiscard]] inline T load_slot(const Row *row, std::uint32_t offset) noexcept {
    T value;
    std::memcpy(&value, row + offset, sizeof(T));
    return value;
}

/// Worker-local, micro-partitioned row storage. Only its worker writes it (consume tasks of one
/// node on that worker); others read it after the writing phase completed (the dataflow layer's
/// node completion orders the two).
class RowStore {
public:
    struct Fragment {
        Fragment *next{nullptr};
        std::uint32_t count{0};
        std::uint32_t capacity{0};

        [[nodiscard]] Row *rows() noexcept { return reinterpret_cast<Row *>(this + 1); }
        [[nodiscard]] const Row *rows() const noexcept { return reinterpret_cast<const Row *>(this + 1); }
    };
    static_assert(sizeof(Fragment) == 16);

    RowStore(std::uint32_t row_size, std::uint32_t partitions)
        : _row_size(row_size), _max_fragment_rows(std::max<std::uint32_t>(8, max_fragment_bytes / row_size)),
          _partitions(partitions) {}
    RowStore(const RowStore &) = delete;
    RowStore &operator=(const RowStore &) = delete;

    /// Memory for one more row of `partition` (header and slots to be written by the caller).
    [[nodiscard]] Row *append(std::uint32_t partition) {
        Chain &chain = _partitions[partition];
        if (chain.last == nullptr || chain.last->count == chain.last->capacity) {
            // Fragments grow per partition, so a tiny build does not pay for full fragments in
            // every one of its partitions, and a big one ends up with few, large fragments.
            const std::uint32_t capacity = chain.next_capacity;
            chain.next_capacity = std::min(capacity * 2, _max_fragment_rows);
            auto *fragment = new (allocate(sizeof(Fragment) + std::size_t{capacity} * _row_size)) Fragment{};
            fragment->capacity = capacity;
            if (chain.last == nullptr) {
                chain.first = fragment;
            } else {
                chain.last->next = fragment;
            }
            chain.last = fragment;
        }
        ++chain.count;
        ++_rows;
        return chain.last->rows() + std::size_t{chain.last->count++} * _row_size;
    }

    [[nodiscard]] const Fragment *first(std::uint32_t partition) const noexcept {
        return _partitions[partition].first;
    }
    [[nodiscard]] std::uint64_t count(std::uint32_t partition) const noexcept {
        return _partitions[partition].count;
    }
    [[nodiscard]] std::uint32_t partitions() const noexcept {
        return static_cast<std::uint32_t>(_partitions.size());
    }
    [[nodiscard]] std::uint64_t rows() const noexcept { return _rows; }
    [[nodiscard]] std::uint32_t row_size() const noexcept { return _row_size; }
    [[nodiscard]] StringHeap &strings() noexcept { return _strings; }
    /// Bytes of its row blocks and copied strings.
    [[nodiscard]] std::uint64_t bytes() const noexcept { return _reserved + _strings.bytes(); }

    /// Calls f(row) for every row of a partition.
    template <class F>
    void for_each(std::uint32_t partition, F &&f) const {
        for (const Fragment *fragment = first(partition); fragment != nullptr; fragment = fragment->next) {
            const Row *row = fragment->rows();
            for (std::uint32_t i = 0; i < fragment->count; ++i, row += _row_size) {
                f(row);
            }
        }
    }
    template <class F>
    void for_each_mutable(std::uint32_t partition, F &&f) {
        for (Fragment *fragment = _partitions[partition].first; fragment != nullptr;
             fragment = fragment->next) {
            Row *row = fragment->rows();
            for (std::uint32_t i = 0; i < fragment->count; ++i, row += _row_size) {
                f(row);
            }
        }
    }

private:
    static constexpr std::size_t block_size = 256 * 1024;
    static constexpr std::uint32_t max_fragment_bytes = 16 * 1024;
    static constexpr std::uint32_t first_fragment_rows = 8;

    struct Chain {
        Fragment *first{nullptr};
        Fragment *last{nullptr};
        std::uint64_t count{0};
        std::uint32_t next_capacity{first_fragment_rows};
    };

    void *allocate(std::size_t bytes) {
        bytes = (bytes + 15U) / 16U * 16U;
        if (_blocks.empty() || _used + bytes > _capacity) {
            _capacity = std::max(bytes, block_size);
            _blocks.push_back(std::make_unique<std::byte[]>(_capacity));
            _reserved += _capacity;
            _used = 0;
        }
        void *memory = _blocks.back().get() + _used;
        _used += bytes;
        return memory;
    }

    std::uint32_t _row_size;
    std::uint32_t _max_fragment_rows;
    std::vector<Chain> _partitions;
    std::uint64_t _rows{0};
    std::uint64_t _reserved{0};
    std::vector<std::unique_ptr<std::byte[]>> _blocks;
    std::size_t _used{0};
    std::size_t _capacity{0};
    StringHeap _strings;
};

/// Writes column `source` (rows `rows`, which must all be live) into `slot` of the row at the
/// same position of `targets`; strings are copied into `strings`. With `null_byte`, also the
/// column's NULL flags (at row + null_byte); without, the values must not be NULL (keys).
inline void store_column(const Vector &source, std::span<const std::uint32_t> rows, Row *const *targets,
                         Slot slot, std::optional<std::uint32_t> null_byte, StringHeap &strings) {
    const std::uint8_t *nulls = source.nulls();
    if (null_byte) {
        for (std::size_t j = 0; j < rows.size(); ++j) {
            targets[j][*null_byte] =
                std::byte{nulls != nullptr && nulls[rows[j]] != 0 ? std::uint8_t{1} : std::uint8_t{0}};
        }
    }
    visit_physical(slot.physical, [&](auto tag) {
        using T = decltype(tag);
        const T *values = source.data<T>();
        for (std::size_t j = 0; j < rows.size(); ++j) {
            T value = values[rows[j]];
            if constexpr (std::is_same_v<T, StringRef>) {
                if (nulls != nullptr && nulls[rows[j]] != 0) {
                    value = StringRef{};
                } else {
                    value = strings.add(value.view());
                }
            }
            std::memcpy(targets[j] + slot.offset, &value, sizeof(T));
        }
    });
}

/// A vector of `count` values gathered from a slot of rows; a null row pointer or a set NULL
/// byte (when `null_byte` is given) yields NULL. Strings stay in the rows' arenas: the caller
/// keeps those alive (Vector::keep_alive).
inline Vector gather_rows(Type type, const Row *const *rows, std::uint32_t count, Slot slot,
                          std::optional<std::uint32_t> null_byte) {
    Vector out(type, count);
    std::uint8_t *nulls = nullptr;
    visit_physical(slot.physical, [&](auto tag) {
        using T = decltype(tag);
        T *values = out.mutable_data<T>();
        for (std::uint32_t j = 0; j < count; ++j) {
            const Row *row = rows[j];
            if (row == nullptr || (null_byte && row[*null_byte] != std::byte{0})) {
                if (nulls == nullptr) {
                    nulls = out.mutable_nulls();
                }
                nulls[j] = 1;
                values[j] = T{};
            } else {
                values[j] = load_slot<T>(row, slot.offset);
            }
        }
    });
    return out;
}

/// A vector of the values of `source` at `rows` (NULL flags included).
inline Vector gather_vector(const Vector &source, const std::uint32_t *rows, std::uint32_t count) {
    Vector out(source.type(), count);
    visit_physical(source.type().physical(), [&](auto tag) {
        using T = decltype(tag);
        const T *values = source.data<T>();
        T *target = out.mutable_data<T>();
        for (std::uint32_t j = 0; j < count; ++j) {
            target[j] = values[rows[j]];
        }
    });
    if (const std::uint8_t *nulls = source.nulls(); nulls != nullptr) {
        std::uint8_t *target = out.mutable_nulls();
        for (std::uint32_t j = 0; j < count; ++j) {
            target[j] = nulls[rows[j]];
        }
    }
    return out;
}

/// An owning vector of `count` NULLs.
inline Vector null_vector(Type type, std::uint32_t count) {
    Vector out(type, count);
    visit_physical(type.physical(), [&](auto tag) {
        using T = decltype(tag);
        T *values = out.mutable_data<T>();
        std::fill(values, values + count, T{});
    });
    if (count > 0) {
        std::memset(out.mutable_nulls(), 1, count);
    }
    return out;
}

} // namespace mx::db::detail::join
