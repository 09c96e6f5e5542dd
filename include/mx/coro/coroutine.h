#pragma once

// Interleaved execution with C++20 coroutines (Psaropoulos, ch. 3): a lookup prefetches the
// address it is about to read and suspends; a scheduler resumes a group of G such lookups
// round-robin, so their cache misses overlap. The lookup is written once, templated on an
// interleave policy: under `Sequential` the load awaitable is ready at once and issues no
// prefetch, so the same code runs as a plain sequential lookup.

#include <array>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <type_traits>
#include <utility>

#include "mx/coro/frame_pool.h"
#include "mx/system/cpu.h"
#include "mx/util/assert.h"

namespace mx::coro {

/// Interleave policies. A policy says whether a load suspends and which prefetch it issues.
struct Sequential {
    static constexpr bool suspends = false;
};
struct Interleaved {
    static constexpr bool suspends = true;
    static constexpr system::PrefetchMode prefetch_mode = system::PrefetchMode::temporal;
};
/// Non-temporal variant: for lookups whose prefetched line is read once, shortly after.
struct InterleavedNonTemporal {
    static constexpr bool suspends = true;
    static constexpr system::PrefetchMode prefetch_mode = system::PrefetchMode::non_temporal;
};

template <class P>
concept InterleavePolicy = requires {
                               { P::suspends } -> std::convertible_to<bool>;
                           };

/// `co_await load<Policy>(object)`: under a suspending policy, prefetch the object's first cache
/// line and suspend; on resumption (or at once under `Sequential`) yield a reference to it.
template <InterleavePolicy Policy, class T>
class Load {
public:
    explicit Load(const T &object) noexcept : _object(&object) {}

    [[nodiscard]] bool await_ready() const noexcept {
        if constexpr (Policy::suspends) {
            // Prefetch here rather than in await_suspend: the frame is not yet written back, so
            // the request leaves as early as possible.
            system::prefetch(_object, Policy::prefetch_mode);
            return false;
        } else {
            return true;
        }
    }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    [[nodiscard]] const T &await_resume() const noexcept { return *_object; }

private:
    const T *_object;
};

template <InterleavePolicy Policy, class T>
[[nodiscard]] Load<Policy, T> load(const T &object) noexcept {
    return Load<Policy, T>{object};
}

/// `co_await prefetch<Policy>(address)`: prefetch and suspend without reading (e.g. a node whose
/// lines the caller reads itself afterwards).
template <InterleavePolicy Policy>
class Prefetch {
public:
    explicit Prefetch(const void *address) noexcept : _address(address) {}
    [[nodiscard]] bool await_ready() const noexcept {
        if constexpr (Policy::suspends) {
            system::prefetch(_address, Policy::prefetch_mode);
            return false;
        } else {
            return true;
        }
    }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    void await_resume() const noexcept {}

private:
    const void *_address;
};

template <InterleavePolicy Policy>
[[nodiscard]] Prefetch<Policy> prefetch(const void *address) noexcept {
    return Prefetch<Policy>{address};
}

namespace detail {

/// Frames of every coroutine type here come from the thread's FramePool. The sized delete is
/// required: the pool needs the frame size to find the free list.
struct PooledFrame {
    // Inlined so that a frame costs a few instructions, not a call (GCC 12 otherwise keeps
    // the delete out of line).
    [[gnu::always_inline]] static void *operator new(std::size_t bytes) {
        return FramePool::local().allocate(bytes);
    }
    [[gnu::always_inline]] static void operator delete(void *frame, std::size_t bytes) noexcept {
        FramePool::local().free(frame, bytes);
    }
};

template <class T>
class ValuePromise : public PooledFrame {
public:
    static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_default_constructible_v<T>,
                  "coroutine results are moved out on the task path, which is noexcept");
    void return_value(T value) noexcept { _value = std::move(value); }
    [[nodiscard]] T &value() noexcept { return _value; }

private:
    T _value{};
};

class VoidPromise : public PooledFrame {
public:
    void return_void() noexcept {}
};

} // namespace detail

/// An interleavable coroutine: starts eagerly (runs to its first suspension, so creating it
/// issues the first prefetch), stays suspended at the end until the owner read the result, and
/// returns its frame to the pool when the owner is destroyed. Move-only.
template <class T = void>
class Coroutine {
public:
    using value_type = T;

    class promise_type // NOLINT(readability-identifier-naming): the language requires this name
        : public std::conditional_t<std::is_void_v<T>, detail::VoidPromise, detail::ValuePromise<T>> {
    public:
        Coroutine get_return_object() noexcept {
            return Coroutine{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        std::suspend_never initial_suspend() const noexcept { return {}; }
        std::suspend_always final_suspend() const noexcept { return {}; }
        // Task paths are noexcept: an escaping exception is a programmer error.
        [[noreturn]] void unhandled_exception() const noexcept { std::terminate(); }
    };
    using Handle = std::coroutine_handle<promise_type>;

    Coroutine() noexcept = default;
    explicit Coroutine(Handle handle) noexcept : _handle(handle) {}
    Coroutine(Coroutine &&other) noexcept : _handle(std::exchange(other._handle, {})) {}
    Coroutine &operator=(Coroutine &&other) noexcept {
        if (this != &other) {
            reset();
            _handle = std::exchange(other._handle, {});
        }
        return *this;
    }
    Coroutine(const Coroutine &) = delete;
    Coroutine &operator=(const Coroutine &) = delete;
    ~Coroutine() { reset(); }

    [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(_handle); }
    [[nodiscard]] bool done() const noexcept { return _handle.done(); }
    void resume() const noexcept {
        MX_ASSERT(!_handle.done(), "resuming a finished coroutine");
        _handle.resume();
    }
    /// The result; only valid once done().
    template <class U = T>
        requires(!std::is_void_v<U>)
    [[nodiscard]] U &result() const noexcept {
        MX_ASSERT(_handle.done(), "reading the result of an unfinished coroutine");
        return _handle.promise().value();
    }

    /// Gives up ownership; the caller destroys the handle (and thereby frees the frame).
    [[nodiscard]] Handle release() noexcept { return std::exchange(_handle, {}); }
    /// The handle, still owned by this object (for schedulers that resume it directly).
    [[nodiscard]] Handle handle() const noexcept { return _handle; }

    void reset() noexcept {
        if (_handle) {
            _handle.destroy();
            _handle = {};
        }
    }

private:
    Handle _handle{};
};

/// Largest group the schedulers here accept; far above the point where the line fill buffers
/// (10-16 outstanding misses per core) stop any further overlap.
inline constexpr std::size_t max_group_size = 64;

/// Runs `count` coroutines, at most `group_size` at a time, resuming the suspended ones
/// round-robin. `start(i)` creates coroutine i (type Coroutine<R>), `finish(i, result)` receives its
/// result (`finish(i)` for Coroutine<void>) in completion order. Runs on the calling thread;
/// group_size 0 means 1, values above max_group_size are clamped.
template <class Start, class Finish>
void interleave(std::size_t group_size, std::size_t count, Start &&start, Finish &&finish) noexcept {
    using Co = std::invoke_result_t<Start &, std::size_t>;
    using R = typename Co::value_type;
    using Handle = typename Co::Handle;

    struct Slot {
        Handle handle;
        std::size_t index;
    };
    std::array<Slot, max_group_size> slots{};
    group_size = group_size == 0 ? 1 : (group_size > max_group_size ? max_group_size : group_size);

    auto complete = [&finish](Handle handle, std::size_t index) noexcept {
        if constexpr (std::is_void_v<R>) {
            finish(index);
        } else {
            finish(index, std::move(handle.promise().value()));
        }
        handle.destroy();
    };
    // Starts coroutines until one suspends; returns false when the inputs ran out first.
    std::size_t next = 0;
    auto launch = [&](Slot &slot) noexcept {
        while (next < count) {
            const std::size_t index = next++;
            Handle handle = start(index).release();
            if (!handle.done()) {
                slot = Slot{handle, index};
                return true;
            }
            complete(handle, index); // finished without suspending (e.g. an empty range)
        }
        return false;
    };

    std::size_t active = 0;
    while (active < group_size && launch(slots[active])) {
        ++active;
    }
    // Invariant: slots[0, active) hold suspended, unfinished coroutines.
    while (active > 0) {
        for (std::size_t i = 0; i < active;) {
            Slot &slot = slots[i];
            slot.handle.resume();
            if (!slot.handle.done()) [[likely]] {
                ++i;
                continue;
            }
            complete(slot.handle, slot.index);
            if (launch(slot)) {
                ++i;
            } else {
                // Inputs exhausted: the last slot takes this place (and is resumed next).
                slot = slots[--active];
            }
        }
    }
}

/// Sequential counterpart of interleave(): same start/finish protocol, one coroutine at a time,
/// resumed until done. With a Sequential-policy coroutine nothing ever suspends.
template <class Start, class Finish>
void run_sequential(std::size_t count, Start &&start, Finish &&finish) noexcept {
    using Co = std::invoke_result_t<Start &, std::size_t>;
    for (std::size_t index = 0; index < count; ++index) {
        Co co = start(index);
        while (!co.done()) {
            co.resume();
        }
        if constexpr (std::is_void_v<typename Co::value_type>) {
            finish(index);
        } else {
            finish(index, std::move(co.result()));
        }
    }
}

/// A fixed-capacity group of suspended, type-erased coroutines resumed round-robin: the piece a
/// worker needs to keep up to G coroutine tasks in flight. Owner-private (one worker).
class RoundRobinGroup {
public:
    explicit RoundRobinGroup(std::size_t capacity) noexcept
        : _capacity(capacity == 0 ? 1 : (capacity > max_group_size ? max_group_size : capacity)) {}

    [[nodiscard]] std::size_t size() const noexcept { return _size; }
    [[nodiscard]] std::size_t capacity() const noexcept { return _capacity; }
    [[nodiscard]] bool empty() const noexcept { return _size == 0; }
    [[nodiscard]] bool full() const noexcept { return _size == _capacity; }

    /// Adds a suspended coroutine; false when the group is full.
    bool try_add(std::coroutine_handle<> handle) noexcept {
        MX_ASSERT(handle && !handle.done(), "only suspended coroutines join a group");
        if (full()) {
            return false;
        }
        _handles[_size++] = handle;
        return true;
    }

    /// Resumes every member once; members that finish leave the group and are passed to
    /// `on_done(handle)`, which owns them from then on (reads the result, destroys the frame).
    template <class OnDone>
    void resume_round(OnDone &&on_done) noexcept {
        for (std::size_t i = 0; i < _size;) {
            std::coroutine_handle<> handle = _handles[i];
            handle.resume();
            if (!handle.done()) [[likely]] {
                ++i;
            } else {
                _handles[i] = _handles[--_size];
                on_done(handle);
            }
        }
    }

private:
    std::size_t _capacity;
    std::size_t _size{0};
    std::array<std::coroutine_handle<>, max_group_size> _handles{};
};

} // namespace mx::coro
