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
# Each binary's CPU seconds for one part, one a line, in round order.
values() { awk -F'\t' -v w="$1" -v p="$2" '$1 == w && $2 == p {print $3}' "$rows"; }
printf "%-44s %-24s %-24s %s\n" "part (CPU s)" before after "median before -> after"
cut -f2 "$rows" | awk '!seen[$0]++' | while IFS= read -r part; do
  printf "%-44s %-24s %-24s %s -> %s\n" "$part" "$(values before "$part" | tr '\n' ' ')" \
    "$(values after "$part" | tr '\n' ' ')" "$(values before "$part" | side_by_side_median)" \
    "$(values after "$part" | side_by_side_median)"
done
