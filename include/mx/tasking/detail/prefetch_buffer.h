#pragma once

// The prefetch buffer (dissertation ch. 3): the tasks a worker took from its pool for its next
// run, prefetched ahead of their execution. Not API: see docs/design/prefetching.md.

#include <algorithm>
#include <array>
#include <cstdint>
#include <typeinfo>
#include <vector>

#include "mx/tasking/config.h"
#include "mx/tasking/task.h"

namespace mx::tasking::detail {

/// A worker's prefetch buffer. fill() puts the next tasks into it; the worker runs them in order
/// and prefetches the annotated data of the task `distance` ahead (static), or of each task at
/// the slot computed from the expected run times and prefetch costs (dynamic). Run times per
/// task type are sampled (one task in `sample_interval`).
///
/// Owner-private: only the worker thread touches it (and Worker::drain() after the thread ended).
struct PrefetchBuffer {
    /// One task in this many is timed: cheap enough to leave on, enough to follow phase changes.
    static constexpr std::uint32_t sample_interval = 32;

    PrefetchBuffer(const RuntimeConfig &config, std::uint32_t load_latency)
        : distance(config.prefetch_distance), dynamic(config.dynamic_prefetch),
          load_latency_cycles(load_latency), tasks(config.task_buffer_size, nullptr),
          expected_cycles(config.task_buffer_size), prefetch_cycles(config.task_buffer_size),
          prefetch_slots(config.task_buffer_size) {}

    [[nodiscard]] std::uint32_t capacity() const noexcept { return static_cast<std::uint32_t>(tasks.size()); }

    /// The task's expected run time: annotated, or else sampled for its type.
    [[nodiscard]] std::uint32_t expected_cycles_of(const Task &task) const noexcept {
        if (task.expected_cycles() != 0) {
            return task.expected_cycles();
        }
        const void *type = &typeid(task);
        const TypeSample &sample =
            type_samples[(reinterpret_cast<std::uintptr_t>(type) >> 4U) % type_samples.size()];
        // Unknown types count as short tasks: prefetching a little early costs less than too late.
        return sample.type == type ? sample.cycles : 100U;
    }

    /// Folds a measured run time of a task of `type` into its moving average.
    void record_sample(const void *type, std::uint32_t cycles) noexcept {
        TypeSample &sample =
            type_samples[(reinterpret_cast<std::uintptr_t>(type) >> 4U) % type_samples.size()];
        if (sample.type != type) {
            sample = TypeSample{type, cycles};
        } else {
            sample.cycles = (sample.cycles * 7U + cycles) / 8U;
        }
    }

    // Configuration.
    std::uint32_t distance;            // static prefetch distance in tasks (0: none)
    bool dynamic;                      // dynamic prefetch slots instead of a fixed distance
    std::uint32_t load_latency_cycles; // cost of one prefetched line (dynamic prefetching)

    std::vector<Task *> tasks;
    std::uint32_t size{0};     // tasks in the buffer
    std::uint32_t position{0}; // next task to run
    // Dynamic prefetching: per slot the expected run time, prefetch cost and the position
    // before which the slot's data is prefetched.
    std::vector<std::uint32_t> expected_cycles;
    std::vector<std::uint32_t> prefetch_cycles;
    std::vector<std::uint32_t> prefetch_slots;
    // Sampled run time per task type (type_info address -> cycles, moving average).
    struct TypeSample {
        const void *type{nullptr};
        std::uint32_t cycles{0};
    };
    std::array<TypeSample, 64> type_samples{};
    std::uint32_t sample_countdown{sample_interval};
};

} // namespace mx::tasking::detail
