#pragma once

// Small CPU helpers used on hot paths: time-stamp counter, spin pause and prefetch.

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#include <x86intrin.h>
#endif

namespace mx::system {

/// Cache line size assumed for layout decisions (alignas, padding). The runtime checks at start
/// that the machine's real line size (Topology::cache_line_size) is not larger.
inline constexpr std::size_t cache_line_size = 64;

/// Reads the time-stamp counter. This machine has no hardware performance counters, so cycle
/// figures in benchmarks come from here.
inline std::uint64_t cycles() noexcept {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0;
#endif
}

inline void pause() noexcept {
#if defined(__x86_64__)
    _mm_pause();
#endif
}

enum class PrefetchMode : std::uint8_t { temporal, non_temporal, for_write };

inline void prefetch(const void *address, PrefetchMode mode = PrefetchMode::temporal) noexcept {
    switch (mode) {
    case PrefetchMode::temporal:
        __builtin_prefetch(address, 0, 3);
        break;
    case PrefetchMode::non_temporal:
        __builtin_prefetch(address, 0, 0);
        break;
    case PrefetchMode::for_write:
        __builtin_prefetch(address, 1, 3);
        break;
    }
}

} // namespace mx::system
