#!/usr/bin/env bash
# The planner's own time on generated trees of several seeds: the goal "16k learners planned in
# at most 0.2 s" (docs/planning-speed.md), measured on trees the planner was not tuned on.
#
#   bench/planning/planner_seconds.sh FLEXPLAN [LEARNERS] [SEED...]   (default: 16000; 7 11 13 21 99)
#
# For each seed it writes `asymmetric_tree_json.py LEARNERS SEED`, plans it ROUNDS times
# (default 7) and takes the planner's time from the command's progress lines: from "topology
# loaded" to "verifying and writing the plan" (so JSON parsing, verification and writing are
# not in it; the command prints those lines from 10,000 learners on). Prints one line per seed: learners, the median, the least and the most seconds,
# and the whole command's median wall time; then the load average. Run it on an idle host: the
# planner uses two threads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../side_by_side.sh"
if [ $# -lt 1 ]; then
  echo "usage: $0 FLEXPLAN [LEARNERS] [SEED...]" >&2
  exit 2
fi
flexplan=$1
learners=${2:-16000}
shift $(($# >= 2 ? 2 : 1))
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(7 11 13 21 99)
side_by_side_executables "$flexplan"
rounds=${ROUNDS:-7}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# $(date -u +%FT%TZ), $rounds rounds per seed, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %9s %8s %8s %8s %10s\n' seed learners median least most "wall (med)"
for seed in "${seeds[@]}"; do
  tree="$work/tree-$seed.json"
  /usr/bin/python3 "$here/asymmetric_tree_json.py" "$learners" "$seed" > "$tree"
  : > "$work/planner.txt"
  : > "$work/wall.txt"
  count=""
  for ((round = 0; round < rounds; ++round)); do
    start=$(date +%s%N)
    if ! "$flexplan" "$tree" -o "$work/plan.bin" > /dev/null 2> "$work/log.txt"; then
      echo "$0: $flexplan failed on seed $seed:" >&2
      tail -5 "$work/log.txt" >&2
      exit 1
    fi
    end=$(date +%s%N)
    echo "$(( (end - start) / 1000000 ))" >> "$work/wall.txt"
    awk '/topology loaded/ {gsub(/[][]/, " "); loaded = $2; if (match($0, /loaded: [0-9]+/)) n = substr($0, RSTART + 8, RLENGTH - 8)}
         /verifying and writing the plan/ {gsub(/[][]/, " "); printf "%.3f\n", $2 - loaded}
         END {print "learners " n > "/dev/stderr"}' "$work/log.txt" >> "$work/planner.txt" 2> "$work/learners.txt"
    count=$(cut -d' ' -f2 "$work/learners.txt")
  done
  if [ ! -s "$work/planner.txt" ]; then
    echo "$0: no progress lines from $flexplan (it prints them from 10,000 learners on)" >&2
    exit 1
  fi
  median=$(side_by_side_median < "$work/planner.txt")
  least=$(sort -g "$work/planner.txt" | head -1)
  most=$(sort -g "$work/planner.txt" | tail -1)
  wall=$(side_by_side_median < "$work/wall.txt")
  printf '%-6s %9s %8s %8s %8s %8s ms\n' "$seed" "$count" "$median" "$least" "$most" "$wall"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
