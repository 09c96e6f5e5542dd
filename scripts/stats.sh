# Shell helpers shared by the A/B scripts (sourced, not run).

# Median of the numbers on standard input (or in file $1), one per line; the lower middle one
# for an even count.
median() { sort -g "$@" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
