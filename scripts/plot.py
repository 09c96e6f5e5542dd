#!/usr/bin/python3
"""Plots of the runtime benchmark results (results/runtime.csv) as PNG files.

Usage: scripts/plot.py results/runtime.csv results/
Also imported by scripts/demo.py (make_runtime_plots).
"""

import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

THROUGHPUT = ["spawn_local", "ping_pong", "all_to_all", "fib"]
VARIANT_ORDER = ["mx", "mx_lifo", "mx_default", "tbb_task_group", "tbb_enqueue", "threads"]


def read_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def lookup(rows):
    """(benchmark, variant, workers, metric) -> value"""
    table = {}
    for row in rows:
        try:
            table[(row["benchmark"], row["variant"], int(row["workers"]), row["metric"])] = float(row["value"])
        except ValueError:
            continue
    return table


COLORS = {"mx": "tab:blue", "tbb_task_group": "tab:orange", "tbb_enqueue": "tab:green", "threads": "tab:red",
          "mx_task_allocator": "tab:blue"}


def _color(name, index):
    """The same variant has the same colour in every panel."""
    if name in COLORS:
        return COLORS[name]
    palette = ["tab:purple", "tab:brown", "tab:pink", "tab:gray", "tab:olive", "tab:cyan", "tab:orange",
               "tab:green", "tab:red"]
    return palette[index % len(palette)]


def _bars(axis, groups, series, values, ylabel, title, log=False):
    width = 0.8 / max(1, len(series))
    for i, name in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ys = [values.get((group, name), 0.0) for group in groups]
        axis.bar(xs, ys, width, label=name, color=_color(name, i))
    axis.set_xticks(range(len(groups)))
    axis.set_xticklabels(groups)
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    if log:
        axis.set_yscale("log")
    axis.legend(fontsize="small")


def plot_throughput(table, out_dir):
    fig, axes = plt.subplots(1, len(THROUGHPUT), figsize=(4.2 * len(THROUGHPUT), 4))
    for axis, bench in zip(axes, THROUGHPUT):
        workers = sorted({k[2] for k in table if k[0] == bench and k[3] == "tasks_per_second"})
        variants = [v for v in VARIANT_ORDER if any(k[0] == bench and k[1] == v for k in table)]
        values = {(f"{w} worker{'s' if w > 1 else ''}", v): table.get((bench, v, w, "tasks_per_second"), 0.0) / 1e6
                  for w in workers for v in variants}
        groups = [f"{w} worker{'s' if w > 1 else ''}" for w in workers]
        _bars(axis, groups, variants, values, "million tasks / s (median)", bench, log=True)
    fig.tight_layout()
    path = os.path.join(out_dir, "runtime_throughput.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_wakeup(table, out_dir):
    keys = [k for k in table if k[0].startswith("wakeup_") and k[3] == "latency_median"]
    if not keys:
        return None
    variants = [v for v in VARIANT_ORDER if any(k[1] == v for k in keys)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for axis, metric in zip(axes, ["latency_median", "latency_p99"]):
        groups = sorted({f"{k[0][7:]}, {k[2]}w" for k in keys})
        values = {}
        for bench, variant, workers, _ in keys:
            values[(f"{bench[7:]}, {workers}w", variant)] = table.get((bench, variant, workers, metric), 0.0) / 1e3
        _bars(axis, groups, variants, values, "microseconds", f"wake-up {metric[8:]}", log=True)
    fig.tight_layout()
    path = os.path.join(out_dir, "runtime_wakeup.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_alloc(table, out_dir):
    patterns = [p for p in ["alloc_single", "alloc_batch", "alloc_cross"] if any(k[0] == p for k in table)]
    if not patterns:
        return None
    variants = sorted({k[1] for k in table if k[0] in patterns and k[1] != "all"},
                      key=lambda v: (not v.startswith("mx"), v))
    values = {}
    for pattern in patterns:
        for variant in variants:
            for workers in (1, 2):
                value = table.get((pattern, variant, workers, "cycles_per_task"))
                if value is not None:
                    values[(pattern, variant)] = value
    fig, axis = plt.subplots(figsize=(11, 4.5))
    _bars(axis, patterns, variants, values, "core cycles per alloc+free (median)", "task allocation", log=True)
    fig.tight_layout()
    path = os.path.join(out_dir, "runtime_alloc.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def make_runtime_plots(csv_path, out_dir):
    table = lookup(read_rows(csv_path))
    paths = [plot_throughput(table, out_dir), plot_wakeup(table, out_dir), plot_alloc(table, out_dir)]
    return [p for p in paths if p]


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in make_runtime_plots(argv[1], argv[2]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
