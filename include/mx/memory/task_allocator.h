#pragma once

// Multi-level task allocator (dissertation 2.5): worker-local LIFO magazines per size class,
// refilled in batches from the NUMA region's heap (the only lock), which takes NUMA-local memory
// from the system in large chunks. A block freed by any worker goes to that worker's magazines;
// full magazines beyond two go back to the region heap, so producer/consumer patterns do not
// hoard memory on the consuming worker.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "mx/system/cpu.h"
#include "mx/util/asan.h"
#include "mx/util/single_writer.h"

namespace mx::memory {

inline constexpr std::array<std::uint32_t, 5> task_size_classes{64, 128, 256, 512, 1024};
inline constexpr std::uint8_t size_class_count = task_size_classes.size();
/// Marks allocations larger than the biggest class; they come from aligned operator new.
inline constexpr std::uint8_t oversized_class = 0xFE;

constexpr std::uint8_t size_class_of(std::size_t bytes) noexcept {
    for (std::uint8_t c = 0; c < size_class_count; ++c) {
        if (bytes <= task_size_classes[c]) {
            return c;
        }
    }
    return oversized_class;
}

/// Per-NUMA-region heap. Thread-safe (one mutex); touched only on refills and give-backs.
class RegionHeap {
public:
    explicit RegionHeap(std::uint8_t memory_node, std::size_t chunk_bytes = std::size_t{2} << 20U);
    ~RegionHeap();
    RegionHeap(const RegionHeap &) = delete;
    RegionHeap &operator=(const RegionHeap &) = delete;

    /// Writes the addresses of up to `count` blocks of a size class to `out`: blocks some
    /// allocator gave back first, then fresh ones. Returns how many; fewer than `count` only
    /// when the system has no memory left. Reads and writes no block.
    std::uint32_t take(std::uint8_t size_class, void **out, std::uint32_t count) noexcept;
    /// Takes back `count` blocks of one size class (their addresses; the blocks are not touched).
    void give_back(std::uint8_t size_class, void *const *blocks, std::uint32_t count) noexcept;

    [[nodiscard]] std::uint8_t memory_node() const noexcept { return _memory_node; }
    [[nodiscard]] std::size_t reserved_bytes() const noexcept;

private:
    struct Chunk {
        void *memory;
        std::size_t bytes;
    };
    bool new_chunk(std::size_t at_least) noexcept;

    std::uint8_t _memory_node;
    std::size_t _chunk_bytes;
    mutable std::mutex _mutex;
    // All below guarded by _mutex.
    std::vector<Chunk> _chunks;
    std::byte *_bump{nullptr};
    std::byte *_bump_end{nullptr};
    std::array<std::vector<void *>, size_class_count> _returned{}; // addresses of given-back blocks
};

/// Worker-local allocator. Owner-private except for the statistics, which any thread may read.
///
/// Per size class it holds two magazines of at most `batch` blocks each, both LIFO stacks of
/// block addresses: the loaded one, which allocate() pops and free() pushes, and a spare. An
/// empty loaded magazine swaps with a non-empty spare, and only if both are empty takes a batch
/// from the region heap; a full one swaps with an empty spare, and only if the spare is full too
/// hands the spare to the heap. It takes a swing of more than `batch` blocks in one direction to
/// go to the heap and back, so a task that allocates a burst and frees it again stays off the
/// heap's mutex.
///
/// A magazine holds addresses, not blocks linked through their first word: allocating never
/// reads the block. A block freed by another worker (a stolen task) is in that worker's cache;
/// popping it from a linked list would cost a cache miss before the next allocation could even
/// start, where writing the new task into it only queues a store.
class TaskAllocator {
public:
    explicit TaskAllocator(RegionHeap &heap, std::uint32_t batch = 64) noexcept;
    TaskAllocator(const TaskAllocator &) = delete;
    TaskAllocator &operator=(const TaskAllocator &) = delete;

    void *allocate(std::uint8_t size_class) noexcept {
        std::uint32_t count = _loaded_counts[size_class].load(std::memory_order_relaxed);
        if (count == 0) [[unlikely]] {
            count = reload(size_class);
            if (count == 0) {
                return nullptr;
            }
        }
        void *block = _loaded[size_class][--count];
        _loaded_counts[size_class].store(count, std::memory_order_relaxed);
        unpoison(block, size_class);
        return block;
    }

    void free(void *memory, std::uint8_t size_class) noexcept {
        std::uint32_t count = _loaded_counts[size_class].load(std::memory_order_relaxed);
        if (count >= _batch) [[unlikely]] {
            unload(size_class);
            count = 0; // unload() leaves an empty loaded magazine
        }
        poison(memory, size_class);
        _loaded[size_class][count] = memory;
        _loaded_counts[size_class].store(count + 1, std::memory_order_relaxed);
    }

    /// Returns every cached block to the region heap (used when a worker retires).
    void flush() noexcept;

    [[nodiscard]] std::uint64_t refills() const noexcept { return _refills.load(std::memory_order_relaxed); }
    /// Blocks taken from the region heap minus blocks given back minus blocks in its magazines.
    /// Summed over all allocators this is the number of blocks in use: a block freed by another
    /// worker lands on that worker's list, so one allocator's figure alone may be negative.
    /// Exact while no allocator is in use (e.g. after Runtime::wait()). No per-operation cost.
    [[nodiscard]] std::int64_t held() const noexcept;

private:
    /// The loaded magazine is empty: swap in the spare, or take a batch from the heap. Returns
    /// the loaded magazine's new length (0: out of memory).
    std::uint32_t reload(std::uint8_t size_class) noexcept;
    /// The loaded magazine is full: swap it for the empty spare, or hand the full spare to the heap
    /// and keep the loaded one as the spare. Leaves an empty loaded magazine.
    void unload(std::uint8_t size_class) noexcept;
    void swap_magazines(std::uint8_t size_class) noexcept;
    /// Hands the spare magazine's blocks (if any) to the region heap.
    void return_spare(std::uint8_t size_class) noexcept;

    static void poison([[maybe_unused]] void *block, [[maybe_unused]] std::uint8_t size_class) noexcept {
#if defined(MX_ASAN)
        // A free block is off limits as a whole: its address lives in a magazine, not in it.
        ASAN_POISON_MEMORY_REGION(block, task_size_classes[size_class]);
#endif
    }
    static void unpoison([[maybe_unused]] void *block, [[maybe_unused]] std::uint8_t size_class) noexcept {
#if defined(MX_ASAN)
        ASAN_UNPOISON_MEMORY_REGION(block, task_size_classes[size_class]);
#endif
    }

    RegionHeap *_heap;
    std::uint32_t _batch; // blocks per magazine
    // Two magazines of `_batch` slots per size class, in one allocation.
    std::unique_ptr<void *[]> _slots;
    std::array<void **, size_class_count> _loaded{};
    std::array<void **, size_class_count> _spare{};
    // Magazine lengths: written by the owner, read (relaxed) by held().
    std::array<std::atomic<std::uint32_t>, size_class_count> _loaded_counts{};
    std::array<std::atomic<std::uint32_t>, size_class_count> _spare_counts{};
    // Written by the owner only; read by statistics readers.
    std::atomic<std::uint64_t> _refills{0};
    std::atomic<std::uint64_t> _obtained{0};   // blocks taken from the region heap
    std::atomic<std::uint64_t> _given_back{0}; // blocks handed back to it
};

} // namespace mx::memory
