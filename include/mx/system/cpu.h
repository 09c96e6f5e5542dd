#pragma once

// Small CPU helpers used on hot paths: time-stamp counter, spin pause and prefetch.

#include <cstddef>
#include <cstdint>
#include <type_traits>

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

/// One prefetch in a mode fixed at compile time. On x86 an asm statement: GCC 12 may delete a
/// loop whose body is nothing but __builtin_prefetch (it has no side effects, so the finite loop
/// may go), which silently switches prefetching off; an asm volatile statement always stays.
template <PrefetchMode Mode>
inline void prefetch_line(const void *address) noexcept {
#if defined(__x86_64__)
    // The address goes in as a register, not as a memory operand: prefetching an address that is
    // not (or no longer) valid is fine, but a dereference in the asm would tell the compiler it is.
    if constexpr (Mode == PrefetchMode::for_write) {
#if defined(__PRFCHW__)
        asm volatile("prefetchw (%0)" : : "r"(address));
#else
        asm volatile("prefetcht0 (%0)" : : "r"(address)); // what the compiler emits without PRFCHW
#endif
    } else if constexpr (Mode == PrefetchMode::non_temporal) {
        asm volatile("prefetchnta (%0)" : : "r"(address));
    } else {
        asm volatile("prefetcht0 (%0)" : : "r"(address));
    }
#else
    __builtin_prefetch(address, Mode == PrefetchMode::for_write ? 1 : 0,
                       Mode == PrefetchMode::non_temporal ? 0 : 3);
#endif
}

/// Calls `body(std::integral_constant<PrefetchMode, mode>{})`: turns a run-time mode into a
/// compile-time one once, so a loop of prefetches inside `body` holds no test of the mode.
template <class Body>
inline void with_prefetch_mode(PrefetchMode mode, Body &&body) noexcept {
    switch (mode) {
    case PrefetchMode::temporal:
        body(std::integral_constant<PrefetchMode, PrefetchMode::temporal>{});
        return;
    case PrefetchMode::non_temporal:
        body(std::integral_constant<PrefetchMode, PrefetchMode::non_temporal>{});
        return;
    case PrefetchMode::for_write:
        body(std::integral_constant<PrefetchMode, PrefetchMode::for_write>{});
        return;
    }
}

inline void prefetch(const void *address, PrefetchMode mode = PrefetchMode::temporal) noexcept {
    with_prefetch_mode(mode, [address](auto fixed) noexcept { prefetch_line<fixed.value>(address); });
}

} // namespace mx::system
