#!/usr/bin/env bash
# Times one rank's plan load with two builds of plan_load_bench side by side on the same
# plan.bin, interleaved: the before/after measurement of docs/planning-speed.md.
#
#   bench/verify/compare_load.sh BEFORE_BENCH AFTER_BENCH PLAN.bin
#
# BEFORE_BENCH and AFTER_BENCH are plan_load_bench binaries (build/bench/verify/plan_load_bench
# of each build). Environment: ROUNDS (default 3) runs of each, interleaved (before first in
# even rounds, after first in odd ones). Prints, per part of the load, each binary's CPU
# seconds in every round and their median. A run that fails stops the script (exit 1).
set -euo pipefail
source "$(dirname "$0")/../side_by_side.sh"
if [ $# -ne 3 ]; then
  echo "usage: $0 BEFORE_BENCH AFTER_BENCH PLAN.bin" >&2
  exit 2
fi
before=$1 after=$2 plan=$3
side_by_side_rounds
side_by_side_executables "$before" "$after"
[ -r "$plan" ] || { echo "$0: cannot read '$plan'" >&2; exit 2; }

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds, $plan"
for ((round = 0; round < rounds; ++round)); do
  for which in $(side_by_side_order "$round"); do
    binary=$before
    [ "$which" = after ] && binary=$after
    if ! output=$("$binary" "$plan" 2 2>&1); then
      echo "$0: $which ($binary) failed on $plan:" >&2
      echo "$output" | tail -5 >&2
      exit 1
    fi
    # Rows look like "  what it times ... 0.123 s wall 0.120 s cpu"; the part's name is what
    # comes before the figures, less the rank numbers that differ between parts.
    echo "$output" | awk -v w="$which" '/ s wall .* s cpu$/ {
      cpu = $(NF - 2); line = $0; sub(/ +[0-9.]+ s wall .*$/, "", line); sub(/^ +/, "", line)
      sub(/ \(.*$/, "", line); sub(/ for rank [0-9]+/, "", line); print w "\t" line "\t" cpu }' >> "$rows"
  done
done
awk -F'\t' '
  { key = $2; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    v[key, $1] = v[key, $1] " " $3; c[key, $1]++; x[key, $1, c[key, $1]] = $3 }
  function median(key, w,    i, j, t, m, a) {
    m = c[key, w]; for (i = 1; i <= m; ++i) a[i] = x[key, w, i]
    for (i = 2; i <= m; ++i) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  END { printf "%-44s %-24s %-24s %s\n", "part (CPU s)", "before", "after", "median before -> after"
        for (i = 1; i <= n; ++i) { k = order[i]
          printf "%-44s %-24s %-24s %.3f -> %.3f\n", k, v[k, "before"], v[k, "after"], median(k, "before"), median(k, "after") } }' "$rows"
