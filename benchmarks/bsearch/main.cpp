// Binary-search benchmark (Psaropoulos ch. 4): sorted arrays of 32-bit integers and of 15-character
// strings, random lookups, and every variant in one run: std::lower_bound, the branch-free
// baseline, group prefetching, AMAC, stand-alone coroutines (mx::coro::interleave), and the same
// coroutine under the sequential policy. All variants must return the same positions.
// CSV goes to --csv (default stdout); progress and a summary go to stderr.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../support/trace_options.h"
#include "amac.h"
#include "coroutine_search.h"
#include "group_prefetch.h"
#include "keys.h"
#include "mx/coro/mapped_buffer.h"
#include "mx/coro/model.h"
#include "runtime_search.h"
#include "sequential.h"

namespace {

using namespace mx::bench::bsearch;
using mx::coro::MappedBuffer;
using mx::coro::PageMode;

struct UsageError {
    std::string message;
};

/// "1M", "1MB", "1MiB", "512K", "4G", "1048576": binary units throughout.
std::size_t parse_size(const std::string &text) {
    if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) == 0) {
        throw UsageError{"'" + text + "' is not a size (examples: 1M, 256MiB, 4G)"};
    }
    std::size_t end = 0;
    unsigned long long number = 0;
    try {
        number = std::stoull(text, &end);
    } catch (const std::exception &) {
        throw UsageError{"'" + text + "' is not a size (examples: 1M, 256MiB, 4G)"};
    }
    std::string unit = text.substr(end);
    for (auto &c : unit) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    std::size_t shift = 0;
    if (unit.empty() || unit == "B") {
        shift = 0;
    } else if (unit == "K" || unit == "KB" || unit == "KIB") {
        shift = 10;
    } else if (unit == "M" || unit == "MB" || unit == "MIB") {
        shift = 20;
    } else if (unit == "G" || unit == "GB" || unit == "GIB") {
        shift = 30;
    } else {
        throw UsageError{"'" + text + "' has an unknown unit (use K, M or G)"};
    }
    if (number == 0 || number > (std::size_t{1} << (44U - shift))) {
        throw UsageError{"'" + text + "' is out of range (1 byte to 16 TiB)"};
    }
    return static_cast<std::size_t>(number) << shift;
}

std::vector<std::string> split(const std::string &text, char separator) {
    std::vector<std::string> parts;
    std::stringstream stream(text);
    std::string part;
    while (std::getline(stream, part, separator)) {
        if (!part.empty()) {
            parts.push_back(part);
        }
    }
    return parts;
}

/// Comma list of items or ranges "a..b"; ranges of sizes double, ranges of counts step by one.
template <class Parse>
std::vector<std::size_t> parse_list(const std::string &option, const std::string &text, Parse parse,
                                    bool doubling) {
    std::vector<std::size_t> values;
    try {
        for (const auto &item : split(text, ',')) {
            const auto dots = item.find("..");
            if (dots == std::string::npos) {
                values.push_back(parse(item));
                continue;
            }
            const std::size_t from = parse(item.substr(0, dots));
            const std::size_t to = parse(item.substr(dots + 2));
            if (to < from) {
                throw UsageError{"range '" + item + "' runs backwards"};
            }
            for (std::size_t v = from; v <= to; v = doubling ? v * 2 : v + 1) {
                values.push_back(v);
            }
        }
    } catch (const UsageError &error) {
        throw UsageError{option + ": " + error.message};
    }
    if (values.empty()) {
        throw UsageError{option + ": no values given"};
    }
    return values;
}

std::size_t parse_count(const std::string &text) {
    if (text.empty() || std::isdigit(static_cast<unsigned char>(text[0])) == 0) {
        throw UsageError{"'" + text + "' is not a positive number"};
    }
    std::size_t end = 0;
    unsigned long long number = 0;
    try {
        number = std::stoull(text, &end);
    } catch (const std::exception &) {
        throw UsageError{"'" + text + "' is not a number"};
    }
    std::string unit = text.substr(end);
    std::size_t factor = 1;
    if (unit == "K" || unit == "k") {
        factor = 1000;
    } else if (unit == "M") {
        factor = 1000000;
    } else if (!unit.empty()) {
        throw UsageError{"'" + text + "' is not a number (K = 1000, M = 1000000 allowed)"};
    }
    if (number == 0 || number > 1000000000ULL / factor) {
        throw UsageError{"'" + text + "' is out of range (1 to 1000000000)"};
    }
    return static_cast<std::size_t>(number) * factor;
}

std::string size_label(std::size_t bytes) {
    if (bytes % (std::size_t{1} << 20U) == 0) {
        return std::to_string(bytes >> 20U) + "MiB";
    }
    if (bytes % 1024 == 0) {
        return std::to_string(bytes >> 10U) + "KiB";
    }
    return std::to_string(bytes) + "B";
}

struct Options {
    std::vector<std::size_t> sizes;
    std::vector<std::size_t> lookups;
    std::vector<std::size_t> groups;
    std::size_t reps{5};
    std::uint64_t seed{0};
    std::vector<PageMode> page_modes;
    std::vector<std::string> types;
    std::vector<std::string> variants;
    std::string csv{"-"};
    std::size_t model_bytes{std::size_t{256} << 20U};
};

const std::vector<std::string> all_variants{"std",
                                            "branchfree",
                                            "coro_seq",
                                            "gp",
                                            "amac",
                                            "coro",
                                            "coro_nta",
                                            "rt_coro",
                                            "rt_annotated_off",
                                            "rt_annotated_static",
                                            "rt_annotated_dynamic"};

class Csv {
public:
    explicit Csv(std::ostream &out) : _out(out) {
        _out << "benchmark,variant,workers,metric,value,unit,repetitions\n";
    }
    void row(const std::string &benchmark, const std::string &variant, const std::string &metric,
             double value, const std::string &unit, std::size_t reps) {
        _out << benchmark << ',' << variant << ",1," << metric << ',' << value << ',' << unit << ',' << reps
             << '\n';
        _out.flush();
    }

private:
    std::ostream &_out;
};

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

using Clock = std::chrono::steady_clock;

struct Variant {
    std::string name;  // family: gp, amac, coro, ...
    std::size_t group; // 0 for sequential variants
    /// Runs the lookups; returns when the last one finished (for the runtime variants the
    /// worker's clock reading, not the moment the sleeping caller noticed).
    std::function<Clock::time_point(std::span<std::size_t>)> run;
    /// Untimed, right before the clock starts: the runtime variants wake their worker here.
    std::function<void()> prepare;
    std::vector<double> ns_per_lookup;
    [[nodiscard]] std::string label() const {
        return group == 0 ? name : name + "/g=" + std::to_string(group);
    }
};

template <class Key>
Key make_key(std::uint64_t number) noexcept {
    if constexpr (std::is_same_v<Key, IntKey>) {
        return static_cast<IntKey>(number);
    } else {
        return StringKey::from(number);
    }
}

template <class Key>
std::string key_text(const Key &key) {
    if constexpr (std::is_same_v<Key, IntKey>) {
        return std::to_string(key);
    } else {
        return key.str();
    }
}

/// Runs every variant `reps` times (after one checked warm-up round), interleaved within each
/// repetition, and emits medians and speedups over the branch-free baseline.
template <class Key>
void run_size(const Options &options, const std::string &type, std::size_t bytes, PageMode pages, Csv &csv,
              std::uint64_t &combination) {
    const std::size_t n = bytes / sizeof(Key);
    const std::string pages_name = pages == PageMode::huge ? "huge" : "4k";
    const auto fill_begin = Clock::now();
    MappedBuffer buffer(n * sizeof(Key), pages);
    Key *table_data = buffer.as<Key>();
    fill_table(table_data, n);
    const double fill_seconds = std::chrono::duration<double>(Clock::now() - fill_begin).count();
    const double huge_fraction =
        static_cast<double>(buffer.huge_page_backed_bytes()) / static_cast<double>(buffer.size());
    const std::span<const Key> table(table_data, n);

    for (const std::size_t lookups : options.lookups) {
        const std::string benchmark = "bsearch/type=" + type + "/size=" + size_label(bytes) +
                                      "/lookups=" + std::to_string(lookups) + "/pages=" + pages_name;
        csv.row(benchmark, "array", "huge_page_fraction", huge_fraction, "ratio", 1);
        csv.row(benchmark, "array", "fill_time", fill_seconds, "s", 1);
        std::fprintf(stderr, "\n%s: %zu keys, %.0f%% huge pages, filled in %.2f s\n", benchmark.c_str(), n,
                     100.0 * huge_fraction, fill_seconds);

        // Each (type, size, lookups, pages) combination draws keys from its own stream, derived
        // from the printed seed.
        std::mt19937_64 random(options.seed + 0x9E3779B97F4A7C15ULL * ++combination);
        std::uniform_int_distribution<std::uint64_t> number(0, 2 * static_cast<std::uint64_t>(n));
        std::vector<Key> key_storage(lookups);
        for (auto &key : key_storage) {
            key = make_key<Key>(number(random));
        }
        const std::span<const Key> keys(key_storage);

        std::vector<Variant> variants;
        auto wanted = [&](const std::string &name) {
            return std::find(options.variants.begin(), options.variants.end(), name) !=
                   options.variants.end();
        };
        auto add = [&](const std::string &name, std::size_t group, auto run) {
            if (wanted(name) || name == "branchfree") {
                variants.push_back(Variant{name,
                                           group,
                                           [run](std::span<std::size_t> out) {
                                               run(out);
                                               return Clock::now();
                                           },
                                           {},
                                           {}});
            }
        };
        // A one-worker runtime per variant, kept across repetitions (start-up not timed); its
        // worker is woken untimed before each run, and a run ends when the worker finished.
        auto add_on_runtime = [&]<class Lookup>(const std::string &name, std::size_t group,
                                                std::type_identity<Lookup>, std::size_t batch,
                                                std::uint16_t coroutine_group, std::uint32_t distance,
                                                bool dynamic) {
            if (!wanted(name)) {
                return;
            }
            auto runtime = make_search_runtime(coroutine_group, distance, dynamic);
            variants.push_back(Variant{name,
                                       group,
                                       [=](std::span<std::size_t> out) {
                                           return search_on_runtime<Lookup>(*runtime, table, keys, out,
                                                                            batch);
                                       },
                                       [=] { wake_worker(*runtime); },
                                       {}});
        };
        add("std", 0, [=](std::span<std::size_t> out) { search_std(table, keys, out); });
        add("branchfree", 0, [=](std::span<std::size_t> out) { search_branch_free(table, keys, out); });
        add("coro_seq", 0,
            [=](std::span<std::size_t> out) { search_coroutines_sequential(table, keys, out); });
        for (const std::size_t g : options.groups) {
            add("gp", g, [=](std::span<std::size_t> out) { search_group_prefetch(g, table, keys, out); });
            add("amac", g, [=](std::span<std::size_t> out) { search_amac(g, table, keys, out); });
            add("coro", g, [=](std::span<std::size_t> out) { search_coroutines(g, table, keys, out); });
            add("coro_nta", g, [=](std::span<std::size_t> out) {
                search_coroutines<mx::coro::InterleavedNonTemporal>(g, table, keys, out);
            });
            // Coroutine tasks on the runtime: the worker's group of G parked tasks.
            add_on_runtime("rt_coro", g, std::type_identity<CoroutineLookup<Key>>{}, 4 * g,
                           static_cast<std::uint16_t>(g), 0, false);
            // Annotated tasks with a static prefetch distance of g tasks.
            add_on_runtime("rt_annotated_static", g, std::type_identity<AnnotatedLookup<Key>>{}, 64, 1,
                           static_cast<std::uint32_t>(g), false);
        }
        // Annotated tasks without prefetching, and with the dynamic distance.
        add_on_runtime("rt_annotated_off", 0, std::type_identity<AnnotatedLookup<Key>>{}, 64, 1, 0, false);
        add_on_runtime("rt_annotated_dynamic", 0, std::type_identity<AnnotatedLookup<Key>>{}, 64, 1, 0, true);

        std::vector<std::size_t> expected(lookups);
        search_std(table, keys, std::span(expected));
        std::vector<std::size_t> out(lookups);
        for (std::size_t rep = 0; rep <= options.reps; ++rep) { // rep 0 is the warm-up
            for (std::size_t k = 0; k < variants.size(); ++k) {
                // Rotate the order per repetition, so no variant always follows the same one.
                Variant &variant = variants[(k + rep) % variants.size()];
                std::fill(out.begin(), out.end(), ~std::size_t{0});
                if (variant.prepare) {
                    variant.prepare();
                }
                const auto begin = Clock::now();
                const auto end = variant.run(std::span(out));
                const double ns = std::chrono::duration<double, std::nano>(end - begin).count();
                for (std::size_t i = 0; i < lookups; ++i) {
                    if (out[i] != expected[i]) {
                        std::fprintf(
                            stderr,
                            "error: %s: variant %s returned %zu for key %s (lookup %zu), std::lower_bound "
                            "returned %zu; seed %llu\n",
                            benchmark.c_str(), variant.label().c_str(), out[i], key_text(keys[i]).c_str(), i,
                            expected[i], static_cast<unsigned long long>(options.seed));
                        std::abort();
                    }
                }
                if (rep > 0) {
                    variant.ns_per_lookup.push_back(ns / static_cast<double>(lookups));
                }
            }
        }

        double baseline = 0;
        for (const auto &variant : variants) {
            if (variant.name == "branchfree") {
                baseline = median(variant.ns_per_lookup);
            }
        }
        struct Best {
            double ns{1e300};
            std::size_t group{0};
        };
        std::map<std::string, Best> best;
        for (const auto &variant : variants) {
            const double med = median(variant.ns_per_lookup);
            const double min = *std::min_element(variant.ns_per_lookup.begin(), variant.ns_per_lookup.end());
            csv.row(benchmark, variant.label(), "time_per_lookup", med, "ns", options.reps);
            csv.row(benchmark, variant.label(), "time_per_lookup_min", min, "ns", options.reps);
            csv.row(benchmark, variant.label(), "speedup_vs_branchfree", baseline / med, "x", options.reps);
            if (variant.group != 0 && med < best[variant.name].ns) {
                best[variant.name] = Best{med, variant.group};
            }
            if (variant.group == 0) {
                std::fprintf(stderr, "  %-12s %9.1f ns/lookup  %5.2fx\n", variant.label().c_str(), med,
                             baseline / med);
            }
        }
        for (const auto &[name, b] : best) {
            csv.row(benchmark, name + "/best", "time_per_lookup", b.ns, "ns", options.reps);
            csv.row(benchmark, name + "/best", "speedup_vs_branchfree", baseline / b.ns, "x", options.reps);
            csv.row(benchmark, name + "/best", "group_size", static_cast<double>(b.group), "lookups",
                    options.reps);
            std::fprintf(stderr, "  %-12s %9.1f ns/lookup  %5.2fx  (best G = %zu)\n",
                         (name + "/best").c_str(), b.ns, baseline / b.ns, b.group);
        }
    }
}

/// Model inputs for this machine and page size: T_stall from a pointer chase, T_switch from
/// suspending on cached data, T_compute as one halving step of the branch-free baseline on an
/// array that fits in L1.
void run_model(const Options &options, PageMode pages, Csv &csv) {
    const std::string benchmark =
        std::string("bsearch/model/pages=") + (pages == PageMode::huge ? "huge" : "4k");
    const double stall = mx::coro::measure_memory_latency_ns(options.model_bytes, pages, 0.1, options.seed);
    const double switch_ns = mx::coro::measure_switch_ns();

    std::vector<IntKey> small(2048);
    fill_table(small.data(), small.size());
    std::vector<IntKey> keys(100000);
    std::mt19937_64 random(options.seed);
    std::uniform_int_distribution<std::uint32_t> number(0, 4096);
    for (auto &k : keys) {
        k = number(random);
    }
    std::vector<std::size_t> out(keys.size());
    double best_ns = 1e300;
    for (int attempt = 0; attempt < 5; ++attempt) {
        const auto begin = Clock::now();
        search_branch_free(std::span<const IntKey>(small), std::span<const IntKey>(keys), std::span(out));
        best_ns = std::min(best_ns, std::chrono::duration<double, std::nano>(Clock::now() - begin).count());
        // Read the results, or the optimizer drops the searches (Clang 15 does).
        std::size_t checksum = 0;
        for (const std::size_t position : out) {
            checksum += position;
        }
        if (checksum == 0) {
            std::fprintf(stderr, "mx_bench_bsearch: warning: compute probe returned only zeros\n");
        }
    }
    const double steps = std::log2(static_cast<double>(small.size())) + 1;
    const double compute = best_ns / static_cast<double>(keys.size()) / steps;
    const mx::coro::ModelParameters parameters{
        .stall_ns = stall, .compute_ns = compute, .switch_ns = switch_ns};
    const std::size_t g = mx::coro::model_group_size(parameters, 64);
    csv.row(benchmark, "model", "memory_latency", stall, "ns", 1);
    csv.row(benchmark, "model", "switch_cost", switch_ns, "ns", 1);
    csv.row(benchmark, "model", "compute_per_step", compute, "ns", 1);
    csv.row(benchmark, "model", "group_size_unclamped", static_cast<double>(g), "lookups", 1);
    csv.row(benchmark, "model", "group_size_default", static_cast<double>(std::min<std::size_t>(g, 16)),
            "lookups", 1);
    csv.row(benchmark, "model", "max_speedup", mx::coro::model_max_speedup(parameters), "x", 1);
    std::fprintf(
        stderr,
        "%s: T_stall %.0f ns, T_switch %.1f ns, T_compute %.1f ns per step -> G >= %zu (default %zu, "
        "clamped to 16 outstanding misses), max speedup %.1fx\n",
        benchmark.c_str(), stall, switch_ns, compute, g, std::min<std::size_t>(g, 16),
        mx::coro::model_max_speedup(parameters));
}

Options parse_options(int argc, char **argv, CLI::App &app, bool &exit_now, int &exit_code) {
    std::string sizes = "1M..1G";
    std::string lookups = "10K";
    std::string groups = "1..16";
    std::string huge = "both";
    std::string types = "int,string";
    std::string variants = "std,branchfree,coro_seq,gp,amac,coro";
    std::string seed_text;
    std::string model_bytes = "256M";
    Options options;
    app.add_option("--sizes", sizes, "array sizes in bytes, list or doubling range (e.g. 1M..1G,4G)")
        ->capture_default_str();
    app.add_option("--lookups", lookups, "lookups per run, list (e.g. 10K,1M)")->capture_default_str();
    app.add_option("--group-sizes", groups, "group sizes G for gp, amac, coro (e.g. 1..16)")
        ->capture_default_str();
    app.add_option("--reps", options.reps, "measured repetitions (median reported), after one warm-up")
        ->capture_default_str();
    app.add_option("--seed", seed_text, "random seed (default: random, printed)");
    app.add_option("--huge-pages", huge, "transparent huge pages for the arrays: on, off or both")
        ->capture_default_str();
    app.add_option("--types", types, "key types: int, string or both")->capture_default_str();
    app.add_option(
           "--variants", variants,
           "variants: " +
               [] {
                   std::string all;
                   for (const auto &v : all_variants) {
                       all += (all.empty() ? "" : ",") + v;
                   }
                   return all;
               }())
        ->capture_default_str();
    app.add_option("--model-buffer", model_bytes, "pointer-chase buffer for the latency model")
        ->capture_default_str();
    app.add_option("--csv", options.csv, "CSV output file, '-' for stdout")->capture_default_str();
    mx::bench::TraceOptions trace;
    mx::bench::add_trace_options(app, trace, "each runtime variant's runtime over its whole life");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &error) {
        exit_now = true;
        exit_code = app.exit(error);
        return options;
    }
    mx::bench::trace_through_environment(trace);
    options.sizes = parse_list("--sizes", sizes, parse_size, true);
    options.lookups = parse_list("--lookups", lookups, parse_count, false);
    options.groups = parse_list("--group-sizes", groups, parse_count, false);
    for (const std::size_t g : options.groups) {
        if (g > mx::coro::max_group_size) {
            throw UsageError{"--group-sizes: " + std::to_string(g) + " exceeds the maximum of " +
                             std::to_string(mx::coro::max_group_size)};
        }
    }
    for (const std::size_t bytes : options.sizes) {
        if (bytes < 64) {
            throw UsageError{"--sizes: " + std::to_string(bytes) + " bytes is too small (at least 64)"};
        }
    }
    if (options.reps == 0) {
        throw UsageError{"--reps: must be at least 1"};
    }
    if (huge == "on") {
        options.page_modes = {PageMode::huge};
    } else if (huge == "off") {
        options.page_modes = {PageMode::small};
    } else if (huge == "both") {
        options.page_modes = {PageMode::small, PageMode::huge};
    } else {
        throw UsageError{"--huge-pages: '" + huge + "' is not one of on, off, both"};
    }
    options.types = split(types, ',');
    if (options.types.empty()) {
        throw UsageError{"--types: no types given"};
    }
    for (const auto &t : options.types) {
        if (t != "int" && t != "string") {
            throw UsageError{"--types: '" + t + "' is not one of int, string"};
        }
    }
    options.variants = split(variants, ',');
    for (const auto &v : options.variants) {
        if (std::find(all_variants.begin(), all_variants.end(), v) == all_variants.end()) {
            throw UsageError{"--variants: '" + v + "' is not a variant"};
        }
    }
    options.model_bytes = parse_list("--model-buffer", model_bytes, parse_size, true).front();
    if (seed_text.empty()) {
        options.seed = std::random_device{}();
    } else {
        try {
            std::size_t end = 0;
            options.seed = std::stoull(seed_text, &end);
            if (end != seed_text.size() || std::isdigit(static_cast<unsigned char>(seed_text[0])) == 0) {
                throw std::invalid_argument(seed_text);
            }
        } catch (const std::exception &) {
            throw UsageError{"--seed: '" + seed_text + "' is not a non-negative integer"};
        }
    }
    return options;
}

} // namespace

int main(int argc, char **argv) {
    CLI::App app{"Binary search: sequential, group prefetching, AMAC and coroutines (mx_bench_bsearch)"};
    Options options;
    try {
        bool exit_now = false;
        int exit_code = 0;
        options = parse_options(argc, argv, app, exit_now, exit_code);
        if (exit_now) {
            return exit_code;
        }
    } catch (const UsageError &error) {
        std::fprintf(stderr, "mx_bench_bsearch: error: %s\n", error.message.c_str());
        return 2;
    }

    std::ofstream file;
    if (options.csv != "-") {
        file.open(options.csv);
        if (!file) {
            std::fprintf(stderr, "mx_bench_bsearch: error: --csv: cannot open '%s' for writing\n",
                         options.csv.c_str());
            return 2;
        }
    }
    Csv csv(options.csv == "-" ? std::cout : file);
    std::fprintf(stderr, "mx_bench_bsearch: seed %llu (replay with --seed %llu)\n",
                 static_cast<unsigned long long>(options.seed),
                 static_cast<unsigned long long>(options.seed));

    try {
        std::uint64_t combination = 0;
        for (const PageMode pages : options.page_modes) {
            run_model(options, pages, csv);
            for (const auto &type : options.types) {
                for (const std::size_t bytes : options.sizes) {
                    if (type == "int") {
                        run_size<IntKey>(options, type, bytes, pages, csv, combination);
                    } else {
                        run_size<StringKey>(options, type, bytes, pages, csv, combination);
                    }
                }
            }
        }
    } catch (const std::exception &error) {
        std::fprintf(stderr, "mx_bench_bsearch: error: %s\n", error.what());
        return 1;
    }
    return 0;
}
