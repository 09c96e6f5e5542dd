#pragma once

// The latches the worker wraps around tasks of a synchronized resource. Applications never call
// these for resources; they are public so baselines and tests can use the same code.

#include <atomic>
#include <cstdint>

#include "mx/system/cpu.h"

#if defined(__SANITIZE_THREAD__)
#define MX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MX_TSAN 1
#endif
#endif

#if defined(MX_TSAN)
// ThreadSanitizer's dynamic annotations: reads between begin and end are not reported. Optimistic
// readers race with writers by design (seqlock style) and validate afterwards.
extern "C" void AnnotateIgnoreReadsBegin(const char *file, int line); // NOLINT: TSan names it
extern "C" void AnnotateIgnoreReadsEnd(const char *file, int line);   // NOLINT: TSan names it
#endif

namespace mx::sync {

namespace detail {
inline void ignore_reads_begin() noexcept {
#if defined(MX_TSAN)
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
#endif
}
inline void ignore_reads_end() noexcept {
#if defined(MX_TSAN)
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
}
} // namespace detail

/// How a resource's tasks are synchronized (dissertation 4.2).
enum class Primitive : std::uint8_t {
    none = 0,
    spinlock = 1,             ///< every task exclusive
    rw_latch = 2,             ///< readers shared, writers exclusive
    optimistic_latched = 3,   ///< readers validate a version; writers take a latch (OLFIT)
    optimistic_scheduled = 4, ///< readers validate a version; writers run on the owning worker
    htm = 5,                  ///< hardware transaction (RTM) with a spinlock fallback
    scheduling = 6,           ///< every task runs on the owning worker, one after another
};
inline constexpr std::uint8_t primitive_count = 7;

const char *to_string(Primitive primitive) noexcept;

/// Test-and-test-and-set spinlock: spins on a plain load so waiters do not bounce the line.
class Spinlock {
public:
    void lock() noexcept {
        while (_locked.exchange(1, std::memory_order_acquire) != 0) {
            while (_locked.load(std::memory_order_relaxed) != 0) {
                system::pause();
            }
        }
    }
    bool try_lock() noexcept {
        return _locked.load(std::memory_order_relaxed) == 0 &&
               _locked.exchange(1, std::memory_order_acquire) == 0;
    }
    void unlock() noexcept { _locked.store(0, std::memory_order_release); }
    [[nodiscard]] bool is_locked() const noexcept { return _locked.load(std::memory_order_relaxed) != 0; }

private:
    std::atomic<std::uint32_t> _locked{0}; // any thread
};

/// Reader/writer latch in one word: bit 31 = writer, low bits = readers. Writers announce
/// themselves first so a stream of readers cannot starve them.
class RwLatch {
public:
    void lock_shared() noexcept {
        while (true) {
            std::uint32_t state = _state.load(std::memory_order_relaxed);
            if ((state & writer_bits) == 0 &&
                _state.compare_exchange_weak(state, state + 1, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
                return;
            }
            system::pause();
        }
    }
    void unlock_shared() noexcept { _state.fetch_sub(1, std::memory_order_release); }

    void lock() noexcept {
        // Claim the writer-waiting bit, then wait for readers to drain.
        while (true) {
            std::uint32_t state = _state.load(std::memory_order_relaxed);
            if ((state & writer_bits) == 0 &&
                _state.compare_exchange_weak(state, state | writer_waiting, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
                break;
            }
            system::pause();
        }
        while (true) {
            std::uint32_t expected = writer_waiting;
            if (_state.compare_exchange_weak(expected, writer_active, std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
                return;
            }
            system::pause();
        }
    }
    void unlock() noexcept { _state.store(0, std::memory_order_release); }

private:
    static constexpr std::uint32_t writer_waiting = 1U << 30U;
    static constexpr std::uint32_t writer_active = 1U << 31U;
    static constexpr std::uint32_t writer_bits = writer_waiting | writer_active;
    std::atomic<std::uint32_t> _state{0}; // any thread
};

/// Version counter for optimistic reads: even = stable, odd = a writer is inside.
class OptimisticVersion {
public:
    /// Waits (bounded) until no writer is inside; returns the stable version or an odd value
    /// when it gave up.
    [[nodiscard]] std::uint64_t read_begin(std::uint32_t max_spins = 1U << 14U) const noexcept {
        std::uint64_t version = _version.load(std::memory_order_acquire);
        for (std::uint32_t i = 0; (version & 1U) != 0 && i < max_spins; ++i) {
            system::pause();
            version = _version.load(std::memory_order_acquire);
        }
        return version;
    }
    /// True when nothing was written since read_begin returned `version`.
    [[nodiscard]] bool validate(std::uint64_t version) const noexcept {
        std::atomic_thread_fence(std::memory_order_acquire);
        return _version.load(std::memory_order_relaxed) == version;
    }

    /// Writers that are serialized otherwise (scheduled on one worker): mark begin and end.
    void write_begin_exclusive() noexcept {
        _version.store(_version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
    }
    /// Writers that compete: take the version as a latch (even -> odd).
    void write_lock() noexcept {
        while (true) {
            std::uint64_t version = _version.load(std::memory_order_relaxed);
            if ((version & 1U) == 0 &&
                _version.compare_exchange_weak(version, version + 1, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
                std::atomic_thread_fence(std::memory_order_release);
                return;
            }
            system::pause();
        }
    }
    void write_end() noexcept {
        _version.store(_version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }

    [[nodiscard]] std::uint64_t load() const noexcept { return _version.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> _version{0}; // written by writers, read by optimistic readers
};

/// Whether this CPU and kernel run RTM transactions (tested once, with real transactions).
bool htm_available() noexcept;

} // namespace mx::sync
