// Synchronized execution: a task on a resource runs under the resource's primitive (scheduling,
// spinlock, reader/writer latch, optimistic versions, HTM). The HTM path is in
// sync/primitives.cpp (compiled for RTM); the optimistic read, inlined into execute_one for the
// common case of a reader, is in synchronized.h.

#include "synchronized.h"

#include <algorithm>

namespace mx::tasking::detail {

namespace {
#if defined(MX_ENABLE_ASSERTS)
std::uint64_t checksum(const void *object, std::uint32_t size) noexcept {
    const auto *bytes = static_cast<const unsigned char *>(object);
    std::uint64_t hash = 1469598103934665603ULL;
    for (std::uint32_t i = 0; i < size; ++i) {
        hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
    return hash;
}
#endif
} // namespace

void Worker::run_primitive(Task &task, TaskContext &context, ResourcePtr resource, ResourceHeader &header,
                           bool reader, TaskResult &result) noexcept {
    // Runs the task where no writer can interfere. Debug builds check the read-only promise
    // there: a reader must leave the object as it found it.
#if defined(MX_ENABLE_ASSERTS)
    const auto run_exclusive_of_writers = [&] {
        const std::uint64_t before = reader ? checksum(resource.get(), header.object_size) : 0;
        result = task.execute(context);
        MX_ASSERT(!reader || checksum(resource.get(), header.object_size) == before,
                  "task annotated read_only modified its resource");
    };
#else
    const auto run_exclusive_of_writers = [&] { result = task.execute(context); };
#endif
    switch (primitive_of(resource)) {
    case sync::Primitive::none:
        result = task.execute(context);
        return;
    case sync::Primitive::scheduling:
        MX_ASSERT(holds(domain_of(resource)), "task on a scheduled resource runs outside its domain");
        run_exclusive_of_writers();
        return;
    case sync::Primitive::spinlock:
        header.spinlock.lock();
        run_exclusive_of_writers();
        header.spinlock.unlock();
        return;
    case sync::Primitive::rw_latch:
        if (reader) {
            header.rw_latch.lock_shared();
            run_exclusive_of_writers();
            header.rw_latch.unlock_shared();
        } else {
            header.rw_latch.lock();
            result = task.execute(context);
            header.rw_latch.unlock();
        }
        return;
    case sync::Primitive::optimistic_latched:
        MX_ASSERT(!reader, "optimistic reader in run_primitive");
        header.version.write_lock();
        result = task.execute(context);
        header.version.write_end();
        return;
    case sync::Primitive::optimistic_scheduled:
        // Writers only run on the domain's holder, and tasks run to completion: no writer can
        // interleave with a reader here, so it needs no validation (dissertation 4.3). Readers
        // elsewhere validate (execute_one runs them through run_optimistic_read).
        MX_ASSERT(holds(domain_of(resource)),
                  "task on an optimistically scheduled resource runs outside its domain and unvalidated");
        if (reader) {
            run_exclusive_of_writers();
        } else {
            header.version.write_begin_exclusive();
            result = task.execute(context);
            header.version.write_end();
        }
        return;
    case sync::Primitive::htm:
        // Inside a transaction the check would abort it; HTM readers are checked by the fallback.
        result = run_transaction(task, context, header);
        return;
    }
}

} // namespace mx::tasking::detail
