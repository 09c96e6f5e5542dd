#pragma once

// Coroutine frames come from a thread-local free list per size class instead of malloc: an
// interleaved lookup creates and destroys one frame per lookup, so the allocator is on the hot
// path. Two levels, like the task allocator (dissertation 2.5): the thread's pool serves and takes
// frames without synchronization; it refills from and gives surplus back to one process-wide
// arena, which owns all chunk memory. Because only the arena owns memory, a frame may be freed on
// another thread than the one that allocated it (a coroutine task that migrated between workers)
// and a thread may exit while its frames live on.

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define MX_CORO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MX_CORO_ASAN 1
#endif
#endif
#if defined(MX_CORO_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace mx::coro {

/// Frames are rounded up to this granularity; one free list per multiple up to the largest class.
inline constexpr std::size_t frame_granularity = 64;
inline constexpr std::size_t frame_class_count = 16;
inline constexpr std::size_t largest_pooled_frame = frame_granularity * frame_class_count;

namespace detail {

struct FreeFrame {
    FreeFrame *next;
};

constexpr std::size_t frame_class_of(std::size_t bytes) noexcept {
    return bytes == 0 ? 0 : (bytes - 1) / frame_granularity;
}
constexpr std::size_t frame_class_bytes(std::size_t frame_class) noexcept {
    return (frame_class + 1) * frame_granularity;
}

inline void poison_frame([[maybe_unused]] FreeFrame *frame, [[maybe_unused]] std::size_t bytes) noexcept {
#if defined(MX_CORO_ASAN)
    // The link word stays readable; touching the rest of a cached frame is a use-after-free.
    __asan_poison_memory_region(reinterpret_cast<std::byte *>(frame) + sizeof(FreeFrame),
                                bytes - sizeof(FreeFrame));
#endif
}
inline void unpoison_frame([[maybe_unused]] void *frame, [[maybe_unused]] std::size_t bytes) noexcept {
#if defined(MX_CORO_ASAN)
    __asan_unpoison_memory_region(frame, bytes);
#endif
}

/// A singly linked list of frames of one class, handed between pool and arena in one piece.
struct FrameList {
    FreeFrame *head{nullptr};
    FreeFrame *tail{nullptr};
    std::uint32_t count{0};
};

/// Process-wide owner of all pooled frame memory. Thread-safe; touched only on refills and
/// give-backs (one per `batch` frames). Chunks are never returned to the system: the memory is
/// bounded by the peak number of frames alive at once.
class FrameArena {
public:
    static constexpr std::size_t chunk_bytes = std::size_t{64} << 10U;

    /// Deliberately never destroyed: thread-local pools of threads that outlive static
    /// destruction (detached threads) still give frames back here.
    static FrameArena &instance() {
        static auto *arena = new FrameArena();
        return *arena;
    }

    /// A list of `count` frames of one class; throws std::bad_alloc when the system has none.
    FrameList take(std::size_t frame_class, std::uint32_t count) {
        const std::size_t bytes = frame_class_bytes(frame_class);
        std::lock_guard lock(_mutex);
        FrameList list;
        while (list.count < count && _returned[frame_class] != nullptr) {
            FreeFrame *frame = _returned[frame_class];
            _returned[frame_class] = frame->next;
            append(list, frame);
        }
        while (list.count < count) {
            if (static_cast<std::size_t>(_bump_end - _bump) < bytes) {
                new_chunk();
            }
            auto *frame = reinterpret_cast<FreeFrame *>(_bump);
            _bump += bytes;
            append(list, frame);
        }
        return list;
    }

    void give_back(std::size_t frame_class, FrameList list) noexcept {
        if (list.head == nullptr) {
            return;
        }
        std::lock_guard lock(_mutex);
        list.tail->next = _returned[frame_class];
        _returned[frame_class] = list.head;
    }

    [[nodiscard]] std::size_t chunk_count() const {
        std::lock_guard lock(_mutex);
        return _chunks.size();
    }

private:
    FrameArena() = default;

    static void append(FrameList &list, FreeFrame *frame) noexcept {
        frame->next = nullptr;
        if (list.tail == nullptr) {
            list.head = frame;
        } else {
            list.tail->next = frame;
        }
        list.tail = frame;
        ++list.count;
    }

    void new_chunk() {
        // Frames hold promise objects; align chunks (and thus frames) to a cache line.
        auto *chunk =
            static_cast<std::byte *>(::operator new(chunk_bytes, std::align_val_t{frame_granularity}));
        _chunks.push_back(chunk);
        _bump = chunk;
        _bump_end = chunk + chunk_bytes;
    }

    mutable std::mutex _mutex;
    // All below guarded by _mutex.
    std::vector<std::byte *> _chunks;
    std::byte *_bump{nullptr};
    std::byte *_bump_end{nullptr};
    std::array<FreeFrame *, frame_class_count> _returned{};
};

} // namespace detail

/// The calling thread's frame pool. Owner-private: only the owning thread calls any member,
/// statistics included (tests and the scheduler run on that thread).
class FramePool {
public:
    /// Frames fetched from (or returned to) the arena at once.
    static constexpr std::uint32_t batch = 32;

    static FramePool &local() noexcept {
        thread_local FramePool pool;
        return pool;
    }

    FramePool(const FramePool &) = delete;
    FramePool &operator=(const FramePool &) = delete;

    ~FramePool() {
        for (std::size_t c = 0; c < frame_class_count; ++c) {
            give_back(c, _counts[c]);
        }
    }

    /// Throws std::bad_alloc only when the system is out of memory (at a refill).
    void *allocate(std::size_t bytes) {
        ++_outstanding;
        if (bytes > largest_pooled_frame) [[unlikely]] {
            ++_oversized;
            return ::operator new(bytes, std::align_val_t{frame_granularity});
        }
        const std::size_t frame_class = detail::frame_class_of(bytes);
        detail::FreeFrame *frame = _lists[frame_class];
        if (frame == nullptr) [[unlikely]] {
            frame = refill(frame_class);
        }
        _lists[frame_class] = frame->next;
        --_counts[frame_class];
        detail::unpoison_frame(frame, detail::frame_class_bytes(frame_class));
        return frame;
    }

    void free(void *memory, std::size_t bytes) noexcept {
        --_outstanding;
        if (bytes > largest_pooled_frame) [[unlikely]] {
            ::operator delete(memory, std::align_val_t{frame_granularity});
            return;
        }
        const std::size_t frame_class = detail::frame_class_of(bytes);
        auto *frame = static_cast<detail::FreeFrame *>(memory);
        frame->next = _lists[frame_class];
        detail::poison_frame(frame, detail::frame_class_bytes(frame_class));
        _lists[frame_class] = frame;
        // A thread that only frees (a consumer of migrated coroutines) must not hoard frames.
        if (++_counts[frame_class] > 4 * batch) [[unlikely]] {
            give_back(frame_class, 2 * batch);
        }
    }

    /// Frames allocated minus frames freed by this thread (0 when every frame was recycled).
    [[nodiscard]] std::int64_t outstanding() const noexcept { return _outstanding; }
    /// Frames cached in this thread's free lists, all classes.
    [[nodiscard]] std::size_t cached() const noexcept {
        std::size_t total = 0;
        for (const std::uint32_t count : _counts) {
            total += count;
        }
        return total;
    }
    /// How often this thread went to the arena for frames; constant in steady state.
    [[nodiscard]] std::uint64_t refills() const noexcept { return _refills; }
    /// Frames larger than the largest class, served by operator new.
    [[nodiscard]] std::uint64_t oversized() const noexcept { return _oversized; }

private:
    FramePool() noexcept = default;

    detail::FreeFrame *refill(std::size_t frame_class) {
        ++_refills;
        detail::FrameList list = detail::FrameArena::instance().take(frame_class, batch);
        // Arena frames arrive unpoisoned; poison all but the one handed out next.
        for (detail::FreeFrame *frame = list.head->next; frame != nullptr; frame = frame->next) {
            detail::poison_frame(frame, detail::frame_class_bytes(frame_class));
        }
        _counts[frame_class] += list.count;
        return list.head;
    }

    void give_back(std::size_t frame_class, std::uint32_t count) noexcept {
        detail::FrameList list;
        while (list.count < count && _lists[frame_class] != nullptr) {
            detail::FreeFrame *frame = _lists[frame_class];
            _lists[frame_class] = frame->next;
            frame->next = nullptr;
            if (list.tail == nullptr) {
                list.head = frame;
            } else {
                list.tail->next = frame;
            }
            list.tail = frame;
            ++list.count;
        }
        _counts[frame_class] -= list.count;
        detail::FrameArena::instance().give_back(frame_class, list);
    }

    std::array<detail::FreeFrame *, frame_class_count> _lists{};
    std::array<std::uint32_t, frame_class_count> _counts{};
    std::int64_t _outstanding{0};
    std::uint64_t _refills{0};
    std::uint64_t _oversized{0};
};

} // namespace mx::coro
