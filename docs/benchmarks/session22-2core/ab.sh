#!/bin/bash
# Interleaved rounds at 10 M keys: the base binary (f0207cc), and this session's binary in its
# default mode, with interleaved lookups, and with interleaved lookups plus payload suspensions.
# Usage: ab.sh BASE_BIN NEW_BIN ROUNDS > out
base=$1; new=$2; rounds=${3:-3}
run() { # label bin args...
    local label=$1 bin=$2; shift 2
    local line; line=$("$bin" -n 10000000 -m 5000000 -r 1 --variants mxtasking "$@" 2>&1 | grep '^rep')
    echo "$label $* :: $line"
}
for r in $(seq 1 "$rounds"); do
    for w in 1 2; do
        run base "$base" -w "$w"
        run new "$new" -w "$w"
        run interleaved "$new" -w "$w" --interleaved-lookups
        run interleaved_payload "$new" -w "$w" --interleaved-lookups --payload-step on
    done
done
