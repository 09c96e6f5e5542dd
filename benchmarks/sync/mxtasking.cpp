// The contention workload on mxtasking: every object is a resource with a forced primitive; an
// operation is a task annotated with the object and read_only or write. One producer task per
// worker spawns the operations in batches (the YCSB driver does the same) and re-queues itself
// at low priority after each batch.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <mx/sync/primitives.h>
#include <mx/tasking/runtime.h>

#include "common.h"

namespace mx::bench::sync {

class MxRuntime {
public:
    MxRuntime(std::uint16_t workers, bool memory_reclamation, std::uint32_t allocator_batch)
        : _runtime(config(workers, memory_reclamation, allocator_batch)) {}
    [[nodiscard]] tasking::Runtime &runtime() noexcept { return _runtime; }

private:
    static tasking::RuntimeConfig config(std::uint16_t workers, bool memory_reclamation,
                                         std::uint32_t allocator_batch) {
        tasking::RuntimeConfig config;
        config.workers = workers;
        config.memory_reclamation = memory_reclamation;
        if (allocator_batch != 0) {
            config.allocator_batch = allocator_batch;
        }
        return config;
    }
    tasking::Runtime _runtime;
};

std::shared_ptr<MxRuntime> make_mx_runtime(std::uint16_t workers, bool memory_reclamation,
                                           std::uint32_t allocator_batch) {
    return std::make_shared<MxRuntime>(workers, memory_reclamation, allocator_batch);
}

bool mx_htm_available(const MxRuntime &runtime) {
    return const_cast<MxRuntime &>(runtime).runtime().htm_available();
}

namespace {

/// One operation on one object. Optimistic readers may run more than once; they only read.
class OperationTask final : public tasking::Task {
public:
    OperationTask(tasking::ResourcePtr object, bool read) noexcept
        : Task(tasking::Annotation{.resource = object,
                                   .access =
                                       read ? tasking::AccessMode::read_only : tasking::AccessMode::write}) {}

    tasking::TaskResult execute(tasking::TaskContext & /*context*/) noexcept override {
        auto *counters = resource().get<Counters>();
        if (access() == tasking::AccessMode::read_only) {
            // The check a == b is meaningful only after validation; keeping the difference alive
            // makes the reader load both fields.
            keep(counters->a - counters->b);
        } else {
            ++counters->a;
            ++counters->b;
        }
        return tasking::TaskResult::remove();
    }
};

/// Spawns its worker's operations, `batch` per round, then re-queues itself at low priority: it
/// runs again once the batch left the pool, in either local order.
class ProducerTask final : public tasking::Task {
public:
    ProducerTask(const std::vector<tasking::ResourcePtr> *objects, const Workload &workload,
                 std::uint16_t worker, std::atomic<std::uint64_t> *writes) noexcept
        : Task(tasking::Annotation{.target_worker = worker, .priority = tasking::Priority::low}),
          _objects(objects), _remaining(workload.operations_per_worker), _read_percent(workload.read_percent),
          _batch(workload.batch), _stream(workload.seed, worker), _writes(writes) {}

    tasking::TaskResult execute(tasking::TaskContext &context) noexcept override {
        const std::uint64_t count = std::min<std::uint64_t>(_batch, _remaining);
        const std::uint64_t objects = _objects->size();
        for (std::uint64_t i = 0; i < count; ++i) {
            const OperationStream::Operation operation = _stream.next(objects, _read_percent);
            _local_writes += operation.read ? 0U : 1U;
            context.spawn(*context.new_task<OperationTask>((*_objects)[operation.object], operation.read));
        }
        _remaining -= count;
        if (_remaining > 0) {
            return tasking::TaskResult::successor(this);
        }
        _writes->fetch_add(_local_writes, std::memory_order_relaxed);
        return tasking::TaskResult::remove();
    }

private:
    const std::vector<tasking::ResourcePtr> *_objects;
    std::uint64_t _remaining;
    std::uint32_t _read_percent;
    std::uint32_t _batch;
    OperationStream _stream;
    std::uint64_t _local_writes{0};
    std::atomic<std::uint64_t> *_writes;
};

std::optional<mx::sync::Primitive> primitive_named(const std::string &name) {
    for (std::uint8_t p = 0; p < mx::sync::primitive_count; ++p) {
        const auto primitive = static_cast<mx::sync::Primitive>(p);
        if (name == mx::sync::to_string(primitive)) {
            return primitive;
        }
    }
    return std::nullopt;
}

class MxVariant final : public Variant {
public:
    MxVariant(std::shared_ptr<MxRuntime> runtime, mx::sync::Primitive primitive, std::string name)
        : _runtime(std::move(runtime)), _primitive(primitive), _name(std::move(name)) {}
    ~MxVariant() override { MxVariant::release(); }

    [[nodiscard]] std::string name() const override { return _name; }

    void prepare(std::uint64_t objects) override {
        release();
        tasking::ResourceAnnotation annotation;
        annotation.primitive = _primitive;
        _objects.reserve(objects);
        for (std::uint64_t i = 0; i < objects; ++i) {
            _objects.push_back(_runtime->runtime().new_resource<Counters>(annotation));
        }
    }

    Run run(const Workload &workload) override {
        tasking::Runtime &runtime = _runtime->runtime();
        std::atomic<std::uint64_t> writes{0};
        const std::uint16_t workers = runtime.worker_count();
        const Stopwatch stopwatch;
        for (std::uint16_t w = 0; w < workers; ++w) {
            runtime.spawn(*runtime.new_task<ProducerTask>(&_objects, workload, w, &writes));
        }
        runtime.wait();
        return stopwatch.stop(workload.operations_per_worker * workers, writes.load());
    }

    [[nodiscard]] bool verify(std::uint64_t writes, std::string &problem) const override {
        return verify_pairs(
            _objects.size(), writes,
            [this](std::uint64_t i) -> const Counters & { return *_objects[i].get<Counters>(); }, problem);
    }

    void release() override {
        for (const tasking::ResourcePtr object : _objects) {
            _runtime->runtime().delete_resource(object);
        }
        _objects.clear();
        _objects.shrink_to_fit();
    }

private:
    std::shared_ptr<MxRuntime> _runtime;
    mx::sync::Primitive _primitive;
    std::string _name;
    std::vector<tasking::ResourcePtr> _objects;
};

} // namespace

std::unique_ptr<Variant> make_mx_variant(std::shared_ptr<MxRuntime> runtime, const std::string &primitive,
                                         const std::string &name) {
    const std::optional<mx::sync::Primitive> chosen = primitive_named(primitive);
    if (!chosen) {
        return nullptr;
    }
    return std::make_unique<MxVariant>(std::move(runtime), *chosen, name);
}

} // namespace mx::bench::sync
