#pragma once

#include <cstddef>
#include <cstdint>

namespace mx::system {

/// Average cycles (time-stamp counter) per dependent load over a random cycle through `bytes` of
/// memory: a pointer chase. Takes about `loads` x the miss latency plus set-up.
std::uint32_t measure_load_latency_cycles(std::size_t bytes = std::size_t{64} << 20U,
                                          std::uint32_t loads = 100'000);

/// measure_load_latency_cycles() once per process (thread-safe), cached.
std::uint32_t load_latency_cycles() noexcept;

} // namespace mx::system
