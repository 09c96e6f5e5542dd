#pragma once

// Futex wait and wake on a 32-bit atomic word: how idle workers sleep and threads in wait() block.
// Private to the runtime's implementation.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

namespace mx::tasking::detail {

/// Sleeps while `word` holds `expected` (or until `timeout`, or a spurious wake-up).
inline void futex_wait(std::atomic<std::uint32_t> &word, std::uint32_t expected,
                       const timespec *timeout) noexcept {
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(&word), FUTEX_WAIT_PRIVATE, expected, timeout,
            nullptr, 0);
}

/// Wakes up to `count` threads sleeping on `word`.
inline void futex_wake(std::atomic<std::uint32_t> &word, int count) noexcept {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr,
            0);
}

} // namespace mx::tasking::detail
