// Baseline: the optimistic thread-based B-link tree driven by oneTBB: one task per batch of
// requests (parallel_for with the batch as grain and a simple partitioner) in an arena of
// `workers` threads.

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>

#include "mx/index/blinktree/thread_tree.h"
#include "thread_driver.h"

namespace mx::bench::ycsb {

namespace {

using Tree = index::blinktree::ThreadBLinkTree<index::blinktree::OptimisticLatch>;

PhaseResult run_phase_tbb(tbb::task_arena &arena, Tree &tree, const std::vector<YcsbRequest> &requests,
                          const VariantConfig &config) {
    std::vector<WorkerCounters> counters(config.workers + 1U);
    PhaseTimer timer;
    timer.start();
    arena.execute([&] {
        tbb::parallel_for(
            tbb::blocked_range<std::size_t>(0, requests.size(), config.batch),
            [&](const tbb::blocked_range<std::size_t> &range) {
                const int slot = tbb::this_task_arena::current_thread_index();
                WorkerCounters &mine =
                    counters[static_cast<std::size_t>(slot < 0 ? 0 : slot) % counters.size()];
                for (std::size_t i = range.begin(); i != range.end(); ++i) {
                    apply(tree, requests[i], mine);
                }
            },
            tbb::simple_partitioner{});
    });
    std::uint64_t found = 0;
    for (const auto &c : counters) {
        found += c.found;
    }
    return timer.stop(requests.size(), found);
}

} // namespace

RunResult run_tbb(const Workload &workload, const VariantConfig &config) {
    tbb::task_arena arena{static_cast<int>(config.workers)};
    // Warm the arena's threads so the first phase does not pay for their creation.
    arena.execute([] { tbb::parallel_for(0, 1024, [](int) {}); });
    Tree tree;
    RunResult result;
    result.load = run_phase_tbb(arena, tree, workload.load, config);
    result.c = run_phase_tbb(arena, tree, workload.c, config);
    result.a = run_phase_tbb(arena, tree, workload.a, config);
    return result;
}

} // namespace mx::bench::ycsb
