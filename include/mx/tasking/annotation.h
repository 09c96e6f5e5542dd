#pragma once

// Annotations: what a task tells the runtime about itself. A plain value struct with named
// fields (designated initializers), stored in the task header.

#include <cstdint>
#include <limits>

#include "mx/system/cpu.h"

namespace mx::tasking {

class Task;
class Squad;

enum class Priority : std::uint8_t { high = 0, normal = 1, low = 2 };
inline constexpr std::size_t priority_count = 3;

/// How the task uses its annotated resource (synchronization issue).
enum class AccessMode : std::uint8_t { none, read_only, write };

inline constexpr std::uint16_t any_worker = std::numeric_limits<std::uint16_t>::max();
inline constexpr std::uint8_t any_region = std::numeric_limits<std::uint8_t>::max();

/// A pointer to a data object managed by the runtime, with the owning worker id and the
/// synchronization primitive tagged into the upper 16 bits, so dispatch needs no lookup.
/// The plain-pointer form (no tag) means "no synchronization".
class ResourcePtr {
public:
    constexpr ResourcePtr() noexcept = default;
    explicit ResourcePtr(const void *object, std::uint16_t tag = 0) noexcept
        : _tagged(reinterpret_cast<std::uintptr_t>(object) | (std::uintptr_t{tag} << 48U)) {}

    [[nodiscard]] void *get() const noexcept {
        return reinterpret_cast<void *>(_tagged & ((std::uintptr_t{1} << 48U) - 1U));
    }
    template <class T>
    [[nodiscard]] T *get() const noexcept {
        return static_cast<T *>(get());
    }
    [[nodiscard]] std::uint16_t tag() const noexcept { return static_cast<std::uint16_t>(_tagged >> 48U); }
    [[nodiscard]] explicit operator bool() const noexcept { return _tagged != 0; }
    friend bool operator==(ResourcePtr, ResourcePtr) noexcept = default;

private:
    std::uintptr_t _tagged{0};
};

/// What to prefetch before the task runs: nothing, the first `size` bytes at an address, a
/// mask of up to 60 cache lines from an address, or a callback that prefetches on its own.
class PrefetchHint {
public:
    enum class Kind : std::uint8_t { none = 0, size = 1, mask = 2, callback = 3 };
    using Callback = void (*)(const Task &) noexcept;

    constexpr PrefetchHint() noexcept = default;
    static PrefetchHint bytes(const void *address, std::uint32_t size,
                              system::PrefetchMode mode = system::PrefetchMode::temporal) noexcept {
        return {reinterpret_cast<std::uintptr_t>(address), encode(Kind::size, mode, size)};
    }
    static PrefetchHint lines(const void *address, std::uint64_t line_mask,
                              system::PrefetchMode mode = system::PrefetchMode::temporal) noexcept {
        return {reinterpret_cast<std::uintptr_t>(address), encode(Kind::mask, mode, line_mask)};
    }
    static PrefetchHint callback(Callback function) noexcept {
        return {reinterpret_cast<std::uintptr_t>(function),
                encode(Kind::callback, system::PrefetchMode::temporal, 0)};
    }

    [[nodiscard]] Kind kind() const noexcept { return static_cast<Kind>(_descriptor >> 62U); }
    [[nodiscard]] system::PrefetchMode mode() const noexcept {
        return static_cast<system::PrefetchMode>((_descriptor >> 60U) & 3U);
    }
    [[nodiscard]] const void *address() const noexcept { return reinterpret_cast<const void *>(_address); }
    [[nodiscard]] std::uint64_t payload() const noexcept { return _descriptor & payload_mask; }
    [[nodiscard]] Callback function() const noexcept { return reinterpret_cast<Callback>(_address); }
    [[nodiscard]] explicit operator bool() const noexcept { return kind() != Kind::none; }

    static constexpr std::uint64_t payload_mask = (std::uint64_t{1} << 60U) - 1U;

private:
    constexpr PrefetchHint(std::uintptr_t address, std::uint64_t descriptor) noexcept
        : _address(address), _descriptor(descriptor) {}
    static constexpr std::uint64_t encode(Kind kind, system::PrefetchMode mode,
                                          std::uint64_t payload) noexcept {
        return (std::uint64_t{static_cast<std::uint8_t>(kind)} << 62U) |
               (std::uint64_t{static_cast<std::uint8_t>(mode)} << 60U) | (payload & payload_mask);
    }
    std::uintptr_t _address{0}; // data address, or the callback
    std::uint64_t _descriptor{0};
};

/// All annotations of a task. Unset fields mean "no preference": the task is queued on the worker
/// that spawned it (or round-robin when spawned from outside the runtime) and, with work
/// stealing, may run on any worker. A target worker or region pins the task: it is never stolen.
/// A target worker or region the runtime does not have is taken modulo the worker or region count
/// (in every build), as workers beyond the core count are mapped onto cores.
struct Annotation {
    std::uint16_t target_worker{any_worker};
    std::uint8_t target_region{any_region};
    Priority priority{Priority::normal};
    ResourcePtr resource{};
    AccessMode access{AccessMode::none};
    PrefetchHint prefetch{};
    Squad *squad{nullptr};
    /// Expected execution time in cycles (0 = unknown; the runtime may monitor instead).
    std::uint32_t expected_cycles{0};
};

} // namespace mx::tasking
