// Recursive fork/join with continuation tasks: fib(n) spawns fib(n-1) and fib(n-2) and a
// continuation that sums both when the second child finished. No task ever blocks.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <mx/tasking/runtime.h>

namespace {

using mx::tasking::Task;
using mx::tasking::TaskContext;
using mx::tasking::TaskResult;

/// Receives two partial results and passes their sum on to its own parent.
class Sum final : public Task {
public:
    Sum(Sum *parent, std::uint64_t *root) noexcept : _parent(parent), _root(root) {}

    void deliver(TaskContext &context, std::uint64_t value) noexcept {
        _value.fetch_add(value, std::memory_order_relaxed);
        if (_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            context.spawn(*this); // both halves arrived: run the continuation
        }
    }

    TaskResult execute(TaskContext &context) noexcept override {
        const std::uint64_t value = _value.load(std::memory_order_relaxed);
        if (_parent != nullptr) {
            _parent->deliver(context, value);
        } else {
            *_root = value;
        }
        return TaskResult::remove();
    }

private:
    Sum *_parent;
    std::uint64_t *_root;
    std::atomic<std::uint64_t> _value{0};
    std::atomic<int> _pending{2};
};

class Fib final : public Task {
public:
    Fib(unsigned n, Sum *parent) noexcept : _n(n), _parent(parent) {}

    TaskResult execute(TaskContext &context) noexcept override {
        if (_n < 2) {
            _parent->deliver(context, _n);
            return TaskResult::remove();
        }
        auto *sum = context.new_task<Sum>(_parent, nullptr);
        context.spawn(*context.new_task<Fib>(_n - 1, sum));
        return TaskResult::successor_and_remove(context.new_task<Fib>(_n - 2, sum));
    }

private:
    unsigned _n;
    Sum *_parent;
};

} // namespace

int main(int argc, char **argv) {
    const unsigned n = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 25;
    mx::tasking::Runtime runtime{};
    std::uint64_t result = 0;
    // The root Sum waits for one child only: deliver its second half up front.
    auto *root = runtime.new_task<Sum>(nullptr, &result);
    runtime.spawn(*runtime.new_task<Fib>(n, root));
    // Feed a zero as the missing second half.
    runtime.spawn([root](TaskContext &context) { root->deliver(context, 0); });
    runtime.wait();
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
