#pragma once

// The interleaving model (Psaropoulos, 3.1) and the measurements that feed it. A group of G
// lookups hides a stall when the other G-1 lookups have enough work to fill it:
//     G >= T_target / (T_compute + T_switch) + 1,   T_target = T_stall - T_switch,
// and the best speedup is 1 / (%compute + %switch). T_stall comes from a pointer chase over a
// buffer far larger than the last-level cache, T_switch from suspending and resuming coroutines
// on cached data; T_compute (work between two misses) belongs to the workload and is passed in.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "mx/coro/coroutine.h"
#include "mx/coro/mapped_buffer.h"

namespace mx::coro {

struct ModelParameters {
    double stall_ns{0};   ///< latency of one miss (T_stall)
    double compute_ns{0}; ///< work between two misses of one lookup (T_compute)
    double switch_ns{0};  ///< one suspend plus one resume (T_switch)
};

/// Smallest G that hides the whole stall per formula 3.2, clamped to [1, max_group].
/// max_group stands for the core's outstanding-miss limit (line fill buffers): beyond it more
/// interleaving adds switches but no overlap.
inline std::size_t model_group_size(const ModelParameters &p, std::size_t max_group = 16) noexcept {
    const double target = std::max(0.0, p.stall_ns - p.switch_ns);
    const double work = std::max(p.compute_ns + p.switch_ns, 0.1);
    const double g = std::ceil(target / work) + 1.0;
    if (!(g >= 1.0)) {
        return 1;
    }
    return std::min(max_group, static_cast<std::size_t>(std::min(g, 1e6)));
}

/// Upper bound of the speedup over sequential code (formula 3.4).
inline double model_max_speedup(const ModelParameters &p) noexcept {
    const double sequential = p.compute_ns + p.stall_ns;
    const double interleaved = p.compute_ns + p.switch_ns;
    return interleaved > 0 ? sequential / interleaved : 0.0;
}

namespace detail {
// Keeps a value alive for the optimizer without a memory barrier.
template <class T>
inline void keep(const T &value) noexcept {
    asm volatile("" : : "r"(value) : "memory");
}
} // namespace detail

/// Average latency of a dependent load, in ns: a chase through one random cycle over all cache
/// lines of `bytes` of memory (make it >> last-level cache), for about `seconds`. Allocating and
/// faulting the buffer takes longer than the chase itself.
inline double measure_memory_latency_ns(std::size_t bytes = std::size_t{256} << 20U,
                                        PageMode pages = PageMode::huge, double seconds = 0.1,
                                        std::uint64_t seed = 42) {
    constexpr std::size_t line = 64;
    MappedBuffer buffer(bytes, pages);
    const std::size_t lines = buffer.size() / line;
    if (lines < 2) {
        return 0.0;
    }
    // One random cycle through all lines (Sattolo), so the prefetchers see no pattern and every
    // load misses; the order array is temporary.
    std::vector<std::uint32_t> order(lines);
    for (std::size_t i = 0; i < lines; ++i) {
        order[i] = static_cast<std::uint32_t>(i);
    }
    std::mt19937_64 random(seed);
    for (std::size_t i = lines - 1; i > 0; --i) {
        std::uniform_int_distribution<std::size_t> pick(0, i - 1);
        std::swap(order[i], order[pick(random)]);
    }
    std::byte *base = buffer.data();
    for (std::size_t i = 0; i < lines; ++i) {
        auto **slot = reinterpret_cast<void **>(base + std::size_t{order[i]} * line);
        *slot = base + std::size_t{order[(i + 1) % lines]} * line;
    }
    order = {};

    using Clock = std::chrono::steady_clock;
    void *cursor = base;
    std::size_t steps = 0;
    constexpr std::size_t chunk = 1U << 14U;
    const auto begin = Clock::now();
    auto now = begin;
    do {
        for (std::size_t i = 0; i < chunk; ++i) {
            cursor = *static_cast<void **>(cursor);
        }
        steps += chunk;
        now = Clock::now();
    } while (std::chrono::duration<double>(now - begin).count() < seconds);
    detail::keep(cursor);
    return std::chrono::duration<double, std::nano>(now - begin).count() / static_cast<double>(steps);
}

namespace detail {
template <InterleavePolicy Policy>
Coroutine<std::size_t> switch_probe(const std::uint64_t *cell, std::size_t rounds) {
    std::size_t sum = 0;
    for (std::size_t i = 0; i < rounds; ++i) {
        sum += co_await load<Policy>(*cell);
    }
    co_return sum;
}
} // namespace detail

/// Cost of one suspend plus resume through interleave(), in ns: `group` coroutines that each load
/// a cached word `rounds` times, minus the same loads done without suspending.
inline double measure_switch_ns(std::size_t group = 8, std::size_t rounds = 100000) {
    const std::uint64_t cell = 1;
    std::size_t sink = 0;
    using Clock = std::chrono::steady_clock;
    auto timed = [&](auto policy) {
        using Policy = decltype(policy);
        const auto begin = Clock::now();
        if constexpr (Policy::suspends) {
            interleave(
                group, group, [&](std::size_t) { return detail::switch_probe<Policy>(&cell, rounds); },
                [&](std::size_t, std::size_t value) { sink += value; });
        } else {
            run_sequential(
                group, [&](std::size_t) { return detail::switch_probe<Policy>(&cell, rounds); },
                [&](std::size_t, std::size_t value) { sink += value; });
        }
        return std::chrono::duration<double, std::nano>(Clock::now() - begin).count();
    };
    // Minimum of each over a few attempts filters out preemption on a shared machine.
    double suspending = 1e300;
    double plain = 1e300;
    for (int attempt = 0; attempt < 5; ++attempt) {
        suspending = std::min(suspending, timed(Interleaved{}));
        plain = std::min(plain, timed(Sequential{}));
    }
    const double best = (suspending - plain) / static_cast<double>(group * rounds);
    detail::keep(sink);
    return std::max(best, 0.0);
}

} // namespace mx::coro

namespace mx::coro {

/// The default group size for a workload that does `compute_ns` of work between two misses:
/// measures T_stall (chase over `buffer_bytes`) and T_switch here and applies the model. Takes
/// a few tenths of a second (mostly faulting the buffer); call once at start-up.
inline std::size_t measure_default_group_size(double compute_ns, PageMode pages = PageMode::huge,
                                              std::size_t max_group = 16,
                                              std::size_t buffer_bytes = std::size_t{256} << 20U) {
    const ModelParameters parameters{.stall_ns = measure_memory_latency_ns(buffer_bytes, pages),
                                     .compute_ns = compute_ns,
                                     .switch_ns = measure_switch_ns()};
    return model_group_size(parameters, max_group);
}

} // namespace mx::coro
