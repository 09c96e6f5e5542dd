// Baseline: the B-link tree driven by threads, optimistic versions per node (readers validate,
// writers latch the version), same nodes as the task-based tree.

#include "mx/index/blinktree/thread_tree.h"
#include "thread_driver.h"

namespace mx::bench::ycsb {

RunResult run_thread_olc(const Workload &workload, const VariantConfig &config) {
    return run_threads<index::blinktree::ThreadBLinkTree<index::blinktree::OptimisticLatch>>(workload,
                                                                                             config);
}

} // namespace mx::bench::ycsb
