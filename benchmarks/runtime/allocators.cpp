// The spawn/free pattern of task descriptors: allocate a task-sized object, construct it, later
// destroy and free it. mxtasking allocates from a worker-local TaskAllocator on a RegionHeap;
// the baselines call the process's malloc (plain, 16-byte aligned) or the cache-line aligned
// operator new a task header needs.

#include "allocators.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <mx/memory/task_allocator.h>
#include <mx/tasking/task.h>

namespace mx::bench {

namespace {

/// A task as the runtime allocates it: one cache-line header, cache-line aligned.
class AlignedTask final : public tasking::Task {
public:
    tasking::TaskResult execute(tasking::TaskContext &) noexcept override {
        return tasking::TaskResult::done();
    }
};
static_assert(sizeof(AlignedTask) == 64 && alignof(AlignedTask) == 64);

/// The same size and construction work (vtable pointer, zeroed fields) without the alignment
/// requirement, so that it may live in plain malloc memory.
class PlainTask {
public:
    PlainTask() noexcept = default;
    PlainTask(const PlainTask &) = delete;
    PlainTask &operator=(const PlainTask &) = delete;
    virtual ~PlainTask() = default;
    virtual int execute() noexcept { return static_cast<int>(_header[0]); }

private:
    std::array<std::uint64_t, 7> _header{};
};
static_assert(sizeof(PlainTask) == 64);

[[noreturn]] void out_of_memory() noexcept {
    std::fputs("mx_bench_runtime: out of memory in an allocator benchmark\n", stderr);
    std::abort();
}

/// Keeps the compiler from eliding an allocation whose result is otherwise unused.
inline void escape(void *pointer) noexcept { asm volatile("" : : "r"(pointer) : "memory"); }

constexpr std::uint8_t task_class = memory::size_class_of(sizeof(AlignedTask));

/// One way to obtain and release a task-sized object; `Slot` is the per-thread state.
struct MxPolicy {
    memory::TaskAllocator *allocator;
    void *create() noexcept {
        void *memory = allocator->allocate(task_class);
        if (memory == nullptr) [[unlikely]] {
            out_of_memory();
        }
        return new (memory) AlignedTask{};
    }
    void destroy(void *object) noexcept {
        auto *task = static_cast<AlignedTask *>(object);
        task->~AlignedTask();
        allocator->free(task, task_class);
    }
};

struct MallocPolicy {
    static void *create() noexcept {
        void *memory = std::malloc(sizeof(PlainTask));
        if (memory == nullptr) [[unlikely]] {
            out_of_memory();
        }
        return new (memory) PlainTask{};
    }
    static void destroy(void *object) noexcept {
        auto *task = static_cast<PlainTask *>(object);
        task->~PlainTask();
        std::free(task);
    }
};

struct AlignedNewPolicy {
    static void *create() noexcept {
        auto *task = new (std::nothrow) AlignedTask{};
        if (task == nullptr) [[unlikely]] {
            out_of_memory();
        }
        return task;
    }
    static void destroy(void *object) noexcept { delete static_cast<AlignedTask *>(object); }
};

template <class Policy>
void single(Policy policy, std::uint64_t ops) noexcept {
    for (std::uint64_t i = 0; i < ops; ++i) {
        void *object = policy.create();
        escape(object);
        policy.destroy(object);
    }
}

/// Like a worker's round: `batch` tasks are created, then run and freed in creation order.
template <class Policy>
void batched(Policy policy, std::uint64_t ops, std::uint32_t batch) noexcept {
    std::vector<void *> objects(batch);
    for (std::uint64_t done = 0; done < ops; done += batch) {
        for (std::uint32_t i = 0; i < batch; ++i) {
            objects[i] = policy.create();
            escape(objects[i]);
        }
        for (std::uint32_t i = 0; i < batch; ++i) {
            policy.destroy(objects[i]);
        }
    }
}

/// Waits politely: spins a while, then yields, so that a descheduled partner thread on a busy
/// machine gets the CPU back instead of being spun against for a whole time slice.
class Backoff {
public:
    void operator()() noexcept {
        if (++_spins < 1000) {
            system::pause();
        } else {
            std::this_thread::yield();
        }
    }

private:
    std::uint32_t _spins{0};
};

/// Single-producer single-consumer ring that carries objects from the allocating thread to the
/// freeing one.
class Ring {
public:
    static constexpr std::uint64_t capacity = 1024;

    void push(void *object) noexcept {
        Backoff backoff;
        while (_tail - _head_cache == capacity) {
            _head_cache = _head.load(std::memory_order_acquire);
            if (_tail - _head_cache == capacity) {
                backoff();
            }
        }
        _slots[_tail % capacity] = object;
        ++_tail;
        _tail_shared.store(_tail, std::memory_order_release);
    }

    void *pop() noexcept {
        Backoff backoff;
        while (_consumer_head == _tail_cache) {
            _tail_cache = _tail_shared.load(std::memory_order_acquire);
            if (_consumer_head == _tail_cache) {
                backoff();
            }
        }
        void *object = _slots[_consumer_head % capacity];
        ++_consumer_head;
        _head.store(_consumer_head, std::memory_order_release);
        return object;
    }

private:
    std::array<void *, capacity> _slots{};
    // Producer-private.
    alignas(system::cache_line_size) std::uint64_t _tail{0};
    std::uint64_t _head_cache{0};
    // Written by the producer, read by the consumer.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _tail_shared{0};
    // Consumer-private.
    alignas(system::cache_line_size) std::uint64_t _consumer_head{0};
    std::uint64_t _tail_cache{0};
    // Written by the consumer, read by the producer.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _head{0};
};

void pin_to(std::size_t index) noexcept {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return;
    }
    std::vector<std::size_t> cpus;
    for (std::size_t cpu = 0; cpu < std::size_t{CPU_SETSIZE}; ++cpu) {
        if (CPU_ISSET(cpu, &set)) {
            cpus.push_back(cpu);
        }
    }
    if (cpus.empty()) {
        return;
    }
    cpu_set_t own;
    CPU_ZERO(&own);
    CPU_SET(cpus[index % cpus.size()], &own);
    pthread_setaffinity_np(pthread_self(), sizeof(own), &own);
}

/// Producer allocates and constructs, consumer destroys and frees: every block is freed by a
/// thread that did not allocate it, as when a task spawned on one worker runs on another.
template <class ProducerPolicy, class ConsumerPolicy>
Run cross(ProducerPolicy producer_policy, ConsumerPolicy consumer_policy, std::uint64_t ops) {
    auto ring = std::make_unique<Ring>();
    std::atomic<bool> go{false};
    std::thread producer{[&] {
        pin_to(0);
        while (!go.load(std::memory_order_acquire)) {
            system::pause();
        }
        for (std::uint64_t i = 0; i < ops; ++i) {
            ring->push(producer_policy.create());
        }
    }};
    std::thread consumer{[&] {
        pin_to(1);
        while (!go.load(std::memory_order_acquire)) {
            system::pause();
        }
        for (std::uint64_t i = 0; i < ops; ++i) {
            consumer_policy.destroy(ring->pop());
        }
    }};
    // Let both threads reach their pinned CPUs before the clock starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Stopwatch watch;
    go.store(true, std::memory_order_release);
    producer.join();
    consumer.join();
    return watch.stop(ops);
}

/// Allocator state of the mx variant: one region heap, one worker-local allocator per thread.
struct MxState {
    memory::RegionHeap heap{0};
    memory::TaskAllocator producer{heap};
    memory::TaskAllocator consumer{heap};
};

MxState &mx_state() {
    static MxState state;
    return state;
}

} // namespace

std::string malloc_name() {
    if (dlsym(RTLD_DEFAULT, "mallctl") != nullptr) {
        return "jemalloc";
    }
    if (dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr) {
        return "tcmalloc";
    }
    return "glibc";
}

std::string alloc_variant_label(const std::string &variant) {
    if (variant == "mx") {
        return "mx_task_allocator";
    }
    return malloc_name() + "_" + variant;
}

Run run_alloc(const std::string &pattern, const std::string &variant, const AllocSizes &sizes) {
    MxState &state = mx_state();
    const std::uint64_t ops = sizes.ops - sizes.ops % sizes.batch;
    if (pattern == "alloc_cross") {
        if (variant == "mx") {
            return cross(MxPolicy{&state.producer}, MxPolicy{&state.consumer}, ops);
        }
        if (variant == "malloc") {
            return cross(MallocPolicy{}, MallocPolicy{}, ops);
        }
        return cross(AlignedNewPolicy{}, AlignedNewPolicy{}, ops);
    }
    const Stopwatch watch;
    if (pattern == "alloc_single") {
        if (variant == "mx") {
            single(MxPolicy{&state.producer}, ops);
        } else if (variant == "malloc") {
            single(MallocPolicy{}, ops);
        } else {
            single(AlignedNewPolicy{}, ops);
        }
    } else {
        if (variant == "mx") {
            batched(MxPolicy{&state.producer}, ops, sizes.batch);
        } else if (variant == "malloc") {
            batched(MallocPolicy{}, ops, sizes.batch);
        } else {
            batched(AlignedNewPolicy{}, ops, sizes.batch);
        }
    }
    return watch.stop(ops);
}

} // namespace mx::bench
