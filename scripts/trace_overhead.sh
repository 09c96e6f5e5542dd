#!/usr/bin/env bash
# Tracing overhead on spawn_local: the same benchmark from a build with tracing compiled in but off
# (A), a build with -DMX_TRACING=OFF (B) and build A recording every timed run (C), interleaved
# A B C A B C ... for ROUNDS rounds. Each invocation reports the median of its repetitions; the
# script prints the median over rounds (and the same from each invocation's fastest repetition) and
#   trace_off_overhead_percent = (B / A - 1) * 100   (throughput lost by compiling tracing in)
#   trace_on_overhead_percent  = (A / C - 1) * 100   (throughput lost while recording)
# Usage: scripts/trace_overhead.sh ON_BUILD OFF_BUILD [WORKERS] [ROUNDS] [TASKS]
#   e.g. scripts/trace_overhead.sh build/bench build/bench-notrace 1 9 2000000
set -euo pipefail
on=$1/benchmarks/mx_bench_runtime
off=$2/benchmarks/mx_bench_runtime
workers=${3:-1}
rounds=${4:-9}
tasks=${5:-2000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(-b spawn_local -w "$workers" --variants mx -r 5 --warmup 1 --tasks "$tasks" -q)
# Stealing can move tasks between workers: room for all of them on each.
events=$((tasks * workers + 100000))
rate() { awk -F, '$1 == "spawn_local" && $4 == "tasks_per_second" { print $5 }' "$1"; }
best() { awk -F, '$1 == "spawn_local" && $4 == "cycles_per_task_min" { print $5 }' "$1"; }
for ((r = 0; r < rounds; ++r)); do
    for k in a b c; do
        case $k in
        a) "$on" "${common[@]}" -o "$tmp/$k.csv" ;;
        b) "$off" "${common[@]}" -o "$tmp/$k.csv" ;;
        c) "$on" "${common[@]}" --profile --trace-events "$events" -o "$tmp/$k.csv" > "$tmp/c.out"
           ! grep -q "events dropped" "$tmp/c.out" || { echo "recording dropped events" >&2; exit 1; } ;;
        esac
        rate "$tmp/$k.csv" >> "$tmp/$k"
        best "$tmp/$k.csv" >> "$tmp/$k.min"
    done
done
python3 - "$tmp" <<'PY'
import statistics, sys
d = sys.argv[1]
v = {k: [float(x) for x in open(f"{d}/{k}")] for k in "abc"}
c = {k: [float(x) for x in open(f"{d}/{k}.min")] for k in "abc"}
m = {k: statistics.median(x) for k, x in v.items()}
spread = {k: (max(x) - min(x)) / statistics.median(x) * 100 for k, x in v.items()}
print("M tasks/s per round:")
for k, name in zip("abc", ["compiled in, off", "compiled out", "recording"]):
    print(f"  {name:17s} median {m[k]/1e6:7.2f}  spread {spread[k]:5.1f} %  " + " ".join(f"{x/1e6:.1f}" for x in v[k]))
print("cycles per task of the fastest repetition, per round (less sensitive to other load):")
for k, name in zip("abc", ["compiled in, off", "compiled out", "recording"]):
    print(f"  {name:17s} median {statistics.median(c[k]):6.1f}  min {min(c[k]):6.1f}  " + " ".join(f"{x:.1f}" for x in c[k]))
print(f"trace_off_overhead_percent {(m['b'] / m['a'] - 1) * 100:.2f} (throughput medians), "
      f"{(statistics.median(c['a']) / statistics.median(c['b']) - 1) * 100:.2f} (fastest-repetition cycles)")
print(f"trace_on_overhead_percent {(m['a'] / m['c'] - 1) * 100:.2f} (throughput medians), "
      f"{(statistics.median(c['c']) / statistics.median(c['a']) - 1) * 100:.2f} (fastest-repetition cycles)")
PY
