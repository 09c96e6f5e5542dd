// Synchronized execution: a task on a resource runs under the resource's primitive (scheduling,
// spinlock, reader/writer latch, optimistic versions, HTM). The HTM path is in
// sync/primitives.cpp (compiled for RTM); run_synchronized, inlined into execute_one, is in
// worker.cpp.

#include "mx/tasking/runtime.h"

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

bool Worker::run_primitive(Task &task, TaskContext &context, ResourcePtr resource, ResourceHeader &header,
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
        return true;
    case sync::Primitive::scheduling:
        MX_ASSERT(holds(domain_of(resource)), "task on a scheduled resource runs outside its domain");
        run_exclusive_of_writers();
        return true;
    case sync::Primitive::spinlock:
        header.spinlock.lock();
        run_exclusive_of_writers();
        header.spinlock.unlock();
        return true;
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
        return true;
    case sync::Primitive::optimistic_latched:
        if (reader) {
            return run_optimistic_read(task, context, header, result);
        }
        header.version.write_lock();
        result = task.execute(context);
        header.version.write_end();
        return true;
    case sync::Primitive::optimistic_scheduled:
        if (holds(domain_of(resource))) {
            // Writers only run on the domain's holder, and tasks run to completion: no writer
            // can interleave with a reader here, so it needs no validation (dissertation 4.3).
            if (reader) {
                run_exclusive_of_writers();
            } else {
                header.version.write_begin_exclusive();
                result = task.execute(context);
                header.version.write_end();
            }
            return true;
        }
        MX_ASSERT(reader, "writer of an optimistically scheduled resource runs outside its domain");
        return run_optimistic_read(task, context, header, result);
    case sync::Primitive::htm:
        // Inside a transaction the check would abort it; HTM readers are checked by the fallback.
        result = run_transaction(task, context, header);
        return true;
    }
    return true;
}

bool Worker::run_optimistic_read(Task &task, TaskContext &context, const ResourceHeader &header,
                                 TaskResult &result) noexcept {
    // A failed read is undone: the annotations (readers often re-annotate themselves to the
    // next node) and the bytes the task declares as its optimistic state.
    const Annotation annotation = task.annotation();
    const std::span<std::byte> state = task.optimistic_state();
    if (!state.empty()) {
        _optimistic_scratch.assign(state.begin(), state.end());
    }
    for (std::uint32_t attempt = 0; attempt <= _optimistic_retries; ++attempt) {
        const std::uint64_t version = header.version.read_begin();
        if ((version & 1U) == 0) {
            _in_optimistic_read = true;
            sync::detail::ignore_reads_begin();
            result = task.execute(context);
            sync::detail::ignore_reads_end();
            _in_optimistic_read = false;
            if (header.version.validate(version)) {
                return true;
            }
        }
        bump(_shared.optimistic_retries);
        Task *successor = result.next();
        if (successor != nullptr && successor != &task && successor->is_runtime_owned()) {
            destroy(*successor); // allocated by the failed run and never dispatched
        }
        result = TaskResult::done();
        task.annotate(annotation);
        if (!state.empty()) {
            std::copy(_optimistic_scratch.begin(), _optimistic_scratch.end(), state.begin());
        }
    }
    return false;
}

} // namespace mx::tasking::detail
