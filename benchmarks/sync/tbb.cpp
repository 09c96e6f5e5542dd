// The contention workload on oneTBB: a task arena of `workers` threads runs parallel_for over
// chunks of operations; each object is guarded by tbb::spin_rw_mutex (readers shared).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/spin_rw_mutex.h>
#include <tbb/task_arena.h>

#include "common.h"

namespace mx::bench::sync {

namespace {

class TbbVariant final : public Variant {
public:
    explicit TbbVariant(std::uint16_t workers) : _workers(workers), _arena(workers) {}

    [[nodiscard]] std::string name() const override { return "tbb_spin_rw_mutex"; }

    void prepare(std::uint64_t objects) override {
        _objects = std::make_unique<Object[]>(objects);
        _count = objects;
    }

    Run run(const Workload &workload) override {
        // Chunks of `batch` operations, each with its own stream: which thread runs a chunk is
        // up to TBB's scheduler, so streams are per chunk rather than per worker.
        const std::uint64_t total = workload.operations_per_worker * _workers;
        const std::uint64_t chunks = (total + workload.batch - 1) / workload.batch;
        std::atomic<std::uint64_t> writes{0};
        Object *objects = _objects.get();
        const std::uint64_t count = _count;
        const Stopwatch stopwatch;
        _arena.execute([&] {
            tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, chunks),
                              [&](const tbb::blocked_range<std::uint64_t> &range) {
                                  std::uint64_t local_writes = 0;
                                  for (std::uint64_t chunk = range.begin(); chunk != range.end(); ++chunk) {
                                      OperationStream stream{workload.seed, chunk};
                                      const std::uint64_t end = std::min(total, (chunk + 1) * workload.batch);
                                      for (std::uint64_t i = chunk * workload.batch; i < end; ++i) {
                                          const OperationStream::Operation operation =
                                              stream.next(count, workload.read_percent);
                                          Object &object = objects[operation.object];
                                          if (operation.read) {
                                              const tbb::spin_rw_mutex::scoped_lock lock{object.lock, false};
                                              keep(object.counters.a - object.counters.b);
                                          } else {
                                              const tbb::spin_rw_mutex::scoped_lock lock{object.lock, true};
                                              ++object.counters.a;
                                              ++object.counters.b;
                                              ++local_writes;
                                          }
                                      }
                                  }
                                  writes.fetch_add(local_writes, std::memory_order_relaxed);
                              });
        });
        return stopwatch.stop(total, writes.load());
    }

    [[nodiscard]] bool verify(std::uint64_t writes, std::string &problem) const override {
        return verify_pairs(
            _count, writes, [this](std::uint64_t i) -> const Counters & { return _objects[i].counters; },
            problem);
    }

    void release() override {
        _objects.reset();
        _count = 0;
    }

private:
    struct alignas(system::cache_line_size) Object {
        tbb::spin_rw_mutex lock;
        Counters counters;
    };
    std::uint16_t _workers;
    tbb::task_arena _arena;
    std::unique_ptr<Object[]> _objects;
    std::uint64_t _count{0};
};

} // namespace

std::unique_ptr<Variant> make_tbb_spin_rw_mutex(std::uint16_t workers) {
    return std::make_unique<TbbVariant>(workers);
}

} // namespace mx::bench::sync
