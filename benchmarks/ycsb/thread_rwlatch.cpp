// Baseline: the B-link tree driven by threads, a reader/writer latch per node.

#include "mx/index/blinktree/thread_tree.h"
#include "thread_driver.h"

namespace mx::bench::ycsb {

RunResult run_thread_rwlatch(const Workload &workload, const VariantConfig &config) {
    return run_threads<index::blinktree::ThreadBLinkTree<index::blinktree::SharedLatch>>(workload, config);
}

} // namespace mx::bench::ycsb
