// Recursive fork/join with a task group: fib(n) spawns fib(n-1) and fib(n-2) into the same
// group, the leaves add up the result, and the main thread sleeps in wait() until the group has
// no task left. No task ever blocks.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <mx/tasking/runtime.h>
#include <mx/tasking/task_group.h>

namespace {

using mx::tasking::TaskContext;
using mx::tasking::TaskGroup;

struct Fib {
    TaskGroup *group;
    std::atomic<std::uint64_t> *sum;
    unsigned n;

    void operator()(TaskContext &context) const noexcept {
        if (n < 2) {
            sum->fetch_add(n, std::memory_order_relaxed);
            return;
        }
        // Counted before they are dispatched, so the group cannot end while they are pending.
        group->spawn(context, Fib{group, sum, n - 1});
        group->spawn(context, Fib{group, sum, n - 2});
    }
};

} // namespace

int main(int argc, char **argv) {
    const unsigned n = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 25;
    mx::tasking::Runtime runtime{};
    std::atomic<std::uint64_t> sum{0};
    TaskGroup group{runtime};
    group.spawn(Fib{&group, &sum, n});
    if (const mx::tasking::GroupResult outcome = group.wait(); !outcome.ok()) {
        std::fprintf(stderr, "fib failed: %s\n", outcome.error.c_str());
        return 1;
    }
    const std::uint64_t result = sum.load(std::memory_order_relaxed);
    std::printf("fib(%u) = %llu on %u workers\n", n, static_cast<unsigned long long>(result),
                unsigned{runtime.worker_count()});
    // Per-worker statistics, as the runtime counts them.
    std::printf("%6s %4s %6s %12s %12s %12s %8s %14s %7s\n", "worker", "cpu", "region", "executed",
                "spawned-loc", "spawned-rem", "refills", "idle-cycles", "sleeps");
    for (const mx::tasking::WorkerStatistics &s : runtime.statistics()) {
        std::printf(
            "%6u %4u %6u %12llu %12llu %12llu %8llu %14llu %7llu\n", unsigned{s.worker}, unsigned{s.cpu},
            unsigned{s.numa_region}, static_cast<unsigned long long>(s.tasks_executed),
            static_cast<unsigned long long>(s.spawned_local),
            static_cast<unsigned long long>(s.spawned_remote),
            static_cast<unsigned long long>(s.allocator_refills),
            static_cast<unsigned long long>(s.idle_cycles), static_cast<unsigned long long>(s.sleeps));
    }
    return 0;
}
