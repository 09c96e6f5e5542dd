#!/usr/bin/python3
"""`make demo`: runs every demonstrator's benchmark drivers with demo-sized parameters, prints
the results, and writes under --out (default results/):

  <suite>.csv    one row per measurement: benchmark,variant,workers,metric,value,unit,repetitions
  <suite>_*.png  plots (matplotlib, Agg backend)
  targets.csv    target,value,unit,goal: one row per target of the issues, measured in this run

Each demonstrator is a suite function appended to SUITES; it runs its drivers, returns the rows
it measured and the targets it can judge. A target that could not be measured is written with
the value NA and the reason is printed: nothing is filled in from earlier runs.

Usage: /usr/bin/python3 scripts/demo.py --build-dir build/release [--quick] [--out results]
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402

HEADER = ["benchmark", "variant", "workers", "metric", "value", "unit", "repetitions"]
TARGET_HEADER = ["target", "value", "unit", "goal"]
# Totals over a suite's processes rather than medians.
SUMMED_METRICS = {"other_cpu_seconds", "own_cpu_seconds", "wall_seconds"}


class Target:
    def __init__(self, name, value, unit, goal, note=""):
        self.name, self.value, self.unit, self.goal, self.note = name, value, unit, goal, note

    def met(self):
        if self.value is None:
            return None
        op, bound = self.goal.split()
        bound = float(bound)
        return {">=": self.value >= bound, ">": self.value > bound, "<": self.value < bound,
                "<=": self.value <= bound}[op]


class Context:
    def __init__(self, args):
        self.build_dir = os.path.abspath(args.build_dir)
        self.out_dir = os.path.abspath(args.out)
        self.quick = args.quick
        self.raw_dir = tempfile.mkdtemp(prefix="mx-demo-")
        self.failures = []

    def binary(self, name):
        for candidate in (os.path.join(self.build_dir, "benchmarks", name), os.path.join(self.build_dir, name)):
            if os.access(candidate, os.X_OK):
                return candidate
        return None

    def run(self, binary, args, csv_name, env_extra=None, timeout=300):
        """Runs a driver writing `csv_name` in the raw directory; returns its rows or None."""
        path = os.path.join(self.raw_dir, csv_name)
        env = dict(os.environ)
        env.update(env_extra or {})
        command = [binary] + args + ["--csv", path, "--quiet"]
        try:
            done = subprocess.run(command, env=env, timeout=timeout, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            self.failures.append(f"{' '.join(command)}: timed out after {timeout} s")
            return None
        if done.returncode != 0:
            self.failures.append(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()}")
            return None
        with open(path, newline="") as handle:
            return list(csv.DictReader(handle))


def aggregate(row_lists):
    """Merges rows of several processes: median of each measurement (sum for load figures),
    repetitions added up."""
    groups = {}
    for rows in row_lists:
        for row in rows:
            key = (row["benchmark"], row["variant"], row["workers"], row["metric"], row["unit"])
            groups.setdefault(key, []).append((float(row["value"]), int(row["repetitions"])))
    merged = []
    for (bench, variant, workers, metric, unit), values in groups.items():
        numbers = [v for v, _ in values]
        value = sum(numbers) if metric in SUMMED_METRICS else statistics.median(numbers)
        repetitions = sum(r for _, r in values) if len(values) > 1 else values[0][1]
        if bench == "calibration":
            repetitions = len(values)
        merged.append({"benchmark": bench, "variant": variant, "workers": workers, "metric": metric,
                       "value": f"{value:.9g}", "unit": unit, "repetitions": str(repetitions)})
    return merged


def value_of(rows, benchmark, variant, workers, metric):
    for row in rows:
        if (row["benchmark"], row["variant"], int(row["workers"]), row["metric"]) == (benchmark, variant, workers,
                                                                                     metric):
            return float(row["value"])
    return None


# ---- runtime core ----------------------------------------------------------------------------

PRELOADS = [("glibc", None),
            ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            ("tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")]
THROUGHPUT = ["spawn_local", "ping_pong", "all_to_all", "fib"]
ALLOC_PATTERNS = ["alloc_single", "alloc_batch", "alloc_cross"]


def runtime_suite(ctx):
    driver = ctx.binary("mx_bench_runtime")
    targets = {
        "spawn_local_vs_tbb": Target("spawn_local_vs_tbb", None, "ratio", ">= 2"),
        "alloc_vs_malloc": Target("alloc_vs_malloc", None, "ratio", ">= 5"),
        "idle_cpu_percent": Target("idle_cpu_percent", None, "percent_of_one_core", "< 1"),
    }
    if driver is None:
        for target in targets.values():
            target.note = f"mx_bench_runtime not found under {ctx.build_dir}"
        return "runtime", [], list(targets.values())

    reps = "5"
    if ctx.quick:
        sizes = {"spawn_local": ["--tasks", "200000"], "ping_pong": ["--hops", "50000"],
                 "all_to_all": ["--hops", "50000"], "fib": ["--fib-n", "23"]}
        wakeup = ["--samples", "60"]
        idle = ["--idle-seconds", "0.25"]
        alloc_ops = {"alloc_single": "500000", "alloc_batch": "500000", "alloc_cross": "100000"}
        rounds = 5
    else:
        sizes = {"spawn_local": ["--tasks", "1000000"], "ping_pong": ["--hops", "200000"],
                 "all_to_all": ["--hops", "200000"], "fib": ["--fib-n", "26"]}
        wakeup = ["--samples", "200"]
        idle = ["--idle-seconds", "0.5"]
        alloc_ops = {"alloc_single": "2000000", "alloc_batch": "2000000", "alloc_cross": "200000"}
        rounds = 5

    row_lists = []
    for bench in THROUGHPUT:
        print(f"  runtime: {bench} ...", flush=True)
        rows = ctx.run(driver, ["-b", bench, "-w", "1,2", "-r", reps] + sizes[bench], f"{bench}.csv")
        if rows:
            row_lists.append(rows)
    print("  runtime: wakeup latency ...", flush=True)
    rows = ctx.run(driver, ["-b", "wakeup", "-w", "1,2", "-r", reps] + wakeup, "wakeup.csv")
    if rows:
        row_lists.append(rows)
    print("  runtime: idle CPU ...", flush=True)
    rows = ctx.run(driver, ["-b", "idle_cpu", "-w", "1,2", "-r", reps] + idle, "idle_cpu.csv")
    if rows:
        row_lists.append(rows)

    # Allocators: jemalloc and TCMalloc replace malloc for a whole process, so each round runs
    # one process per allocator, alternating, one timed repetition each; medians over rounds.
    print("  runtime: task allocation (glibc / jemalloc / TCMalloc processes, interleaved) ...", flush=True)
    alloc_rows = []
    for round_index in range(rounds):
        for name, library in PRELOADS:
            if library is not None and not os.path.exists(library):
                if round_index == 0:
                    ctx.failures.append(f"{library} missing: {name} not measured")
                continue
            env = {"LD_PRELOAD": library} if library else {}
            for pattern in ALLOC_PATTERNS:
                rows = ctx.run(driver, ["-b", pattern, "-r", "1", "--warmup", "1", "--ops", alloc_ops[pattern]],
                               f"{pattern}_{name}_{round_index}.csv", env, timeout=120)
                if rows:
                    alloc_rows.append(rows)
    merged = aggregate(row_lists + alloc_rows)

    # Targets, from this run only.
    ratios = []
    for workers in (1, 2):
        mx = value_of(merged, "spawn_local", "mx", workers, "tasks_per_second")
        tbb = value_of(merged, "spawn_local", "tbb_task_group", workers, "tasks_per_second")
        if mx and tbb:
            ratios.append((workers, mx / tbb))
    if ratios:
        # Conservative: the smaller ratio of the 1- and 2-worker runs.
        targets["spawn_local_vs_tbb"].value = min(r for _, r in ratios)
        targets["spawn_local_vs_tbb"].note = ", ".join(f"{w} worker(s): {r:.2f}x" for w, r in ratios)
    else:
        targets["spawn_local_vs_tbb"].note = "spawn_local did not produce mx and tbb_task_group figures"
    mx = value_of(merged, "alloc_batch", "mx_task_allocator", 1, "cycles_per_task")
    glibc = value_of(merged, "alloc_batch", "glibc_malloc", 1, "cycles_per_task")
    if mx and glibc:
        targets["alloc_vs_malloc"].value = glibc / mx
        single_mx = value_of(merged, "alloc_single", "mx_task_allocator", 1, "cycles_per_task")
        single_glibc = value_of(merged, "alloc_single", "glibc_malloc", 1, "cycles_per_task")
        if single_mx and single_glibc:
            targets["alloc_vs_malloc"].note = (f"alloc_batch (spawn 64, then free in order); "
                                               f"alloc_single: {single_glibc / single_mx:.2f}x")
    else:
        targets["alloc_vs_malloc"].note = "alloc_batch did not produce mx and glibc figures"
    idle_values = [(w, value_of(merged, "idle_cpu", "mx", w, "cpu_percent")) for w in (2, 1)]
    idle_values = [(w, v) for w, v in idle_values if v is not None]
    if idle_values:
        workers, value = idle_values[0]
        targets["idle_cpu_percent"].value = value
        targets["idle_cpu_percent"].note = f"runtime with {workers} worker(s), median of idle windows"
    else:
        targets["idle_cpu_percent"].note = "idle_cpu did not produce an mx figure"
    return "runtime", merged, list(targets.values())


def print_runtime_tables(rows):
    def get(bench, variant, workers, metric):
        return value_of(rows, bench, variant, workers, metric)

    print("\nRuntime core: throughput (median of 5; 'x mx' = how many times mx's throughput)")
    print(f"{'benchmark':<12} {'w':>2} {'variant':<16} {'Mtasks/s':>10} {'cycles/task':>12} {'x mx':>7}")
    for bench in THROUGHPUT:
        for workers in (1, 2):
            mx = get(bench, "mx", workers, "tasks_per_second")
            for variant in plot.VARIANT_ORDER:
                tps = get(bench, variant, workers, "tasks_per_second")
                if tps is None:
                    continue
                cpt = get(bench, variant, workers, "cycles_per_task")
                ratio = f"{mx / tps:7.2f}" if mx else "    n/a"
                print(f"{bench:<12} {workers:>2} {variant:<16} {tps / 1e6:>10.2f} {cpt:>12.0f} {ratio}")
    print("\nWake-up latency, spawn from an outside thread to the task's first instruction")
    print(f"{'state':<9} {'w':>2} {'variant':<14} {'median us':>10} {'p99 us':>10} {'slept':>6}")
    for state in ("sleeping", "spinning"):
        for workers in (1, 2):
            for variant in plot.VARIANT_ORDER:
                med = get(f"wakeup_{state}", variant, workers, "latency_median")
                if med is None:
                    continue
                p99 = get(f"wakeup_{state}", variant, workers, "latency_p99")
                slept = get(f"wakeup_{state}", variant, workers, "slept_fraction")
                slept_text = f"{slept:6.2f}" if slept is not None else "     -"
                print(f"{state:<9} {workers:>2} {variant:<14} {med / 1e3:>10.2f} {p99 / 1e3:>10.2f} {slept_text}")
    print("\nIdle CPU (percent of one core while the runtime has nothing to do)")
    for workers in (1, 2):
        for variant in plot.VARIANT_ORDER:
            value = get("idle_cpu", variant, workers, "cpu_percent")
            if value is not None:
                print(f"  {variant:<14} {workers} worker(s): {value:6.3f} %")
    print("\nTask allocation: alloc + construct + destroy + free of a 64-byte task (median over processes)")
    print(f"{'pattern':<13} {'variant':<22} {'cycles':>8} {'ns':>8} {'mx faster':>10}")
    for pattern in ALLOC_PATTERNS:
        workers = 2 if pattern == "alloc_cross" else 1
        mx = get(pattern, "mx_task_allocator", workers, "cycles_per_task")
        variants = sorted({r["variant"] for r in rows if r["benchmark"] == pattern and r["variant"] != "all"},
                          key=lambda v: (not v.startswith("mx"), v))
        for variant in variants:
            cycles = get(pattern, variant, workers, "cycles_per_task")
            ns = get(pattern, variant, workers, "ns_per_task")
            if cycles is None:
                continue
            ratio = f"{cycles / mx:10.2f}" if mx else "       n/a"
            print(f"{pattern:<13} {variant:<22} {cycles:>8.1f} {ns:>8.1f} {ratio}")
    other = sum(float(r["value"]) for r in rows if r["metric"] == "other_cpu_seconds")
    wall = sum(float(r["value"]) for r in rows if r["metric"] == "wall_seconds")
    if wall > 0:
        print(f"\nLoad from other processes while measuring: {other:.1f} CPU-s in {wall:.1f} s "
              f"({100 * other / wall:.0f} % of one core on average)")


# ---- driver ----------------------------------------------------------------------------------

# Each suite: (title, function(ctx) -> (name, rows, targets), function(rows) printing tables,
# function(csv_path, out_dir) -> plot paths). Later demonstrators append here.
SUITES = [
    ("runtime core", runtime_suite, print_runtime_tables, plot.make_runtime_plots),
]


def write_rows(path, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=HEADER)
        writer.writeheader()
        for row in sorted(rows, key=lambda r: (r["benchmark"], int(r["workers"]), r["variant"], r["metric"])):
            writer.writerow(row)


def main():
    parser = argparse.ArgumentParser(description="Run the mxtasking demonstrators and write results/.")
    parser.add_argument("--build-dir", default="build/release", help="CMake build directory with the drivers")
    parser.add_argument("--out", default="results", help="directory for CSV files and plots")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (still 5 repetitions)")
    args = parser.parse_args()
    if not os.path.isdir(args.build_dir):
        print(f"demo.py: build directory '{args.build_dir}' does not exist (configure and build first: "
              f"cmake --preset release && cmake --build --preset release)", file=sys.stderr)
        return 2
    ctx = Context(args)
    os.makedirs(ctx.out_dir, exist_ok=True)
    all_targets = []
    started = time.monotonic()
    for title, suite, tables, plots in SUITES:
        print(f"== {title}", flush=True)
        suite_started = time.monotonic()
        name, rows, targets = suite(ctx)
        all_targets += targets
        if rows:
            csv_path = os.path.join(ctx.out_dir, f"{name}.csv")
            write_rows(csv_path, rows)
            tables(rows)
            for path in plots(csv_path, ctx.out_dir):
                print(f"plot: {os.path.relpath(path)}")
            print(f"csv:  {os.path.relpath(csv_path)}")
        print(f"({title}: {time.monotonic() - suite_started:.0f} s)")

    targets_path = os.path.join(ctx.out_dir, "targets.csv")
    with open(targets_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(TARGET_HEADER)
        for t in all_targets:
            writer.writerow([t.name, "NA" if t.value is None else f"{t.value:.4g}", t.unit, t.goal])
    print("\nTargets (measured in this run)")
    print(f"{'target':<22} {'value':>10} {'goal':>7}  status")
    for t in all_targets:
        met = t.met()
        status = "not measured" if met is None else ("met" if met else "NOT met")
        value = "NA" if t.value is None else f"{t.value:.3g}"
        print(f"{t.name:<22} {value:>10} {t.goal:>7}  {status}{'  (' + t.note + ')' if t.note else ''}")
    print(f"targets: {os.path.relpath(targets_path)}")
    if ctx.failures:
        print("\nProblems:", file=sys.stderr)
        for failure in ctx.failures:
            print(f"  {failure}", file=sys.stderr)
    print(f"total {time.monotonic() - started:.0f} s")
    # Failed drivers make the demo fail; unmet targets are results, not failures.
    return 1 if ctx.failures else 0


if __name__ == "__main__":
    sys.exit(main())
