// The task-based B-link tree on mxtasking. Requests are handed out in batches: one low-priority
// batch task per worker claims the next batch from a shared cursor, submits one operation task
// per request on its own worker and re-spawns itself; being low priority, it runs again only
// when the worker has nothing else to do, so the pools never hold more than a batch or so.

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "../support/trace_options.h"
#include "mx/index/blinktree/tree.h"
#include "mx/tasking/runtime.h"
#include "workload.h"

namespace mx::bench::ycsb {

namespace {

using index::blinktree::BLinkTree;
using index::blinktree::Listener;
using index::blinktree::Operation;
using index::blinktree::OpResult;
using index::blinktree::Request;
using Tree = BLinkTree<1024>;

struct Phase {
    Tree *tree;
    const std::vector<YcsbRequest> *requests;
    std::size_t batch;
    std::vector<WorkerCounters> counters;
    bool static_split;
    alignas(system::cache_line_size) std::atomic<std::size_t> cursor{0}; // claimed by all batch tasks
};

void on_result(void *context, const OpResult &result, tasking::TaskContext &task_context) noexcept {
    WorkerCounters &mine = static_cast<Phase *>(context)->counters[task_context.worker_id()];
    if (result.operation == Operation::insert ? !result.found : result.found) {
        ++mine.found;
        mine.checksum += result.value;
    }
}

class BatchTask final : public tasking::Task {
public:
    BatchTask(Phase &phase, std::uint16_t worker, std::uint16_t workers) noexcept
        : _phase(&phase), _next(phase.requests->size() * worker / workers),
          _share_end(phase.requests->size() * (worker + 1U) / workers) {
        annotate(worker);
        annotate(tasking::Priority::low);
    }
    tasking::TaskResult execute(tasking::TaskContext &context) noexcept override {
        const auto &requests = *_phase->requests;
        std::size_t begin = 0;
        std::size_t limit = requests.size();
        if (_phase->static_split) {
            // The task is pinned to its worker and never runs twice at once: a plain cursor.
            begin = _next;
            limit = _share_end;
            _next = std::min(begin + _phase->batch, limit);
        } else {
            begin = _phase->cursor.fetch_add(_phase->batch, std::memory_order_relaxed);
        }
        if (begin >= limit) {
            return tasking::TaskResult::remove();
        }
        const std::size_t end = std::min(begin + _phase->batch, limit);
        const Listener listener{&on_result, _phase};
        for (std::size_t i = begin; i < end; ++i) {
            const YcsbRequest &request = requests[i];
            const Operation operation = request.kind == Kind::insert ? Operation::insert
                                        : request.kind == Kind::read ? Operation::lookup
                                                                     : Operation::update;
            _phase->tree->submit(context, Request{.operation = operation,
                                                  .key = request.key,
                                                  .value = request.value,
                                                  .listener = listener});
        }
        return tasking::TaskResult::successor(this);
    }

private:
    Phase *_phase;
    std::size_t _next;      // static split: the next request of this worker's share
    std::size_t _share_end; // static split: the end of this worker's share
};

PhaseResult run_phase(tasking::Runtime &runtime, Tree &tree, const std::vector<YcsbRequest> &requests,
                      const VariantConfig &config) {
    Phase phase{&tree,
                &requests,
                config.batch,
                std::vector<WorkerCounters>(runtime.worker_count()),
                config.static_split,
                {}};
    runtime.wait();
    PhaseTimer timer;
    timer.start();
    for (std::uint16_t worker = 0; worker < runtime.worker_count(); ++worker) {
        runtime.spawn(*runtime.new_task<BatchTask>(phase, worker, runtime.worker_count()));
    }
    runtime.wait();
    std::uint64_t found = 0;
    for (const auto &c : phase.counters) {
        found += c.found;
    }
    return timer.stop(requests.size(), found);
}

std::optional<sync::Primitive> parse_primitive(const std::string &name) {
    if (name == "auto") {
        return std::nullopt;
    }
    for (std::uint8_t p = 0; p < sync::primitive_count; ++p) {
        if (name == sync::to_string(static_cast<sync::Primitive>(p))) {
            return static_cast<sync::Primitive>(p);
        }
    }
    throw std::invalid_argument{"unknown primitive '" + name + "'"};
}

} // namespace

RunResult run_mxtasking(const Workload &workload, const VariantConfig &config) {
    tasking::RuntimeConfig runtime_config;
    runtime_config.workers = config.workers;
    runtime_config.prefetch_distance = config.prefetch_distance;
    runtime_config.task_buffer_size = config.task_buffer;
    runtime_config.dynamic_prefetch = config.dynamic_prefetch;
    runtime_config.work_stealing = config.work_stealing;
    runtime_config.coroutine_group_size = config.coroutine_group_size;
    tasking::Runtime runtime{runtime_config};
    index::blinktree::TreeConfig tree_config;
    tree_config.primitive = parse_primitive(config.primitive);
    tree_config.prefetch_hints = config.prefetch_hints;
    tree_config.read_prefetch_eighths = config.read_prefetch_eighths;
    if (config.non_temporal_reads) {
        tree_config.read_prefetch_mode = system::PrefetchMode::non_temporal;
    }
    tree_config.bypass_min_level = config.bypass_min_level;
    tree_config.submit_inline = config.submit_inline;
    tree_config.payload_step = config.payload_step;
    tree_config.interleaved_lookups = config.interleaved_lookups;
    RunResult result;
    const TraceOptions trace{.path = config.trace, .profile = config.profile};
    start_trace(runtime, trace);
    {
        Tree tree{runtime, tree_config};
        result.load = run_phase(runtime, tree, workload.load, config);
        result.c = run_phase(runtime, tree, workload.c, config);
        result.a = run_phase(runtime, tree, workload.a, config);
    }
    runtime.wait();
    finish_trace(runtime, trace, "mx_bench_ycsb",
                 "mxtasking with " + std::to_string(runtime.worker_count()) + " workers (load, C, A)");
    return result;
}

} // namespace mx::bench::ycsb
