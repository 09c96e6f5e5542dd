#include "mx/memory/task_allocator.h"

#include <numa.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace mx::memory {

namespace {
bool numa_usable() noexcept {
    static const bool usable = numa_available() >= 0;
    return usable;
}
} // namespace

RegionHeap::RegionHeap(std::uint8_t memory_node, std::size_t chunk_bytes)
    : _memory_node(memory_node), _chunk_bytes(chunk_bytes) {}

RegionHeap::~RegionHeap() {
    for (const Chunk &chunk : _chunks) {
#if defined(MX_ASAN)
        ASAN_UNPOISON_MEMORY_REGION(chunk.memory, chunk.bytes);
#endif
        if (numa_usable()) {
            numa_free(chunk.memory, chunk.bytes);
        } else {
            munmap(chunk.memory, chunk.bytes);
        }
    }
}

bool RegionHeap::new_chunk(std::size_t at_least) noexcept {
    const std::size_t bytes = std::max(_chunk_bytes, at_least);
    void *memory = nullptr;
    if (numa_usable() && _memory_node <= numa_max_node()) {
        memory = numa_alloc_onnode(bytes, _memory_node);
    } else {
        memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED) {
            memory = nullptr;
        }
    }
    if (memory == nullptr) {
        return false;
    }
    _chunks.push_back(Chunk{memory, bytes});
    _bump = static_cast<std::byte *>(memory);
    _bump_end = _bump + bytes;
    return true;
}

std::uint32_t RegionHeap::take(std::uint8_t size_class, void **out, std::uint32_t count) noexcept {
    const std::size_t block_size = task_size_classes[size_class];
    std::lock_guard lock{_mutex};
    // Given-back blocks first: they are NUMA-local already and keep the heap from growing.
    auto &returned = _returned[size_class];
    const auto reused = static_cast<std::uint32_t>(std::min<std::size_t>(count, returned.size()));
    std::copy(returned.end() - reused, returned.end(), out);
    returned.resize(returned.size() - reused);
    std::uint32_t taken = reused;
    if (taken < count) {
        const std::size_t needed = block_size * (count - taken);
        if (static_cast<std::size_t>(_bump_end - _bump) < needed && !new_chunk(needed)) {
            return taken;
        }
        for (; taken < count; ++taken) {
            out[taken] = _bump;
            _bump += block_size;
        }
    }
    return taken;
}

void RegionHeap::give_back(std::uint8_t size_class, void *const *blocks, std::uint32_t count) noexcept {
    std::lock_guard lock{_mutex};
    auto &returned = _returned[size_class];
    try {
        returned.insert(returned.end(), blocks, blocks + count);
    } catch (const std::bad_alloc &) {
        // The list grows only to the number of blocks ever carved: the process is out of memory.
        std::fputs("mxtasking: out of memory while returning task descriptors to the region heap\n", stderr);
        std::abort();
    }
}

std::size_t RegionHeap::reserved_bytes() const noexcept {
    std::lock_guard lock{_mutex};
    std::size_t bytes = 0;
    for (const Chunk &chunk : _chunks) {
        bytes += chunk.bytes;
    }
    return bytes;
}

TaskAllocator::TaskAllocator(RegionHeap &heap, std::uint32_t batch) noexcept
    : _heap(&heap), _batch(batch),
      _slots(new(std::nothrow) void *[std::size_t{2} * size_class_count * batch]) {
    if (_slots == nullptr) {
        std::fputs("mxtasking: out of memory for a task allocator's magazines\n", stderr);
        std::abort();
    }
    for (std::uint8_t c = 0; c < size_class_count; ++c) {
        _loaded[c] = _slots.get() + std::size_t{2} * c * batch;
        _spare[c] = _loaded[c] + batch;
    }
}

void TaskAllocator::swap_magazines(std::uint8_t size_class) noexcept {
    std::swap(_loaded[size_class], _spare[size_class]);
    const std::uint32_t loaded = _loaded_counts[size_class].load(std::memory_order_relaxed);
    _loaded_counts[size_class].store(_spare_counts[size_class].load(std::memory_order_relaxed),
                                     std::memory_order_relaxed);
    _spare_counts[size_class].store(loaded, std::memory_order_relaxed);
}

std::uint32_t TaskAllocator::reload(std::uint8_t size_class) noexcept {
    if (_spare_counts[size_class].load(std::memory_order_relaxed) != 0) {
        swap_magazines(size_class);
        return _loaded_counts[size_class].load(std::memory_order_relaxed);
    }
    const std::uint32_t count = _heap->take(size_class, _loaded[size_class], _batch);
    _loaded_counts[size_class].store(count, std::memory_order_relaxed);
    util::bump(_refills);
    util::bump(_obtained, count);
    return count;
}

void TaskAllocator::return_spare(std::uint8_t size_class) noexcept {
    const std::uint32_t count = _spare_counts[size_class].load(std::memory_order_relaxed);
    if (count == 0) {
        return;
    }
    _heap->give_back(size_class, _spare[size_class], count);
    util::bump(_given_back, count);
    _spare_counts[size_class].store(0, std::memory_order_relaxed);
}

void TaskAllocator::unload(std::uint8_t size_class) noexcept {
    return_spare(size_class); // both full: the spare goes to the heap
    swap_magazines(size_class);
}

std::int64_t TaskAllocator::held() const noexcept {
    std::int64_t cached = 0;
    for (std::uint8_t c = 0; c < size_class_count; ++c) {
        cached += _loaded_counts[c].load(std::memory_order_relaxed) +
                  _spare_counts[c].load(std::memory_order_relaxed);
    }
    return static_cast<std::int64_t>(_obtained.load(std::memory_order_relaxed)) -
           static_cast<std::int64_t>(_given_back.load(std::memory_order_relaxed)) - cached;
}

void TaskAllocator::flush() noexcept {
    for (std::uint8_t c = 0; c < size_class_count; ++c) {
        return_spare(c);
        swap_magazines(c);
        return_spare(c);
    }
}

} // namespace mx::memory
