#pragma once

// Annotation-based prefetching (dissertation ch. 3): what to prefetch for a task, and when.

#include <bit>
#include <cstddef>
#include <cstdint>

#include "mx/system/cpu.h"
#include "mx/tasking/resource.h"
#include "mx/tasking/task.h"

namespace mx::tasking::detail {

/// Cache lines the task's prefetch hint names (a callback counts as one line).
inline std::uint32_t prefetch_lines(const Task &task) noexcept {
    const PrefetchHint hint = task.prefetch_hint();
    switch (hint.kind()) {
    case PrefetchHint::Kind::none:
        return task.resource() ? 1U : 0U;
    case PrefetchHint::Kind::size:
        return static_cast<std::uint32_t>((hint.payload() + system::cache_line_size - 1) /
                                          system::cache_line_size);
    case PrefetchHint::Kind::mask:
        return static_cast<std::uint32_t>(std::popcount(hint.payload()));
    case PrefetchHint::Kind::callback:
        return 1U;
    }
    return 0U;
}

/// Calls `f` with the address of every cache line that `mask` names, counted from `base`, in
/// ascending order.
template <class F>
[[gnu::always_inline]] inline void for_each_masked_line(const std::byte *base, std::uint64_t mask,
                                                        F &&f) noexcept {
    if ((mask & (mask + 1)) == 0) {
        // The first lines of the object (a node's header and key lines): a run needs no bit scan
        // per line.
        const std::byte *end =
            base + static_cast<std::size_t>(std::countr_one(mask)) * system::cache_line_size;
        for (const std::byte *line = base; line != end; line += system::cache_line_size) {
            f(line);
        }
        return;
    }
    for (; mask != 0; mask &= mask - 1) {
        f(base + static_cast<std::size_t>(std::countr_zero(mask)) * system::cache_line_size);
    }
}

/// Issues the prefetches a task's annotations ask for: the hint's lines, or the callback, and
/// the header line of a synchronized resource (its latch or version is touched first).
inline void prefetch_task_data(const Task &task) noexcept {
    const ResourcePtr resource = task.resource();
    if (resource && primitive_of(resource) != sync::Primitive::none) {
        const bool latched_write = task.access() == AccessMode::write;
        system::prefetch(&header_of(resource),
                         latched_write ? system::PrefetchMode::for_write : system::PrefetchMode::temporal);
    }
    const PrefetchHint hint = task.prefetch_hint();
    const auto *base = static_cast<const std::byte *>(hint.address());
    switch (hint.kind()) {
    case PrefetchHint::Kind::none:
        if (resource) {
            system::prefetch(resource.get());
        }
        return;
    case PrefetchHint::Kind::size: {
        const std::uint64_t lines = (hint.payload() + system::cache_line_size - 1) / system::cache_line_size;
        // The mode is fixed once per hint, so the loops hold only the address and the prefetch
        // (a tree node step names five to sixteen lines, once per dispatched task).
        system::with_prefetch_mode(hint.mode(), [base, lines](auto mode) noexcept {
            for (std::uint64_t line = 0; line < lines; ++line) {
                system::prefetch_line<mode.value>(base + line * system::cache_line_size);
            }
        });
        return;
    }
    case PrefetchHint::Kind::mask:
        system::with_prefetch_mode(hint.mode(), [base, mask = hint.payload()](auto mode) noexcept {
            for_each_masked_line(base, mask, [](const std::byte *line) noexcept {
                system::prefetch_line<decltype(mode)::value>(line);
            });
        });
        return;
    case PrefetchHint::Kind::callback:
        hint.function()(task);
        return;
    }
}

/// Dynamic prefetch distance: for each task i of a buffer, the position before whose execution
/// its data should be prefetched, so that the expected run time of the tasks in between covers
/// the prefetch cost. slots[i] is the largest s <= i with sum(expected[s..i-1]) >= cost[i]
/// (0 when even the whole prefix is too short); slots never decrease, so the worker prefetches
/// in buffer order with one cursor.
inline void compute_prefetch_slots(const std::uint32_t *expected_cycles, const std::uint32_t *prefetch_cycles,
                                   std::uint32_t count, std::uint32_t *slots) noexcept {
    std::uint32_t previous = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint64_t covered = 0;
        std::uint32_t slot = i;
        while (slot > 0 && covered < prefetch_cycles[i]) {
            --slot;
            covered += expected_cycles[slot];
        }
        slot = slot < previous ? previous : slot;
        slots[i] = slot;
        previous = slot;
    }
}

} // namespace mx::tasking::detail
