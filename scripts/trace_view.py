#!/usr/bin/env python3
"""Draws an mxtasking trace (Chrome Trace Event JSON from Runtime::stop_trace, --trace or
MX_TRACE) as a PNG: one lane per worker with its task slices coloured by label, its idle time
in light grey, and the pipeline lanes (user spans, e.g. a TunaDB query's pipelines) on top, each
span named. For a picture in a document; to explore a trace, open the JSON in ui.perfetto.dev.

Usage: scripts/trace_view.py TRACE.json OUT.png [--title TEXT] [--labels N] [--from MS] [--to MS]
Needs matplotlib (Debian: python3-matplotlib, i.e. /usr/bin/python3 scripts/trace_view.py ...).
"""

import argparse
import json
import sys
from collections import defaultdict


def load(path):
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, json.JSONDecodeError) as error:
        sys.exit(f"trace_view.py: cannot read {path}: {error}")
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        sys.exit(f"trace_view.py: {path} has no traceEvents list")
    names = {}
    slices = []
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            names[event.get("tid")] = event.get("args", {}).get("name", str(event.get("tid")))
        elif event.get("ph") == "X":
            slices.append(event)
    return names, slices


def main():
    parser = argparse.ArgumentParser(description="Draw an mxtasking trace as a PNG.")
    parser.add_argument("trace", help="Chrome Trace Event JSON written by mxtasking")
    parser.add_argument("out", help="PNG to write")
    parser.add_argument("--title", default=None, help="title above the picture (default: the file name)")
    parser.add_argument("--labels", type=int, default=12, help="task labels with a colour of their own")
    parser.add_argument("--from", dest="start", type=float, default=None, help="first millisecond shown")
    parser.add_argument("--to", dest="end", type=float, default=None, help="last millisecond shown")
    args = parser.parse_args()
    if args.labels < 1:
        sys.exit("trace_view.py: --labels must be at least 1")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        sys.exit("trace_view.py: needs matplotlib (pip install matplotlib, or Debian's python3-matplotlib)")

    names, slices = load(args.trace)
    if not slices:
        sys.exit(f"trace_view.py: {args.trace} holds no slices")

    def lane_name(tid):
        return names.get(tid, f"track {tid}")

    pipeline_tids = sorted({e["tid"] for e in slices if e.get("cat") == "span"} |
                           {t for t, n in names.items() if n.startswith("pipelines")})
    worker_tids = sorted({e["tid"] for e in slices if e["tid"] not in pipeline_tids} |
                         {t for t, n in names.items() if n.startswith("worker")})
    # Top to bottom: pipelines, then workers 0, 1, ...
    lanes = list(reversed(worker_tids)) + list(reversed(pipeline_tids))
    row = {tid: i for i, tid in enumerate(lanes)}

    busy = defaultdict(float)
    for e in slices:
        if e.get("cat") == "task":
            busy[e["name"]] += e.get("dur", 0.0)
    ranked = sorted(busy, key=busy.get, reverse=True)
    shown = ranked[: args.labels]
    palette = plt.get_cmap("tab20").colors
    colour = {name: palette[(2 * i) % 20 if i < 10 else (2 * (i - 10) + 1) % 20] for i, name in enumerate(shown)}
    other = (0.45, 0.45, 0.45)
    idle = (0.88, 0.88, 0.88)

    # Per lane and colour, the (start, width) bars in milliseconds.
    bars = defaultdict(list)
    spans = []
    for e in slices:
        start = e.get("ts", 0.0) / 1000.0
        width = max(e.get("dur", 0.0) / 1000.0, 0.0)
        category = e.get("cat")
        if category == "span":
            spans.append((e["tid"], start, width, e["name"]))
        elif category == "task":
            bars[(e["tid"], colour.get(e["name"], other))].append((start, width))
        elif category == "idle":
            bars[(e["tid"], idle)].append((start, width))
    # By default from the first task or span to the last one's end: idle time before the first
    # task (a driver starts recording before the query is planned) shows nothing.
    work = [e for e in slices if e.get("cat") in ("task", "span")] or slices
    first = min(e.get("ts", 0.0) for e in work) / 1000.0
    last = max(e.get("ts", 0.0) + e.get("dur", 0.0) for e in work) / 1000.0
    margin = (last - first) * 0.01
    first, last = first - margin, last + margin
    low = args.start if args.start is not None else first
    high = args.end if args.end is not None else last
    if high <= low:
        sys.exit("trace_view.py: --to must be after --from")

    figure, axes = plt.subplots(figsize=(12, 1.2 + 0.45 * len(lanes)))
    for (tid, rgb), items in bars.items():
        # Tiny tasks: a bar at least a pixel-ish wide so dense runs stay visible.
        minimum = (high - low) / 3000.0
        axes.broken_barh([(s, max(w, minimum)) for s, w in items], (row[tid] - 0.4, 0.8), facecolors=rgb,
                         linewidth=0)
    span_palette = plt.get_cmap("Pastel1").colors
    for i, (tid, start, width, name) in enumerate(sorted(spans, key=lambda s: s[1])):
        axes.broken_barh([(start, width)], (row[tid] - 0.4, 0.8), facecolors=span_palette[i % len(span_palette)],
                         edgecolor=(0.3, 0.3, 0.3), linewidth=0.5)
    axes.set_yticks(range(len(lanes)))
    axes.set_yticklabels([lane_name(tid) for tid in lanes])
    axes.set_xlim(low, high)
    axes.set_ylim(-0.6, len(lanes) - 0.4)
    axes.set_xlabel("milliseconds since start_trace")
    axes.set_title(args.title if args.title is not None else args.trace, fontsize=10)
    handles = [Patch(facecolor=colour[name], label=name if len(name) <= 48 else name[:45] + "...") for name in shown]
    if len(ranked) > len(shown):
        handles.append(Patch(facecolor=other, label=f"{len(ranked) - len(shown)} other task labels"))
    handles.append(Patch(facecolor=idle, label="idle"))
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    figure.tight_layout()
    # Span names where they fit: the whole name, else its first part ("pipeline 3"), else its
    # number, else none.
    dpi = 130
    figure.set_dpi(dpi)
    axes_px = axes.get_window_extent().width
    char_px = 7 * 0.6 * dpi / 72  # fontsize 7
    for tid, start, width, name in spans:
        visible = min(start + width, high) - max(start, low)
        if visible <= 0:
            continue
        chars = int(visible / (high - low) * axes_px / char_px) - 1
        head = name.split(":")[0]
        fitting = [t for t in (name, head, head.split()[-1] if head.split() else head) if len(t) <= chars]
        if fitting:
            text = fitting[0]
            axes.text(max(start, low) + visible / 2, row[tid], text, ha="center", va="center", fontsize=7,
                      clip_on=True)
    figure.savefig(args.out, dpi=dpi)
    print(f"wrote {args.out}: {len(worker_tids)} workers, {len(spans)} spans, {len(ranked)} task labels")


if __name__ == "__main__":
    main()
