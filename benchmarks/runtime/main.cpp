// mx_bench_runtime: the runtime-core benchmark driver. Runs one benchmark for each requested
// worker count with every variant interleaved (mx, tbb, threads, mx, tbb, ...), takes the median
// over the repetitions and appends one CSV row per measurement:
//   benchmark,variant,workers,metric,value,unit,repetitions,disturb_core,work_stealing
// The last two hold the run's settings: the CPU of the --disturb-core busy process (-1: none) and
// RuntimeConfig::work_stealing of the mxtasking variants (1, or 0 with --no-steal).

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "../support/csv_writer.h"
#include "../support/disturber.h"
#include "../support/load_meter.h"
#include "allocators.h"
#include "common.h"

namespace mx::bench {

double tsc_hz() noexcept {
    static const double hz = [] {
        const auto start_time = std::chrono::steady_clock::now();
        const std::uint64_t start_cycles = system::cycles();
        auto now = start_time;
        while (now - start_time < std::chrono::milliseconds(20)) {
            now = std::chrono::steady_clock::now();
        }
        const std::uint64_t end_cycles = system::cycles();
        return static_cast<double>(end_cycles - start_cycles) /
               std::chrono::duration<double>(now - start_time).count();
    }();
    return hz;
}

void spin_for_micros(double micros) noexcept {
    const auto ticks = static_cast<std::uint64_t>(micros * 1e-6 * tsc_hz());
    const std::uint64_t start = system::cycles();
    while (system::cycles() - start < ticks) {
        system::pause();
    }
}

void settle() noexcept { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

namespace {

const std::vector<std::string> throughput_benchmarks{"spawn_local", "ping_pong", "all_to_all", "fib"};
const std::vector<std::string> alloc_benchmarks{"alloc_single", "alloc_batch", "alloc_cross"};
const std::vector<std::string> runtime_variants{"mx",          "mx_lifo", "mx_default", "tbb_task_group",
                                                "tbb_enqueue", "threads"};
/// Every other variant's throughput is also reported relative to this one, per repetition.
const std::string ratio_baseline{"tbb_task_group"};
const std::vector<std::string> alloc_variants{"mx", "malloc", "aligned_new"};

bool contains(const std::vector<std::string> &list, const std::string &value) {
    return std::find(list.begin(), list.end(), value) != list.end();
}

std::string join(const std::vector<std::string> &list) {
    std::string text;
    for (const auto &item : list) {
        text += (text.empty() ? "" : ", ") + item;
    }
    return text;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// Nearest-rank percentile (p in 0..100).
double percentile(std::vector<double> values, double p) {
    std::sort(values.begin(), values.end());
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
    return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double process_cpu_seconds() noexcept {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct Options {
    std::string benchmark;
    std::vector<unsigned> workers{1, 2};
    std::vector<std::string> variants;
    unsigned repetitions{5};
    unsigned warmup{1};
    Sizes sizes;
    AllocSizes alloc;
    std::string csv{"results/runtime.csv"};
    bool append{false};
    bool quiet{false};
    bool pin{true};
    bool work_stealing{true};            // RuntimeConfig::work_stealing of every mx variant
    int disturb_core{-1};                // CPU of the busy process, -1: none
    const Disturber *disturber{nullptr}; // that process, for the load figures
    std::string trace;                   // throughput benchmarks: trace file of the mx variants
    bool profile{false};                 // print a per-task-type profile of the mx variants
    std::uint32_t trace_events{0};       // events per worker (0: the runtime's default)
    bool queue_times{true};              // TraceConfig::queue_times
};

/// --trace FILE for one of several runs: FILE with "-<variant>-w<workers>" before its extension.
std::string trace_path(const Options &options, const std::string &variant, unsigned workers, bool several) {
    if (!several) {
        return options.trace;
    }
    const std::string suffix = "-" + variant + "-w" + std::to_string(workers);
    const std::size_t slash = options.trace.find_last_of('/');
    const std::size_t dot = options.trace.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
        return options.trace + suffix;
    }
    return options.trace.substr(0, dot) + suffix + options.trace.substr(dot);
}

std::unique_ptr<System> make_system(const Options &options, const std::string &variant,
                                    std::uint16_t workers) {
    if (variant == "mx") {
        return make_mxtasking(workers, MxMode::fifo, options.pin, options.work_stealing);
    }
    if (variant == "mx_lifo") {
        return make_mxtasking(workers, MxMode::lifo, options.pin, options.work_stealing);
    }
    if (variant == "mx_default") {
        return make_mxtasking(workers, MxMode::defaults, options.pin, options.work_stealing);
    }
    if (variant == "tbb_task_group") {
        return make_tbb_task_group(workers);
    }
    if (variant == "tbb_enqueue") {
        return make_tbb_enqueue(workers);
    }
    return make_threads(workers, options.pin);
}

Run run_once(System &system, const std::string &benchmark, const Sizes &sizes) {
    if (benchmark == "spawn_local") {
        return system.spawn_local(sizes);
    }
    if (benchmark == "ping_pong") {
        return system.ping_pong(sizes);
    }
    if (benchmark == "all_to_all") {
        return system.all_to_all(sizes);
    }
    return system.fib(sizes);
}

void write_load(CsvWriter &csv, const Options &options, const std::string &benchmark, unsigned workers,
                const LoadMeter &meter, std::size_t repetitions) {
    const LoadMeter::Reading load = meter.read();
    csv.row(benchmark, "all", workers, "other_cpu_seconds", load.other_cpu_seconds, "s", repetitions);
    csv.row(benchmark, "all", workers, "own_cpu_seconds", load.own_cpu_seconds, "s", repetitions);
    csv.row(benchmark, "all", workers, "wall_seconds", load.wall_seconds, "s", repetitions);
    if (options.disturber != nullptr) {
        csv.row(benchmark, "all", workers, "disturber_cpu_seconds", load.disturber_cpu_seconds, "s",
                repetitions);
    }
}

/// Median over the repetitions of each variant's throughput divided by the baseline's in the
/// same repetition (the runs are interleaved, so both saw the same machine load).
void write_ratios(CsvWriter &csv, const Options &options, const std::string &benchmark, unsigned workers,
                  const std::vector<std::string> &names, const std::vector<std::vector<Run>> &runs) {
    const auto base = std::find(names.begin(), names.end(), ratio_baseline);
    if (base == names.end()) {
        return;
    }
    const std::vector<Run> &baseline = runs[static_cast<std::size_t>(base - names.begin())];
    const auto per_second = [](const Run &run) { return static_cast<double>(run.tasks) / run.seconds; };
    for (std::size_t s = 0; s < names.size(); ++s) {
        if (names[s] == ratio_baseline) {
            continue;
        }
        std::vector<double> ratios;
        for (std::size_t r = 0; r < runs[s].size(); ++r) {
            ratios.push_back(per_second(runs[s][r]) / per_second(baseline[r]));
        }
        const double value = median(ratios);
        csv.row(benchmark, names[s], workers, "ratio_vs_" + ratio_baseline, value, "x", ratios.size());
        if (!options.quiet) {
            std::printf("%-13s %-22s workers=%u  %.2fx %s (median of per-repetition ratios)\n",
                        benchmark.c_str(), names[s].c_str(), workers, value, ratio_baseline.c_str());
        }
    }
}

/// Median throughput and cycles per task of the runs of one variant.
void write_runs(CsvWriter &csv, const Options &options, const std::string &benchmark,
                const std::string &variant, unsigned workers, const std::vector<Run> &runs) {
    std::vector<double> per_second;
    std::vector<double> cycles;
    for (const Run &run : runs) {
        per_second.push_back(static_cast<double>(run.tasks) / run.seconds);
        // Core cycles: every worker is counted for the whole run, busy or not.
        cycles.push_back(static_cast<double>(run.cycles) * workers / static_cast<double>(run.tasks));
    }
    const double tps = median(per_second);
    const double cpt = median(cycles);
    csv.row(benchmark, variant, workers, "tasks_per_second", tps, "tasks/s", runs.size());
    csv.row(benchmark, variant, workers, "cycles_per_task", cpt, "cycles", runs.size());
    csv.row(benchmark, variant, workers, "cycles_per_task_min",
            *std::min_element(cycles.begin(), cycles.end()), "cycles", runs.size());
    csv.row(benchmark, variant, workers, "ns_per_task", 1e9 / tps * workers, "ns", runs.size());
    if (!options.quiet) {
        std::printf("%-13s %-22s workers=%u  %12.0f tasks/s  %8.1f cycles/task\n", benchmark.c_str(),
                    variant.c_str(), workers, tps, cpt);
    }
}

/// The requested variants that have an implementation of `benchmark`, in the requested order.
std::vector<std::string> variants_for(const Options &options, const std::string &benchmark) {
    std::vector<std::string> chosen;
    for (const auto &variant : options.variants) {
        // mx_lifo (depth-first local order) only matters for recursive fork/join.
        const bool supported = variant == "mx" || variant == "mx_default" || variant == "threads" ||
                               (variant == "mx_lifo" && benchmark == "fib") ||
                               (variant == "tbb_task_group" && contains(throughput_benchmarks, benchmark)) ||
                               (variant == "tbb_enqueue" && benchmark != "fib");
        if (supported) {
            chosen.push_back(variant);
        }
    }
    return chosen;
}

void run_throughput(const Options &options, CsvWriter &csv) {
    for (const unsigned workers : options.workers) {
        const auto count = static_cast<std::uint16_t>(workers);
        std::vector<std::string> names = variants_for(options, options.benchmark);
        std::vector<std::unique_ptr<System>> systems;
        for (const auto &name : names) {
            systems.push_back(make_system(options, name, count));
        }
        std::vector<std::vector<Run>> runs(systems.size());
        const LoadMeter meter{options.disturber};
        for (unsigned r = 0; r < options.warmup; ++r) {
            for (auto &system : systems) {
                settle();
                run_once(*system, options.benchmark, options.sizes);
            }
        }
        // --trace / --profile: every timed run of an mx variant is recorded (so its throughput
        // is the traced one); the last repetition's trace is written and profiled.
        const bool tracing = !options.trace.empty() || options.profile;
        std::size_t traced_systems = 0;
        for (const auto &name : names) {
            traced_systems += name.rfind("mx", 0) == 0 ? 1U : 0U;
        }
        const bool several = traced_systems * options.workers.size() > 1;
        for (unsigned r = 0; r < options.repetitions; ++r) {
            for (std::size_t s = 0; s < systems.size(); ++s) {
                settle();
                const bool traced = tracing && names[s].rfind("mx", 0) == 0;
                if (traced) {
                    if (const std::string error = systems[s]->start_trace(
                            options.trace_events, options.profile && options.queue_times);
                        !error.empty()) {
                        throw std::runtime_error{"--trace: " + error};
                    }
                }
                runs[s].push_back(run_once(*systems[s], options.benchmark, options.sizes));
                if (traced) {
                    const bool last = r + 1 == options.repetitions;
                    const std::string path =
                        last && !options.trace.empty() ? trace_path(options, names[s], workers, several) : "";
                    std::string report;
                    if (const std::string error =
                            systems[s]->stop_trace(path, last && options.profile, report);
                        !error.empty()) {
                        std::fprintf(stderr, "mx_bench_runtime: --trace: %s\n", error.c_str());
                    }
                    if (!report.empty()) {
                        std::printf("%s, %s, %u workers, repetition %u:\n%s", options.benchmark.c_str(),
                                    names[s].c_str(), workers, r + 1, report.c_str());
                    }
                }
            }
        }
        for (std::size_t s = 0; s < systems.size(); ++s) {
            write_runs(csv, options, options.benchmark, names[s], workers, runs[s]);
        }
        write_ratios(csv, options, options.benchmark, workers, names, runs);
        write_load(csv, options, options.benchmark, workers, meter, options.repetitions);
    }
}

void run_wakeup(const Options &options, CsvWriter &csv) {
    const double ns_per_cycle = 1e9 / tsc_hz();
    const unsigned per_block =
        std::max(1U, (options.sizes.samples + options.repetitions - 1) / options.repetitions);
    for (const unsigned workers : options.workers) {
        const auto count = static_cast<std::uint16_t>(workers);
        std::vector<std::string> names = variants_for(options, "wakeup");
        std::vector<std::unique_ptr<System>> systems;
        for (const auto &name : names) {
            systems.push_back(make_system(options, name, count));
        }
        for (const bool sleeping : {true, false}) {
            const std::string benchmark = sleeping ? "wakeup_sleeping" : "wakeup_spinning";
            const double gap_us = sleeping ? options.sizes.sleep_gap_us : options.sizes.spin_gap_us;
            std::vector<std::vector<double>> latencies(systems.size());
            std::vector<std::uint64_t> slept(systems.size(), 0);
            std::vector<std::uint64_t> last_sleeps(systems.size(), 0);
            const LoadMeter meter{options.disturber};
            for (std::size_t s = 0; s < systems.size(); ++s) {
                settle();
                systems[s]->wakeup_sample(); // warm-up
                last_sleeps[s] = systems[s]->counts_sleeps() ? systems[s]->sleeps() : 0;
            }
            // Blocks of consecutive samples per variant, the blocks interleaved: a spinning
            // worker must not be left alone long enough to fall asleep.
            for (unsigned block = 0; block < options.repetitions; ++block) {
                for (std::size_t s = 0; s < systems.size(); ++s) {
                    System &system = *systems[s];
                    settle();
                    if (!sleeping) {
                        // Untimed: wakes the worker that fell asleep while the others ran.
                        system.wakeup_sample();
                        last_sleeps[s] = system.counts_sleeps() ? system.sleeps() : 0;
                    }
                    for (unsigned i = 0; i < per_block; ++i) {
                        if (sleeping) {
                            std::this_thread::sleep_for(
                                std::chrono::microseconds(options.sizes.sleep_gap_us));
                        } else {
                            spin_for_micros(gap_us);
                        }
                        // Did worker 0 go to sleep since the previous sample ended?
                        const std::uint64_t sleeps = system.counts_sleeps() ? system.sleeps() : 0;
                        slept[s] += sleeps > last_sleeps[s] ? 1U : 0U;
                        latencies[s].push_back(static_cast<double>(system.wakeup_sample()) * ns_per_cycle);
                        last_sleeps[s] = system.counts_sleeps() ? system.sleeps() : 0;
                    }
                }
            }
            for (std::size_t s = 0; s < systems.size(); ++s) {
                const std::size_t n = latencies[s].size();
                const double med = median(latencies[s]);
                const double p99 = percentile(latencies[s], 99.0);
                csv.row(benchmark, names[s], workers, "latency_median", med, "ns", n);
                csv.row(benchmark, names[s], workers, "latency_p99", p99, "ns", n);
                csv.row(benchmark, names[s], workers, "latency_min",
                        *std::min_element(latencies[s].begin(), latencies[s].end()), "ns", n);
                if (systems[s]->counts_sleeps()) {
                    csv.row(benchmark, names[s], workers, "slept_fraction",
                            static_cast<double>(slept[s]) / static_cast<double>(n), "fraction", n);
                }
                if (!options.quiet) {
                    std::printf("%-16s %-12s workers=%u  median %9.0f ns  p99 %9.0f ns\n", benchmark.c_str(),
                                names[s].c_str(), workers, med, p99);
                }
            }
            write_load(csv, options, benchmark, workers, meter, options.repetitions);
        }
    }
}

void run_idle(const Options &options, CsvWriter &csv) {
    for (const unsigned workers : options.workers) {
        const auto count = static_cast<std::uint16_t>(workers);
        std::vector<std::string> names = variants_for(options, "idle_cpu");
        std::vector<std::vector<double>> percents(names.size());
        const LoadMeter meter{options.disturber};
        for (unsigned r = 0; r < options.repetitions; ++r) {
            for (std::size_t s = 0; s < names.size(); ++s) {
                // A fresh system per window: only its threads can be awake in this process.
                std::unique_ptr<System> system = make_system(options, names[s], count);
                system->touch_all_workers();
                const double cpu_before = process_cpu_seconds();
                const auto wall_before = std::chrono::steady_clock::now();
                std::this_thread::sleep_for(std::chrono::duration<double>(options.sizes.idle_seconds));
                const double cpu = process_cpu_seconds() - cpu_before;
                const double wall =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_before).count();
                percents[s].push_back(100.0 * cpu / wall);
            }
        }
        for (std::size_t s = 0; s < names.size(); ++s) {
            const double med = median(percents[s]);
            csv.row("idle_cpu", names[s], workers, "cpu_percent", med, "percent_of_one_core",
                    percents[s].size());
            csv.row("idle_cpu", names[s], workers, "cpu_percent_max",
                    *std::max_element(percents[s].begin(), percents[s].end()), "percent_of_one_core",
                    percents[s].size());
            if (!options.quiet) {
                std::printf("idle_cpu         %-12s workers=%u  %.3f %% of one core\n", names[s].c_str(),
                            workers, med);
            }
        }
        write_load(csv, options, "idle_cpu", workers, meter, options.repetitions);
    }
}

void run_allocators(const Options &options, CsvWriter &csv) {
    const std::string &pattern = options.benchmark;
    const unsigned workers = pattern == "alloc_cross" ? 2 : 1;
    std::vector<std::vector<Run>> runs(options.variants.size());
    const LoadMeter meter{options.disturber};
    for (unsigned r = 0; r < options.warmup; ++r) {
        for (const auto &variant : options.variants) {
            run_alloc(pattern, variant, options.alloc);
        }
    }
    for (unsigned r = 0; r < options.repetitions; ++r) {
        for (std::size_t v = 0; v < options.variants.size(); ++v) {
            runs[v].push_back(run_alloc(pattern, options.variants[v], options.alloc));
        }
    }
    for (std::size_t v = 0; v < options.variants.size(); ++v) {
        write_runs(csv, options, pattern, alloc_variant_label(options.variants[v]), workers, runs[v]);
    }
    write_load(csv, options, pattern, workers, meter, options.repetitions);
}

} // namespace

} // namespace mx::bench

int main(int argc, char **argv) {
    using mx::bench::Options;
    Options options;
    std::vector<std::string> benchmarks = mx::bench::throughput_benchmarks;
    benchmarks.insert(benchmarks.end(), {"wakeup", "idle_cpu"});
    benchmarks.insert(benchmarks.end(), mx::bench::alloc_benchmarks.begin(),
                      mx::bench::alloc_benchmarks.end());

    CLI::App app{"mxtasking runtime benchmarks: mxtasking against oneTBB, a std::thread pool and malloc"};
    app.add_option("-b,--benchmark", options.benchmark, "Benchmark to run")
        ->required()
        ->check(CLI::IsMember(benchmarks));
    app.add_option("-w,--workers", options.workers, "Worker counts, comma separated (ignored by alloc_*)")
        ->delimiter(',')
        ->check(CLI::Range(1U, 64U));
    app.add_option("--variants", options.variants,
                   "Variants, comma separated (runtime: mx, mx_lifo (fib only), mx_default (RuntimeConfig{} "
                   "with only the worker count set, no placement annotations), tbb_task_group, tbb_enqueue, "
                   "threads; alloc_*: mx, malloc, aligned_new); default all")
        ->delimiter(',');
    app.add_option("-r,--repetitions", options.repetitions, "Timed repetitions per variant (median reported)")
        ->check(CLI::Range(1U, 10000U));
    app.add_option("--warmup", options.warmup, "Untimed runs per variant first")->check(CLI::Range(0U, 100U));
    app.add_option("--tasks", options.sizes.tasks, "spawn_local: empty tasks per worker")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40U));
    app.add_option("--chunk", options.sizes.chunk, "spawn_local: tasks spawned per round of a root task")
        ->check(CLI::Range(1U, 1U << 20U));
    app.add_option("--hops", options.sizes.hops, "ping_pong: hops in total; all_to_all: hops per worker")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40U));
    app.add_option("--in-flight", options.sizes.in_flight, "all_to_all: tasks in flight per worker")
        ->check(CLI::Range(1U, 1U << 16U));
    app.add_option("--fib-n", options.sizes.fib_n, "fib: argument")->check(CLI::Range(2U, 40U));
    app.add_option("--spread-depth", options.sizes.spread_depth,
                   "fib: top levels spread over workers (mx, threads)")
        ->check(CLI::Range(0U, 30U));
    app.add_option("--samples", options.sizes.samples, "wakeup: latency samples per variant and state")
        ->check(CLI::Range(1U, 1000000U));
    app.add_option("--sleep-gap-us", options.sizes.sleep_gap_us, "wakeup: idle time before a sleeping sample")
        ->check(CLI::Range(100U, 1000000U));
    app.add_option("--spin-gap-us", options.sizes.spin_gap_us, "wakeup: idle time before a spinning sample")
        ->check(CLI::Range(0U, 1000U));
    app.add_option("--idle-seconds", options.sizes.idle_seconds, "idle_cpu: length of one window")
        ->check(CLI::Range(0.01, 600.0));
    app.add_option("--ops", options.alloc.ops, "alloc_*: allocations per run")
        ->check(CLI::Range(std::uint64_t{1024}, std::uint64_t{1} << 40U));
    app.add_option("--batch", options.alloc.batch, "alloc_batch: objects allocated before they are freed")
        ->check(CLI::Range(1U, 1U << 20U));
    app.add_option("-o,--csv", options.csv, "CSV file to write");
    app.add_flag("--append", options.append, "Append to the CSV file instead of replacing it");
    bool no_pin = false;
    app.add_flag(
        "--no-pin", no_pin,
        "Do not pin mx and threads workers to CPUs (oneTBB never pins); for machines shared with other load");
    app.add_option("--disturb-core", options.disturb_core,
                   "Run a busy process pinned to this CPU for the whole measurement (a core the workers "
                   "share with a program they do not know about)")
        ->check(CLI::Range(0, CPU_SETSIZE - 1));
    bool no_steal = false;
    app.add_flag("--no-steal", no_steal, "RuntimeConfig::work_stealing = false for every mx variant");
    app.add_flag("-q,--quiet", options.quiet, "No progress lines on stdout");
    app.add_option(
        "--trace", options.trace,
        "spawn_local, ping_pong, all_to_all, fib: record the timed runs of the mx variants and write "
        "the last one's task timeline here (Chrome Trace Event JSON, or CSV for *.csv; several "
        "variants or worker counts add -<variant>-w<workers> before the extension)");
    app.add_flag("--profile", options.profile,
                 "Like --trace (with queue times), and print tasks, cycles and queue times per task type and "
                 "worker of the last run");
    app.add_flag(
        "!--no-queue-times", options.queue_times,
        "--profile: record without queue times (TraceConfig::queue_times = false; cheaper for tiny tasks; "
        "--trace alone never records them)");
    app.add_option("--trace-events", options.trace_events,
                   "Events per worker a trace keeps (later ones are dropped and counted; default 262144)")
        ->check(CLI::Range(1U, 0xFFFFFFFFU));
    CLI11_PARSE(app, argc, argv);
    options.pin = !no_pin;
    options.work_stealing = !no_steal;

    const bool alloc = mx::bench::contains(mx::bench::alloc_benchmarks, options.benchmark);
    const std::vector<std::string> &known = alloc ? mx::bench::alloc_variants : mx::bench::runtime_variants;
    if (options.variants.empty()) {
        options.variants = known;
    }
    for (const auto &variant : options.variants) {
        if (!mx::bench::contains(known, variant)) {
            std::fprintf(stderr, "--variants: '%s' is not a variant of %s (choose from: %s)\n",
                         variant.c_str(), options.benchmark.c_str(), mx::bench::join(known).c_str());
            return 2;
        }
    }
    if (!alloc && mx::bench::variants_for(options, options.benchmark).empty()) {
        std::fprintf(stderr, "--variants: none of %s implements %s\n",
                     mx::bench::join(options.variants).c_str(), options.benchmark.c_str());
        return 2;
    }
    if ((!options.trace.empty() || options.profile) &&
        !mx::bench::contains(mx::bench::throughput_benchmarks, options.benchmark)) {
        std::fprintf(stderr, "--trace and --profile work with %s, not with %s\n",
                     mx::bench::join(mx::bench::throughput_benchmarks).c_str(), options.benchmark.c_str());
        return 2;
    }
    if (options.benchmark == "alloc_batch" && options.alloc.ops < options.alloc.batch) {
        std::fprintf(stderr, "--ops (%llu) must be at least --batch (%u)\n",
                     static_cast<unsigned long long>(options.alloc.ops), options.alloc.batch);
        return 2;
    }

    try {
        // Stopped by its destructor on every way out of this block; std::exit() and signals end it
        // through PR_SET_PDEATHSIG.
        const mx::bench::Disturber disturber{options.disturb_core};
        options.disturber = options.disturb_core >= 0 ? &disturber : nullptr;
        mx::bench::CsvWriter csv{options.csv,
                                 options.append,
                                 {{"disturb_core", std::to_string(options.disturb_core)},
                                  {"work_stealing", options.work_stealing ? "1" : "0"}}};
        csv.row("calibration", "tsc", 0, "tsc_hz", mx::bench::tsc_hz(), "Hz", 1);
        if (alloc) {
            mx::bench::run_allocators(options, csv);
        } else if (options.benchmark == "wakeup") {
            mx::bench::run_wakeup(options, csv);
        } else if (options.benchmark == "idle_cpu") {
            mx::bench::run_idle(options, csv);
        } else {
            mx::bench::run_throughput(options, csv);
        }
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mx_bench_runtime: %s\n", error.what());
        return 1;
    }
    return 0;
}
