// Squads: tasks collected while a squad is filled and handed to a worker in one block when the
// squad is published.

#include "mx/tasking/runtime.h"

#include <algorithm>
#include <iterator>

namespace mx::tasking::detail {

/// Squads published together. Handed out one at a time, largest first, to the feeders (one per
/// worker): a worker takes its next squad when it has run out of other work, so a slower or
/// busier worker simply takes fewer squads.
struct PublishBatch {
    explicit PublishBatch(std::vector<Squad *> sorted, std::uint32_t feeder_count) noexcept
        : squads(std::move(sorted)), feeders(feeder_count) {}
    const std::vector<Squad *> squads;  // written before any feeder runs
    std::atomic<std::size_t> next{0};   // the next squad to hand out; any feeder
    std::atomic<std::uint32_t> feeders; // feeders not yet destroyed; the last one frees the batch
};

/// Takes the next squad of a publish batch and moves its tasks into the local pool of the worker
/// it runs on, then queues itself again at low priority: it runs once those tasks (and whatever
/// else the worker has queued) are done, and takes the next squad.
class SquadFeeder final : public Task {
public:
    explicit SquadFeeder(PublishBatch &batch) noexcept : _batch(&batch) {}
    SquadFeeder(const SquadFeeder &) = delete;
    SquadFeeder &operator=(const SquadFeeder &) = delete;
    ~SquadFeeder() override {
        // Also when a stopping runtime discards the feeder unrun.
        if (_batch->feeders.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            delete _batch;
        }
    }
    TaskResult execute(TaskContext &) noexcept override {
        const std::size_t next = _batch->next.fetch_add(1, std::memory_order_relaxed);
        if (next >= _batch->squads.size()) {
            return TaskResult::remove();
        }
        current_worker()->adopt(*_batch->squads[next]);
        return TaskResult::successor(this);
    }

private:
    PublishBatch *_batch;
};

template <class Push>
std::uint64_t Worker::adopt_each(Squad &squad, Push &&push) noexcept {
    std::uint64_t adopted = 0;
    while (!squad._tasks.empty()) {
        Task *task = squad._tasks.pop();
        if (task == nullptr) {
            system::pause(); // a producer is between its two stores
            continue;
        }
        // Squad tasks count as spawned from here on; they start a fresh epoch.
        task->annotate(static_cast<Squad *>(nullptr));
        count_spawn(*task);
        push(*task);
        ++adopted;
    }
    squad._queued.fetch_sub(adopted, std::memory_order_relaxed);
    return adopted;
}

void Worker::adopt(Squad &squad) noexcept {
    // Pinned: a squad's tasks run together on the worker that adopted it.
    adopt_each(squad, [this](Task &task) noexcept { _pool.push_pinned(task); });
}

void Worker::adopt_next(Squad &squad) noexcept {
    IntrusiveQueue<Task> chains[priority_count];
    adopt_each(squad, [&chains](Task &task) noexcept {
        chains[static_cast<std::size_t>(task.priority())].push_back(task);
    });
    _pool.prepend_pinned(chains);
}

void RuntimeCore::publish(Squad *const *squads, std::size_t count, Worker *caller) noexcept {
    if (count == 1 && caller != nullptr) {
        // One squad from inside a task: its data is in this core's cache (the task just made
        // it), so the squad runs here and next, ahead of the worker's queued tasks. Adopted on
        // the spot: no dispatch task, no allocation (a join publishes one squad per partition).
        caller->adopt_next(*squads[0]);
        return;
    }
    // Largest squads first (the last ones handed out are the short ones that even out the end);
    // empty ones have nothing to adopt.
    std::vector<Squad *> order;
    order.reserve(count);
    std::copy_if(squads, squads + count, std::back_inserter(order),
                 [](const Squad *squad) { return squad->queued() != 0; });
    if (order.empty()) {
        return;
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const Squad *a, const Squad *b) { return a->queued() > b->queued(); });
    const auto feeders = static_cast<std::uint16_t>(std::min(order.size(), _workers.size()));
    auto *batch = new PublishBatch{std::move(order), feeders};
    // Feeders start at a rotating worker, so single squads published from outside spread too.
    const auto first = static_cast<std::uint16_t>(
        _next_external_worker.fetch_add(1, std::memory_order_relaxed) % _workers.size());
    for (std::uint16_t i = 0; i < feeders; ++i) {
        const auto target = static_cast<std::uint16_t>((first + i) % _workers.size());
        Task *feeder =
            caller != nullptr
                ? caller->new_task<SquadFeeder>(*batch)
                : construct_task<SquadFeeder>(
                      *this,
                      [this](std::uint8_t size_class) noexcept { return allocate_external(size_class); },
                      *batch);
        feeder->annotate(Annotation{.target_worker = target, .priority = Priority::low});
        if (caller != nullptr) {
            caller->spawn(*feeder);
        } else {
            spawn_external(*feeder);
        }
    }
}

} // namespace mx::tasking::detail
