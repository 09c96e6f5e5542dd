#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mx::tasking {

/// Order in which a worker runs the tasks it spawned for itself. LIFO (the default) runs the
/// newest first (depth-first), which keeps recursive fork/join (divide and conquer) from building
/// a breadth-first frontier of tasks, and runs a task while the data its spawner just wrote is
/// in cache; thieves take the oldest. FIFO runs them in spawn order (per producer, as long as no
/// thief takes one). Nothing in the runtime or the layers above depends on either order.
enum class LocalOrder : std::uint8_t { fifo, lifo };

/// How to start a runtime. Every field has a sane default: `Runtime runtime{};` starts one
/// pinned worker per core this process may use.
struct RuntimeConfig {
    /// Number of workers; unset = one per core (or per simulated core). More workers than cores
    /// is allowed (worker i runs on core i mod n), e.g. to test interleavings.
    std::optional<std::uint16_t> workers{};
    /// OS CPU ids to run on; empty = every CPU in the process's affinity mask.
    std::vector<std::uint16_t> cores{};
    /// "" = $MX_TOPOLOGY if set, else the real machine; "RxC" = simulate R NUMA regions of C
    /// cores each, mapped onto the real CPUs.
    std::string topology{};
    bool pin_workers{true};
    LocalOrder local_order{LocalOrder::lifo};
    /// Tasks a worker moves from its pool into its buffer per round.
    std::uint32_t task_buffer_size{64};
    /// Static prefetch distance in tasks: before running task i the worker prefetches the
    /// annotated data of task i + distance. 0 (with dynamic_prefetch off) switches it off.
    std::uint32_t prefetch_distance{2};
    /// Dynamic distance instead: each task's data is prefetched early enough that the expected
    /// run time of the tasks before it (annotated, or sampled per task type) covers the
    /// prefetch cost (lines x load latency).
    bool dynamic_prefetch{false};
    /// Load latency per cache line in cycles for the dynamic distance; 0 = measure once per
    /// process with a short pointer chase.
    std::uint32_t load_latency_cycles{0};
    /// Suspended coroutine tasks a worker interleaves; 0 = from the model
    /// (default_coroutine_group_size()).
    std::uint16_t coroutine_group_size{0};
    /// How long an idle worker spins (time-stamp counter cycles) before it sleeps.
    std::uint64_t idle_spin_cycles{100'000};
    /// Blocks per worker-local magazine (a refill from, or a give-back to, the region heap).
    std::uint32_t allocator_batch{256};
    /// Epoch-based memory reclamation of retired resources. Off: retire() frees at once, which
    /// is only safe without optimistic readers (kept to measure the cost of EBMR).
    bool memory_reclamation{true};
    /// How often the global epoch may advance.
    std::uint32_t epoch_interval_ms{50};
    /// A worker looks at the epoch (advance, reclaim) every this many tasks and when idle.
    std::uint32_t epoch_check_tasks{64};
    /// Optimistic reads re-run at once this many times before the task is put back in the pool.
    std::uint32_t optimistic_retries{8};
    /// Idle workers steal work (docs/design/scheduler.md, Stealing): tasks without a target
    /// from other workers' local deques (own NUMA region first), and whole synchronization
    /// domains with the tasks of the resources they serialize. Off: dispatch is static.
    bool work_stealing{true};
    /// Synchronization domains per worker: resources serialized by scheduling map to one of
    /// workers x domains_per_worker domains, which move between workers as a whole. At least 1.
    std::uint16_t domains_per_worker{4};
    /// Domain balancing by measured load (docs/design/scheduler.md, Balancing domains): every
    /// this many microseconds a worker compares the tasks drained from each domain with the
    /// other workers' and, when it drains clearly less than average while another drains clearly
    /// more, takes over one of that worker's domains. Unlike stealing this also moves domains
    /// while every worker is busy. 0 switches it off.
    std::uint32_t domain_balance_us{1000};
};

/// Thrown by the Runtime constructor and start() on a configuration that cannot work.
class ConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Per-worker counters. Each is written by its worker only and may be read at any time.
struct WorkerStatistics {
    std::uint16_t worker{0};
    std::uint16_t cpu{0};
    std::uint8_t numa_region{0};
    /// Runs of tasks (a task returned as its own successor counts once per run).
    std::uint64_t tasks_executed{0};
    /// Spawns into this worker's own pool, successors included.
    std::uint64_t spawned_local{0};
    std::uint64_t spawned_remote{0};
    std::uint64_t allocator_refills{0};
    std::uint64_t idle_cycles{0};
    std::uint64_t sleeps{0};
    std::uint64_t optimistic_retries{0};
    std::uint64_t retired{0};
    std::uint64_t reclaimed{0};
    /// Tasks this worker took from other workers' deques.
    std::uint64_t stolen_tasks{0};
    /// Synchronization domains this worker took over from other workers.
    std::uint64_t stolen_domains{0};
    /// Synchronization domains this worker took over to balance the measured load.
    std::uint64_t balanced_domains{0};
};

} // namespace mx::tasking
