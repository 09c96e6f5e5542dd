#include "large_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "mx/system/aligned_mapping.h"
#include "mx/util/asan.h"

namespace mx::db::detail {

namespace {

constexpr std::size_t huge = LargeBuffer::huge_page_bytes;

/// A fresh 2 MiB-aligned mapping of `bytes` (a multiple of 2 MiB) asking for huge pages, zeroed
/// by the kernel; nullptr when out of memory.
std::byte *map_aligned(std::size_t bytes) noexcept {
    std::byte *memory = system::map_huge_aligned(bytes);
#if defined(MADV_HUGEPAGE)
    if (memory != nullptr) {
        static_cast<void>(::madvise(memory, bytes, MADV_HUGEPAGE));
    }
#endif
    return memory;
}

/// Freed mappings kept for reuse, by size. Taking and giving back happen a few hundred times per
/// query run (each a whole table or 2 MiB of rows), so one mutex is no bottleneck.
class Recycler {
public:
    static Recycler &instance() noexcept {
        // Never destroyed: buffers may be freed by static destructors after it would be.
        static Recycler *recycler = new Recycler;
        return *recycler;
    }

    /// A kept mapping of at least `bytes` and at most a quarter more, nullptr if none; `mapped`
    /// receives its size.
    std::byte *take(std::size_t bytes, std::size_t &mapped) noexcept {
        const std::lock_guard lock{_mutex};
        const auto found = _kept.lower_bound(bytes);
        if (found == _kept.end() || found->first > bytes + bytes / 4) {
            return nullptr;
        }
        mapped = found->first;
        std::byte *memory = found->second;
        _kept.erase(found);
        _bytes -= mapped;
#if defined(MX_ASAN)
        ASAN_UNPOISON_MEMORY_REGION(memory, mapped);
#endif
        return memory;
    }

    /// Keeps the mapping, or unmaps it when the recycler is full (or has no memory for its entry).
    void give_back(std::byte *memory, std::size_t mapped) noexcept {
        if (!keep(memory, mapped)) {
            ::munmap(memory, mapped);
        }
    }

    std::size_t bytes() noexcept {
        const std::lock_guard lock{_mutex};
        return _bytes;
    }

    void release() noexcept {
        std::multimap<std::size_t, std::byte *> kept;
        {
            const std::lock_guard lock{_mutex};
            kept.swap(_kept);
            _bytes = 0;
        }
        for (const auto &[mapped, memory] : kept) {
#if defined(MX_ASAN)
            ASAN_UNPOISON_MEMORY_REGION(memory, mapped);
#endif
            ::munmap(memory, mapped);
        }
    }

    bool keep(std::byte *memory, std::size_t mapped) noexcept {
        const std::lock_guard lock{_mutex};
        if (_bytes + mapped > limit()) {
            return false;
        }
        try {
            _kept.emplace(mapped, memory);
        } catch (const std::bad_alloc &) {
            return false;
        }
        _bytes += mapped;
#if defined(MX_ASAN)
        ASAN_POISON_MEMORY_REGION(memory, mapped);
#endif
        return true;
    }

    static std::size_t limit() noexcept {
        static const std::size_t value = [] {
            const long pages = ::sysconf(_SC_PHYS_PAGES);
            const long page = ::sysconf(_SC_PAGESIZE);
            const std::size_t physical =
                pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                      : std::size_t{1} << 30U;
            return std::min(physical / 16, std::size_t{2} << 30U);
        }();
        return value;
    }

private:
    std::mutex _mutex;
    std::multimap<std::size_t, std::byte *> _kept; // guarded by _mutex
    std::size_t _bytes{0};                         // guarded by _mutex: sum of _kept's sizes
};

} // namespace

LargeBuffer::LargeBuffer(std::size_t bytes) {
    if (!allocate(bytes)) {
        throw std::bad_alloc{};
    }
}

LargeBuffer LargeBuffer::try_zeroed(std::size_t bytes) noexcept {
    LargeBuffer buffer;
    static_cast<void>(buffer.allocate(bytes)); // empty when it failed
    return buffer;
}

bool LargeBuffer::allocate(std::size_t bytes) noexcept {
    _bytes = bytes;
    if (bytes == 0) {
        return true;
    }
    const std::size_t rounded = (bytes + huge - 1) / huge * huge;
    if (rounded - bytes > huge / 8) {
        // Small (or far from a page multiple): the allocator's own memory, zeroed here.
        _data = static_cast<std::byte *>(::operator new(bytes, std::nothrow));
        if (_data == nullptr) {
            _bytes = 0;
            return false;
        }
        std::memset(_data, 0, bytes);
        return true;
    }
    std::size_t mapped = 0;
    if (std::byte *reused = Recycler::instance().take(rounded, mapped); reused != nullptr) {
        std::memset(reused, 0, bytes);
        _data = reused;
        _mapped = mapped;
        return true;
    }
    _data = map_aligned(rounded); // zero already
    if (_data == nullptr) {
        _bytes = 0;
        return false;
    }
    _mapped = rounded;
    return true;
}

void LargeBuffer::release() noexcept {
    if (_data == nullptr) {
        return;
    }
    if (_mapped != 0) {
        Recycler::instance().give_back(_data, _mapped);
    } else {
        ::operator delete(_data);
    }
    _data = nullptr;
    _bytes = 0;
    _mapped = 0;
}

std::size_t recycled_buffer_bytes() noexcept { return Recycler::instance().bytes(); }

std::size_t recycled_buffer_limit() noexcept { return Recycler::limit(); }

void release_recycled_buffers() noexcept { Recycler::instance().release(); }

} // namespace mx::db::detail
