#pragma once

// Anonymous memory that starts on a 2 MiB boundary, so that every 2 MiB of it can be a
// transparent huge page. The kernel hands it out zeroed; callers say with madvise() whether they
// want huge pages and free it with munmap(memory, bytes).

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace mx::system {

inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20U;

/// `bytes` (a multiple of huge_page_bytes) of fresh anonymous memory at a 2 MiB boundary, or
/// nullptr with errno set by mmap. One huge page more is mapped and the ends are trimmed.
inline std::byte *map_huge_aligned(std::size_t bytes) noexcept {
    const std::size_t mapped = bytes + huge_page_bytes;
    void *raw = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        return nullptr;
    }
    const auto begin = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (begin + huge_page_bytes - 1) & ~(std::uintptr_t{huge_page_bytes} - 1);
    if (aligned > begin) {
        ::munmap(raw, aligned - begin);
    }
    const std::uintptr_t end = begin + mapped;
    if (end > aligned + bytes) {
        ::munmap(reinterpret_cast<void *>(aligned + bytes), end - (aligned + bytes));
    }
    return reinterpret_cast<std::byte *>(aligned);
}

} // namespace mx::system
