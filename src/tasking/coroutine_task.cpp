#include "mx/tasking/coroutine_task.h"

#include <algorithm>
#include <cmath>
#include <coroutine>

#include "mx/system/memory_latency.h"

namespace mx::tasking {

namespace {

/// A coroutine that suspends `rounds` times: resuming it is one switch there and back.
coro::Coroutine<> bouncer(std::uint32_t rounds) {
    for (std::uint32_t i = 0; i < rounds; ++i) {
        co_await std::suspend_always{};
    }
}

std::uint32_t measure_switch_cycles() noexcept {
    constexpr std::uint32_t rounds = 20'000;
    coro::Coroutine<> coroutine = bouncer(rounds);
    const std::uint64_t start = system::cycles();
    while (!coroutine.done()) {
        coroutine.resume();
    }
    return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (system::cycles() - start) / rounds));
}

} // namespace

std::uint16_t coroutine_group_size(double stall_cycles, double switch_cycles,
                                   double compute_cycles) noexcept {
    const double work = std::max(compute_cycles + switch_cycles, 1.0);
    const double g = std::ceil(std::max(0.0, stall_cycles - switch_cycles) / work) + 1.0;
    return static_cast<std::uint16_t>(std::clamp(g, 1.0, 16.0));
}

std::uint16_t default_coroutine_group_size() noexcept {
    static const std::uint16_t group = [] {
        const double switch_cost = measure_switch_cycles();
        // A search step costs about as much as a switch.
        return coroutine_group_size(system::load_latency_cycles(), switch_cost, switch_cost);
    }();
    return group;
}

} // namespace mx::tasking
