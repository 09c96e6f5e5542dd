// mx_bench_sync: the contention micro-benchmark. Tasks (or threads) update or read K objects
// (counter pairs) with a given read ratio, for every mxtasking primitive and for std::thread
// with std::mutex, std::shared_mutex and a hand-written optimistic lock, and oneTBB with
// spin_rw_mutex. Variants are interleaved run by run; the median of the repetitions goes to
// the CSV (benchmark,variant,workers,metric,value,unit,repetitions). A second part measures
// epoch-based reclamation on against off on the same workload; a last part writes the targets.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "../support/csv_writer.h"
#include "../support/trace_options.h"
#include "common.h"

namespace mx::bench::sync {
namespace {

const std::vector<std::string> mx_primitives{
    "spinlock", "rw_latch", "optimistic_latched", "optimistic_scheduled", "htm", "scheduling"};
const std::vector<std::string> baseline_variants{"threads_mutex", "threads_shared_mutex",
                                                 "threads_optimistic", "tbb_spin_rw_mutex"};
const std::vector<std::string> optimistic_variants{"mx_optimistic_latched", "mx_optimistic_scheduled"};

std::vector<std::string> all_variants() {
    std::vector<std::string> names;
    for (const auto &primitive : mx_primitives) {
        names.push_back("mx_" + primitive);
    }
    names.insert(names.end(), baseline_variants.begin(), baseline_variants.end());
    return names;
}

double tsc_hz() {
    static const double hz = [] {
        const auto start_time = std::chrono::steady_clock::now();
        const std::uint64_t start_cycles = system::cycles();
        auto now = start_time;
        while (now - start_time < std::chrono::milliseconds(50)) {
            now = std::chrono::steady_clock::now();
        }
        const std::uint64_t end_cycles = system::cycles();
        return static_cast<double>(end_cycles - start_cycles) /
               std::chrono::duration<double>(now - start_time).count();
    }();
    return hz;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// Lets spinning workers and threads of the previous run go idle before the next is timed.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }

struct Options {
    std::vector<unsigned> workers{1, 2};
    std::vector<std::uint64_t> objects{1, 1000, 1'000'000};
    std::vector<unsigned> read_ratios{0, 50, 95, 100};
    std::vector<std::string> variants{all_variants()};
    unsigned repetitions{5};
    unsigned warmup{1};
    Workload workload{};
    bool ebmr{true};
    std::uint64_t ebmr_objects{1000};
    unsigned ebmr_read_ratio{95};
    unsigned ebmr_repetitions{15};
    std::uint32_t allocator_batch{0};
    std::string csv{"results/sync.csv"};
    bool append{false};
    bool quiet{false};
};

std::string benchmark_name(const std::string &prefix, std::uint64_t objects, unsigned read_ratio) {
    return prefix + "_k" + std::to_string(objects) + "_r" + std::to_string(read_ratio);
}

struct Throughput {
    double ops_per_second;
    double cycles_per_op;
};

Throughput summarize(const std::vector<Run> &runs, unsigned workers, double hz) {
    std::vector<double> per_second;
    std::vector<double> cycles;
    for (const Run &run : runs) {
        const auto operations = static_cast<double>(run.operations);
        per_second.push_back(operations / (static_cast<double>(run.cycles) / hz));
        // Core cycles: every worker is counted for the whole run, busy or not.
        cycles.push_back(static_cast<double>(run.cycles) * workers / operations);
    }
    return {median(per_second), median(cycles)};
}

void write_runs(CsvWriter &csv, const Options &options, const std::string &benchmark,
                const std::string &variant, unsigned workers, const std::vector<Run> &runs, double hz) {
    const Throughput t = summarize(runs, workers, hz);
    std::vector<double> cycles;
    for (const Run &run : runs) {
        cycles.push_back(static_cast<double>(run.cycles) * workers / static_cast<double>(run.operations));
    }
    csv.row(benchmark, variant, workers, "ops_per_second", t.ops_per_second, "ops/s", runs.size());
    csv.row(benchmark, variant, workers, "cycles_per_op", t.cycles_per_op, "cycles", runs.size());
    csv.row(benchmark, variant, workers, "cycles_per_op_min", *std::min_element(cycles.begin(), cycles.end()),
            "cycles", runs.size());
    if (!options.quiet) {
        std::printf("%-22s %-24s workers=%u %12.0f ops/s %9.1f cycles/op\n", benchmark.c_str(),
                    variant.c_str(), workers, t.ops_per_second, t.cycles_per_op);
    }
}

std::unique_ptr<Variant> make_variant(const std::string &name, std::uint16_t workers,
                                      const std::shared_ptr<MxRuntime> &runtime) {
    if (name.rfind("mx_", 0) == 0) {
        return make_mx_variant(runtime, name.substr(3), name);
    }
    if (name == "threads_mutex") {
        return make_threads_mutex(workers);
    }
    if (name == "threads_shared_mutex") {
        return make_threads_shared_mutex(workers);
    }
    if (name == "threads_optimistic") {
        return make_threads_optimistic(workers);
    }
    return make_tbb_spin_rw_mutex(workers);
}

/// Median ops/s per (workers, objects, read ratio, variant), for the targets.
using ResultKey = std::tuple<unsigned, std::uint64_t, unsigned, std::string>;

void verify_or_throw(const Variant &variant, std::uint64_t writes) {
    std::string problem;
    if (!variant.verify(writes, problem)) {
        throw std::runtime_error{variant.name() + " broke the workload's invariant: " + problem};
    }
}

void sweep(const Options &options, CsvWriter &csv, std::map<ResultKey, double> &results, double hz) {
    for (const unsigned workers : options.workers) {
        const auto worker_count = static_cast<std::uint16_t>(workers);
        const std::shared_ptr<MxRuntime> runtime =
            make_mx_runtime(worker_count, true, options.allocator_batch);
        csv.row("sync", "mx", workers, "htm_available", mx_htm_available(*runtime) ? 1.0 : 0.0, "bool", 1);
        std::vector<std::unique_ptr<Variant>> variants;
        for (const auto &name : options.variants) {
            variants.push_back(make_variant(name, worker_count, runtime));
        }
        for (const std::uint64_t objects : options.objects) {
            std::vector<std::uint64_t> writes(variants.size(), 0);
            for (auto &variant : variants) {
                variant->prepare(objects);
            }
            for (const unsigned ratio : options.read_ratios) {
                Workload workload = options.workload;
                workload.objects = objects;
                workload.read_percent = ratio;
                std::vector<std::vector<Run>> runs(variants.size());
                const unsigned rounds = options.warmup + options.repetitions;
                for (unsigned round = 0; round < rounds; ++round) {
                    workload.seed = options.workload.seed + round;
                    // Interleaved, with a rotating start so no variant always follows the same one.
                    for (std::size_t j = 0; j < variants.size(); ++j) {
                        const std::size_t v = (round + j) % variants.size();
                        settle();
                        const Run run = variants[v]->run(workload);
                        writes[v] += run.writes;
                        if (round >= options.warmup) {
                            runs[v].push_back(run);
                        }
                    }
                }
                const std::string benchmark = benchmark_name("contention", objects, ratio);
                for (std::size_t v = 0; v < variants.size(); ++v) {
                    write_runs(csv, options, benchmark, variants[v]->name(), workers, runs[v], hz);
                    results[{workers, objects, ratio, variants[v]->name()}] =
                        summarize(runs[v], workers, hz).ops_per_second;
                }
            }
            for (std::size_t v = 0; v < variants.size(); ++v) {
                verify_or_throw(*variants[v], writes[v]);
                variants[v]->release();
            }
        }
    }
}

/// EBMR on against off: the same workload on two runtimes that differ only in
/// memory_reclamation. Runs alternate (on, off, off, on, ...); the overhead of each pair is
/// off/on - 1, and the median over the pairs is reported.
void ebmr(const Options &options, CsvWriter &csv, std::map<unsigned, double> &overheads, double hz) {
    const std::string benchmark = benchmark_name("ebmr", options.ebmr_objects, options.ebmr_read_ratio);
    for (const unsigned workers : options.workers) {
        const auto worker_count = static_cast<std::uint16_t>(workers);
        const auto on = make_mx_variant(make_mx_runtime(worker_count, true, options.allocator_batch),
                                        "optimistic_latched", "mx_ebmr_on");
        const auto off = make_mx_variant(make_mx_runtime(worker_count, false, options.allocator_batch),
                                         "optimistic_latched", "mx_ebmr_off");
        on->prepare(options.ebmr_objects);
        off->prepare(options.ebmr_objects);
        Workload workload = options.workload;
        workload.objects = options.ebmr_objects;
        workload.read_percent = options.ebmr_read_ratio;
        std::vector<Run> on_runs;
        std::vector<Run> off_runs;
        std::vector<double> overhead;
        std::uint64_t on_writes = 0;
        std::uint64_t off_writes = 0;
        for (unsigned round = 0; round < options.warmup + options.ebmr_repetitions; ++round) {
            workload.seed = options.workload.seed + round;
            Run on_run;
            Run off_run;
            for (int j = 0; j < 2; ++j) {
                settle();
                if ((j == 0) == (round % 2 == 0)) {
                    on_run = on->run(workload);
                    on_writes += on_run.writes;
                } else {
                    off_run = off->run(workload);
                    off_writes += off_run.writes;
                }
            }
            if (round >= options.warmup) {
                on_runs.push_back(on_run);
                off_runs.push_back(off_run);
                // Same operations: the time ratio is the throughput ratio.
                overhead.push_back(
                    (static_cast<double>(on_run.cycles) / static_cast<double>(off_run.cycles) - 1.0) * 100.0);
            }
        }
        write_runs(csv, options, benchmark, on->name(), workers, on_runs, hz);
        write_runs(csv, options, benchmark, off->name(), workers, off_runs, hz);
        const double percent = median(overhead);
        csv.row(benchmark, "mx_optimistic_latched", workers, "ebmr_overhead_percent", percent, "%",
                overhead.size());
        // Cross-check that other processes can only make larger: the best run of each side.
        const auto fastest = [](const std::vector<Run> &runs) {
            std::uint64_t best = runs.front().cycles;
            for (const Run &run : runs) {
                best = std::min(best, run.cycles);
            }
            return static_cast<double>(best);
        };
        csv.row(benchmark, "mx_optimistic_latched", workers, "ebmr_overhead_percent_best_runs",
                (fastest(on_runs) / fastest(off_runs) - 1.0) * 100.0, "%", overhead.size());
        overheads[workers] = percent;
        if (!options.quiet) {
            std::printf("%-22s %-24s workers=%u %+11.2f %% (EBMR on vs off, median of paired runs)\n",
                        benchmark.c_str(), "mx_optimistic_latched", workers, percent);
        }
        verify_or_throw(*on, on_writes);
        verify_or_throw(*off, off_writes);
    }
}

/// The targets of the issue, one row each per worker count; the last worker count (the most
/// parallel) is the one the summary line reports.
void targets(const Options &options, CsvWriter &csv, const std::map<ResultKey, double> &results,
             const std::map<unsigned, double> &overheads) {
    constexpr std::uint64_t target_objects = 1000;
    constexpr unsigned target_ratio = 95;
    std::printf("\ntargets:\n");
    for (const unsigned workers : options.workers) {
        const auto shared = results.find({workers, target_objects, target_ratio, "threads_shared_mutex"});
        double best = 0.0;
        std::string best_name;
        for (const auto &name : optimistic_variants) {
            const auto found = results.find({workers, target_objects, target_ratio, name});
            if (found != results.end() && found->second > best) {
                best = found->second;
                best_name = name;
            }
        }
        if (shared != results.end() && best > 0.0) {
            const double ratio = best / shared->second;
            csv.row("sync_targets", best_name, workers, "optimistic_vs_shared_mutex_r95", ratio, "x",
                    options.repetitions);
            std::printf(
                "  TARGET optimistic_vs_shared_mutex_r95 workers=%u value=%.3f (%s vs threads_shared_mutex, "
                "goal >= 1.5: %s)\n",
                workers, ratio, best_name.c_str(), ratio >= 1.5 ? "met" : "missed");
        }
        if (const auto found = overheads.find(workers); found != overheads.end()) {
            csv.row("sync_targets", "mx_optimistic_latched", workers, "ebmr_overhead_percent", found->second,
                    "%", options.ebmr_repetitions);
            std::printf("  TARGET ebmr_overhead_percent workers=%u value=%.3f (goal < 5: %s)\n", workers,
                        found->second, found->second < 5.0 ? "met" : "missed");
        }
    }
}

} // namespace
} // namespace mx::bench::sync

int main(int argc, char **argv) {
    using namespace mx::bench::sync;
    Options options;
    CLI::App app{"mx_bench_sync: contention on K objects for every mxtasking synchronization primitive, "
                 "against std::thread with std locks or an optimistic lock and oneTBB's spin_rw_mutex"};
    app.add_option("-w,--workers", options.workers, "Worker counts, comma separated")
        ->delimiter(',')
        ->check(CLI::Range(1U, 64U));
    app.add_option("-k,--objects", options.objects, "Object counts K, comma separated")
        ->delimiter(',')
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 28U));
    app.add_option("--read-ratios", options.read_ratios, "Read percentages, comma separated")
        ->delimiter(',')
        ->check(CLI::Range(0U, 100U));
    app.add_option("--variants", options.variants, "Variants, comma separated (default: all)")
        ->delimiter(',')
        ->check(CLI::IsMember(all_variants()));
    app.add_option("-r,--repetitions", options.repetitions, "Timed repetitions per variant (median reported)")
        ->check(CLI::Range(1U, 1000U));
    app.add_option("--warmup", options.warmup, "Untimed rounds first")->check(CLI::Range(0U, 100U));
    app.add_option("--ops", options.workload.operations_per_worker, "Operations per worker and run")
        ->check(CLI::Range(std::uint64_t{1000}, std::uint64_t{1} << 36U));
    app.add_option("--batch", options.workload.batch,
                   "mxtasking: operation tasks a producer spawns per round")
        ->check(CLI::Range(1U, 1U << 20U));
    app.add_option("--allocator-batch", options.allocator_batch,
                   "mxtasking: RuntimeConfig::allocator_batch (0 = the runtime's default)")
        ->check(CLI::Range(0U, 1U << 16U));
    app.add_option("--seed", options.workload.seed, "Seed of the operation streams");
    app.add_flag("!--no-ebmr", options.ebmr, "Skip the EBMR on/off comparison");
    app.add_option("--ebmr-objects", options.ebmr_objects, "EBMR comparison: objects")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 28U));
    app.add_option("--ebmr-read-ratio", options.ebmr_read_ratio, "EBMR comparison: read percentage")
        ->check(CLI::Range(0U, 100U));
    app.add_option("--ebmr-repetitions", options.ebmr_repetitions, "EBMR comparison: paired runs")
        ->check(CLI::Range(1U, 1000U));
    app.add_option("-o,--csv", options.csv, "CSV output file");
    app.add_flag("--append", options.append, "Append to the CSV instead of replacing it");
    app.add_flag("-q,--quiet", options.quiet, "Print only the targets");
    mx::bench::TraceOptions trace;
    mx::bench::add_trace_options(app, trace, "each mx runtime's whole life (warm-up included)");
    CLI11_PARSE(app, argc, argv);
    mx::bench::trace_through_environment(trace);

    try {
        mx::bench::CsvWriter csv{options.csv, options.append};
        const double hz = tsc_hz();
        csv.row("sync", "all", 0, "tsc_hz", hz, "Hz", 1);
        if (!options.quiet) {
            std::printf("time-stamp counter: %.3f GHz (measured)\n", hz * 1e-9);
        }
        std::map<ResultKey, double> results;
        std::map<unsigned, double> overheads;
        sweep(options, csv, results, hz);
        if (options.ebmr) {
            ebmr(options, csv, overheads, hz);
        }
        targets(options, csv, results, overheads);
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mx_bench_sync: %s\n", error.what());
        return 1;
    }
    return 0;
}
