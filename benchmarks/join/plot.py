#!/usr/bin/python3
"""Plots mx_bench_join's CSV: total and partition time over radix bits, one line per variant.

Usage: /usr/bin/python3 benchmarks/join/plot.py results/join.csv [-o results/join.png]
"""

import argparse
import csv
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METRICS = [("partition_time", "Partition phase (ms)"), ("build_probe_time", "Build + probe (ms)"),
           ("total_time", "End to end (ms)")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--out", default=None, help="PNG to write (default: CSV name with .png)")
    args = parser.parse_args()
    try:
        with open(args.csv, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as error:
        print(f"plot.py: cannot read {args.csv}: {error}", file=sys.stderr)
        return 1
    value = {}
    for row in rows:
        match = re.fullmatch(r"radix_join_(\d+)b", row.get("benchmark", ""))
        if match:
            key = (row["metric"], row["variant"], int(row["workers"]), int(match.group(1)))
            value[key] = float(row["value"])
    if not value:
        print(f"plot.py: no radix_join rows in {args.csv}", file=sys.stderr)
        return 1
    variants = list(dict.fromkeys(k[1] for k in value))
    workers = sorted({k[2] for k in value})
    figure, axes = plt.subplots(len(workers), len(METRICS), figsize=(4.2 * len(METRICS), 3.4 * len(workers)),
                                squeeze=False)
    for row_index, worker_count in enumerate(workers):
        for axis, (metric, title) in zip(axes[row_index], METRICS):
            for variant in variants:
                points = sorted((k[3], v) for k, v in value.items()
                                if k[0] == metric and k[1] == variant and k[2] == worker_count)
                if points:
                    axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=variant,
                              linestyle="--" if variant.startswith("classic") else "-")
            axis.set_title(f"{title}, {worker_count} worker{'s' if worker_count > 1 else ''}")
            axis.set_xlabel("radix bits")
            axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    figure.suptitle("Radix join: classic partitioning vs micro partitioning with task squads (medians)")
    figure.tight_layout()
    out = args.out or (args.csv.rsplit(".", 1)[0] + ".png")
    figure.savefig(out, dpi=110)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
