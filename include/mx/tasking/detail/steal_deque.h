#pragma once

// The work-stealing deque of a worker's local tasks (Chase and Lev, SPAA 2005, with the C11
// memory orders of Lê et al., PPoPP 2013). The owner pushes at the bottom and takes tasks in
// batches from either end; thieves take batches of up to max_steal tasks from the top, each
// with one CAS: the owner takes from the bottom without a CAS only while the range it takes
// lies at least max_steal tasks above top.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mx/system/cpu.h"
#include "mx/tasking/task.h"

namespace mx::tasking::detail {

class StealDeque {
public:
    StealDeque() {
        _rings.push_back(std::make_unique<Ring>(initial_capacity));
        _array.store(_rings.back().get(), std::memory_order_relaxed);
    }
    StealDeque(const StealDeque &) = delete;
    StealDeque &operator=(const StealDeque &) = delete;
    ~StealDeque() = default;

    /// Owner only. Grows the ring when full (the old ring stays readable for thieves that
    /// loaded it, and is freed with the deque).
    [[gnu::always_inline]] void push(Task &task) noexcept {
        const std::int64_t bottom = _bottom.load(std::memory_order_relaxed);
        Ring *ring = _array.load(std::memory_order_relaxed);
        // Top only grows: the owner's last look at it bounds the size from above, so the
        // shared line is read only when the ring seems full, not on every push.
        if (bottom - _known_top >= static_cast<std::int64_t>(ring->capacity)) [[unlikely]] {
            _known_top = _top.load(std::memory_order_acquire);
            if (bottom - _known_top >= static_cast<std::int64_t>(ring->capacity)) {
                ring = grow(ring, _known_top, bottom);
            }
        }
        ring->put(bottom, &task);
        // Release: a thief that sees the new bottom also sees the slot.
        _bottom.store(bottom + 1, std::memory_order_release);
    }

    /// Thieves take at most this many tasks with one compare-and-swap.
    static constexpr std::int64_t max_steal = 32;

    /// Owner only: takes up to `capacity` of the newest tasks, newest first (depth-first order).
    /// Near the top, where a thief may be about to take a batch, it takes the oldest instead.
    std::uint32_t take_newest(Task **out, std::uint32_t capacity) noexcept {
        const std::int64_t bottom = _bottom.load(std::memory_order_relaxed);
        // Top only grows: a stale top can only make the deque look fuller than it is.
        const std::int64_t seen_top = _top.load(std::memory_order_relaxed);
        if (bottom <= seen_top) {
            return 0;
        }
        const std::int64_t wanted = std::min<std::int64_t>(capacity, bottom - seen_top);
        const std::int64_t new_bottom = bottom - wanted;
        _bottom.store(new_bottom, std::memory_order_relaxed);
        // The fence orders the bottom store before the top load, against the thieves' top
        // load / fence / bottom load: a thief that loads top after we loaded it sees the lowered
        // bottom. So only a thief that loaded the very top we see can still act on the old
        // bottom, and its one CAS takes at most [top, top + max_steal).
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const std::int64_t top = _top.load(std::memory_order_relaxed);
        if (top + max_steal <= new_bottom) {
            Ring *ring = _array.load(std::memory_order_relaxed);
            std::uint32_t count = 0;
            for (std::int64_t i = bottom - 1; i >= new_bottom; --i) {
                out[count++] = ring->get(i);
            }
            return count;
        }
        // Thieves may reach into the range: put bottom back (release: the slots were published
        // by earlier pushes, and a relaxed store would not carry that on) and claim the oldest
        // tasks with a CAS on top, which a thief's pending CAS then fails against.
        _bottom.store(bottom, std::memory_order_release);
        return take_oldest(out, capacity);
    }

    /// Owner only: takes up to `capacity` of the oldest tasks, oldest first (FIFO order), with
    /// one compare-and-swap on top: thieves move top with CASes too, and nobody else lowers
    /// bottom.
    std::uint32_t take_oldest(Task **out, std::uint32_t capacity) noexcept {
        const std::int64_t bottom = _bottom.load(std::memory_order_relaxed);
        std::int64_t top = _top.load(std::memory_order_acquire);
        Ring *ring = _array.load(std::memory_order_relaxed);
        while (top < bottom) {
            const std::int64_t count = std::min<std::int64_t>(capacity, bottom - top);
            for (std::int64_t i = 0; i < count; ++i) {
                out[i] = ring->get(top + i);
            }
            if (_top.compare_exchange_weak(top, top + count, std::memory_order_seq_cst,
                                           std::memory_order_acquire)) {
                return static_cast<std::uint32_t>(count);
            }
        }
        return 0;
    }

    /// Any thread: takes the oldest tasks, half of what is queued but at most `capacity` (and
    /// max_steal), with one CAS. Returns how many were written to `out`: 0 when the deque is
    /// empty or another thread won the race.
    std::uint32_t steal(Task **out, std::uint32_t capacity) noexcept {
        std::int64_t top = _top.load(std::memory_order_acquire);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const std::int64_t bottom = _bottom.load(std::memory_order_acquire);
        if (top >= bottom || capacity == 0) {
            return 0;
        }
        const std::int64_t count =
            std::min<std::int64_t>({std::max<std::int64_t>(1, (bottom - top) / 2), capacity, max_steal});
        // A ring replaced by grow() keeps every slot in [top, bottom) it had; the owner does not
        // overwrite a slot of [top, bottom) before top moved past it.
        Ring *ring = _array.load(std::memory_order_acquire);
        for (std::int64_t i = 0; i < count; ++i) {
            out[i] = ring->get(top + i);
        }
        if (!_top.compare_exchange_strong(top, top + count, std::memory_order_seq_cst,
                                          std::memory_order_relaxed)) {
            return 0;
        }
        return static_cast<std::uint32_t>(count);
    }

    /// Any thread: a snapshot of how many tasks are queued (exact for the owner).
    [[nodiscard]] std::int64_t size() const noexcept {
        const std::int64_t bottom = _bottom.load(std::memory_order_acquire);
        const std::int64_t top = _top.load(std::memory_order_acquire);
        return std::max<std::int64_t>(0, bottom - top);
    }
    [[nodiscard]] bool empty() const noexcept { return size() == 0; }

private:
    static constexpr std::size_t initial_capacity = 256;

    struct Ring {
        explicit Ring(std::size_t slots_count)
            : capacity(slots_count), mask(slots_count - 1), slots(new std::atomic<Task *>[slots_count]) {}
        // Relaxed: the slot is published by the release store of bottom (push) or of the ring
        // pointer (grow).
        [[nodiscard]] Task *get(std::int64_t index) const noexcept {
            return slots[static_cast<std::size_t>(index) & mask].load(std::memory_order_relaxed);
        }
        void put(std::int64_t index, Task *task) noexcept {
            slots[static_cast<std::size_t>(index) & mask].store(task, std::memory_order_relaxed);
        }
        const std::size_t capacity;
        const std::size_t mask;
        std::unique_ptr<std::atomic<Task *>[]> slots;
    };

    Ring *grow(Ring *ring, std::int64_t top, std::int64_t bottom) {
        auto bigger = std::make_unique<Ring>(ring->capacity * 2);
        for (std::int64_t i = top; i < bottom; ++i) {
            bigger->put(i, ring->get(i));
        }
        Ring *raw = bigger.get();
        _rings.push_back(std::move(bigger));
        _array.store(raw, std::memory_order_release);
        return raw;
    }

    // Written by thieves (CAS) and by the owner's take_* (CAS), read by everyone.
    alignas(system::cache_line_size) std::atomic<std::int64_t> _top{0};
    // Written by the owner only, read by thieves.
    alignas(system::cache_line_size) std::atomic<std::int64_t> _bottom{0};
    // The current ring: replaced by the owner (grow), read by thieves.
    std::atomic<Ring *> _array{nullptr};
    // Owner only: a value top had (a lower bound of it).
    std::int64_t _known_top{0};
    // Every ring this deque had (owner only): old ones stay alive for thieves that still read them.
    std::vector<std::unique_ptr<Ring>> _rings;
};

} // namespace mx::tasking::detail
