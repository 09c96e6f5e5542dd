// Radix join benchmark (dissertation ch. 6; workload A of Balkesen et al.): the classic radix join
// on plain threads (one and two passes, with and without software write-combining buffers)
// against the task-based join with micro partitioning and task squads (fragments of 128 and 256
// tuples, with and without write-combining lines), over a sweep of radix bits and worker counts. Every run's
// result must equal the first variant's (and the reference join's with --verify). Medians of --repetitions
// runs after one warm-up run. CSV to --csv (default stdout); progress and TARGET lines to stderr.

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "mx/join/classic_radix_join.h"
#include "mx/join/micro_radix_join.h"
#include "mx/join/relation.h"
#include "mx/tasking/runtime.h"

#include "../support/trace_options.h"

namespace {

using mx::join::JoinResult;
using mx::join::JoinTimings;

struct Variant {
    std::string name;
    bool micro;
    unsigned passes;
    bool combining;
    std::uint32_t capacity;
    bool fuse_probe{true};
    std::uint32_t fragments_per_chunk{mx::join::MicroJoinConfig{}.fragments_per_chunk};
    std::uint32_t table_slots{mx::join::MicroJoinConfig{}.table_slots_per_worker};
    std::uint32_t fragments_per_task{mx::join::MicroJoinConfig{}.fragments_per_task};
};

std::vector<Variant> all_variants(const std::vector<std::uint32_t> &capacities) {
    std::vector<Variant> variants{
        {"classic_1pass", false, 1, false, 0},
        {"classic_1pass_swwcb", false, 1, true, 0},
        {"classic_2pass", false, 2, false, 0},
        {"classic_2pass_swwcb", false, 2, true, 0},
    };
    for (const std::uint32_t capacity : capacities) {
        const std::string name = "micro_" + std::to_string(capacity);
        variants.push_back({name, true, 0, true, capacity, true});
        // Plain stores instead of write-combining lines (run by default like the classic
        // join's two scatters: which one wins depends on the machine and its load).
        variants.push_back({name + "_nowc", true, 0, false, capacity, true});
        // Ablations (run only when named): the build phase completed before any probe squad is
        // published (the dissertation's schedule), with and without write combining.
        variants.push_back({name + "_phased", true, 0, true, capacity, false});
        variants.push_back({name + "_nowc_phased", true, 0, false, capacity, false});
        // Every fragment from the producer's counter, scattered among all partitions.
        variants.push_back({name + "_scattered", true, 0, true, capacity, true, 1});
        // Every hash table in its own slice of one arena instead of a reused per-worker slot.
        variants.push_back({name + "_arena", true, 0, true, capacity, true,
                            mx::join::MicroJoinConfig{}.fragments_per_chunk, 0});
        // A task per fragment (the dissertation's granularity) instead of a run of adjacent ones.
        variants.push_back({name + "_fragment_tasks", true, 0, true, capacity, true,
                            mx::join::MicroJoinConfig{}.fragments_per_chunk,
                            mx::join::MicroJoinConfig{}.table_slots_per_worker, 1});
    }
    return variants;
}

bool is_ablation(const Variant &variant) {
    const mx::join::MicroJoinConfig defaults;
    return variant.micro &&
           (!variant.fuse_probe || variant.fragments_per_chunk != defaults.fragments_per_chunk ||
            variant.table_slots != defaults.table_slots_per_worker ||
            variant.fragments_per_task != defaults.fragments_per_task);
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

std::size_t physical_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page_size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page_size)
                                      : std::size_t{8} << 30U;
}

double tsc_per_ns() {
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t cycles = mx::system::cycles();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(50)) {
    }
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    return static_cast<double>(mx::system::cycles() - cycles) / static_cast<double>(ns.count());
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"Radix join: classic partitioning (threads) vs micro partitioning with task squads"};
    std::size_t build_size = 1U << 20U;
    std::size_t probe_size = 1U << 24U;
    unsigned min_bits = 6;
    unsigned max_bits = 14;
    std::vector<unsigned> workers_list{1, 2};
    std::vector<std::string> variant_names;
    unsigned repetitions = 3;
    std::uint64_t seed = 1;
    double zipf = 0.0;
    bool verify = false;
    bool per_run = false;
    std::string csv_path = "-";
    std::uint32_t prefetch_distance = 2;
    std::vector<std::uint32_t> capacities{128, 256};
    app.add_option("--build", build_size, "build relation tuples (workload A: 16M)")
        ->check(CLI::Range(0UL, 1UL << 31U));
    app.add_option("--probe", probe_size, "probe relation tuples (workload A: 256M)");
    app.add_option("--min-bits", min_bits, "smallest radix bits of the sweep")->check(CLI::Range(1U, 20U));
    app.add_option("--max-bits", max_bits, "largest radix bits of the sweep")->check(CLI::Range(1U, 20U));
    app.add_option("--workers", workers_list, "worker (thread) counts")->check(CLI::Range(1U, 256U));
    app.add_option("--variants", variant_names, "variants to run (default: all)");
    app.add_option("--repetitions", repetitions, "measured runs per point (after one warm-up)")
        ->check(CLI::Range(1U, 1000U));
    app.add_option("--seed", seed, "relation generator seed");
    app.add_option("--zipf", zipf, "Zipf skew of the probe keys (0 = uniform)")
        ->check(CLI::Range(0.0, 0.999));
    app.add_option("--prefetch-distance", prefetch_distance,
                   "runtime prefetch distance in tasks (0 = off) for the fragment annotations");
    app.add_option("--fragment-capacities", capacities, "tuples per fragment of the micro variants")
        ->check(CLI::Range(1U, mx::join::MicroRadixJoin::max_fragment_capacity));
    app.add_flag("--verify", verify, "also check every result against the reference join (slow)");
    app.add_flag("--per-run", per_run, "also print every measured run's phase times to stderr");
    app.add_option("--csv", csv_path, "CSV output file ('-' = stdout)");
    mx::bench::TraceOptions trace;
    mx::bench::add_trace_options(app, trace, "the last repetition of each micro (task-based) variant");
    CLI11_PARSE(app, argc, argv);
    if (min_bits > max_bits) {
        std::cerr << "mx_bench_join: --min-bits " << min_bits << " is larger than --max-bits " << max_bits
                  << "\n";
        return 2;
    }
    const std::vector<Variant> known = all_variants(capacities);
    std::vector<Variant> variants;
    for (const Variant &variant : known) {
        if ((variant_names.empty() && !is_ablation(variant)) ||
            std::find(variant_names.begin(), variant_names.end(), variant.name) != variant_names.end()) {
            variants.push_back(variant);
        }
    }
    for (const std::string &name : variant_names) {
        if (std::none_of(known.begin(), known.end(),
                         [&](const Variant &variant) { return variant.name == name; })) {
            std::cerr << "mx_bench_join: unknown variant '" << name
                      << "' (classic_1pass, classic_1pass_swwcb, "
                      << "classic_2pass, classic_2pass_swwcb, micro_<capacity>[_nowc][_phased], "
                         "micro_<capacity>_{scattered,arena,fragment_tasks} for each "
                      << "--fragment-capacities)\n";
            return 2;
        }
    }
    std::ofstream file;
    if (csv_path != "-") {
        file.open(csv_path);
        if (!file) {
            std::cerr << "mx_bench_join: cannot write --csv " << csv_path << "\n";
            return 2;
        }
    }
    std::ostream &csv = csv_path == "-" ? std::cout : file;
    csv << "benchmark,variant,workers,metric,value,unit,repetitions\n";

    std::cerr << "generating build " << build_size << " / probe " << probe_size << " tuples (seed " << seed
              << ", zipf " << zipf << ")\n";
    const mx::join::TupleBuffer build = mx::join::make_build_relation(build_size, seed);
    const mx::join::TupleBuffer probe = mx::join::make_probe_relation(probe_size, build_size, seed, zipf);
    std::optional<JoinResult> expected;
    if (verify) {
        expected = mx::join::reference_join(build.span(), probe.span());
    }
    const double cycles_per_ns = tsc_per_ns();
    const double tuples = static_cast<double>(build_size + probe_size);

    // (bits, variant, workers) -> medians of partition and total milliseconds.
    std::map<std::tuple<unsigned, std::string, unsigned>, std::pair<double, double>> summary;
    for (const unsigned workers : workers_list) {
        mx::tasking::RuntimeConfig config;
        config.workers = static_cast<std::uint16_t>(workers);
        config.prefetch_distance = prefetch_distance;
        std::unique_ptr<mx::tasking::Runtime> runtime;
        for (unsigned bits = min_bits; bits <= max_bits; ++bits) {
            // Repetitions interleave the variants (rep 0 of each, rep 1 of each, ...), so a slow
            // phase of this shared machine hits all of them alike. Every join keeps its buffers
            // across repetitions when they all fit in half the memory; otherwise each run builds
            // its join anew (untimed: allocation and pre-faulting happen in the constructor).
            struct Measured {
                const Variant *variant;
                std::unique_ptr<mx::join::ClassicRadixJoin> classic;
                std::unique_ptr<mx::join::MicroRadixJoin> micro;
                std::vector<double> partition_ms, build_ms, probe_ms, join_ms, total_ms, cycles;
            };
            const auto make_join = [&](Measured &m) {
                const Variant &variant = *m.variant;
                if (variant.micro) {
                    if (!runtime) {
                        runtime = std::make_unique<mx::tasking::Runtime>(config);
                    }
                    m.micro = std::make_unique<mx::join::MicroRadixJoin>(
                        *runtime, build.span(), probe.span(),
                        mx::join::MicroJoinConfig{bits, variant.capacity, variant.combining,
                                                  variant.fuse_probe, variant.fragments_per_chunk,
                                                  variant.table_slots, variant.fragments_per_task});
                } else {
                    // Plain threads compete with nothing: the runtime's idle workers sleep.
                    m.classic = std::make_unique<mx::join::ClassicRadixJoin>(
                        build.span(), probe.span(),
                        mx::join::ClassicJoinConfig{workers, bits, variant.passes, variant.combining});
                }
            };
            const double relation_bytes = tuples * sizeof(mx::join::Tuple);
            const bool keep_joins = 3.0 * relation_bytes * static_cast<double>(variants.size()) <
                                    0.5 * static_cast<double>(physical_memory_bytes());
            std::vector<Measured> measured;
            for (const Variant &variant : variants) {
                measured.push_back(Measured{&variant, nullptr, nullptr, {}, {}, {}, {}, {}, {}});
            }
            for (unsigned run = 0; run <= repetitions; ++run) {
                for (Measured &m : measured) {
                    const Variant &variant = *m.variant;
                    if (!m.micro && !m.classic) {
                        make_join(m);
                    }
                    JoinTimings timings;
                    // --trace / --profile: the last repetition of a task-based variant.
                    const bool traced = trace.wanted() && m.micro && run == repetitions;
                    if (traced) {
                        if (const std::string error = runtime->start_trace(); !error.empty()) {
                            std::cerr << "mx_bench_join: --trace: " << error << "\n";
                            return 2;
                        }
                    }
                    const JoinResult result = m.micro ? m.micro->run(&timings) : m.classic->run(&timings);
                    if (traced) {
                        mx::bench::finish_trace(*runtime, trace, "mx_bench_join",
                                                variant.name + " with " + std::to_string(bits) +
                                                    " bits and " + std::to_string(workers) + " workers");
                    }
                    if (!keep_joins) {
                        m.micro.reset();
                        m.classic.reset();
                    }
                    if (!expected) {
                        expected = result;
                    }
                    if (result != *expected) {
                        std::cerr << "mx_bench_join: " << variant.name << " with " << bits << " bits and "
                                  << workers << " workers returned " << result.matches
                                  << " matches / checksum " << result.checksum << ", expected "
                                  << expected->matches << " / " << expected->checksum << "\n";
                        return 1;
                    }
                    if (run == 0) {
                        continue; // warm-up
                    }
                    m.partition_ms.push_back(static_cast<double>(timings.partition_ns) / 1e6);
                    m.build_ms.push_back(static_cast<double>(timings.build_ns) / 1e6);
                    m.probe_ms.push_back(static_cast<double>(timings.probe_ns) / 1e6);
                    m.join_ms.push_back(static_cast<double>(timings.build_probe_ns) / 1e6);
                    m.total_ms.push_back(static_cast<double>(timings.total_ns) / 1e6);
                    m.cycles.push_back(static_cast<double>(timings.total_cycles));
                    if (per_run) {
                        std::fprintf(stderr, "  run %u %-22s partition %8.2f ms  join %8.2f ms\n", run,
                                     variant.name.c_str(), m.partition_ms.back(), m.join_ms.back());
                    }
                }
            }
            for (const Measured &m : measured) {
                const Variant &variant = *m.variant;
                const std::string benchmark = "radix_join_" + std::to_string(bits) + "b";
                const auto row = [&](const char *metric, double value, const char *unit) {
                    csv << benchmark << ',' << variant.name << ',' << workers << ',' << metric << ',' << value
                        << ',' << unit << ',' << repetitions << '\n';
                };
                const double total = median(m.total_ms);
                row("partition_time", median(m.partition_ms), "ms");
                if (variant.micro && !variant.fuse_probe) {
                    row("build_time", median(m.build_ms), "ms");
                    row("probe_time", median(m.probe_ms), "ms");
                }
                row("build_probe_time", median(m.join_ms), "ms");
                row("total_time", total, "ms");
                row("throughput", tuples / (total / 1e3), "tuples/s");
                row("cycles_per_tuple", median(m.cycles) / tuples, "cycles");
                summary[{bits, variant.name, workers}] = {median(m.partition_ms), total};
                std::fprintf(stderr,
                             "%-22s bits=%2u workers=%u partition %8.2f ms  join %8.2f ms  total %8.2f ms  "
                             "%.1f cycles/tuple (TSC %.2f GHz)\n",
                             variant.name.c_str(), bits, workers, median(m.partition_ms), median(m.join_ms),
                             total, median(m.cycles) / tuples, cycles_per_ns);
            }
        }
    }

    // Targets at 11 radix bits with the most workers measured: best micro vs best classic.
    const unsigned target_workers = *std::max_element(workers_list.begin(), workers_list.end());
    if (min_bits <= 11 && 11 <= max_bits) {
        double classic_partition = 0.0;
        double classic_total = 0.0;
        double micro_partition = 0.0;
        double micro_total = 0.0;
        for (const Variant &variant : variants) {
            const auto found = summary.find({11U, variant.name, target_workers});
            if (found == summary.end()) {
                continue;
            }
            double &partition = variant.micro ? micro_partition : classic_partition;
            double &total = variant.micro ? micro_total : classic_total;
            partition = partition == 0.0 ? found->second.first : std::min(partition, found->second.first);
            total = total == 0.0 ? found->second.second : std::min(total, found->second.second);
        }
        if (classic_partition > 0.0 && micro_partition > 0.0) {
            const double partition_ratio = classic_partition / micro_partition;
            const double total_ratio = classic_total / micro_total;
            std::fprintf(
                stderr,
                "TARGET radix_partition_micro_vs_classic_11b workers=%u value=%.3f (goal >= 1.15: %s; "
                "build %zu, probe %zu)\n",
                target_workers, partition_ratio, partition_ratio >= 1.15 ? "met" : "missed", build_size,
                probe_size);
            std::fprintf(
                stderr,
                "TARGET radix_join_micro_vs_classic_11b workers=%u value=%.3f (goal >= 1.0: %s; build %zu, "
                "probe %zu)\n",
                target_workers, total_ratio, total_ratio >= 1.0 ? "met" : "missed", build_size, probe_size);
        }
    }
    return 0;
}
