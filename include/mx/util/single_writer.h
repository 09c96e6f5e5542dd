#pragma once

// Counters that one thread writes and others only read (statistics, per-worker spawn and
// completion counts): updated with a plain load and store instead of a locked read-modify-write.

#include <atomic>
#include <cstdint>

namespace mx::util {

inline void bump(std::atomic<std::uint64_t> &counter, std::uint64_t amount = 1,
                 std::memory_order order = std::memory_order_relaxed) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + amount, order);
}

} // namespace mx::util
