#pragma once

// Resources: data objects created through the runtime, annotated with how they are accessed.
// The runtime picks a synchronization primitive and a synchronization domain for each and tags
// both into the ResourcePtr, so dispatching a task on a resource needs no lookup.

#include <atomic>
#include <cstdint>
#include <optional>

#include "mx/sync/primitives.h"
#include "mx/system/cpu.h"
#include "mx/tasking/annotation.h"

namespace mx::tasking {

enum class Isolation : std::uint8_t {
    none,             ///< no synchronization (read-only or thread-confined data)
    exclusive,        ///< one task at a time
    exclusive_writer, ///< one writer at a time, readers in parallel
};

/// Expected access frequency; also the weight in the domain mapping (unused 0 ... excessive 8).
enum class AccessFrequency : std::uint8_t { unused, normal, high, excessive };

struct ResourceAnnotation {
    Isolation isolation{Isolation::exclusive_writer};
    /// Expected fraction of accesses that only read (0.0 - 1.0).
    double read_ratio{0.5};
    AccessFrequency frequency{AccessFrequency::normal};
    /// Forces a primitive instead of the cost model (HTM falls back to a spinlock where RTM is
    /// not available).
    std::optional<sync::Primitive> primitive{};
    /// Forces a domain that starts on this worker instead of the weighted mapping (taken modulo
    /// the worker count inside tasks; Runtime::new_resource rejects it with ConfigError). With
    /// work stealing the domain, and so the resource's scheduled tasks, may move to other workers.
    std::optional<std::uint16_t> worker{};
};

/// The cost model of dissertation 4.3; see docs/design/synchronization.md for the table.
sync::Primitive choose_primitive(const ResourceAnnotation &annotation, bool htm_available) noexcept;

namespace detail {

// Tag layout in the upper 16 bits of a ResourcePtr: primitive in bits 13-15, synchronization
// domain in 0-12.
inline constexpr std::uint16_t tag_domain_mask = (1U << 13U) - 1U;
inline constexpr std::uint32_t max_domains = std::uint32_t{tag_domain_mask} + 1U;
constexpr std::uint16_t make_tag(sync::Primitive primitive, std::uint16_t domain) noexcept {
    return static_cast<std::uint16_t>((static_cast<unsigned>(primitive) << 13U) | (domain & tag_domain_mask));
}
constexpr sync::Primitive tag_primitive(std::uint16_t tag) noexcept {
    return static_cast<sync::Primitive>(tag >> 13U);
}
constexpr std::uint16_t tag_domain(std::uint16_t tag) noexcept { return tag & tag_domain_mask; }

/// Lives in the cache line before the object. The latch words are touched by every worker that
/// runs a task on the resource; the rest is written once at creation.
struct alignas(system::cache_line_size) ResourceHeader {
    static constexpr std::uint32_t alive = 0x4d58'5253;   // "MXRS"
    static constexpr std::uint32_t retired = 0x5245'5449; // "RETI"

    sync::OptimisticVersion version{};
    sync::Spinlock spinlock{}; // spinlock primitive and HTM fallback
    sync::RwLatch rw_latch{};
    std::atomic<std::uint32_t> state{alive}; // alive until delete_resource retires it
    std::uint32_t object_size{0};
    void (*destroy)(void *object) noexcept {nullptr};
    std::uint16_t domain{0};
    std::uint8_t weight{0};
};
static_assert(sizeof(ResourceHeader) == system::cache_line_size);

inline ResourceHeader &header_of(ResourcePtr resource) noexcept {
    return *(static_cast<ResourceHeader *>(resource.get()) - 1);
}

} // namespace detail

[[nodiscard]] inline sync::Primitive primitive_of(ResourcePtr resource) noexcept {
    return detail::tag_primitive(resource.tag());
}
/// The synchronization domain of a resource (fixed for its lifetime). Runtime::owner_of tells
/// which worker drains the domain now.
[[nodiscard]] inline std::uint16_t domain_of(ResourcePtr resource) noexcept {
    return detail::tag_domain(resource.tag());
}

} // namespace mx::tasking
