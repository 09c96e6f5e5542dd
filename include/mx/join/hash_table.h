#pragma once

// The per-partition hash table of the radix join: bucket chaining through an index array, as in
// Balkesen et al. Partitions are sized so that a table fits the L2 cache, so chains stay in cache
// and no pointer leaves the partition. The table does not own memory: the classic join reuses
// per-thread scratch arrays, the task-based join carves tables out of one arena.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mx/join/relation.h"
#include "mx/system/cpu.h"
#include "mx/util/assert.h"

namespace mx::join {

class PartitionHashTable {
public:
    /// Buckets for `capacity` tuples: a power of two with a load factor of at most one.
    static std::size_t bucket_count_for(std::size_t capacity) noexcept {
        return std::bit_ceil(capacity == 0 ? std::size_t{1} : capacity);
    }

    PartitionHashTable() noexcept = default;
    /// `heads` has bucket_count_for(capacity) entries, `next` and `tuples` have `capacity`.
    /// Keys are hashed by their bits above `radix_bits` (the lower bits chose the partition).
    PartitionHashTable(std::uint32_t *heads, std::uint32_t *next, Tuple *tuples, std::size_t capacity,
                       unsigned radix_bits) noexcept
        : _heads(heads), _next(next), _tuples(tuples), _capacity(capacity),
          _mask(bucket_count_for(capacity) - 1), _shift(radix_bits) {
        std::memset(_heads, 0, (_mask + 1) * sizeof(std::uint32_t));
    }

    /// Copies a tuple into the table's own tuple array and links it into its bucket.
    void insert(const Tuple &tuple) noexcept {
        MX_ASSERT(_size < _capacity, "more build tuples than the partition was sized for");
        _tuples[_size] = tuple;
        link(_size);
        ++_size;
    }

    /// Links tuples [0, count) that are already in place in the tuple array (the classic join
    /// builds directly on its partition, no copy).
    void link_all(std::size_t count) noexcept {
        MX_ASSERT(count <= _capacity, "more build tuples than the partition was sized for");
        for (std::size_t i = 0; i < count; ++i) {
            link(i);
        }
        _size = count;
    }

    /// Calls on_match(build_tuple) for every build tuple with the key.
    template <class F>
    void probe(std::uint64_t key, F &&on_match) const noexcept {
        for (std::uint32_t entry = _heads[bucket(key)]; entry != 0; entry = _next[entry - 1]) {
            const Tuple &candidate = _tuples[entry - 1];
            if (candidate.key == key) {
                on_match(candidate);
            }
        }
    }

    /// Prefetches the whole table (buckets, chains, tuples): a table is sized to fit the L2
    /// cache, so a worker about to probe it many times loads it at full memory parallelism
    /// instead of one dependent miss per probe.
    void prefetch() const noexcept {
        const auto lines = [](const void *address, std::size_t bytes) noexcept {
            const auto *base = static_cast<const std::byte *>(address);
            for (std::size_t offset = 0; offset < bytes; offset += system::cache_line_size) {
                system::prefetch(base + offset);
            }
        };
        lines(_heads, (_mask + 1) * sizeof(std::uint32_t));
        lines(_next, _size * sizeof(std::uint32_t));
        lines(_tuples, _size * sizeof(Tuple));
    }

    [[nodiscard]] std::size_t size() const noexcept { return _size; }

private:
    [[nodiscard]] std::size_t bucket(std::uint64_t key) const noexcept {
        return static_cast<std::size_t>(key >> _shift) & _mask;
    }
    void link(std::size_t index) noexcept {
        const std::size_t b = bucket(_tuples[index].key);
        _next[index] = _heads[b];
        _heads[b] = static_cast<std::uint32_t>(index + 1); // 0 ends a chain
    }

    std::uint32_t *_heads{nullptr};
    std::uint32_t *_next{nullptr};
    Tuple *_tuples{nullptr};
    std::size_t _capacity{0};
    std::size_t _size{0};
    std::size_t _mask{0};
    unsigned _shift{0};
};

} // namespace mx::join
