#pragma once

// Blocked Bloom filter of the hash join (Putze et al.), register-blocked: every key sets 4 bits
// inside one 64-bit word of a 64-byte block, so a probe costs one load (at most one cache miss,
// against a chain walk through the hash table that costs at least one) and one mask test instead
// of four dependent bit tests. Built on the build side's key hashes, checked by the probe before
// the table lookup; probe rows it rejects never touch the table.
//
// The block is chosen by the TOP bits of the hash, and the filter has at least as many blocks as
// the build has micro partitions (which are chosen by the top bits, too): the blocks of
// different partitions are disjoint, so the tasks that build the tables partition by partition
// can set bits with plain stores, without atomics and without losing updates.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include <mx/util/assert.h>

namespace mx::db::detail::join {

class BloomFilter {
public:
    static constexpr std::size_t block_bytes = 64;
    static constexpr std::size_t words_per_block = block_bytes / sizeof(std::uint64_t);
    /// Bits per key when sizing: 16 bits with 4 probes in a 64-bit word gives about 0.5 % false
    /// positives.
    static constexpr std::uint64_t bits_per_key = 16;

    BloomFilter() = default;

    /// Sizes the filter for `keys` keys, with at least 2^min_block_bits blocks (zeroed).
    void allocate(std::uint64_t keys, unsigned min_block_bits) {
        const std::uint64_t wanted =
            std::bit_ceil(std::max<std::uint64_t>(1, keys * bits_per_key / (block_bytes * 8)));
        const unsigned bits =
            std::max<unsigned>(static_cast<unsigned>(std::countr_zero(wanted)), min_block_bits);
        MX_ASSERT(bits < 40, "Bloom filter absurdly large");
        _block_bits = bits;
        const std::size_t bytes = (std::size_t{1} << bits) * block_bytes;
        // calloc: large allocations come as fresh zero pages, so zeroing costs nothing here and
        // the pages are first touched by the (parallel) tasks that set bits.
        _memory.reset(static_cast<std::byte *>(std::calloc(bytes + block_bytes, 1)));
        if (!_memory) {
            throw std::bad_alloc();
        }
        const auto address = reinterpret_cast<std::uintptr_t>(_memory.get());
        _words = reinterpret_cast<std::uint64_t *>((address + block_bytes - 1) / block_bytes * block_bytes);
    }

    [[nodiscard]] bool empty() const noexcept { return _words == nullptr; }
    [[nodiscard]] unsigned block_bits() const noexcept { return _block_bits; }
    [[nodiscard]] std::size_t bytes() const noexcept {
        return empty() ? 0 : (std::size_t{1} << _block_bits) * block_bytes;
    }

    /// Plain stores: only the task that owns the hash's partition may call it (see above).
    void insert(std::uint64_t hash) noexcept { *word_of(hash) |= pattern(hash); }

    [[nodiscard]] bool maybe_contains(std::uint64_t hash) const noexcept {
        const std::uint64_t bits = pattern(hash);
        return (*word_of(hash) & bits) == bits;
    }

    /// Starts loading the block of `hash`: a probe that knows the hashes of the next rows
    /// overlaps their misses (a filter of 100 K keys is 256 KiB, beyond the L1 and shared with
    /// the streamed columns in the L2).
    void prefetch(std::uint64_t hash) const noexcept { __builtin_prefetch(block_of(hash)); }

private:
    struct Free {
        void operator()(std::byte *memory) const noexcept { std::free(memory); }
    };

    [[nodiscard]] std::uint64_t *block_of(std::uint64_t hash) const noexcept {
        const std::uint64_t block = _block_bits == 0 ? 0 : hash >> (64U - _block_bits);
        return _words + block * words_per_block;
    }
    /// The word inside the block: hash bits 32..34. With pattern()'s bits 8..31 they stay away
    /// from the lowest bits (the hash table's buckets) and the top ones (block and partition).
    [[nodiscard]] std::uint64_t *word_of(std::uint64_t hash) const noexcept {
        return block_of(hash) + ((hash >> 32U) & (words_per_block - 1));
    }
    /// The key's 4 bits inside its word: 6 hash bits each from bits 8..31.
    [[nodiscard]] static std::uint64_t pattern(std::uint64_t hash) noexcept {
        return (std::uint64_t{1} << ((hash >> 8U) & 63U)) | (std::uint64_t{1} << ((hash >> 14U) & 63U)) |
               (std::uint64_t{1} << ((hash >> 20U) & 63U)) | (std::uint64_t{1} << ((hash >> 26U) & 63U));
    }

    std::unique_ptr<std::byte, Free> _memory;
    std::uint64_t *_words{nullptr};
    unsigned _block_bits{0};
};

} // namespace mx::db::detail::join
