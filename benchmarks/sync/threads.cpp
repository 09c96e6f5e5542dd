// The contention workload on plain threads: one std::thread per worker (pinned like mxtasking's
// workers) runs its operations directly, each object guarded by std::mutex, std::shared_mutex or
// a hand-written optimistic lock (a version word: readers validate, writers CAS it odd).

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace mx::bench::sync {

namespace {

/// Exclusive for every operation.
struct MutexPolicy {
    static constexpr const char *name = "threads_mutex";
    struct alignas(system::cache_line_size) Object {
        std::mutex lock;
        Counters counters;
    };
    static std::uint64_t read(Object &object) noexcept {
        const std::lock_guard guard{object.lock};
        return object.counters.a - object.counters.b;
    }
    static void write(Object &object) noexcept {
        const std::lock_guard guard{object.lock};
        ++object.counters.a;
        ++object.counters.b;
    }
};

/// Readers shared, writers exclusive.
struct SharedMutexPolicy {
    static constexpr const char *name = "threads_shared_mutex";
    struct alignas(system::cache_line_size) Object {
        std::shared_mutex lock;
        Counters counters;
    };
    static std::uint64_t read(Object &object) noexcept {
        const std::shared_lock guard{object.lock};
        return object.counters.a - object.counters.b;
    }
    static void write(Object &object) noexcept {
        const std::unique_lock guard{object.lock};
        ++object.counters.a;
        ++object.counters.b;
    }
};

/// Optimistic lock written for this baseline: even version = unlocked. Readers never write
/// the shared line; the fields are accessed through atomic_ref (relaxed: plain moves on x86) so
/// the racy reads are not undefined behaviour.
struct OptimisticPolicy {
    static constexpr const char *name = "threads_optimistic";
    struct alignas(system::cache_line_size) Object {
        std::atomic<std::uint64_t> version{0}; // any thread
        Counters counters;
    };
    static std::uint64_t read(Object &object) noexcept {
        while (true) {
            const std::uint64_t before = object.version.load(std::memory_order_acquire);
            if ((before & 1U) != 0) {
                system::pause();
                continue;
            }
            const std::uint64_t a = std::atomic_ref{object.counters.a}.load(std::memory_order_relaxed);
            const std::uint64_t b = std::atomic_ref{object.counters.b}.load(std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (object.version.load(std::memory_order_relaxed) == before) {
                return a - b;
            }
        }
    }
    static void write(Object &object) noexcept {
        std::uint64_t version = object.version.load(std::memory_order_relaxed);
        while ((version & 1U) != 0 ||
               !object.version.compare_exchange_weak(version, version + 1, std::memory_order_acquire,
                                                     std::memory_order_relaxed)) {
            system::pause();
            version = object.version.load(std::memory_order_relaxed);
        }
        std::atomic_thread_fence(std::memory_order_release);
        std::atomic_ref a{object.counters.a};
        std::atomic_ref b{object.counters.b};
        a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        object.version.store(version + 2, std::memory_order_release);
    }
};

void pin_to(std::uint16_t worker) noexcept {
    const unsigned cpus = std::max(1U, std::thread::hardware_concurrency());
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(worker % cpus, &set);
    static_cast<void>(pthread_setaffinity_np(pthread_self(), sizeof(set), &set));
}

template <class Policy>
class ThreadVariant final : public Variant {
public:
    explicit ThreadVariant(std::uint16_t workers) : _workers(workers) {}

    [[nodiscard]] std::string name() const override { return Policy::name; }

    void prepare(std::uint64_t objects) override {
        _objects = std::make_unique<typename Policy::Object[]>(objects);
        _count = objects;
    }

    Run run(const Workload &workload) override {
        std::atomic<bool> go{false};
        std::atomic<std::uint32_t> ready{0};
        std::atomic<std::uint64_t> writes{0};
        std::vector<std::thread> threads;
        typename Policy::Object *objects = _objects.get();
        const std::uint64_t count = _count;
        for (std::uint16_t w = 0; w < _workers; ++w) {
            threads.emplace_back([&, w, objects, count] {
                pin_to(w);
                OperationStream stream{workload.seed, w};
                std::uint64_t local_writes = 0;
                ready.fetch_add(1, std::memory_order_acq_rel);
                while (!go.load(std::memory_order_acquire)) {
                    system::pause();
                }
                for (std::uint64_t i = 0; i < workload.operations_per_worker; ++i) {
                    const OperationStream::Operation operation = stream.next(count, workload.read_percent);
                    if (operation.read) {
                        keep(Policy::read(objects[operation.object]));
                    } else {
                        Policy::write(objects[operation.object]);
                        ++local_writes;
                    }
                }
                writes.fetch_add(local_writes, std::memory_order_relaxed);
            });
        }
        // Thread start-up is not part of the measurement.
        while (ready.load(std::memory_order_acquire) < _workers) {
            std::this_thread::yield();
        }
        const Stopwatch stopwatch;
        go.store(true, std::memory_order_release);
        for (auto &thread : threads) {
            thread.join();
        }
        return stopwatch.stop(workload.operations_per_worker * _workers, writes.load());
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
    std::uint16_t _workers;
    std::unique_ptr<typename Policy::Object[]> _objects;
    std::uint64_t _count{0};
};

} // namespace

std::unique_ptr<Variant> make_threads_mutex(std::uint16_t workers) {
    return std::make_unique<ThreadVariant<MutexPolicy>>(workers);
}
std::unique_ptr<Variant> make_threads_shared_mutex(std::uint16_t workers) {
    return std::make_unique<ThreadVariant<SharedMutexPolicy>>(workers);
}
std::unique_ptr<Variant> make_threads_optimistic(std::uint16_t workers) {
    return std::make_unique<ThreadVariant<OptimisticPolicy>>(workers);
}

} // namespace mx::bench::sync
