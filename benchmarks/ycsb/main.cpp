// mx_bench_ycsb: YCSB load, A and C on the B-link tree, task-based (mxtasking, prefetching on and
// off) against the thread-based trees (optimistic, reader/writer latch) and oneTBB. Each
// repetition runs every variant once (interleaved, so drifting machine load hits all alike);
// the CSV holds medians over the repetitions and the target ratios (median of per-repetition
// ratios). Columns: benchmark,variant,workers,metric,value,unit,repetitions,disturb_core,
// work_stealing; the last two hold the run's settings: the CPU of the --disturb-core busy
// process (-1: none) and RuntimeConfig::work_stealing of the mxtasking variants (1, or 0 with
// --no-steal).

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "../support/csv_writer.h"
#include "../support/disturber.h"
#include "../support/load_meter.h"
#include "workload.h"

namespace mx::bench::ycsb {
namespace {

const std::vector<std::string> all_variants{"mxtasking", "mxtasking_noprefetch", "thread_olc",
                                            "thread_rwlatch", "tbb"};

struct Options {
    WorkloadConfig workload;
    std::vector<std::uint16_t> workers{1, 2};
    std::vector<std::string> variants{all_variants};
    std::string distribution{"zipf"};
    unsigned repetitions{3};
    VariantConfig variant; // the tuning options; workers is set per run
    std::string csv{"results/blinktree.csv"};
    bool quiet{false};
    int disturb_core{-1};   // CPU of the busy process, -1: none
    std::string export_dir; // non-empty: write the workload as text files there and exit
};

/// Writes the workload as "OP key" lines (INSERT, READ, UPDATE), the text form YCSB's own
/// generator prints, so other B-link tree implementations run exactly the same requests:
/// DIR/fill (the load phase), DIR/mixed_c and DIR/mixed_a.
int export_workload(const Workload &workload, const std::string &dir) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    const auto write = [&](const char *name, const std::vector<YcsbRequest> &requests) {
        const std::filesystem::path path = std::filesystem::path{dir} / name;
        std::ofstream out{path};
        for (const YcsbRequest &request : requests) {
            out << (request.kind == Kind::insert ? "INSERT "
                    : request.kind == Kind::read ? "READ "
                                                 : "UPDATE ")
                << request.key << '\n';
        }
        out.close();
        if (!out) {
            std::fprintf(stderr, "mx_bench_ycsb: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
            return false;
        }
        return true;
    };
    return write("fill", workload.load) && write("mixed_c", workload.c) && write("mixed_a", workload.a) ? 0
                                                                                                        : 1;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// --trace FILE: every mxtasking run writes its task timeline (the last repetition's stays); with
/// several mxtasking variants or worker counts, "-<variant>-w<workers>" goes before the extension.
std::string trace_path(const Options &options, const std::string &variant, std::uint16_t workers) {
    const std::string &path = options.variant.trace;
    const auto mx_variants =
        std::count_if(options.variants.begin(), options.variants.end(),
                      [](const std::string &name) { return name.rfind("mxtasking", 0) == 0; });
    if (path.empty() || static_cast<std::size_t>(mx_variants) * options.workers.size() <= 1) {
        return path;
    }
    const std::string suffix = "-" + variant + "-w" + std::to_string(workers);
    const std::size_t slash = path.find_last_of('/');
    const std::size_t dot = path.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
        return path + suffix;
    }
    return path.substr(0, dot) + suffix + path.substr(dot);
}

RunResult run_variant(const std::string &variant, const Workload &workload, const Options &options,
                      std::uint16_t workers) {
    VariantConfig config = options.variant;
    config.workers = workers;
    config.trace = trace_path(options, variant, workers);
    if (variant == "mxtasking") {
        return run_mxtasking(workload, config);
    }
    if (variant == "mxtasking_noprefetch") {
        config.prefetch_distance = 0;
        config.dynamic_prefetch = false;
        return run_mxtasking(workload, config);
    }
    if (variant == "thread_olc") {
        return run_thread_olc(workload, config);
    }
    if (variant == "thread_rwlatch") {
        return run_thread_rwlatch(workload, config);
    }
    return run_tbb(workload, config);
}

double mops(const PhaseResult &phase) { return static_cast<double>(phase.operations) / phase.seconds / 1e6; }

const PhaseResult &phase_of(const RunResult &run, const std::string &phase) {
    return phase == "load" ? run.load : phase == "a" ? run.a : run.c;
}

struct TargetRatio {
    const char *id;
    const char *phase;
    const char *numerator;
    const char *denominator;
};
const TargetRatio target_ratios[] = {
    {"blinktree_c_task_vs_thread", "c", "mxtasking", "thread_olc"},
    {"blinktree_load_task_vs_thread", "load", "mxtasking", "thread_olc"},
    {"blinktree_a_task_vs_thread", "a", "mxtasking", "thread_olc"},
    {"blinktree_c_prefetch_on_vs_off", "c", "mxtasking", "mxtasking_noprefetch"},
    {"blinktree_c_task_vs_tbb", "c", "mxtasking", "tbb"},
};

int run(const Options &options) {
    if (!options.quiet) {
        std::printf("ycsb: generating %llu keys, %llu operations per workload (%s)\n",
                    static_cast<unsigned long long>(options.workload.keys),
                    static_cast<unsigned long long>(options.workload.operations),
                    options.distribution.c_str());
    }
    const Workload workload = make_workload(options.workload);
    if (!options.export_dir.empty()) {
        return export_workload(workload, options.export_dir);
    }
    // Started once the workload exists (its generation is not measured); stopped by its destructor
    // on every way out of this function.
    const Disturber disturber{options.disturb_core};
    const Disturber *disturbed = options.disturb_core >= 0 ? &disturber : nullptr;
    CsvWriter csv{options.csv,
                  false,
                  {{"disturb_core", std::to_string(options.disturb_core)},
                   {"work_stealing", options.variant.work_stealing ? "1" : "0"}}};
    const char *phases[] = {"load", "c", "a"};
    for (const std::uint16_t workers : options.workers) {
        const LoadMeter meter{disturbed};
        // runs[variant][repetition]
        std::map<std::string, std::vector<RunResult>> runs;
        for (unsigned rep = 0; rep < options.repetitions; ++rep) {
            for (const auto &variant : options.variants) {
                const RunResult result = run_variant(variant, workload, options, workers);
                runs[variant].push_back(result);
                if (!options.quiet) {
                    std::printf("rep %u workers %u %-22s load %6.2f  C %6.2f  A %6.2f Mops/s\n", rep, workers,
                                variant.c_str(), mops(result.load), mops(result.c), mops(result.a));
                    std::fflush(stdout);
                }
                // Every key is loaded and every request names a loaded key: anything else is a bug.
                if (result.load.found != workload.load.size() || result.c.found != workload.c.size() ||
                    result.a.found != workload.a.size()) {
                    std::fprintf(stderr, "ycsb: %s found %llu/%llu/%llu of %zu/%zu/%zu keys (load/C/A)\n",
                                 variant.c_str(), static_cast<unsigned long long>(result.load.found),
                                 static_cast<unsigned long long>(result.c.found),
                                 static_cast<unsigned long long>(result.a.found), workload.load.size(),
                                 workload.c.size(), workload.a.size());
                    return 1;
                }
            }
        }
        for (const auto &variant : options.variants) {
            for (const char *phase : phases) {
                std::vector<double> throughput;
                std::vector<double> cycles;
                std::vector<double> cpu;
                for (const RunResult &run_result : runs[variant]) {
                    const PhaseResult &p = phase_of(run_result, phase);
                    cpu.push_back(p.cpu_seconds * 1e9 / static_cast<double>(p.operations));
                    throughput.push_back(static_cast<double>(p.operations) / p.seconds / 1e6);
                    cycles.push_back(static_cast<double>(p.cycles) * workers /
                                     static_cast<double>(p.operations));
                }
                const std::string benchmark = std::string{"ycsb_"} + phase;
                csv.row(benchmark, variant, workers, "throughput", median(throughput), "Mops/s",
                        throughput.size());
                csv.row(benchmark, variant, workers, "cycles_per_op", median(cycles), "cycles",
                        cycles.size());
                csv.row(benchmark, variant, workers, "cpu_ns_per_op", median(cpu), "ns", cpu.size());
            }
        }
        for (const TargetRatio &target : target_ratios) {
            if (!runs.contains(target.numerator) || !runs.contains(target.denominator)) {
                continue;
            }
            std::vector<double> ratios;
            for (unsigned rep = 0; rep < options.repetitions; ++rep) {
                const PhaseResult &a = phase_of(runs[target.numerator][rep], target.phase);
                const PhaseResult &b = phase_of(runs[target.denominator][rep], target.phase);
                ratios.push_back(b.seconds / a.seconds);
            }
            csv.row("blinktree_targets", target.id, workers, "ratio", median(ratios), "x", ratios.size());
            if (!options.quiet) {
                std::printf("workers %u %-32s %.2fx\n", workers, target.id, median(ratios));
            }
        }
        // CPU time of other processes over all variants and repetitions of this worker count.
        const LoadMeter::Reading load = meter.read();
        csv.row("ycsb", "all", workers, "other_cpu_seconds", load.other_cpu_seconds, "s",
                options.repetitions);
        csv.row("ycsb", "all", workers, "own_cpu_seconds", load.own_cpu_seconds, "s", options.repetitions);
        csv.row("ycsb", "all", workers, "wall_seconds", load.wall_seconds, "s", options.repetitions);
        if (disturbed != nullptr) {
            csv.row("ycsb", "all", workers, "disturber_cpu_seconds", load.disturber_cpu_seconds, "s",
                    options.repetitions);
        }
    }
    return 0;
}

} // namespace
} // namespace mx::bench::ycsb

int main(int argc, char **argv) {
    using mx::bench::ycsb::Options;
    Options options;
    CLI::App app{"YCSB on the B-link tree: mxtasking against thread-based trees and oneTBB"};
    app.add_option("-n,--keys", options.workload.keys, "Keys loaded (load phase inserts)")
        ->check(CLI::Range(std::uint64_t{1000}, std::uint64_t{1} << 32U));
    app.add_option("-m,--ops", options.workload.operations, "Operations of workloads A and C each")
        ->check(CLI::Range(std::uint64_t{1000}, std::uint64_t{1} << 32U));
    app.add_option("-w,--workers", options.workers, "Worker (thread) counts, comma separated")
        ->delimiter(',')
        ->check(CLI::Range(1U, 256U));
    app.add_option("--variants", options.variants, "Variants, comma separated (default all)")
        ->delimiter(',')
        ->check(CLI::IsMember(mx::bench::ycsb::all_variants));
    app.add_option("-d,--distribution", options.distribution, "Request distribution")
        ->check(CLI::IsMember({"zipf", "uniform"}));
    app.add_option("--theta", options.workload.theta, "Zipfian skew")->check(CLI::Range(0.01, 0.999));
    app.add_option("-r,--repetitions", options.repetitions, "Repetitions (medians reported)")
        ->check(CLI::Range(1U, 1000U));
    app.add_option("--batch", options.variant.batch, "Requests handed out per batch")
        ->check(CLI::Range(1U, 1U << 20U));
    app.add_option("--split", options.variant.static_split,
                   "mxtasking: how the feeders share the requests: shared (batches claimed from one cursor, "
                   "which balances by itself) or static (each worker a fixed contiguous share, as with "
                   "partitioned data: only stealing balances)")
        ->transform(
            CLI::CheckedTransformer(std::map<std::string, bool>{{"shared", false}, {"static", true}}));
    app.add_option("--task-buffer", options.variant.task_buffer,
                   "mxtasking: tasks a worker takes from its pool per round")
        ->check(CLI::Range(1U, 4096U));
    app.add_option("--prefetch-distance", options.variant.prefetch_distance,
                   "mxtasking: static prefetch distance")
        ->check(CLI::Range(0U, 64U));
    app.add_flag("--dynamic-prefetch", options.variant.dynamic_prefetch,
                 "mxtasking: dynamic prefetch distance");
    app.add_option("--primitive", options.variant.primitive,
                   "mxtasking: force the nodes' primitive (auto = cost model)")
        ->check(CLI::IsMember({"auto", "spinlock", "rw_latch", "optimistic_latched", "optimistic_scheduled",
                               "htm", "scheduling"}));
    app.add_flag("--non-temporal-reads", options.variant.non_temporal_reads,
                 "mxtasking: reading steps prefetch non-temporally (prefetchnta)");
    app.add_option("--read-prefetch-eighths", options.variant.read_prefetch_eighths,
                   "mxtasking: eighths of the key array prefetched for reading steps")
        ->check(CLI::Range(0U, 8U));
    app.add_option("--submit-inline", options.variant.submit_inline,
                   "mxtasking: an operation's bypassed upper steps run inside the batch task that submits it "
                   "(true) or start with a round through the pool (false)");
    app.add_option("--bypass-level", options.variant.bypass_min_level,
                   "mxtasking: steps into nodes on this level or above bypass the task pool (0 = never)")
        ->check(CLI::Range(0, 64));
    app.add_option("--seed", options.workload.seed, "Request generator seed");
    app.add_option("-o,--csv", options.csv, "CSV file to write");
    app.add_option("--disturb-core", options.disturb_core,
                   "Run a busy process pinned to this CPU while measuring (a core the workers share with a "
                   "program they do not know about)")
        ->check(CLI::Range(0, CPU_SETSIZE - 1));
    app.add_option("--export-workload", options.export_dir,
                   "Write the workload to DIR/fill, DIR/mixed_c and DIR/mixed_a as 'OP key' lines and exit");
    app.add_flag("--interleaved-lookups,!--no-interleaved-lookups", options.variant.interleaved_lookups,
                 "mxtasking: lookups as coroutine tasks that suspend at each node's prefetch (interleaved "
                 "execution) instead of operation tasks that go through the pool per node");
    app.add_option("--coroutine-group", options.variant.coroutine_group_size,
                   "mxtasking: coroutine tasks a worker interleaves (0: from the runtime's latency model)")
        ->check(CLI::Range(0, 64));
    std::string payload_step{"off"};
    app.add_option("--payload-step", payload_step,
                   "mxtasking: read steps in two rounds, the second with the payload line prefetched "
                   "(auto: when the measured memory latency is high; default off)")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    bool no_steal = false;
    app.add_flag("--no-steal", no_steal, "mxtasking: RuntimeConfig::work_stealing = false");
    app.add_flag("-q,--quiet", options.quiet, "No progress lines");
    app.add_option("--trace", options.variant.trace,
                   "mxtasking variants: write each run's task timeline here (Chrome Trace Event JSON, or CSV "
                   "for *.csv; the last repetition stays; $MX_TRACE_EVENTS sets the events kept per worker)");
    app.add_flag(
        "--profile", options.variant.profile,
        "mxtasking variants: record each run and print tasks, cycles, queue time, optimistic retries "
        "and prefetch distance per task type and worker");
    CLI11_PARSE(app, argc, argv);
    options.variant.work_stealing = !no_steal;
    options.variant.payload_step =
        payload_step == "auto" ? std::nullopt : std::optional<bool>{payload_step == "on"};
    options.workload.zipfian = options.distribution == "zipf";
    try {
        return mx::bench::ycsb::run(options);
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mx_bench_ycsb: %s\n", error.what());
        return 1;
    }
}
