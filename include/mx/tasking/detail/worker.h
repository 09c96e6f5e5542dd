#pragma once

// Worker and runtime internals that the hot paths (spawn, new_task) need inline. Not API: use
// mx::tasking::Runtime and mx::tasking::TaskContext.

#include <array>
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "mx/memory/task_allocator.h"
#include "mx/system/cpu.h"
#include "mx/system/topology.h"
#include "mx/tasking/config.h"
#include "mx/tasking/detail/coroutine_group.h"
#include "mx/tasking/detail/prefetch_buffer.h"
#include "mx/tasking/detail/queues.h"
#include "mx/tasking/detail/reclamation.h"
#include "mx/tasking/detail/sync_domain.h"
#include "mx/tasking/detail/task_pool.h"
#include "mx/tasking/detail/trace_buffer.h"
#include "mx/tasking/resource.h"
#include "mx/tasking/squad.h"
#include "mx/tasking/task.h"
#include "mx/tasking/trace.h"
#include "mx/util/single_writer.h"

namespace mx::tasking::detail {

class RuntimeCore;

using util::bump;

/// Successors a worker runs by bypass in a row (TaskResult::bypass) before it spawns the next
/// one into its pool: enough for a tree's upper levels, few enough that queued tasks still run.
inline constexpr std::uint32_t max_bypass_chain = 8;

class Worker {
public:
    Worker(RuntimeCore &core, std::uint16_t id, std::uint8_t region, std::uint16_t cpu,
           memory::RegionHeap &heap, const RuntimeConfig &config);
    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;

    [[nodiscard]] std::uint16_t id() const noexcept { return _id; }
    [[nodiscard]] std::uint8_t region() const noexcept { return _region; }
    [[nodiscard]] std::uint16_t cpu() const noexcept { return _cpu; }
    [[nodiscard]] RuntimeCore &core() const noexcept { return *_core; }

    /// Owner thread only: dispatches a task following its annotations.
    void spawn(Task &task) noexcept;
    /// Owner thread only, from inside a running task: runs `task` now, before returning, when
    /// it may run on this worker (stays_here), is not routed to a domain's owner, and the running
    /// task holds no resource; then it and its bypass successors run as if dispatched here, and a
    /// successor that goes through a pool is queued as usual. Otherwise (and within another
    /// inline run) a plain spawn.
    void run_inline(Task &task) noexcept;
    /// Any thread: puts a task into this worker's pool and wakes the worker if it sleeps.
    void push_remote(Task &task, std::uint8_t producer_region) noexcept {
        _pool.push_remote(task, producer_region);
        if (sleeping()) [[unlikely]] {
            wake();
        }
    }
    /// Any thread (a thief): hands back a stolen task annotated for this worker or its region.
    void push_returned(Task &task) noexcept {
        _pool.push_returned(task);
        if (sleeping()) [[unlikely]] {
            wake();
        }
    }
    void wake() noexcept;

    template <class T, class... Args>
    T *new_task(Args &&...args) noexcept;
    void destroy(Task &task) noexcept;

    /// Owner thread only: moves every task queued in the squad into the local pool in one block.
    void adopt(Squad &squad) noexcept;
    /// adopt() for a squad its own task published: the tasks go in front of the local queues.
    void adopt_next(Squad &squad) noexcept;
    template <class Push>
    std::uint64_t adopt_each(Squad &squad, Push &&push) noexcept;

    /// Owner thread, inside a task: runs `read` as a reader of `resource` under the resource's
    /// primitive and returns its result once the read stands (TaskContext::read).
    template <class F>
    std::optional<std::invoke_result_t<F &>> read_resource(ResourcePtr resource, F &read) noexcept;

    /// Owner thread only: defer freeing `object` until no task can still reach it.
    void retire(void *object, void (*deleter)(void *) noexcept) noexcept;

    /// Thread body.
    void run() noexcept;
    /// After the thread ended: destroys runtime-owned tasks left in the pool and buffer.
    void drain() noexcept;
    /// Owner thread (or before the first start): this worker drains `domain` from now on.
    void own_domain(std::uint32_t domain) noexcept { _domains.push_back(domain); }
    /// Whether this worker holds `domain` right now (only its holder can see its own id there).
    [[nodiscard]] bool holds(std::uint32_t domain) const noexcept;
    /// Any thread: whether the worker sleeps (or is about to).
    [[nodiscard]] bool sleeping() const noexcept {
        return _shared.sleeping.load(std::memory_order_seq_cst) != 0;
    }
    /// Any thread: the stealable tasks of this worker's pool.
    [[nodiscard]] TaskPool &pool() noexcept { return _pool; }
    /// After the thread ended: frees everything retired (no task runs any more).
    void reclaim_all() noexcept;
    /// Owner thread: frees the retired objects no task can reach any more.
    void reclaim_now() noexcept;

    [[nodiscard]] std::uint64_t spawned(std::uint32_t bucket) const noexcept {
        return _shared.spawned[bucket].load(std::memory_order_acquire);
    }
    [[nodiscard]] std::uint64_t completed(std::uint32_t bucket) const noexcept {
        return _shared.completed[bucket].load(std::memory_order_acquire);
    }
    [[nodiscard]] WorkerStatistics statistics() const noexcept;
    [[nodiscard]] const memory::TaskAllocator &allocator() const noexcept { return _allocator; }

    /// Tracing thread (Runtime::start_trace), while this worker does not trace: a fresh buffer.
    void prepare_trace(const TraceConfig &config, std::uint32_t capacity, std::uint64_t origin);
    /// Owner thread: records a user span while this worker traces (Runtime::trace_span).
    void trace_span(const char *label, std::uint64_t start, std::uint64_t end) noexcept;
    /// Owner thread: whether this worker records a trace now.
    [[nodiscard]] bool tracing() const noexcept { return _tracing; }
    /// Tracing thread, after acknowledged(generation): hands the recorded events over.
    Trace::Worker take_trace();
    /// Any thread: whether the worker has seen trace generation `generation` (or has left its
    /// loop): from then on it does not touch its trace buffer until the next generation.
    [[nodiscard]] bool acknowledged(std::uint32_t generation) const noexcept {
        const std::uint32_t ack = _shared.trace_ack.load(std::memory_order_acquire);
        return ack == generation || ack == trace_ack_exited;
    }
    static constexpr std::uint32_t trace_ack_exited = 0xFFFFFFFFU;

private:
    friend class RuntimeCore;
    /// Runs the task and the successors it hands over by bypass.
    void execute(Task &task) noexcept;
    /// Runs one task; returns the successor to run right away (bypass) or nullptr.
    Task *execute_one(Task &task) noexcept;
    /// The task and the successors it hands over by bypass (execute's body).
    void execute_chain(Task &task) noexcept;
    /// Runs `next` (if any) and the successors handed over by bypass after it.
    void run_bypassed(Task *next) noexcept;
    /// After a task finished: successor, remove/stop, completion count, epoch duties. Returns
    /// the successor to run right away (already counted as spawned) or nullptr.
    Task *complete(Task &task, const TaskResult &result) noexcept;
    /// complete()'s body, inlined into execute_one.
    Task *finish(Task &task, const TaskResult &result) noexcept;
    /// Whether the task's annotations let it run right here (no squad, region or other target
    /// worker, and no scheduled resource whose domain this worker does not hold): a bypass runs
    /// such a successor at once.
    [[nodiscard]] bool stays_here(const Task &task) const noexcept;
    /// A coroutine task suspended: keep it in the group; while the group is full, resume it.
    void park(Task &task) noexcept;
    /// Resumes the parked coroutine task at the cursor; a finished one leaves a hole.
    void resume_group_next() noexcept;
    /// The coroutine in `slot` finished: its slot becomes a hole, the task completes.
    void retire_group_member(std::uint32_t slot) noexcept;
    /// Resumes every parked coroutine task once; finished ones leave the group.
    void resume_group_round() noexcept;
    void execute_sampled(Task &task) noexcept;
    template <bool Traced>
    void run_buffer_static() noexcept;
    /// Top-ups per round while the worker holds synchronization domains: a held domain cannot be
    /// stolen, so a round that keeps topping up must end now and then to let them go.
    static constexpr std::uint32_t max_top_ups_holding_domains = 4;
    template <bool Traced>
    void run_buffer_dynamic() noexcept;
    /// execute() that records each task of the bypass chain into `open`, the run of equal tasks
    /// (a copy of TraceBuffer::open the buffer loop keeps in registers).
    /// `distance`: the task's prefetch distance, at most max_traced_distance.
    void execute_traced(Task &task, bool stolen, std::uint32_t distance, TraceEvent &open) noexcept;
    /// Tasks in one merged slice and a task's recorded prefetch distance at most: their product
    /// fits TraceEvent::prefetch_distance.
    static constexpr std::uint32_t max_traced_run = 1U << 24U;
    static constexpr std::uint32_t max_traced_distance = 255;
    /// Takes on the trace generation the runtime asks for (start or stop recording).
    void sync_trace() noexcept;
    /// Whether start_trace or stop_trace waits for this worker to notice (idle loop, sleep).
    [[nodiscard]] bool trace_change_pending() const noexcept;
    void record(const TraceEvent &event) noexcept { _trace.record(event); }
    /// Runs the task under its resource's primitive, except an optimistic read (execute_one runs
    /// those through run_optimistic_read).
    void run_primitive(Task &task, TaskContext &context, ResourcePtr resource, ResourceHeader &header,
                       bool reader, TaskResult &result) noexcept;
    /// False: the read kept failing validation (execute_one puts the task back into the pool).
    bool run_optimistic_read(Task &task, TaskContext &context, const ResourceHeader &header,
                             TaskResult &result) noexcept;
    /// One optimistic attempt: runs `run` between reading and validating the resource's version.
    /// True when no writer interfered.
    template <class Run>
    bool try_optimistic(const ResourceHeader &header, Run &&run) noexcept;
    /// read_resource after a failed first attempt, and for the other primitives.
    template <class F>
    std::optional<std::invoke_result_t<F &>> read_resource_slowly(ResourcePtr resource, F &read) noexcept;
    /// Runs `read` while this worker holds `domain` (taking it for the read if nobody holds
    /// it); nullopt when another worker holds it.
    template <class F>
    std::optional<std::invoke_result_t<F &>> read_holding(std::uint32_t domain, F &read) noexcept;
    /// Runs `read`; debug builds flag it as a read that may run again, in which spawning asserts.
    template <class F>
    decltype(auto) guarded(F &read) noexcept;
    TaskResult run_transaction(Task &task, TaskContext &context, ResourceHeader &header) noexcept;
    void count_spawn(Task &task) noexcept;
    /// While recording queue times: the task's enqueue time.
    void stamp_queue_time(Task &task) noexcept;
    /// Once per task run: the epoch duties every `epoch_check_tasks` runs.
    void count_run_for_epoch() noexcept;
    /// Spawn of a task with any routing annotation (squad, resource, worker, region).
    void spawn_routed(Task &task) noexcept;
    /// A task without a target; wakes a sleeping worker to steal it if there is one.
    void push_local(Task &task) noexcept;
    void epoch_duties() noexcept;
    /// At the start of a round (and of a top-up): the tasks spawned from now on carry the
    /// current global epoch.
    void refresh_local_epoch() noexcept;
    void idle() noexcept;
    void sleep() noexcept;
    /// Owner: moves the next tasks of the highest non-empty priority into the buffer: pinned and
    /// local tasks, then the owned domains' queues (holding each domain it takes tasks from),
    /// then the remote queues.
    std::uint32_t fill() noexcept { return fill(_buffer.tasks.data(), _buffer.capacity()); }
    std::uint32_t fill(Task **buffer, std::uint32_t capacity) noexcept;
    /// Static prefetching: when the buffer is down to the `distance` tasks already prefetched,
    /// moves them to its front and fills the rest, so the next tasks get prefetched while those
    /// run instead of the next round starting cold. Returns false when the round should end.
    bool top_up() noexcept;
    /// Takes up to `capacity` tasks of `priority` from the domains this worker owns.
    std::uint32_t take_domains(std::size_t priority, Task **buffer, std::uint32_t capacity) noexcept;
    /// Ends the holds of fill(): the buffer's tasks have run.
    void release_domains() noexcept;
    /// Idle: takes tasks from other workers' deques (own region first, then the others) into the
    /// buffer, or else takes over a domain whose tasks wait. Returns the tasks put in the buffer.
    std::uint32_t steal() noexcept;
    std::uint32_t steal_tasks_from(Worker &victim) noexcept;
    bool steal_domain() noexcept;
    /// Balancing by measured load: compares the tasks drained from every domain since this
    /// worker's last look and takes over a domain of the busiest owner when this one drains
    /// clearly less than the average (see RuntimeConfig::domain_balance_us).
    void balance_domains() noexcept;
    /// Holding `id` (try_hold succeeded): makes this worker its owner and lists it.
    void take_over_domain(std::uint32_t id) noexcept;
    /// Any thread's view: whether another worker has tasks to steal or a domain waits.
    [[nodiscard]] bool work_to_steal() const noexcept;
    /// Whether this worker has anything to run: its pool or the domains it owns.
    [[nodiscard]] bool has_work() const noexcept;

    RuntimeCore *_core;
    std::uint16_t _id;
    std::uint8_t _region;
    std::uint16_t _cpu;
    std::uint64_t _idle_spin_cycles;
    std::uint32_t _region_round_robin{0};
    bool _stealing;
    std::uint32_t _optimistic_retries;

    // Owner-private: touched only by the worker thread (and by drain() after it ended).
    memory::TaskAllocator _allocator;
    TaskPool _pool; // its deques and remote queues are shared (see TaskPool)
    PrefetchBuffer _buffer;
    CoroutineGroup _group;
    Reclamation _reclamation;
    Task *_running{nullptr};         // task in execute(), for epoch inheritance
    std::uint32_t _bypass_chain{0};  // successors run by bypass since execute() began
    bool _inline_run{false};         // run_inline() is running a task inside another one
    bool _in_optimistic_read{false}; // spawning then is a bug (the read may be repeated)
    // Recording with queue times: spawns stamp their time into the task. Here, beside the fields
    // count_spawn reads anyway, so an untraced spawn's check touches no other line.
    bool _stamp_spawns{false};
    std::vector<std::byte> _optimistic_scratch;
    Task::Header _optimistic_saved{}; // the running reader's header, restored after a failed read
    // The domains this worker believes it owns; one stolen by another worker is dropped when
    // fill() sees its new owner.
    std::vector<std::uint32_t> _domains;
    std::vector<std::uint32_t> _held; // domains held for the tasks of the current buffer
    std::uint32_t _steal_state;       // xorshift state for picking victims
    std::uint32_t _steal_cursor{0};   // next domain a domain steal looks at
    // Domain balancing: the interval (0 = off), the next time to look (steady clock), a round
    // countdown so the clock is read once per balance_check_rounds rounds, each domain's drained
    // count at the last look, and scratch for the owners' loads.
    static constexpr std::uint32_t balance_check_rounds = 32;
    std::uint64_t _balance_ns{0};
    std::uint64_t _next_balance{0};
    std::uint32_t _balance_countdown{balance_check_rounds};
    std::vector<std::uint64_t> _drained_seen;
    std::vector<std::uint64_t> _domain_load;
    std::vector<std::uint64_t> _owner_load;
    // Fewer tasks per worker than this in an interval say nothing about the load.
    static constexpr std::uint64_t min_balance_tasks = 256;
    // Tracing: the generation this worker follows (odd = recording), whether it records, and
    // its buffer (TraceBuffer says who touches it when).
    std::uint32_t _trace_seen{0};
    bool _tracing{false};
    TraceBuffer _trace;

    // Shared with producers and statistics readers, kept off the owner's lines.
    struct alignas(system::cache_line_size) Shared {
        // 1 while the worker sleeps or is about to; set by the worker, cleared by a waker.
        std::atomic<std::uint32_t> sleeping{0};
        // Owner writes, everyone reads (wait(), reclamation, statistics).
        alignas(system::cache_line_size) std::atomic<std::uint64_t> completed[epoch_buckets]{};
        std::atomic<std::uint64_t> spawned[epoch_buckets]{};
        std::atomic<std::uint64_t> spawned_remote{0};
        std::atomic<std::uint64_t> handoffs{0}; // tasks that were their own successor (statistics)
        std::atomic<std::uint64_t> idle_cycles{0};
        std::atomic<std::uint64_t> sleeps{0};
        std::atomic<std::uint64_t> optimistic_retries{0};
        std::atomic<std::uint64_t> retired{0};
        std::atomic<std::uint64_t> reclaimed{0};
        std::atomic<std::uint64_t> stolen_tasks{0};
        std::atomic<std::uint64_t> stolen_domains{0};
        std::atomic<std::uint64_t> balanced_domains{0};
        // Worker writes (release) the trace generation it follows, or trace_ack_exited when it
        // leaves its loop; the tracing thread reads it (acquire) before it takes the buffer.
        std::atomic<std::uint32_t> trace_ack{0};
    } _shared;
};

/// Everything a started runtime owns. Lives as long as the Runtime object.
class RuntimeCore {
public:
    explicit RuntimeCore(const RuntimeConfig &config);
    ~RuntimeCore();
    RuntimeCore(const RuntimeCore &) = delete;
    RuntimeCore &operator=(const RuntimeCore &) = delete;

    void start();
    void stop() noexcept;
    void wait() noexcept;
    /// Workers run and no stop was requested (a task's TaskResult::stop() included).
    [[nodiscard]] bool running() const noexcept {
        return _started.load(std::memory_order_acquire) && !stop_requested();
    }

    [[nodiscard]] std::uint16_t worker_count() const noexcept {
        return static_cast<std::uint16_t>(_workers.size());
    }
    [[nodiscard]] Worker &worker(std::uint16_t id) const noexcept { return *_workers[id]; }
    [[nodiscard]] std::uint16_t region_count() const noexcept {
        return static_cast<std::uint16_t>(_regions.size());
    }
    [[nodiscard]] const std::vector<std::uint16_t> &workers_of_region(std::uint8_t region) const noexcept {
        return _regions[region];
    }
    [[nodiscard]] const system::Topology &topology() const noexcept { return _topology; }
    /// The worker a task annotated with a target worker or region goes to: targets beyond the
    /// worker or region count are taken modulo the count; `ticket` picks among a region's workers.
    [[nodiscard]] std::uint16_t target_of(const Task &task, std::uint32_t ticket) const noexcept {
        if (task.target_worker() != any_worker) {
            return static_cast<std::uint16_t>(task.target_worker() % _workers.size());
        }
        const auto &workers = _regions[task.target_region() % _regions.size()];
        return workers[ticket % workers.size()];
    }

    [[nodiscard]] std::uint32_t domain_count() const noexcept { return _domain_count; }
    [[nodiscard]] SyncDomain &domain(std::uint32_t id) const noexcept { return _domains[id]; }
    /// Any thread: queues a task of a scheduled resource in its domain and wakes the domain's owner.
    void push_domain(Task &task, std::uint32_t domain) noexcept;
    /// Any thread: wakes one sleeping worker other than `self` (there is work to steal).
    void wake_thief(const Worker *self) noexcept;
    /// Workers asleep (a hint for spawners: a sleeping worker could steal).
    [[nodiscard]] std::uint32_t sleepers() const noexcept {
        return _sleepers.load(std::memory_order_relaxed);
    }
    void count_sleeper(std::int32_t delta) noexcept {
        _sleepers.fetch_add(static_cast<std::uint32_t>(delta), std::memory_order_seq_cst);
    }

    /// Any thread that is not one of this runtime's workers.
    void spawn_external(Task &task) noexcept;
    void *allocate_external(std::uint8_t size_class) noexcept;
    void free_external(void *memory, std::uint8_t size_class) noexcept;

    void request_stop() noexcept;
    [[nodiscard]] bool stop_requested() const noexcept {
        return _stop_requested.load(std::memory_order_acquire);
    }
    /// Called by a worker that found no work: wakes threads blocked in wait().
    void notify_idle() noexcept;

    // --- tracing (trace.cpp) ---
    /// Odd while recording. Written by start_trace/stop_trace, read by workers once per round.
    /// seq_cst for the hand-shake with sleeping workers (a plain load on x86, like acquire).
    [[nodiscard]] std::uint32_t trace_generation() const noexcept {
        return _trace_generation.load(std::memory_order_seq_cst);
    }
    /// Empty on success, else why not (already recording, compiled out, called from a task).
    std::string start_trace(const TraceConfig &config);
    /// Stops recording and hands the trace over; false (and `error`) when not recording.
    bool stop_trace(Trace &trace, std::string &error);
    [[nodiscard]] bool tracing() const noexcept { return (trace_generation() & 1U) != 0; }
    /// Whether spawns from outside the workers stamp their time (recording with queue times).
    [[nodiscard]] bool stamp_external_spawns() const noexcept {
        return tracing() && _trace_queue_times.load(std::memory_order_relaxed);
    }
    /// Wakes every worker and waits until each follows trace generation `generation`.
    void await_workers(std::uint32_t generation) noexcept;
    /// Any thread that is not a worker: records a user span while a trace records.
    void trace_span_external(const char *label, std::uint64_t start, std::uint64_t end);
    /// MX_TRACE: the path the trace started by the environment goes to ("" = none).
    std::string env_trace_path;
    /// MX_TRACE_PROFILE: print the profile of the trace started by the environment.
    bool env_trace_profile{false};
    /// Whether the environment started the trace being recorded.
    bool env_tracing{false};

    [[nodiscard]] std::uint64_t live_tasks() const noexcept;

    /// Runtime-owned tasks too large for the size classes (rare): counted for live_tasks().
    void count_oversized(std::int64_t delta) noexcept {
        _oversized_live.fetch_add(delta, std::memory_order_relaxed);
    }

    /// `object_bytes`: sizeof the task's class. Packed as Task::Header::size_class describes.
    static void mark_runtime_owned(Task &task, std::uint8_t size_class, std::size_t object_bytes) noexcept {
        const std::size_t lines_beyond_first =
            std::min<std::size_t>((object_bytes - 1) / system::cache_line_size, max_descriptor_lines_ahead);
        const std::uint8_t size_bits = size_class == memory::oversized_class ? oversized_bits : size_class;
        task._h.size_class = static_cast<std::uint8_t>(size_bits | lines_beyond_first << 3U);
    }
    static std::uint8_t size_class_of(const Task &task) noexcept {
        const auto size_bits = static_cast<std::uint8_t>(task._h.size_class & 7U);
        return size_bits == oversized_bits ? memory::oversized_class : size_bits;
    }
    /// Cache lines of the task object after its first (0 for tasks the runtime did not allocate:
    /// their size is unknown), capped at max_descriptor_lines_ahead.
    static std::uint32_t descriptor_lines_beyond_first(const Task &task) noexcept {
        return task.is_runtime_owned() ? (task._h.size_class >> 3U) & 3U : 0U;
    }
    static constexpr std::size_t max_descriptor_lines_ahead = 3;
    static constexpr std::uint8_t oversized_bits = 7;
    static_assert(memory::size_class_count < oversized_bits, "size classes fit in bits 0-2");
    static void set_epoch(Task &task, std::uint8_t epoch) noexcept { task._h.epoch = epoch; }
    /// The spawn time stamp of a traced task: the counter's low 40 bits (they wrap after about
    /// six minutes at 3 GHz, far beyond a queue time), 0 = never stamped.
    static constexpr std::uint64_t spawn_tsc_mask = (std::uint64_t{1} << 40U) - 1U;
    static void stamp_spawn(Task &task, std::uint64_t tsc) noexcept {
        task._h.spawn_tsc = static_cast<std::uint32_t>(tsc);
        task._h.spawn_tsc_high = static_cast<std::uint8_t>(tsc >> 32U);
    }
    static std::uint64_t spawn_tsc_of(const Task &task) noexcept {
        return (std::uint64_t{task._h.spawn_tsc_high} << 32U) | task._h.spawn_tsc;
    }
    static std::uint8_t epoch_of(const Task &task) noexcept { return task._h.epoch; }
    /// Destroys a runtime-owned task from a thread that is not a worker.
    void destroy_external(Task &task) noexcept;

    // --- resources and reclamation ---
    [[nodiscard]] bool htm() const noexcept { return _htm; }
    /// Picks the domain of a new resource: one of `forced`'s domains (taken modulo the worker
    /// count), or else the domain with the least accumulated access weight.
    std::uint16_t assign_domain(std::optional<std::uint16_t> forced, std::uint8_t weight) noexcept;
    void release_domain(std::uint16_t domain, std::uint8_t weight) noexcept;
    /// The worker that drains `domain` now.
    [[nodiscard]] std::uint16_t owner_of_domain(std::uint32_t domain) const noexcept {
        return _domains[domain].owner.load(std::memory_order_acquire);
    }
    void retire(void *object, void (*deleter)(void *) noexcept) noexcept;
    /// Any thread: hands each squad to a worker, balancing queued task counts.
    void publish(Squad *const *squads, std::size_t count, Worker *caller) noexcept;
    [[nodiscard]] bool reclamation() const noexcept { return _epochs.enabled; }
    [[nodiscard]] std::uint64_t global_epoch() const noexcept {
        return _epochs.epoch.load(std::memory_order_acquire);
    }
    /// Advances the global epoch if the interval passed and the oldest bucket is free.
    void try_advance_epoch() noexcept;
    /// Objects retired in an epoch below this one can be freed: the global epoch moved past
    /// them and no task stamped with any epoch up to theirs is in flight. Computed once per
    /// reclamation pass.
    [[nodiscard]] std::uint64_t reclaimable_below() const noexcept;
    /// Frees externally retired objects that are safe (called by workers' reclamation).
    void reclaim_external() noexcept;
    /// Whether objects retired from outside the workers wait for reclamation.
    [[nodiscard]] bool external_retired_pending() const noexcept {
        return _epochs.outside_pending.load(std::memory_order_seq_cst);
    }

private:
    /// True when no task stamped into any bucket of `buckets` (a bit mask) is in flight.
    [[nodiscard]] bool drained(std::uint32_t buckets) const noexcept;
    [[nodiscard]] bool quiescent() const noexcept { return drained((1U << epoch_buckets) - 1U); }

    system::Topology _topology;
    std::vector<std::unique_ptr<memory::RegionHeap>> _heaps; // one per region
    std::vector<std::unique_ptr<Worker>> _workers;
    std::vector<std::vector<std::uint16_t>> _regions; // worker ids per region
    std::vector<std::thread> _threads;                // owned by the thread calling start/stop
    // Set by start(), cleared by stop() once the threads are joined; read by anyone.
    std::atomic<bool> _started{false};
    // Set by stop() before it drains, cleared by start(); read by spawns from outside.
    std::atomic<bool> _closed{false};
    std::unique_ptr<SyncDomain[]> _domains; // fixed at construction
    std::uint32_t _domain_count{0};
    bool _pin_workers;
    bool _htm;
    GlobalReclamation _epochs;

    std::mutex _external_mutex;
    std::unique_ptr<memory::TaskAllocator> _external_allocator; // guarded by _external_mutex

    std::mutex _mapping_mutex; // guards SyncDomain::weight and _next_domain
    std::mutex _trace_mutex;   // serializes start_trace and stop_trace
    // Spans from threads outside the workers (rare: workers record theirs in their buffers).
    std::mutex _external_spans_mutex;
    std::vector<TraceEvent> _external_spans; // guarded by _external_spans_mutex
    // TraceConfig::queue_times of the trace being recorded: written by start_trace before it
    // publishes the generation, read by outside spawners.
    std::atomic<bool> _trace_queue_times{false};
    // Written under _trace_mutex by start_trace, read by stop_trace: the clock at the start.
    std::uint64_t _trace_origin_tsc{0};
    std::int64_t _trace_origin_ns{0};
    std::uint32_t _next_domain{0};

    // Shared: written by outside threads / workers, read by everyone.
    alignas(system::cache_line_size) std::atomic<std::uint64_t> _external_spawned[epoch_buckets]{};
    std::atomic<std::uint32_t> _next_external_worker{0};
    alignas(system::cache_line_size) std::atomic<bool> _stop_requested{false};
    // On the line of _stop_requested, which workers read after every task anyway, so the per-round
    // check of the trace generation costs no extra cache miss.
    std::atomic<std::uint32_t> _trace_generation{0};
    std::atomic<std::uint32_t> _waiters{0};
    std::atomic<std::uint32_t> _idle_events{0}; // futex word for wait()
    std::atomic<std::int64_t> _oversized_live{0};
    // Written by workers going to sleep and waking, read by spawners with stealable work.
    alignas(system::cache_line_size) std::atomic<std::uint32_t> _sleepers{0};
};

/// The worker running on this thread, or nullptr outside any runtime's workers.
Worker *current_worker() noexcept;

/// Prints a clear message and aborts: task descriptors cannot be allocated.
[[noreturn]] void out_of_task_memory() noexcept;

// ---- inline hot paths ---------------------------------------------------------------------

inline void Worker::count_spawn(Task &task) noexcept {
    std::uint8_t epoch = 0;
    if (_reclamation.enabled) {
        if (_running != nullptr) {
            // A task on a resource may carry a pointer its spawner read: it keeps the
            // spawner's epoch so the resource cannot be reclaimed under it. Others take the
            // worker's local epoch, refreshed per buffer: the running task pins the global
            // epoch to at most its own stamp + 3, so the local copy is never too old.
            epoch = task.resource() ? RuntimeCore::epoch_of(*_running) : _reclamation.local_epoch;
        } else {
            epoch = static_cast<std::uint8_t>(_core->global_epoch() % epoch_buckets);
        }
    }
    RuntimeCore::set_epoch(task, epoch);
    bump(_shared.spawned[epoch]);
    stamp_queue_time(task);
}

inline void Worker::stamp_queue_time([[maybe_unused]] Task &task) noexcept {
#if MX_TRACING
    // Queue times (trace.h): only while this worker records, so an untraced spawn pays a
    // predictable branch on a worker-private flag.
    if (_stamp_spawns) [[unlikely]] {
        RuntimeCore::stamp_spawn(task, system::cycles());
    }
#endif
}

inline void Worker::count_run_for_epoch() noexcept {
    if (--_reclamation.tasks_until_epoch_check == 0) [[unlikely]] {
        epoch_duties();
    }
}

/// Fig. 2 of the paper: tasks on a resource serialized by scheduling, and writers of an
/// optimistically scheduled resource, go through the resource's synchronization domain.
inline bool routed_to_owner(const Task &task) noexcept {
    const ResourcePtr resource = task.resource();
    if (!resource || task.access() == AccessMode::none) {
        return false;
    }
    const sync::Primitive primitive = primitive_of(resource);
    return primitive == sync::Primitive::scheduling ||
           (primitive == sync::Primitive::optimistic_scheduled && task.access() == AccessMode::write);
}

inline bool Worker::trace_change_pending() const noexcept {
#if MX_TRACING
    // seq_cst: sleep() stores `sleeping` and then calls this; stop_trace stores the generation and
    // then looks at `sleeping` (Dekker, as for spawns).
    return _core->trace_generation() != _trace_seen;
#else
    return false;
#endif
}

inline bool Worker::holds(std::uint32_t domain) const noexcept { return _core->domain(domain).held_by(_id); }

template <class F>
[[gnu::always_inline]] inline decltype(auto) Worker::guarded(F &read) noexcept {
#if defined(MX_ENABLE_ASSERTS)
    const bool outer = _in_optimistic_read;
    _in_optimistic_read = true;
    if constexpr (std::is_void_v<std::invoke_result_t<F &>>) {
        read();
        _in_optimistic_read = outer;
    } else {
        std::invoke_result_t<F &> result = read();
        _in_optimistic_read = outer;
        return result;
    }
#else
    return read();
#endif
}

template <class Run>
[[gnu::always_inline]] inline bool Worker::try_optimistic(const ResourceHeader &header, Run &&run) noexcept {
    const std::uint64_t version = header.version.read_begin();
    if ((version & 1U) != 0) [[unlikely]] {
        return false; // a writer stayed inside
    }
    sync::detail::ignore_reads_begin();
    guarded(run);
    sync::detail::ignore_reads_end();
    return header.version.validate(version);
}

template <class F>
[[gnu::always_inline]] inline std::optional<std::invoke_result_t<F &>>
Worker::read_resource(ResourcePtr resource, F &read) noexcept {
    const sync::Primitive primitive = primitive_of(resource);
    if (primitive == sync::Primitive::optimistic_latched ||
        primitive == sync::Primitive::optimistic_scheduled) [[likely]] {
        // The optimistic read of run_optimistic_read, for a function instead of a task: nothing
        // to undo, a result read while the version moved is dropped.
        std::optional<std::invoke_result_t<F &>> result;
        if (try_optimistic(header_of(resource), [&]() noexcept { result.emplace(read()); })) [[likely]] {
            return result;
        }
    }
    return read_resource_slowly(resource, read);
}

template <class F>
std::optional<std::invoke_result_t<F &>> Worker::read_holding(std::uint32_t domain, F &read) noexcept {
    if (holds(domain)) {
        return guarded(read);
    }
    SyncDomain &held = _core->domain(domain);
    if (!held.try_hold(_id)) {
        return std::nullopt;
    }
    std::optional<std::invoke_result_t<F &>> result{guarded(read)};
    held.release();
    return result;
}

template <class F>
[[gnu::noinline]] std::optional<std::invoke_result_t<F &>> Worker::read_resource_slowly(ResourcePtr resource,
                                                                                        F &read) noexcept {
    using Result = std::invoke_result_t<F &>;
    ResourceHeader &header = header_of(resource);
    const sync::Primitive primitive = primitive_of(resource);
    switch (primitive) {
    case sync::Primitive::none:
        return guarded(read);
    case sync::Primitive::scheduling:
        // Only the domain's holder touches the resource: this worker, or it holds the domain
        // for the read. While another worker drains the domain, the caller has to send a task.
        return read_holding(domain_of(resource), read);
    case sync::Primitive::spinlock:
    case sync::Primitive::htm: { // the spinlock is HTM's fallback: taking it aborts transactions
        header.spinlock.lock();
        std::optional<Result> result{guarded(read)};
        header.spinlock.unlock();
        return result;
    }
    case sync::Primitive::rw_latch: {
        header.rw_latch.lock_shared();
        std::optional<Result> result{guarded(read)};
        header.rw_latch.unlock_shared();
        return result;
    }
    case sync::Primitive::optimistic_latched:
    case sync::Primitive::optimistic_scheduled:
        break;
    }
    // The first attempt failed validation (read_resource).
    bump(_shared.optimistic_retries);
    for (std::uint32_t attempt = 1;; ++attempt) {
        if (attempt > _optimistic_retries) {
            // Writers keep interfering: read without them. A latched resource's version is its
            // latch; a scheduled one's writers run only on the domain's holder, so a worker
            // that holds the domain (or takes it for the read) reads undisturbed, and otherwise
            // keeps validating (those writers end without waiting for anything).
            if (primitive == sync::Primitive::optimistic_latched) {
                header.version.write_lock();
                std::optional<Result> result{guarded(read)};
                header.version.write_end();
                return result;
            }
            if (std::optional<Result> result = read_holding(domain_of(resource), read)) {
                return result;
            }
            system::pause();
        }
        std::optional<Result> result;
        if (try_optimistic(header, [&]() noexcept { result.emplace(read()); })) {
            return result;
        }
        bump(_shared.optimistic_retries);
    }
}

inline bool Worker::stays_here(const Task &task) const noexcept {
    if (task.squad() != nullptr || task.target_region() != any_region ||
        (task.target_worker() != any_worker && task.target_worker() != _id)) {
        return false;
    }
    return !routed_to_owner(task) || holds(domain_of(task.resource()));
}

[[gnu::always_inline]] inline void Worker::push_local(Task &task) noexcept {
    _pool.push_local(task);
    if (_stealing && _core->sleepers() != 0) [[unlikely]] {
        _core->wake_thief(this);
    }
}

/// No squad, region, worker or owning domain: the task goes into this worker's pool.
inline bool goes_to_local_pool(const Task &task) noexcept {
    return task.squad() == nullptr && task.target_region() == any_region &&
           task.target_worker() == any_worker && !routed_to_owner(task);
}

[[gnu::always_inline]] inline void Worker::spawn(Task &task) noexcept {
    MX_ASSERT(!_in_optimistic_read,
              "an optimistic reader may run again: return successors via TaskResult instead of spawning");
    if (goes_to_local_pool(task)) [[likely]] {
        count_spawn(task);
        push_local(task);
        return;
    }
    spawn_routed(task);
}

/// Destroys a runtime-owned task and returns its memory through `free(memory, size_class)` (or
/// aligned delete for oversized tasks); the counterpart of construct_task.
template <class Free>
[[gnu::always_inline]] inline void destroy_task(RuntimeCore &core, Task &task, Free &&free) noexcept {
    MX_ASSERT(task.is_runtime_owned(),
              "a task the runtime did not allocate cannot be removed or deleted by it");
    const std::uint8_t size_class = RuntimeCore::size_class_of(task);
    task.~Task();
    if (size_class != memory::oversized_class) [[likely]] {
        free(static_cast<void *>(&task), size_class);
    } else {
        ::operator delete(static_cast<void *>(&task), std::align_val_t{system::cache_line_size});
        core.count_oversized(-1);
    }
}

inline void Worker::destroy(Task &task) noexcept {
    destroy_task(*_core, task, [this](void *memory, std::uint8_t size_class) noexcept {
        _allocator.free(memory, size_class);
    });
}

/// Allocates (through `allocate(size_class)`, or aligned new for oversized tasks) and constructs a
/// runtime-owned task; shared by workers and outside threads.
template <class T, class Allocate, class... Args>
T *construct_task(RuntimeCore &core, Allocate &&allocate, Args &&...args) noexcept {
    static_assert(std::is_base_of_v<Task, T>, "new_task creates tasks");
    static_assert(alignof(T) <= system::cache_line_size, "over-aligned tasks are not supported");
    constexpr std::uint8_t size_class = memory::size_class_of(sizeof(T));
    void *memory = nullptr;
    if constexpr (size_class == memory::oversized_class) {
        memory = ::operator new(sizeof(T), std::align_val_t{system::cache_line_size}, std::nothrow);
        core.count_oversized(1);
    } else {
        memory = allocate(size_class);
    }
    if (memory == nullptr) [[unlikely]] {
        out_of_task_memory();
    }
    T *task = new (memory) T(std::forward<Args>(args)...);
    RuntimeCore::mark_runtime_owned(*task, size_class, sizeof(T));
    return task;
}

template <class T, class... Args>
T *Worker::new_task(Args &&...args) noexcept {
    return construct_task<T>(
        *_core, [this](std::uint8_t size_class) noexcept { return _allocator.allocate(size_class); },
        std::forward<Args>(args)...);
}

} // namespace mx::tasking::detail
