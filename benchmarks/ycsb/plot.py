#!/usr/bin/python3
"""Plots mx_bench_ycsb's CSV: throughput per YCSB phase, one bar per variant and worker count.

Usage: /usr/bin/python3 benchmarks/ycsb/plot.py results/blinktree.csv [-o results/blinktree.png]
"""

import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PHASES = [("ycsb_load", "Load (inserts)"), ("ycsb_c", "YCSB C (reads)"), ("ycsb_a", "YCSB A (50 % updates)")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--out", default=None, help="PNG to write (default: CSV name with .png)")
    args = parser.parse_args()
    try:
        with open(args.csv, newline="") as handle:
            # The phases of undisturbed runs only (scripts/demo.py adds *_disturbed rows).
            rows = [row for row in csv.DictReader(handle)
                    if row["metric"] == "throughput" and row["benchmark"] in dict(PHASES)]
    except (OSError, KeyError) as error:
        print(f"plot.py: cannot read {args.csv}: {error}", file=sys.stderr)
        return 1
    if not rows:
        print(f"plot.py: no throughput rows in {args.csv}", file=sys.stderr)
        return 1
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    workers = sorted({int(row["workers"]) for row in rows})
    value = {(r["benchmark"], r["variant"], int(r["workers"])): float(r["value"]) for r in rows}
    figure, axes = plt.subplots(1, len(PHASES), figsize=(4.2 * len(PHASES), 3.8), sharey=False)
    width = 0.8 / len(variants)
    for axis, (benchmark, title) in zip(axes, PHASES):
        for i, variant in enumerate(variants):
            xs = [w_index + i * width for w_index in range(len(workers))]
            ys = [value.get((benchmark, variant, w), 0.0) for w in workers]
            axis.bar(xs, ys, width, label=variant)
        axis.set_xticks([w_index + 0.4 - width / 2 for w_index in range(len(workers))])
        axis.set_xticklabels([f"{w} worker{'s' if w > 1 else ''}" for w in workers])
        axis.set_title(title)
        axis.set_ylabel("M operations / s")
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.suptitle("B-link tree, YCSB (medians)")
    figure.tight_layout()
    out = args.out or (args.csv.rsplit(".", 1)[0] + ".png")
    figure.savefig(out, dpi=110)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
