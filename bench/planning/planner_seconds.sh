#!/usr/bin/env bash
# The planner's own time on generated trees of several seeds: the goal "16k learners planned in
# at most 0.2 s" (docs/planning-speed.md), measured on trees the planner was not tuned on.
#
#   bench/planning/planner_seconds.sh FLEXPLAN[,OTHER] [LEARNERS] [SEED...]
#                                     (default: 16000 learners; seeds 7 11 13 21 99)
#
# For each seed it writes `asymmetric_tree_json.py LEARNERS SEED` and plans it ROUNDS times
# (default 7) with each binary in turn (a second binary after a comma: before/after, the order
# swapped every round, so that a noisy host slows both alike). The planner's time comes from
# the command's progress lines, from "topology loaded" to "verifying and writing the plan": JSON
# parsing, verification and writing are not in it (the command prints those lines from 10,000
# learners on). Prints one line per seed and binary: learners, the median, least and most
# seconds, and the whole command's median wall time. Run it on an idle host: the planner uses
# two threads. COLLECTIVES (default allreduce, the figure the goal is about) is passed to
# --collectives; the plan command's own default plans all five.
set -euo pipefail
collectives=${COLLECTIVES:-allreduce}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../side_by_side.sh"
if [ $# -lt 1 ]; then
  echo "usage: $0 FLEXPLAN[,OTHER] [LEARNERS] [SEED...]" >&2
  exit 2
fi
IFS=, read -r -a binaries <<< "$1"
learners=${2:-16000}
shift $(($# >= 2 ? 2 : 1))
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(7 11 13 21 99)
side_by_side_executables "${binaries[@]}"
rounds=${ROUNDS:-7}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# $(date -u +%FT%TZ), $rounds rounds per seed, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-24s %9s %8s %8s %8s %10s\n' seed binary learners median least most "wall (med)"
for seed in "${seeds[@]}"; do
  tree="$work/tree-$seed.json"
  /usr/bin/python3 "$here/asymmetric_tree_json.py" "$learners" "$seed" > "$tree"
  for b in "${!binaries[@]}"; do : > "$work/planner-$b.txt"; : > "$work/wall-$b.txt"; done
  count=""
  for ((round = 0; round < rounds; ++round)); do
    order=("${!binaries[@]}")
    if ((round % 2 == 1)); then order=($(printf '%s\n' "${order[@]}" | sort -rn)); fi
    for b in "${order[@]}"; do
      start=$(date +%s%N)
      if ! "${binaries[$b]}" "$tree" --collectives "$collectives" -o "$work/plan.bin" > /dev/null 2> "$work/log.txt"; then
        echo "$0: ${binaries[$b]} failed on seed $seed:" >&2
        tail -5 "$work/log.txt" >&2
        exit 1
      fi
      end=$(date +%s%N)
      echo "$(( (end - start) / 1000000 ))" >> "$work/wall-$b.txt"
      awk '/topology loaded/ {gsub(/[][]/, " "); loaded = $2}
           /verifying and writing the plan/ {gsub(/[][]/, " "); printf "%.3f\n", $2 - loaded}' \
        "$work/log.txt" >> "$work/planner-$b.txt"
      count=$(grep -o 'loaded: [0-9]*' "$work/log.txt" | cut -d' ' -f2 || true)
    done
  done
  for b in "${!binaries[@]}"; do
    if [ ! -s "$work/planner-$b.txt" ]; then
      echo "$0: no progress lines from ${binaries[$b]} (it prints them from 10,000 learners on)" >&2
      exit 1
    fi
    printf '%-6s %-24s %9s %8s %8s %8s %8s ms\n' "$seed" "$(basename "${binaries[$b]}")" "$count" \
      "$(side_by_side_median < "$work/planner-$b.txt")" "$(sort -g "$work/planner-$b.txt" | head -1)" \
      "$(sort -g "$work/planner-$b.txt" | tail -1)" "$(side_by_side_median < "$work/wall-$b.txt")"
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
