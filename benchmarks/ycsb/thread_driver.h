#pragma once

// Drives a thread-based B-link tree with plain threads: each thread takes batches of requests
// from one shared cursor over the request array (the same hand-out as the task-based driver).

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "workload.h"

namespace mx::bench::ycsb {

/// Executes one request on a thread tree; counts reads and updates that found their key.
template <class Tree>
inline void apply(Tree &tree, const YcsbRequest &request, WorkerCounters &counters) noexcept {
    switch (request.kind) {
    case Kind::insert:
        counters.found += tree.insert(request.key, request.value) ? 1U : 0U;
        break;
    case Kind::read:
        if (const auto value = tree.lookup(request.key)) {
            ++counters.found;
            counters.checksum += *value;
        }
        break;
    case Kind::update:
        counters.found += tree.update(request.key, request.value) ? 1U : 0U;
        break;
    }
}

inline void pin_to_cpu(std::size_t index) noexcept {
    // Workers of the runtime are pinned too; pin the baselines the same way (cpu i mod cores).
    const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(index % cores, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/// Runs `requests` on `threads` pinned threads; returns the measured phase.
template <class Tree>
PhaseResult run_phase_threads(Tree &tree, const std::vector<YcsbRequest> &requests,
                              const VariantConfig &config) {
    std::atomic<std::size_t> cursor{0};  // next unclaimed request, claimed in batches by all threads
    std::atomic<std::uint32_t> ready{0}; // threads waiting for the start signal
    std::atomic<bool> go{false};         // set by the measuring thread
    std::vector<WorkerCounters> counters(config.workers);
    std::vector<std::thread> threads;
    for (std::uint16_t t = 0; t < config.workers; ++t) {
        threads.emplace_back([&, t] {
            pin_to_cpu(t);
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) {
                system::pause();
            }
            WorkerCounters &mine = counters[t];
            while (true) {
                const std::size_t begin = cursor.fetch_add(config.batch, std::memory_order_relaxed);
                if (begin >= requests.size()) {
                    break;
                }
                const std::size_t end = std::min(begin + config.batch, requests.size());
                for (std::size_t i = begin; i < end; ++i) {
                    apply(tree, requests[i], mine);
                }
            }
        });
    }
    while (ready.load() < config.workers) {
        std::this_thread::yield();
    }
    PhaseTimer timer;
    timer.start();
    go.store(true, std::memory_order_release);
    for (auto &thread : threads) {
        thread.join();
    }
    std::uint64_t found = 0;
    for (const auto &c : counters) {
        found += c.found;
    }
    return timer.stop(requests.size(), found);
}

template <class Tree>
RunResult run_threads(const Workload &workload, const VariantConfig &config) {
    Tree tree;
    RunResult result;
    result.load = run_phase_threads(tree, workload.load, config);
    result.c = run_phase_threads(tree, workload.c, config);
    result.a = run_phase_threads(tree, workload.a, config);
    return result;
}

} // namespace mx::bench::ycsb
