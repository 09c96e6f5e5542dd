#include "mx/tasking/resource.h"

#include <new>

#include "mx/tasking/runtime.h"

namespace mx::tasking {

sync::Primitive choose_primitive(const ResourceAnnotation &annotation, bool htm_available) noexcept {
    using sync::Primitive;
    if (annotation.primitive) {
        // HTM without RTM degrades to its own fallback path.
        return *annotation.primitive == Primitive::htm && !htm_available ? Primitive::spinlock
                                                                         : *annotation.primitive;
    }
    switch (annotation.isolation) {
    case Isolation::none:
        return Primitive::none;
    case Isolation::exclusive:
        // Scheduling beat spinlocks in the dissertation's measurements; HTM beats both where present.
        return htm_available ? Primitive::htm : Primitive::scheduling;
    case Isolation::exclusive_writer:
        break;
    }
    const bool hot = annotation.frequency >= AccessFrequency::high;
    if (!hot) {
        // Rarely accessed: latch contention is rare, while routing writers to an owner costs a
        // remote dispatch every time, so writers take the latch themselves.
        return Primitive::optimistic_latched;
    }
    // Hot: writers go to the owner, so the object's lines stay in one cache; readers stay
    // parallel. When reads are rare, versioning buys nothing and plain scheduling is cheaper.
    return annotation.read_ratio < 0.2 ? Primitive::scheduling : Primitive::optimistic_scheduled;
}

namespace detail {

std::uint8_t frequency_weight(AccessFrequency frequency) noexcept {
    switch (frequency) {
    case AccessFrequency::unused:
        return 0;
    case AccessFrequency::normal:
        return 1;
    case AccessFrequency::high:
        return 4;
    case AccessFrequency::excessive:
        return 8;
    }
    return 1;
}

void free_resource(void *memory) noexcept {
    auto *header = static_cast<ResourceHeader *>(memory);
    header->destroy(header + 1);
    header->~ResourceHeader();
    ::operator delete(memory, std::align_val_t{system::cache_line_size});
}

} // namespace detail
} // namespace mx::tasking
