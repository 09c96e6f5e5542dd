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
       [--suites runtime,sync,bsearch,blinktree,join,tpch,python,scaling] [--tpch-sf 1] [--tpch-rounds 1]
       [--workers 1,2,4,8,16]

The scaling suite runs only when named in --suites or when --workers is given (then alone,
unless --suites names others): the runtime, B-link tree, radix join and TPC-H drivers at each
worker count, written to scaling.csv (with a speedup row per measurement) and scaling_*.png.
"""

import argparse
import copy
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
SUMMED_METRICS = {"other_cpu_seconds", "own_cpu_seconds", "wall_seconds", "disturber_cpu_seconds"}


class Target:
    def __init__(self, name, value, unit, goal, note=""):
        self.name, self.value, self.unit, self.goal, self.note = name, value, unit, goal, note

    def met(self):
        # goal "info": recorded for comparison by hand (e.g. with another implementation), no bound.
        if self.value is None or self.goal == "info":
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
        self.tpch_sf = args.tpch_sf
        self.tpch_rounds = args.tpch_rounds
        self.workers = args.workers
        self.tpch_threads = TPCH_THREADS
        self.tpch_queries = TPCH_QUERIES
        self.raw_dir = tempfile.mkdtemp(prefix="mx-demo-")
        self.failures = []

    def binary(self, name):
        for candidate in (os.path.join(self.build_dir, "benchmarks", name), os.path.join(self.build_dir, name)):
            if os.access(candidate, os.X_OK):
                return candidate
        return None

    def run(self, binary, args, csv_name, env_extra=None, timeout=300, quiet=True):
        """Runs a driver writing `csv_name` in the raw directory; returns its rows or None."""
        path = os.path.join(self.raw_dir, csv_name)
        env = dict(os.environ)
        env.update(env_extra or {})
        command = [binary] + args + ["--csv", path] + (["--quiet"] if quiet else [])
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


def missing_driver(ctx, suite, driver, targets):
    """A suite whose driver was not built: every target says so instead of getting a value."""
    for target in targets:
        target.note = f"{driver} not found under {ctx.build_dir}"
    return suite, [], targets


# ---- runtime core ----------------------------------------------------------------------------

PRELOADS = [("glibc", None),
            ("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            ("tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")]
THROUGHPUT = ["spawn_local", "ping_pong", "all_to_all", "fib"]
ALLOC_PATTERNS = ["alloc_single", "alloc_batch", "alloc_cross"]
# Runtime benchmarks also measured with a busy process on one of the workers' cores.
DISTURBED = ["spawn_local", "fib"]
DISTURBED_ROUNDS = 5


def disturbed_core(workers):
    """The CPU of the last of `workers` pinned workers (worker i runs on usable CPU i): the
    machine's last core on a 2-core machine. None with fewer usable CPUs than workers."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[workers - 1] if len(cpus) >= workers else None


def renamed(rows, suffix_benchmark="", suffix_variant=""):
    """Rows of a disturbed run under their own names, so they never merge with undisturbed ones."""
    out = []
    for row in rows:
        if row["benchmark"] == "calibration":
            continue
        row = dict(row)
        row["benchmark"] += suffix_benchmark
        if row["variant"] != "all":
            row["variant"] += suffix_variant
        out.append(row)
    return out


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def steal_bound(one_worker, off, off_share):
    """The highest steal on/off ratio any balancing could reach in a round: the two cores minus
    what the busy process took of its core, at the undisturbed 1-worker rate, over the rate
    measured without stealing. None when a figure is missing."""
    if not one_worker or not off or off_share is None:
        return None, None
    capacity = (2.0 - min(max(off_share, 0.0), 1.0)) * one_worker
    return capacity / off, capacity


def runtime_disturbed(ctx, driver, targets, sizes):
    """Each round runs one process with work stealing (mx_default and oneTBB interleaved) and one
    without (mx_default), both with a busy process on the last worker's core, and an undisturbed
    1-worker process that gives the capacity perfect balancing could use; ratios per round,
    medians over the rounds."""
    cpu = disturbed_core(2)
    if cpu is None:
        for bench in DISTURBED:
            for name in (f"disturbed_steal_on_vs_off_{bench}", f"disturbed_vs_tbb_{bench}",
                         f"disturbed_steal_bound_{bench}"):
                targets[name].note = "needs at least 2 usable CPUs"
        return []
    rows = []
    reps = "1" if ctx.quick else "3"
    for bench in DISTURBED:
        print(f"  runtime: {bench}, 2 workers, busy process on CPU {cpu}, work stealing on / off "
              f"({DISTURBED_ROUNDS} rounds) ...", flush=True)
        steal_ratios, tbb_ratios, bounds, of_capacity = [], [], [], []
        for round_index in range(DISTURBED_ROUNDS):
            common = ["-b", bench, "-w", "2", "-r", reps, "--disturb-core", str(cpu)] + sizes[bench]
            on = ctx.run(driver, common + ["--variants", "mx_default,tbb_task_group"],
                         f"{bench}_disturbed_on_{round_index}.csv", timeout=120)
            off = ctx.run(driver, common + ["--variants", "mx_default", "--no-steal"],
                          f"{bench}_disturbed_off_{round_index}.csv", timeout=120)
            if on:
                rows.append(renamed(on, "_disturbed"))
                tbb_ratios.append(value_of(on, bench, "mx_default", 2, "ratio_vs_tbb_task_group"))
            if off:
                rows.append(renamed(off, "_disturbed", "_nosteal"))
            one = ctx.run(driver, ["-b", bench, "-w", "1", "-r", reps, "--variants", "mx_default"] + sizes[bench],
                          f"{bench}_undisturbed_1w_{round_index}.csv", timeout=120)
            if on and off:
                with_steal = value_of(on, bench, "mx_default", 2, "tasks_per_second")
                without = value_of(off, bench, "mx_default", 2, "tasks_per_second")
                if with_steal and without:
                    steal_ratios.append(with_steal / without)
                busy = value_of(off, bench, "all", 2, "disturber_cpu_seconds")
                wall = value_of(off, bench, "all", 2, "wall_seconds")
                bound, capacity = steal_bound(value_of(one or [], bench, "mx_default", 1, "tasks_per_second"),
                                              without, busy / wall if busy is not None and wall else None)
                if bound is not None:
                    bounds.append(bound)
                    if with_steal:
                        of_capacity.append(with_steal / capacity)
        size = " ".join(sizes[bench])
        on_off = targets[f"disturbed_steal_on_vs_off_{bench}"]
        on_off.value = median_or_none(steal_ratios)
        on_off.note = (f"mx_default, 2 workers, {size}, busy process on CPU {cpu}; median of {len(steal_ratios)} "
                       f"rounds (one process each way per round)") if steal_ratios else f"no {bench} figures"
        bound = targets[f"disturbed_steal_bound_{bench}"]
        bound.value = median_or_none(bounds)
        bound.note = (f"the steal on/off ratio that perfect balancing would give: (2 - the busy process's share "
                      f"of its core) x the undisturbed 1-worker rate, over the rate without stealing; median of "
                      f"{len(bounds)} rounds; with stealing mx_default reached "
                      f"{100 * median_or_none(of_capacity):.0f} % of that capacity") if bounds and of_capacity else (
                          f"no {bench} figures for the bound")
        vs_tbb = targets[f"disturbed_vs_tbb_{bench}"]
        vs_tbb.value = median_or_none(tbb_ratios)
        vs_tbb.note = (f"mx_default / tbb_task_group, 2 workers, {size}, busy process on CPU {cpu}; median over "
                       f"rounds of per-repetition ratios") if vs_tbb.value is not None else f"no {bench} figures"
    return rows


def runtime_suite(ctx):
    driver = ctx.binary("mx_bench_runtime")
    targets = {
        "spawn_local_vs_tbb": Target("spawn_local_vs_tbb", None, "ratio", ">= 2"),
        "alloc_vs_malloc": Target("alloc_vs_malloc", None, "ratio", ">= 5"),
        "idle_cpu_percent": Target("idle_cpu_percent", None, "percent_of_one_core", "< 1"),
        "fib_vs_tbb_1w": Target("fib_vs_tbb_1w", None, "ratio", ">= 1.0"),
        "fib_vs_tbb_2w": Target("fib_vs_tbb_2w", None, "ratio", ">= 1.0"),
        "trace_on_overhead_percent": Target("trace_on_overhead_percent", None, "percent", "< 10"),
    }
    for bench in DISTURBED:
        targets[f"disturbed_steal_on_vs_off_{bench}"] = Target(f"disturbed_steal_on_vs_off_{bench}", None, "ratio",
                                                               ">= 1.5")
    for bench in DISTURBED:
        targets[f"disturbed_vs_tbb_{bench}"] = Target(f"disturbed_vs_tbb_{bench}", None, "ratio", ">= 1.0")
    for bench in DISTURBED:
        targets[f"disturbed_steal_bound_{bench}"] = Target(f"disturbed_steal_bound_{bench}", None, "ratio", "info")
    if driver is None:
        return missing_driver(ctx, "runtime", "mx_bench_runtime", list(targets.values()))

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
                 "all_to_all": ["--hops", "200000"], "fib": ["--fib-n", "26"]}  # fib_vs_tbb: n >= 26
        wakeup = ["--samples", "200"]
        idle = ["--idle-seconds", "0.5"]
        alloc_ops = {"alloc_single": "2000000", "alloc_batch": "2000000", "alloc_cross": "200000"}
        rounds = 5

    example = os.path.join(ctx.build_dir, "examples", "mx_example_fib")
    if os.access(example, os.X_OK):
        # The runtime's own per-worker statistics (tasks, spawns, allocator refills, idle, sleeps)
        # for a recursive fork/join run; also once on a simulated 2-region topology.
        for label, env in (("this machine", {}), ("simulated 2 NUMA regions x 1 core", {"MX_TOPOLOGY": "2x1"})):
            done = subprocess.run([example, "24"], capture_output=True, text=True, timeout=120,
                                  env=dict(os.environ, **env))
            print(f"  runtime statistics, fib(24), {label}:")
            print("    " + (done.stdout.strip() or done.stderr.strip()).replace("\n", "\n    "), flush=True)
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
    disturbed_rows = runtime_disturbed(ctx, driver, targets, sizes)
    runtime_trace_overhead(ctx, driver, targets["trace_on_overhead_percent"], sizes, rounds)
    merged = aggregate(row_lists + alloc_rows + disturbed_rows)

    # Targets, from this run only; ratios are medians of per-repetition ratios (interleaved runs).
    ratios = []
    for workers in (1, 2):
        ratio = value_of(merged, "spawn_local", "mx", workers, "ratio_vs_tbb_task_group")
        if ratio:
            ratios.append((workers, ratio))
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
    fib_n = sizes["fib"][1]
    for workers in (1, 2):
        target = targets[f"fib_vs_tbb_{workers}w"]
        target.value = value_of(merged, "fib", "mx_default", workers, "ratio_vs_tbb_task_group")
        target.note = (f"fib({fib_n}), mx_default (RuntimeConfig{{}} with {workers} worker(s)) / tbb_task_group, "
                       f"median of per-repetition ratios" + ("" if int(fib_n) >= 26 else
                                                               " (--quick; the target is for fib(26) or larger)")
                       if target.value is not None else "fib did not produce mx_default and tbb_task_group figures")
    return "runtime", merged, list(targets.values())


def runtime_trace_overhead(ctx, driver, target, sizes, rounds):
    """spawn_local on 1 worker without and with the task timeline recording (every task recorded
    into the trace buffers, without queue times), interleaved processes; the target is the throughput lost while
    recording, from the medians over rounds. (Tracing compiled out needs a second build:
    scripts/trace_overhead.sh measures that.)"""
    tasks = int(sizes["spawn_local"][1])
    common = ["-b", "spawn_local", "-w", "1", "--variants", "mx", "-r", "5", "--warmup", "1",
              "--tasks", str(tasks)]
    print("  runtime: tracing overhead (spawn_local, 1 worker, recording off / on, interleaved) ...", flush=True)
    rates = {"off": [], "on": []}
    for round_index in range(rounds):
        for mode in ("off", "on"):
            # A timeline as --trace records it (no queue times; a --profile adds them).
            extra = [] if mode == "off" else ["--trace", os.path.join(ctx.raw_dir, "trace_spawn_local.json"),
                                              "--trace-events", str(tasks + 100000)]
            rows = ctx.run(driver, common + extra, f"trace_{mode}_{round_index}.csv", timeout=120)
            value = value_of(rows or [], "spawn_local", "mx", 1, "tasks_per_second")
            if value:
                rates[mode].append(value)
    if rates["off"] and rates["on"]:
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        target.value = (off / on - 1) * 100
        target.note = (f"spawn_local {tasks} tasks, 1 worker, medians over {len(rates['on'])} processes: "
                       f"{off / 1e6:.1f} vs {on / 1e6:.1f} M tasks/s")
    else:
        target.note = "mx_bench_runtime produced no spawn_local figures with and without recording"


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
    if any(r["benchmark"].endswith("_disturbed") for r in rows):
        print("\nDisturbed core: 2 workers, a busy process pinned to the last worker's core "
              "(median over processes; nosteal = RuntimeConfig::work_stealing off)")
        print(f"{'benchmark':<12} {'variant':<20} {'Mtasks/s':>10} {'x tbb':>7}")
        for bench in DISTURBED:
            for variant in ("mx_default", "mx_default_nosteal", "tbb_task_group"):
                tps = get(f"{bench}_disturbed", variant, 2, "tasks_per_second")
                if tps is None:
                    continue
                ratio = get(f"{bench}_disturbed", variant, 2, "ratio_vs_tbb_task_group")
                ratio_text = f"{ratio:7.2f}" if ratio is not None else "      -"
                print(f"{bench:<12} {variant:<20} {tps / 1e6:>10.2f} {ratio_text}")
        busy = sum(float(r["value"]) for r in rows if r["metric"] == "disturber_cpu_seconds")
        print(f"  the busy processes used {busy:.1f} CPU-s (not counted as other load below)")
    other = sum(float(r["value"]) for r in rows if r["metric"] == "other_cpu_seconds")
    wall = sum(float(r["value"]) for r in rows if r["metric"] == "wall_seconds")
    if wall > 0:
        print(f"\nLoad from other processes while measuring: {other:.1f} CPU-s in {wall:.1f} s "
              f"({100 * other / wall:.0f} % of one core on average)")


# ---- synchronization (resources, primitives, EBMR) ---------------------------------------------

def sync_suite(ctx):
    driver = ctx.binary("sync/mx_bench_sync")
    targets = {
        "optimistic_vs_shared_mutex_r95": Target("optimistic_vs_shared_mutex_r95", None, "ratio", ">= 1.5"),
        "ebmr_overhead_percent": Target("ebmr_overhead_percent", None, "percent", "< 5"),
    }
    if driver is None:
        return missing_driver(ctx, "sync", "mx_bench_sync", list(targets.values()))
    objects = "1,1000,1000000"
    ops = "100000" if ctx.quick else "300000"
    print("  sync: contention sweep (K = 1, 1K, 1M; reads 0/50/95/100 %; every primitive) ...", flush=True)
    rows = ctx.run(driver, ["-w", "1,2", "-k", objects, "--read-ratios", "0,50,95,100", "-r", "5", "--ops", ops],
                   "sync.csv", timeout=900) or []
    for target in targets.values():
        values = [(int(r["workers"]), float(r["value"]), r["variant"]) for r in rows
                  if r["benchmark"] == "sync_targets" and r["metric"] == target.name]
        if values:
            workers, value, variant = max(values)
            target.value = value
            target.note = f"{workers} workers, {variant}; " + ", ".join(f"{w} w: {v:.3g}" for w, v, _ in sorted(values))
        else:
            target.note = "mx_bench_sync produced no figure"
    return "sync", rows, list(targets.values())


def print_sync_tables(rows):
    print("\nSynchronization: cycles per operation at K = 1000 objects (median of 5)")
    variants = list(dict.fromkeys(r["variant"] for r in rows if r["metric"] == "cycles_per_op"
                                  and r["benchmark"].startswith("contention_")))
    for workers in (1, 2):
        print(f"  {workers} worker(s)          " + "".join(f"{ratio:>8}%" for ratio in ("0", "50", "95", "100")))
        for variant in variants:
            cells = []
            for ratio in ("0", "50", "95", "100"):
                value = next((float(r["value"]) for r in rows if r["metric"] == "cycles_per_op" and
                              r["variant"] == variant and int(r["workers"]) == workers and
                              r["benchmark"] == f"contention_k1000_r{ratio}"), None)
                cells.append(f"{value:9.0f}" if value is not None else "        -")
            print(f"  {variant:<22}" + "".join(cells))


def make_sync_plots(csv_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = plot.read_rows(csv_path)
    picked = [r for r in rows if r["metric"] == "cycles_per_op" and r["benchmark"] == "contention_k1000_r95"]
    if not picked:
        return []
    variants = list(dict.fromkeys(r["variant"] for r in picked))
    figure, axis = plt.subplots(figsize=(9, 3.8))
    for offset, workers in enumerate((1, 2)):
        values = [next((float(r["value"]) for r in picked if r["variant"] == v and int(r["workers"]) == workers), 0)
                  for v in variants]
        axis.bar([i + 0.4 * offset for i in range(len(variants))], values, width=0.4, label=f"{workers} worker(s)")
    axis.set_xticks([i + 0.2 for i in range(len(variants))])
    axis.set_xticklabels(variants, rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("cycles per operation")
    axis.set_title("1000 objects, 95 % reads")
    axis.legend()
    figure.tight_layout()
    path = os.path.join(out_dir, "sync_r95_k1000.png")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


# ---- B-link tree under YCSB --------------------------------------------------------------------

BLINKTREE_TARGETS = [("blinktree_c_task_vs_thread", ">= 1.4"), ("blinktree_load_task_vs_thread", ">= 1.0"),
                     ("blinktree_a_task_vs_thread", ">= 1.25"), ("blinktree_c_prefetch_on_vs_off", ">= 1.3"),
                     ("blinktree_c_task_vs_tbb", ">= 1.25")]


def blinktree_suite(ctx):
    driver = ctx.binary("ycsb/mx_bench_ycsb")
    targets = [Target(name, None, "ratio", goal) for name, goal in BLINKTREE_TARGETS]
    disturbed = Target("disturbed_steal_on_vs_off_blinktree_c", None, "ratio", ">= 1.5")
    targets.append(disturbed)
    # Per-worker lookup throughput, for comparison with the original MxTasking by hand
    # (scripts/ab_original.sh; docs/benchmarks.md).
    one_worker_c = Target("blinktree_c_1w_mops", None, "Mops/s", "info")
    targets.append(one_worker_c)
    if driver is None:
        return missing_driver(ctx, "blinktree", "mx_bench_ycsb", targets)
    # The size (10 M keys, 10 M operations per workload): ~7 minutes; at 2 M keys the
    # tree mostly fits the caches and the ratios move by up to 30 % between runs. The targets
    # are taken at 2 workers, where the baselines' throughput swings by +-20 % between runs of
    # one binary on this shared machine: five repetitions there (their median ratio) instead
    # of three.
    keys = "500000" if ctx.quick else "10000000"
    print(f"  blinktree: YCSB load/A/C, {keys} keys and operations, zipf 0.99, 1 and 2 workers ...", flush=True)
    rows = []
    for workers, repetitions in (("1", "3"), ("2", "5")):
        rows += ctx.run(driver, ["-n", keys, "-m", keys, "-w", workers, "-r", repetitions],
                        f"blinktree_{workers}w.csv", timeout=1800) or []
    one_worker_c.value = value_of(rows, "ycsb_c", "mxtasking", 1, "throughput")
    for target in targets:
        if target in (disturbed, one_worker_c):
            continue
        value = value_of(rows, "blinktree_targets", target.name, 2, "ratio")
        if value is None:
            target.note = "mx_bench_ycsb produced no figure"
            continue
        target.value = value
        target.note = f"2 workers, {keys} keys and operations" + (
            "" if keys == "10000000" else " (the issue's size is 10 M: mx_bench_ycsb -n 10000000 -m 10000000)")
    rows += blinktree_disturbed(ctx, driver, disturbed)
    return "blinktree", rows, targets


def blinktree_disturbed(ctx, driver, target):
    """YCSB-C with a busy process on the last worker's core, mxtasking with and without work
    stealing: one process each way per round, interleaved; the ratio of each round's C
    throughputs, median over the rounds. Fewer keys and operations than the main runs. Each
    worker's feeder submits a fixed share of the requests (--split static, as with partitioned
    data): with the default shared cursor the busy worker just claims fewer batches, which
    balances without stealing and leaves stealing nothing to show."""
    cpu = disturbed_core(2)
    if cpu is None:
        target.note = "needs at least 2 usable CPUs"
        return []
    keys = "200000" if ctx.quick else "1000000"
    print(f"  blinktree: YCSB C, {keys} keys and operations, 2 workers, busy process on CPU {cpu}, "
          f"work stealing on / off ({DISTURBED_ROUNDS} rounds) ...", flush=True)
    row_lists, ratios = [], []
    for round_index in range(DISTURBED_ROUNDS):
        common = ["-n", keys, "-m", keys, "-w", "2", "-r", "1", "--variants", "mxtasking", "--disturb-core", str(cpu),
                  "--split", "static"]
        on = ctx.run(driver, common, f"blinktree_disturbed_on_{round_index}.csv", timeout=600)
        off = ctx.run(driver, common + ["--no-steal"], f"blinktree_disturbed_off_{round_index}.csv", timeout=600)
        if on:
            row_lists.append(renamed(on, "_disturbed"))
        if off:
            row_lists.append(renamed(off, "_disturbed", "_nosteal"))
        if on and off:
            with_steal = value_of(on, "ycsb_c", "mxtasking", 2, "throughput")
            without = value_of(off, "ycsb_c", "mxtasking", 2, "throughput")
            if with_steal and without:
                ratios.append(with_steal / without)
    target.value = median_or_none(ratios)
    target.note = (f"YCSB C, mxtasking, 2 workers, {keys} keys and operations, a fixed share per worker "
                   f"(--split static), busy process on CPU {cpu}; median "
                   f"of {len(ratios)} rounds (one process each way per round)") if ratios else "no YCSB C figures"
    return aggregate(row_lists)


def print_blinktree_tables(rows):
    print("\nB-link tree, YCSB (zipf 0.99): million operations per second (median)")
    phases = ("ycsb_load", "ycsb_a", "ycsb_c")
    variants = list(dict.fromkeys(r["variant"] for r in rows if r["metric"] == "throughput" and r["benchmark"] in phases))
    print(f"  {'variant':<22}" + "".join(f"{p + ' ' + str(w) + 'w':>12}" for p in ("load", "A", "C") for w in (1, 2)))
    for variant in variants:
        cells = []
        for phase in ("ycsb_load", "ycsb_a", "ycsb_c"):
            for workers in (1, 2):
                value = value_of(rows, phase, variant, workers, "throughput")
                cells.append(f"{value:12.2f}" if value is not None else f"{'-':>12}")
        print(f"  {variant:<22}" + "".join(cells))
    disturbed = [(variant, value_of(rows, "ycsb_c_disturbed", variant, 2, "throughput"))
                 for variant in ("mxtasking", "mxtasking_nosteal")]
    if any(value is not None for _, value in disturbed):
        print("  YCSB C, 2 workers, busy process on the last worker's core (median over processes): " +
              ", ".join(f"{variant} {value:.2f}" for variant, value in disturbed if value is not None))


def make_blinktree_plots(csv_path, out_dir):
    path = os.path.join(out_dir, "blinktree.png")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "ycsb", "plot.py")
    done = subprocess.run([sys.executable, script, csv_path, "-o", path], capture_output=True, text=True)
    return [path] if done.returncode == 0 else []


# ---- binary search: interleaved execution and runtime prefetching ------------------------------

def bsearch_suite(ctx):
    driver = ctx.binary("bsearch/mx_bench_bsearch")
    targets = [Target("coro_bsearch_4g_vs_branchfree", None, "ratio", ">= 2.0"),
               Target("runtime_coro_vs_standalone", None, "ratio", ">= 0.87"),
               Target("annotated_prefetch_on_vs_off", None, "ratio", ">= 1.5")]
    if driver is None:
        return missing_driver(ctx, "bsearch", "mx_bench_bsearch", targets)
    size = "1G" if ctx.quick else "4G"
    print(f"  bsearch: {size} sorted 32-bit integers, 2 MiB pages, 10 K lookups, G in 1,2,4,8,12,16 ...", flush=True)
    variants = "std,branchfree,gp,amac,coro,rt_coro,rt_annotated_off,rt_annotated_static,rt_annotated_dynamic"
    rows = ctx.run(driver, ["--sizes", size, "--types", "int", "--huge-pages", "on", "--lookups", "10K",
                            "--group-sizes", "1,2,4,8,12,16", "--reps", "9", "--seed", "42",
                            "--variants", variants], "bsearch.csv", timeout=900, quiet=False) or []
    # The runtime-vs-stand-alone ratio also from 1 M lookups: a 10 K-lookup run lasts ~4 ms, and on
    # this VM single such runs of one variant varied by up to 60 %; a 1 M-lookup run lasts ~0.4 s.
    print(f"  bsearch: {size}, 1 M lookups, coro and rt_coro at G in 12,16 ...", flush=True)
    rows_1m = ctx.run(driver, ["--sizes", size, "--types", "int", "--huge-pages", "on", "--lookups", "1M",
                               "--group-sizes", "12,16", "--reps", "5", "--seed", "42",
                               "--variants", "coro,rt_coro"], "bsearch_1m.csv", timeout=900, quiet=False) or []
    mib = '1024' if ctx.quick else '4096'
    bench = f"bsearch/type=int/size={mib}MiB/lookups=10000/pages=huge"
    bench_1m = f"bsearch/type=int/size={mib}MiB/lookups=1000000/pages=huge"

    def time_of(variant):
        return value_of(rows, bench, variant, 1, "time_per_lookup")

    speedup = value_of(rows, bench, "coro/best", 1, "speedup_vs_branchfree")
    if speedup is not None:
        targets[0].value = speedup
        targets[0].note = f"{size} array" + ("" if size == "4G" else " (--quick; the target is for 4 GiB)")
    standalone, on_runtime = time_of("coro/best"), time_of("rt_coro/best")
    standalone_1m = value_of(rows_1m, bench_1m, "coro/best", 1, "time_per_lookup")
    on_runtime_1m = value_of(rows_1m, bench_1m, "rt_coro/best", 1, "time_per_lookup")
    if standalone_1m and on_runtime_1m:
        targets[1].value = standalone_1m / on_runtime_1m
        targets[1].note = "1 M lookups, best G of each; time ratio stand-alone / runtime"
        if standalone and on_runtime:
            targets[1].note += f" (10 K lookups: {standalone / on_runtime:.2f})"
    elif standalone and on_runtime:
        targets[1].value = standalone / on_runtime
        targets[1].note = "10 K lookups (the 1 M-lookup run failed), best G of each"
    rows = rows + rows_1m
    off = time_of("rt_annotated_off")
    on = [t for t in (time_of("rt_annotated_static/best"), time_of("rt_annotated_dynamic")) if t]
    if off and on:
        targets[2].value = off / min(on)
        targets[2].note = "best of static (distance = G) and dynamic distance vs prefetching off"
    for target in targets:
        if target.value is None and not target.note:
            target.note = "mx_bench_bsearch produced no figure"
    return "bsearch", rows, targets


def print_bsearch_tables(rows):
    print("\nBinary search: ns per lookup (median) and speedup over the branch-free baseline")
    for bench in dict.fromkeys(row["benchmark"] for row in rows if row["metric"] == "time_per_lookup"):
        print(f"  {bench.replace('bsearch/', '')}")
        for row in rows:
            if row["benchmark"] == bench and row["metric"] == "time_per_lookup" and "/g=" not in row["variant"]:
                speed = value_of(rows, bench, row["variant"], 1, "speedup_vs_branchfree")
                print(f"    {row['variant']:<24} {float(row['value']):10.1f} ns  {speed or 0:6.2f}x")


def make_bsearch_plots(csv_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in plot.read_rows(csv_path) if r["metric"] == "speedup_vs_branchfree" and "/g=" in r["variant"]]
    if not rows:
        return []
    rows = [r for r in rows if "/lookups=10000/" in r["benchmark"]]  # the G sweep, not the 1 M check
    if not rows:
        return []
    figure, axis = plt.subplots(figsize=(7, 4))
    for family in dict.fromkeys(r["variant"].split("/g=")[0] for r in rows):
        points = sorted((int(r["variant"].split("/g=")[1]), float(r["value"])) for r in rows
                        if r["variant"].startswith(family + "/g="))
        axis.plot([g for g, _ in points], [v for _, v in points], marker="o", label=family)
    axis.set_xlabel("group size G (static prefetch distance for rt_annotated_static)")
    axis.set_ylabel("speedup over branch-free")
    axis.set_title(rows[0]["benchmark"].replace("bsearch/", ""), fontsize=9)
    axis.legend(fontsize=8)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    path = os.path.join(out_dir, "bsearch_group_size.png")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


# ---- radix join: micro partitioning and squads --------------------------------------------------

def join_suite(ctx):
    driver = ctx.binary("join/mx_bench_join")
    targets = [Target("radix_partition_micro_vs_classic_11b", None, "ratio", ">= 1.15"),
               Target("radix_join_micro_vs_classic_11b", None, "ratio", ">= 1.0")]
    if driver is None:
        return missing_driver(ctx, "join", "mx_bench_join", targets)
    build, probe = ("250000", "4000000") if ctx.quick else ("1000000", "16000000")
    print(f"  join: build {build} / probe {probe} tuples, radix bits 6-14, 1 and 2 workers ...", flush=True)
    rows = ctx.run(driver, ["--build", build, "--probe", probe, "--min-bits", "6", "--max-bits", "14",
                            "--workers", "1", "2", "--repetitions", "3"], "join.csv", timeout=900, quiet=False) or []

    def best(prefix, metric):
        values = [float(r["value"]) for r in rows if r["benchmark"] == "radix_join_11b" and
                  r["variant"].startswith(prefix) and int(r["workers"]) == 2 and r["metric"] == metric]
        return min(values) if values else None

    for target, metric in zip(targets, ("partition_time", "total_time")):
        classic, micro = best("classic", metric), best("micro", metric)
        if classic and micro:
            target.value = classic / micro
            target.note = (f"2 workers, best classic / best micro {metric}, build {build} / probe {probe} "
                           f"(the issue's size is 16 M / 256 M: mx_bench_join --build 16000000 --probe 256000000)")
        else:
            target.note = "mx_bench_join produced no figure"
    return "join", rows, targets


def print_join_tables(rows):
    print("\nRadix join at 11 bits: milliseconds (median of 3)")
    print(f"  {'variant':<22} {'w':>2} {'partition':>10} {'build+probe':>12} {'total':>8} {'cycles/tuple':>13}")
    for workers in (1, 2):
        for variant in dict.fromkeys(r["variant"] for r in rows if r["benchmark"] == "radix_join_11b"):
            get = lambda metric: value_of(rows, "radix_join_11b", variant, workers, metric)  # noqa: E731
            if get("total_time") is None:
                continue
            print(f"  {variant:<22} {workers:>2} {get('partition_time'):>10.1f} {get('build_probe_time'):>12.1f} "
                  f"{get('total_time'):>8.1f} {get('cycles_per_tuple'):>13.1f}")


def make_join_plots(csv_path, out_dir):
    path = os.path.join(out_dir, "join.png")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "join", "plot.py")
    done = subprocess.run([sys.executable, script, csv_path, "-o", path], capture_output=True, text=True)
    return [path] if done.returncode == 0 and os.path.exists(path) else []


# ---- TPC-H: TunaDB side by side with DuckDB ----------------------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPCH_QUERIES = [str(q) for q in range(1, 23)]
# The 11 queries without subqueries: their geometric mean is a second row, comparable with the
# 11-query figures in docs/benchmarks.md, and what the scaling suite measures at each worker
# count (to keep its time down).
TPCH_QUERIES_11 = ["1", "3", "5", "6", "7", "8", "9", "10", "12", "14", "19"]
TPCH_THREADS = (1, 2)
TPCH_REPS = 5
# A TunaDB run longer than this many seconds per unit of SF (at least 10 s) is cancelled and
# its query reported as failed: DuckDB needs about a second for the slowest query at SF 1 on one
# core, so such a run is far outside the target anyway. The cancelled process gives up on the
# remaining queries after --cancel-grace, and a new one runs them.
TPCH_QUERY_TIMEOUT_S_PER_SF = 30


def machine_busy_seconds():
    """Busy time of all CPUs since boot, from /proc/stat (user nice system idle iowait irq softirq steal)."""
    with open("/proc/stat") as handle:
        fields = handle.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run_measured(ctx, command, timeout):
    """Runs a benchmark process; returns (completed process or None, other_cpu_s, own_cpu_s, wall_s).
    other_cpu_s is the CPU time every other process used meanwhile: the machine's busy time minus
    the child's CPU time."""
    import resource
    before_busy = machine_busy_seconds()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        done = subprocess.run(command, timeout=timeout, capture_output=True, text=True, cwd=REPO)
    except subprocess.TimeoutExpired:
        ctx.failures.append(f"{' '.join(command)}: timed out after {timeout} s")
        done = None
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    other = max(0.0, machine_busy_seconds() - before_busy - own)
    return done, other, own, wall


def read_time_csv(path):
    """{query: row} of a CSV in tpch.py time's format (system,threads,query,median_s,min_s,max_s,reps)."""
    if not os.path.isfile(path):
        return {}
    with open(path, newline="") as handle:
        return {row["query"]: row for row in csv.DictReader(handle)}


def tpch_duckdb_run(ctx, python, data, threads, tag):
    path = os.path.join(ctx.raw_dir, f"tpch_duckdb_{threads}t_{tag}.csv")
    command = [python, os.path.join(REPO, "scripts", "tpch.py"), "time", "--data", data, "--threads", str(threads),
               "--queries", ",".join(ctx.tpch_queries), "--reps", str(TPCH_REPS), "--csv", path]
    print(f"  tpch: DuckDB, {threads} thread(s) ...", flush=True)
    done, other, own, wall = run_measured(ctx, command, timeout=1800)
    load = None
    if done is not None:
        for line in done.stdout.splitlines():
            if ": load " in line:
                load = float(line.split(": load ")[1].split()[0])
        if done.returncode != 0:
            ctx.failures.append(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    results = {q: {"status": "ok", "median": float(r["median_s"]), "min": float(r["min_s"]),
                   "max": float(r["max_s"]), "reps": int(r["reps"])} for q, r in read_time_csv(path).items()}
    for query in ctx.tpch_queries:
        results.setdefault(query, {"status": "failed", "detail": "DuckDB did not time it"})
    return {"results": results, "load": load, "other": other, "own": own, "wall": wall, "command": command}


def tpch_tunadb_run(ctx, driver, data, answers, threads, tag):
    """One TunaDB process over the queries; when a runaway query makes the driver give up (the
    queries after it are 'skipped'), a new process runs the skipped ones."""
    import json
    results, load, other, own, wall, commands = {}, None, 0.0, 0.0, 0.0, []
    pending = list(ctx.tpch_queries)
    attempt = 0
    while pending:
        attempt += 1
        path = os.path.join(ctx.raw_dir, f"tpch_tunadb_{threads}t_{tag}_{attempt}.csv")
        status_path = path[:-4] + ".json"
        timeout = max(10.0, TPCH_QUERY_TIMEOUT_S_PER_SF * ctx.tpch_sf)
        command = [driver, "--data", data, "--threads", str(threads), "--queries", ",".join(pending),
                   "--reps", str(TPCH_REPS), "--warmup", "1", "--answers", answers, "--timeout",
                   f"{timeout:g}", "--cancel-grace", "5", "--quiet", "--csv", path, "--json", status_path]
        commands.append(command)
        print(f"  tpch: TunaDB, {threads} thread(s){'' if attempt == 1 else ', queries ' + ','.join(pending)} ...",
              flush=True)
        done, o, w, t = run_measured(ctx, command, timeout=1800)
        other, own, wall = other + o, own + w, wall + t
        try:
            with open(status_path) as handle:
                status = json.load(handle)
        except (OSError, ValueError):
            status = {"queries": []}
        if done is not None and done.returncode not in (0, 1):
            ctx.failures.append(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
        if load is None and status.get("load_s") is not None:
            load = float(status["load_s"])
        retry = []
        for entry in status["queries"]:
            query = entry["query"]
            if entry["status"] in ("skipped", "pending"):
                retry.append(query)
            elif entry["status"] in ("ok", "unchecked"):
                results[query] = {"status": entry["status"], "median": float(entry["median_s"]),
                                  "min": float(entry["min_s"]), "max": float(entry["max_s"]),
                                  "reps": int(entry["reps"])}
            else:
                results[query] = {"status": entry["status"], "detail": entry.get("detail", "")}
                print(f"    TunaDB q{query}, {threads} thread(s): {entry['status']}: {entry.get('detail', '')[:300]}",
                      flush=True)
        # A process that died without a status file leaves its queries unmeasured, not retried.
        pending = retry if retry and retry != pending else []
    for query in ctx.tpch_queries:
        results.setdefault(query, {"status": "failed", "detail": "TunaDB did not time it (crash?)"})
    return {"results": results, "load": load, "other": other, "own": own, "wall": wall, "command": commands[0]}


def geometric_mean(values):
    import math
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def tpch_suite(ctx):
    sf = ctx.tpch_sf
    sf_name = format(sf, "g")
    queries = ctx.tpch_queries
    all_22 = queries == TPCH_QUERIES
    # Over all 22 queries (the goal) and, as a second row, over the 11 without subqueries (the
    # figure of earlier runs, with its earlier goal).
    targets_22 = [Target(f"tpch_sf1_duckdb_over_tunadb_22q_{t}t", None, "ratio", ">= 1.0")
                  for t in ctx.tpch_threads] if all_22 else []
    worst_target = Target("tpch_sf1_worst_query_ratio", None, "ratio", ">= 0.5") if all_22 else None
    targets_11 = [Target(f"tpch_sf1_duckdb_over_tunadb_{t}t", None, "ratio", ">= 0.33") for t in ctx.tpch_threads]
    targets = targets_22 + ([worst_target] if worst_target else []) + targets_11
    driver = ctx.binary("tpch/mx_bench_tpch")
    if driver is None:
        return missing_driver(ctx, "tpch", "mx_bench_tpch", targets)
    python = os.path.join(REPO, "build", "venv", "bin", "python")
    if not os.access(python, os.X_OK):
        for target in targets:
            target.note = "build/venv is missing: run `make deps` (DuckDB 1.5.5)"
        ctx.failures.append("tpch: build/venv/bin/python missing (make deps)")
        return "tpch", [], targets
    data = os.path.join(REPO, "build", "tpch", f"sf{sf_name}")
    answers = data + "-answers"
    tpch_py = os.path.join(REPO, "scripts", "tpch.py")
    print(f"  tpch: data at SF {sf_name} in {os.path.relpath(data)} (generated once, then cached) ...", flush=True)
    done = subprocess.run([python, tpch_py, "gen", "--sf", sf_name, "--out", data], capture_output=True, text=True)
    if done.returncode != 0:
        ctx.failures.append(f"tpch.py gen --sf {sf_name}: {done.stderr.strip()[-500:]}")
        for target in targets:
            target.note = "no TPC-H data"
        return "tpch", [], targets
    print("    " + done.stdout.strip(), flush=True)
    marker = os.path.join(data, ".complete")
    fresh = all(os.path.isfile(os.path.join(answers, f"q{q}.csv")) and
                os.path.getmtime(os.path.join(answers, f"q{q}.csv")) >= os.path.getmtime(marker)
                for q in queries)
    if not fresh:
        print("  tpch: DuckDB's answers for validation ...", flush=True)
        done = subprocess.run([python, tpch_py, "answers", "--data", data, "--out", answers,
                               "--queries", ",".join(queries)], capture_output=True, text=True)
        if done.returncode != 0:
            ctx.failures.append(f"tpch.py answers: {done.stderr.strip()[-500:]}")
            for target in targets:
                target.note = "no DuckDB answers to validate against"
            return "tpch", [], targets

    # Interleaved: DuckDB 1 thread, TunaDB 1 thread, DuckDB 2 threads, TunaDB 2 threads, per round.
    runs = {}
    for round_index in range(ctx.tpch_rounds):
        for threads in ctx.tpch_threads:
            runs.setdefault(("duckdb", threads), []).append(
                tpch_duckdb_run(ctx, python, data, threads, round_index))
            runs.setdefault(("tunadb", threads), []).append(
                tpch_tunadb_run(ctx, driver, data, answers, threads, round_index))

    rows = []
    bench = f"tpch_sf{sf_name}"

    def add(benchmark, variant, workers, metric, value, unit, repetitions):
        rows.append({"benchmark": benchmark, "variant": variant, "workers": str(workers), "metric": metric,
                     "value": f"{value:.9g}", "unit": unit, "repetitions": str(repetitions)})

    medians = {}  # (system, threads) -> {query: median over rounds of the per-process medians}
    for (system, threads), process_runs in runs.items():
        per_query = {}
        for query in queries:
            good = [r["results"][query] for r in process_runs if r["results"][query]["status"] in ("ok", "unchecked")]
            ok = len(good) == len(process_runs)  # a query counts only if it was right in every process
            add(f"{bench}_q{query}", system, threads, "answer_ok", 1 if ok else 0, "bool", len(process_runs))
            if ok:
                value = statistics.median(r["median"] for r in good)
                per_query[query] = value
                reps = sum(r["reps"] for r in good)
                add(f"{bench}_q{query}", system, threads, "median_time", value, "s", reps)
                add(f"{bench}_q{query}", system, threads, "min_time", min(r["min"] for r in good), "s", reps)
                add(f"{bench}_q{query}", system, threads, "max_time", max(r["max"] for r in good), "s", reps)
        medians[(system, threads)] = per_query
        loads = [r["load"] for r in process_runs if r["load"] is not None]
        if loads:
            add(f"{bench}_load", system, threads, "load_time", statistics.median(loads), "s", len(loads))
        add(bench, system, threads, "other_cpu_seconds", sum(r["other"] for r in process_runs), "s", len(process_runs))
        add(bench, system, threads, "own_cpu_seconds", sum(r["own"] for r in process_runs), "s", len(process_runs))
        add(bench, system, threads, "wall_seconds", sum(r["wall"] for r in process_runs), "s", len(process_runs))

    other_total = sum(r["other"] for process_runs in runs.values() for r in process_runs)
    wall_total = sum(r["wall"] for process_runs in runs.values() for r in process_runs)
    other_note = f"other processes {other_total:.0f} CPU-s in {wall_total:.0f} s"
    sf_note = f" (measured at SF {sf_name}, the target is for SF 1)" if sf != 1 else ""

    def geomean_rows(subset, benchmark, target, threads):
        """The geometric means over `subset` at `threads` as rows and as `target`'s value."""
        duck, tuna = medians.get(("duckdb", threads), {}), medians.get(("tunadb", threads), {})
        common = [q for q in subset if q in duck and q in tuna]
        missing = [q for q in subset if q not in common]
        if not common:
            target.note = "no query ran correctly on both systems"
            return
        duck_mean = geometric_mean([duck[q] for q in common])
        tuna_mean = geometric_mean([tuna[q] for q in common])
        target.value = duck_mean / tuna_mean
        add(benchmark, "duckdb", threads, "geomean_time", duck_mean, "s", len(common))
        add(benchmark, "tunadb", threads, "geomean_time", tuna_mean, "s", len(common))
        add(benchmark, "duckdb_over_tunadb", threads, "ratio", target.value, "ratio", len(common))
        failed = []
        for q in missing:
            why = []
            for system in ("duckdb", "tunadb"):
                if q not in medians.get((system, threads), {}):
                    result = runs[(system, threads)][-1]["results"][q]
                    why.append(f"{system} {result['status']}")
            failed.append(f"q{q} ({', '.join(why)})")
        counted = (f"over {len(common)} of {len(subset)} queries, excluded: {'; '.join(failed)}"
                   if missing else f"all {len(subset)} queries")
        target.note = (f"SF {sf_name}, {threads} thread(s), {counted}; geomean DuckDB {duck_mean:.4f} s, "
                       f"TunaDB {tuna_mean:.4f} s; {other_note}{sf_note}")

    for target, threads in zip(targets_22, ctx.tpch_threads):
        geomean_rows(queries, f"{bench}_geomean", target, threads)
    for target, threads in zip(targets_11, ctx.tpch_threads):
        geomean_rows(TPCH_QUERIES_11, f"{bench}_geomean11" if all_22 else f"{bench}_geomean", target, threads)
    if worst_target is not None:
        # The slowest query relative to DuckDB at either thread count; a query TunaDB failed
        # (wrong answer, error, timeout) while DuckDB answered it counts as ratio 0.
        worst = None
        for threads in ctx.tpch_threads:
            duck, tuna = medians.get(("duckdb", threads), {}), medians.get(("tunadb", threads), {})
            for q in queries:
                if q not in duck:
                    continue
                ratio = duck[q] / tuna[q] if q in tuna else 0.0
                if worst is None or ratio < worst[0]:
                    worst = (ratio, q, threads)
        if worst is None:
            worst_target.note = "no query ran on DuckDB"
        else:
            worst_target.value = worst[0]
            failed = "" if worst[1] in medians.get(("tunadb", worst[2]), {}) else " (TunaDB failed it)"
            worst_target.note = (f"SF {sf_name}: q{worst[1]} at {worst[2]} thread(s){failed}, DuckDB time / "
                                 f"TunaDB time over {len(queries)} queries and {len(ctx.tpch_threads)} thread "
                                 f"counts; {other_note}{sf_note}")
            add(f"{bench}_worst", "duckdb_over_tunadb", worst[2], "ratio", worst[0], "ratio", 1)
    return "tpch", rows, targets


def print_tpch_tables(rows):
    table = plot.lookup(rows)
    prefix = next((r["benchmark"].split("_q")[0] for r in rows if "_q" in r["benchmark"]), "tpch")
    print(f"\nTPC-H {prefix.replace('tpch_sf', 'SF ')}: median seconds per query (5 runs after a warm-up, "
          "DuckDB 1.5.5 vs TunaDB at the same thread count); ratio = DuckDB / TunaDB (> 1: TunaDB faster)")
    threads_list = sorted({int(r["workers"]) for r in rows})
    header = f"  {'query':<8}" + "".join(f"{'duckdb ' + str(t) + 't':>11}{'tunadb ' + str(t) + 't':>11}{'ratio':>7}"
                                          for t in threads_list)
    print(header)
    queries = [q for q in TPCH_QUERIES if any((f"{prefix}_q{q}", s, t, "answer_ok") in table
                                              for s in ("duckdb", "tunadb") for t in threads_list)]
    for query in queries:
        cells = []
        for threads in threads_list:
            duck = table.get((f"{prefix}_q{query}", "duckdb", threads, "median_time"))
            tuna = table.get((f"{prefix}_q{query}", "tunadb", threads, "median_time"))
            cells.append(f"{duck:11.4f}" if duck is not None else f"{'FAILED':>11}")
            cells.append(f"{tuna:11.4f}" if tuna is not None else f"{'FAILED':>11}")
            cells.append(f"{duck / tuna:7.2f}" if duck and tuna else f"{'-':>7}")
        print(f"  q{query:<7}" + "".join(cells))
    for benchmark, label, subset in ((f"{prefix}_geomean", "geomean", queries),
                                     (f"{prefix}_geomean11", "geo. 11", TPCH_QUERIES_11)):
        if not any(r["benchmark"] == benchmark for r in rows):
            continue
        cells = []
        for threads in threads_list:
            duck = table.get((benchmark, "duckdb", threads, "geomean_time"))
            tuna = table.get((benchmark, "tunadb", threads, "geomean_time"))
            ratio = table.get((benchmark, "duckdb_over_tunadb", threads, "ratio"))
            cells.append(f"{duck:11.4f}" if duck else f"{'-':>11}")
            cells.append(f"{tuna:11.4f}" if tuna else f"{'-':>11}")
            cells.append(f"{ratio:7.2f}" if ratio else f"{'-':>7}")
        print(f"  {label:<8}" + "".join(cells))
        counted = {int(r["workers"]): r["repetitions"] for r in rows if r["benchmark"] == benchmark}
        if any(c != str(len(subset)) for c in counted.values()):
            print(f"  {label} over the queries that ran correctly on both systems: "
                  + ", ".join(f"{t} thread(s): {c} of {len(subset)}" for t, c in sorted(counted.items())))
    if any(r["benchmark"] == f"{prefix}_geomean11" for r in rows):
        print(f"  (geo. 11: the {len(TPCH_QUERIES_11)} queries without subqueries, "
              f"q{',q'.join(TPCH_QUERIES_11)}, the set of earlier runs)")
    ratios = []
    for q in queries:
        for t in threads_list:
            duck = table.get((f"{prefix}_q{q}", "duckdb", t, "median_time"))
            tuna = table.get((f"{prefix}_q{q}", "tunadb", t, "median_time"))
            if duck is not None:
                ratios.append((duck / tuna if tuna else 0.0, q, t))
    if ratios and any(r["benchmark"] == f"{prefix}_worst" for r in rows):
        ratio, q, t = min(ratios)
        print(f"  worst query ratio: {ratio:.2f} (q{q}, {t} thread(s){'' if ratio else ', TunaDB failed it'})")
    for threads in threads_list:
        loads = [f"{s} {table[(prefix + '_load', s, threads, 'load_time')]:.2f} s" for s in ("duckdb", "tunadb")
                 if (prefix + "_load", s, threads, "load_time") in table]
        print(f"  load (separate from the query times), {threads} thread(s): {', '.join(loads)}")
    other = sum(float(r["value"]) for r in rows if r["metric"] == "other_cpu_seconds")
    wall = sum(float(r["value"]) for r in rows if r["metric"] == "wall_seconds")
    if wall > 0:
        print(f"  load from other processes while measuring: {other:.1f} CPU-s in {wall:.1f} s "
              f"({100 * other / wall:.0f} % of one core on average); per process group:")
        for threads in threads_list:
            for system in ("duckdb", "tunadb"):
                o = table.get((prefix, system, threads, "other_cpu_seconds"))
                w = table.get((prefix, system, threads, "wall_seconds"))
                if o is not None and w:
                    print(f"    {system} {threads}t: {o:.1f} CPU-s in {w:.1f} s ({100 * o / w:.0f} % of one core)")


def make_tpch_plots(csv_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    rows = plot.read_rows(csv_path)
    table = plot.lookup(rows)
    prefixes = sorted({r["benchmark"].split("_q")[0] for r in rows if "_q" in r["benchmark"]})
    if not prefixes:
        return []
    prefix = prefixes[0]
    queries = [q for q in TPCH_QUERIES if any(r["benchmark"] == f"{prefix}_q{q}" for r in rows)]
    threads_list = sorted({int(r["workers"]) for r in rows})
    figure, axes = plt.subplots(len(threads_list), 1, figsize=(11, 4.2 * len(threads_list)), squeeze=False,
                                sharey=True)
    colors = {"duckdb": "tab:orange", "tunadb": "tab:blue"}
    times = [float(r["value"]) for r in rows if r["metric"] in ("median_time", "geomean_time")]
    if not times:
        plt.close(figure)
        return []
    for axis, threads in zip(axes[:, 0], threads_list):
        counted = next((r["repetitions"] for r in rows if r["benchmark"] == f"{prefix}_geomean"
                        and int(r["workers"]) == threads), "?")
        labels = [f"q{q}" for q in queries] + [f"geomean\n({counted} of {len(queries)})"]
        means = [f"{prefix}_geomean"]
        if any(r["benchmark"] == f"{prefix}_geomean11" for r in rows):
            counted11 = next((r["repetitions"] for r in rows if r["benchmark"] == f"{prefix}_geomean11"
                              and int(r["workers"]) == threads), "?")
            labels.append(f"geomean 11\n({counted11} of {len(TPCH_QUERIES_11)})")
            means.append(f"{prefix}_geomean11")
        for offset, system in enumerate(("duckdb", "tunadb")):
            values = [table.get((f"{prefix}_q{q}", system, threads, "median_time")) for q in queries]
            values += [table.get((mean, system, threads, "geomean_time")) for mean in means]
            xs = [i + (offset - 0.5) * 0.4 for i in range(len(labels))]
            axis.bar(xs, [v or 0 for v in values], width=0.4, color=colors[system],
                     label="DuckDB 1.5.5" if system == "duckdb" else "TunaDB")
            for x, value in zip(xs, values):
                if value is None:
                    axis.text(x, 0.03, "failed", rotation=90, ha="center", va="bottom", fontsize=7, color="red",
                              transform=axis.get_xaxis_transform())
        ratio = table.get((f"{prefix}_geomean", "duckdb_over_tunadb", threads, "ratio"))
        axis.set_yscale("log")
        # Bars on a log axis start at its bottom: keep every bar's top visible, with labels.
        axis.set_ylim(min(times) / 1.6, max(times) * 1.6)
        seconds = matplotlib.ticker.FuncFormatter(
            lambda value, _: f"{value:g}" if f"{value:.0e}"[0] in "125" else "")
        axis.yaxis.set_major_formatter(seconds)
        axis.yaxis.set_minor_formatter(seconds)
        axis.set_xticks(range(len(labels)))
        axis.set_xticklabels(labels, rotation=45, fontsize=8)
        axis.set_ylabel("median seconds (log scale)")
        title = f"{prefix.replace('tpch_sf', 'TPC-H SF ')}, {threads} thread(s)"
        if ratio:
            title += f": DuckDB/TunaDB geomean {ratio:.2f}"
        axis.set_title(title, fontsize=10)
        axis.grid(axis="y", alpha=0.3, which="both")
        axis.legend(fontsize=8)
    figure.tight_layout()
    path = os.path.join(out_dir, "tpch.png")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


# ---- scaling: every demonstrator at each worker count --------------------------------------------

# (benchmark, variants) of mx_bench_runtime; mx_default is RuntimeConfig{} with only the worker
# count set, mx / mx_lifo place their tasks by annotations.
SCALING_RUNTIME = [("spawn_local", "mx_default,mx,tbb_task_group"), ("fib", "mx_default,mx_lifo,tbb_task_group"),
                   ("all_to_all", "mx_default,mx,tbb_task_group")]
SCALING_YCSB_VARIANTS = "mxtasking,thread_olc,tbb"


def default_scaling_workers():
    """1, 2, 4, ... up to the usable CPUs, and the CPU count itself."""
    cpus = len(os.sched_getaffinity(0))
    counts, count = [], 1
    while count < cpus:
        counts.append(count)
        count *= 2
    return counts + [cpus]


def parse_workers(text):
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        return None
    return counts if counts and all(1 <= c <= 256 for c in counts) else None


def add_speedups(rows, metric, unit_of_time=False):
    """A speedup row per (benchmark, variant, workers): the measurement over the same variant's at
    the smallest worker count (times: the other way round)."""
    base = {}
    for row in rows:
        if row["metric"] != metric:
            continue
        key = (row["benchmark"], row["variant"])
        workers = int(row["workers"])
        if key not in base or workers < base[key][0]:
            base[key] = (workers, float(row["value"]))
    extra = []
    for row in rows:
        if row["metric"] != metric:
            continue
        first_workers, first = base[(row["benchmark"], row["variant"])]
        value = float(row["value"])
        if first <= 0 or value <= 0:
            continue
        speedup = first / value if unit_of_time else value / first
        extra.append({"benchmark": row["benchmark"], "variant": row["variant"], "workers": row["workers"],
                      "metric": "speedup", "value": f"{speedup:.6g}", "unit": f"x_vs_{first_workers}w",
                      "repetitions": row["repetitions"]})
    return rows + extra


def python_suite(ctx):
    """The tunadb Python package against DuckDB's: a 10 M-row, 4-column result fetched as Arrow
    (scripts/python_bench.py, run on build/venv, where the package is installed if missing)."""
    threads = max(ctx.tpch_threads)
    target = Target("python_fetch_arrow_vs_duckdb", None, "ratio", ">= 0.67")
    tpch_target = Target("python_tpch_vs_cpp", None, "ratio", ">= 0.95")
    python = os.path.join(REPO, "build", "venv", "bin", "python")

    def failed(reason):
        target.note = tpch_target.note = reason
        ctx.failures.append(f"python: {reason}")
        return "python", [], [target, tpch_target]

    if not os.access(python, os.X_OK):
        return failed("build/venv is missing: run `make deps`")
    if subprocess.run([python, "-c", "import tunadb"], capture_output=True).returncode != 0:
        print("  python: installing the tunadb package into build/venv (compiles the engine once) ...", flush=True)
        done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-build-isolation",
                               os.path.join(REPO, "python")], capture_output=True, text=True)
        if done.returncode != 0:
            return failed(f"pip install ./python failed: {(done.stdout + done.stderr).strip()[-500:]}")
    tpch_rows = python_tpch(ctx, python, threads, tpch_target)
    rows = 1_000_000 if ctx.quick else 10_000_000
    path = os.path.join(ctx.raw_dir, "python.csv")
    done = subprocess.run([python, os.path.join(REPO, "scripts", "python_bench.py"), "--rows", str(rows),
                           "--threads", str(threads), "--csv", path], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return failed(f"python_bench.py: {done.stderr.strip()[-500:]}")
    with open(path, newline="") as handle:
        measured = list(csv.DictReader(handle))
    target.value = value_of(measured, "python_fetch_arrow", "duckdb_over_tunadb", threads, "ratio")
    target.note = f"{rows} rows x 4 columns, {threads} threads, DuckDB time / TunaDB time"
    return "python", measured + tpch_rows, [target, tpch_target]


def python_tpch(ctx, python, threads, target):
    """The TPC-H queries through the Python API against mx_bench_tpch on the TPC-H suite's data
    (scripts/python_bench.py --tpch-data): rows for the CSV; sets `target`."""
    sf_name = format(ctx.tpch_sf, "g")
    data = os.path.join(REPO, "build", "tpch", f"sf{sf_name}")
    driver = ctx.binary("tpch/mx_bench_tpch")
    if driver is None or not os.path.isfile(os.path.join(data, ".complete")):
        target.note = "needs the TPC-H suite's data and mx_bench_tpch (run the tpch suite first)"
        return []
    path = os.path.join(ctx.raw_dir, "python_tpch.csv")
    print(f"  python: TPC-H SF {sf_name} through the Python API against mx_bench_tpch, {threads} threads ...",
          flush=True)
    command = [python, os.path.join(REPO, "scripts", "python_bench.py"), "--tpch-data", data, "--tpch-driver",
               driver, "--threads", str(threads), "--rounds", "2" if ctx.quick else "3", "--csv", path]
    done, other, _own, wall = run_measured(ctx, command, timeout=1800)
    if done is None or done.returncode != 0 or not os.path.isfile(path):
        reason = "python_bench.py --tpch-data failed" + (f": {done.stderr.strip()[-500:]}" if done else "")
        target.note = reason
        ctx.failures.append(f"python: {reason}")
        return []
    with open(path, newline="") as handle:
        measured = list(csv.DictReader(handle))
    target.value = value_of(measured, "python_tpch", "cpp_over_python", threads, "ratio")
    target.note = (f"SF {sf_name}, 22 queries, {threads} threads, mx_bench_tpch time / Python time "
                   f"(geometric mean; other processes {other:.0f} CPU-s in {wall:.0f} s)")
    return measured


def print_python_tables(rows):
    for row in rows:
        if row["benchmark"].startswith("python_tpch_q"):
            continue  # per query: in the CSV
        print(f"  {row['benchmark']:<20} {row['variant']:<20} {float(row['value']):10.4f} {row['unit']}")


def scaling_suite(ctx):
    workers = ctx.workers or default_scaling_workers()
    listed = ",".join(str(w) for w in workers)
    cpus = len(os.sched_getaffinity(0))
    if max(workers) > cpus:
        print(f"  scaling: {max(workers)} workers on {cpus} usable CPUs: counts above {cpus} share cores", flush=True)
    rows = []
    reps = "3"

    driver = ctx.binary("mx_bench_runtime")
    if driver is None:
        ctx.failures.append(f"scaling: mx_bench_runtime not found under {ctx.build_dir}")
    else:
        sizes = ({"spawn_local": ["--tasks", "200000"], "fib": ["--fib-n", "25"], "all_to_all": ["--hops", "50000"]}
                 if ctx.quick else
                 {"spawn_local": ["--tasks", "1000000"], "fib": ["--fib-n", "30"], "all_to_all": ["--hops", "200000"]})
        for bench, variants in SCALING_RUNTIME:
            print(f"  scaling: runtime {bench}, workers {listed} ...", flush=True)
            got = ctx.run(driver, ["-b", bench, "-w", listed, "-r", reps, "--variants", variants] + sizes[bench],
                          f"scaling_runtime_{bench}.csv", timeout=3600)
            rows += [dict(r, benchmark=f"runtime_{r['benchmark']}") for r in got or []
                     if r["metric"] in ("tasks_per_second", "ratio_vs_tbb_task_group")]

    driver = ctx.binary("ycsb/mx_bench_ycsb")
    if driver is None:
        ctx.failures.append(f"scaling: mx_bench_ycsb not found under {ctx.build_dir}")
    else:
        keys = "200000" if ctx.quick else "2000000"
        print(f"  scaling: B-link tree YCSB C and A, {keys} keys and operations, workers {listed} ...", flush=True)
        got = ctx.run(driver, ["-n", keys, "-m", keys, "-w", listed, "-r", reps, "--variants", SCALING_YCSB_VARIANTS],
                      "scaling_blinktree.csv", timeout=3600)
        rows += [dict(r, benchmark=f"blinktree_{r['benchmark']}") for r in got or []
                 if r["benchmark"] in ("ycsb_c", "ycsb_a") and r["metric"] == "throughput"]

    driver = ctx.binary("join/mx_bench_join")
    if driver is None:
        ctx.failures.append(f"scaling: mx_bench_join not found under {ctx.build_dir}")
    else:
        build, probe = ("250000", "4000000") if ctx.quick else ("1000000", "16000000")
        print(f"  scaling: radix join at 11 bits, build {build} / probe {probe}, workers {listed} ...", flush=True)
        got = ctx.run(driver, ["--build", build, "--probe", probe, "--min-bits", "11", "--max-bits", "11",
                               "--workers"] + [str(w) for w in workers] + ["--repetitions", reps],
                      "scaling_join.csv", timeout=3600, quiet=False)
        rows += [dict(r, benchmark=f"join_{r['benchmark']}") for r in got or []
                 if r["benchmark"] == "radix_join_11b" and r["metric"] == "total_time"]

    # TPC-H through the tpch suite's own runs (interleaved DuckDB / TunaDB processes), at each count.
    tpch_ctx = copy.copy(ctx)
    tpch_ctx.tpch_threads = tuple(workers)
    tpch_ctx.tpch_queries = TPCH_QUERIES_11
    _, tpch_rows, _ = tpch_suite(tpch_ctx)
    rows += [r for r in tpch_rows if r["benchmark"].endswith("_geomean") and r["metric"] == "geomean_time"]

    rows = add_speedups(rows, "tasks_per_second")
    rows = add_speedups(rows, "throughput")
    rows = add_speedups(rows, "total_time", unit_of_time=True)
    rows = add_speedups(rows, "geomean_time", unit_of_time=True)
    return "scaling", rows, []


def print_scaling_tables(rows):
    print("\nScaling: speed-up over each variant's own run at the smallest worker count")
    workers = sorted({int(r["workers"]) for r in rows if r["metric"] == "speedup"})
    print(f"  {'benchmark':<28} {'variant':<26}" + "".join(f"{str(w) + 'w':>7}" for w in workers))
    keys = list(dict.fromkeys((r["benchmark"], r["variant"]) for r in rows if r["metric"] == "speedup"))
    for bench, variant in keys:
        cells = []
        for w in workers:
            value = value_of(rows, bench, variant, w, "speedup")
            cells.append(f"{value:7.2f}" if value is not None else f"{'-':>7}")
        print(f"  {bench:<28} {variant:<26}" + "".join(cells))


SCALING_PLOTS = [("runtime", "runtime core (tasks/s)"), ("blinktree", "B-link tree, YCSB (operations/s)"),
                 ("join", "radix join at 11 bits (total time)"), ("tpch", "TPC-H (geometric mean of query times)")]


def make_scaling_plots(csv_path, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in plot.read_rows(csv_path) if r["metric"] == "speedup"]
    paths = []
    for prefix, title in SCALING_PLOTS:
        mine = [r for r in rows if r["benchmark"].startswith(prefix + "_")]
        benchmarks = list(dict.fromkeys(r["benchmark"] for r in mine))
        if not benchmarks:
            continue
        figure, axes = plt.subplots(1, len(benchmarks), figsize=(4.4 * len(benchmarks), 3.8), squeeze=False)
        workers = sorted({int(r["workers"]) for r in mine})
        # One colour per variant across the panels.
        variants = sorted({r["variant"] for r in mine})
        for axis, bench in zip(axes[0], benchmarks):
            for variant in variants:
                points = sorted((int(r["workers"]), float(r["value"])) for r in mine
                                if r["benchmark"] == bench and r["variant"] == variant)
                if not points:
                    continue
                axis.plot([w for w, _ in points], [v for _, v in points], marker="o", label=variant,
                          color=plot._color(variant, variants.index(variant)))
            axis.plot(workers, [w / workers[0] for w in workers], linestyle="--", color="gray", label="linear")
            axis.set_xscale("log", base=2)
            axis.set_xticks(workers)
            axis.set_xticklabels([str(w) for w in workers])
            axis.set_xlabel("workers (threads)")
            axis.set_ylabel(f"speed-up over {workers[0]} worker(s)")
            axis.set_title(bench.removeprefix(prefix + "_"), fontsize=9)
            axis.grid(alpha=0.3)
            axis.legend(fontsize=7)
        figure.suptitle(f"Scaling: {title}")
        figure.tight_layout()
        path = os.path.join(out_dir, f"scaling_{prefix}.png")
        figure.savefig(path, dpi=110)
        plt.close(figure)
        paths.append(path)
    return paths


# ---- driver ----------------------------------------------------------------------------------

# Each suite: (title, function(ctx) -> (name, rows, targets), function(rows) printing tables,
# function(csv_path, out_dir) -> plot paths). Later demonstrators append here.
SUITES = [
    ("runtime core", runtime_suite, print_runtime_tables, plot.make_runtime_plots),
    ("synchronization", sync_suite, print_sync_tables, make_sync_plots),
    ("binary search (interleaving, prefetching)", bsearch_suite, print_bsearch_tables, make_bsearch_plots),
    ("B-link tree (YCSB)", blinktree_suite, print_blinktree_tables, make_blinktree_plots),
    ("radix join (micro partitioning, squads)", join_suite, print_join_tables, make_join_plots),
    ("TPC-H: TunaDB and DuckDB", tpch_suite, print_tpch_tables, make_tpch_plots),
    ("Python: TunaDB's package and DuckDB's", python_suite, print_python_tables, lambda csv_path, out_dir: []),
    ("scaling over worker counts", scaling_suite, print_scaling_tables, make_scaling_plots),
]
# Not part of the default selection: run when named in --suites or when --workers is given.
OPT_IN_SUITES = {"scaling"}


def write_rows(path, rows):
    with open(path, "w", newline="") as handle:
        # Drivers may add columns with their run's settings; demo rows carry them in their names.
        writer = csv.DictWriter(handle, fieldnames=HEADER, extrasaction="ignore")
        writer.writeheader()
        for row in sorted(rows, key=lambda r: (r["benchmark"], int(r["workers"]), r["variant"], r["metric"])):
            writer.writerow(row)


def main():
    parser = argparse.ArgumentParser(description="Run the mxtasking demonstrators and write results/.")
    parser.add_argument("--build-dir", default="build/release", help="CMake build directory with the drivers")
    parser.add_argument("--out", default="results", help="directory for CSV files and plots")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (still 5 repetitions)")
    suite_names = [suite.__name__.removesuffix("_suite") for _, suite, _, _ in SUITES]
    parser.add_argument("--suites", help=f"comma-separated subset of {','.join(suite_names)} (default: all but scaling)")
    parser.add_argument("--tpch-sf", type=float, default=1.0,
                        help="TPC-H scale factor (default 1, what the targets are for; 1.1 GB in build/tpch)")
    parser.add_argument("--tpch-rounds", type=int, default=1,
                        help="TPC-H rounds of the interleaved DuckDB/TunaDB processes (default 1)")
    parser.add_argument("--workers", help="worker counts of the scaling suite, comma separated, e.g. 1,2,4,8,16 "
                                          "(selects that suite; default with --suites scaling: 1, 2, 4, ... up "
                                          "to the usable CPUs)")
    args = parser.parse_args()
    if args.workers is not None:
        args.workers = parse_workers(args.workers)
        if args.workers is None:
            print("demo.py: --workers takes comma-separated counts from 1 to 256, e.g. 1,2,4,8", file=sys.stderr)
            return 2
    if args.suites:
        chosen = [name.strip() for name in args.suites.split(",") if name.strip()]
    elif args.workers:
        chosen = ["scaling"]
    else:
        chosen = [name for name in suite_names if name not in OPT_IN_SUITES]
    unknown = [name for name in chosen if name not in suite_names]
    if unknown:
        print(f"demo.py: unknown suite(s) {', '.join(unknown)} (known: {', '.join(suite_names)})", file=sys.stderr)
        return 2
    if args.tpch_sf <= 0 or args.tpch_rounds < 1:
        print("demo.py: --tpch-sf must be positive and --tpch-rounds at least 1", file=sys.stderr)
        return 2
    if not os.path.isdir(args.build_dir):
        print(f"demo.py: build directory '{args.build_dir}' does not exist (configure and build first: "
              f"cmake --preset release && cmake --build --preset release)", file=sys.stderr)
        return 2
    ctx = Context(args)
    os.makedirs(ctx.out_dir, exist_ok=True)
    all_targets = []
    started = time.monotonic()
    for title, suite, tables, plots in SUITES:
        if suite.__name__.removesuffix("_suite") not in chosen:
            continue
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
    width = max([22] + [len(t.name) for t in all_targets])
    print(f"{'target':<{width}} {'value':>10} {'goal':>7}  status")
    for t in all_targets:
        met = t.met()
        status = ("informational" if t.goal == "info" and t.value is not None else
                  "not measured" if met is None else ("met" if met else "NOT met"))
        value = "NA" if t.value is None else f"{t.value:.3g}"
        print(f"{t.name:<{width}} {value:>10} {t.goal:>7}  {status}{'  (' + t.note + ')' if t.note else ''}")
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
