#!/usr/bin/env bash
# All five collectives planned beside all-reduce alone, same binary, alternating: the goal "all
# five at most twice the all-reduce's planning time, memory near-linear in learners" (issue 38,
# docs/planning-speed.md).
#
#   bench/planning/collectives_seconds.sh FLEXPLAN[,OTHER] TREE...
#
# A TREE is a topology file, or a learner count for asymmetric_tree_json.py (seed SEED, default
# 7). For each tree and binary it runs `FLEXPLAN TREE --collectives allreduce -o plan.bin` and the same with
# `--collectives allreduce,reduce_scatter,allgather,broadcast,reduce`, ROUNDS times (default 5),
# the two in turn and the order swapped every round (and the binaries likewise), so that a noisy
# host slows both alike. Each run is timed whole (loading, planning, verifying, writing) with
# /usr/bin/time, which gives its peak memory too. Prints per tree and binary the medians, the
# least and most seconds, and the ratio of the medians.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../side_by_side.sh"
if [ $# -lt 2 ]; then
  echo "usage: $0 FLEXPLAN[,OTHER] TREE..." >&2
  exit 2
fi
IFS=, read -r -a binaries <<< "$1"
shift
side_by_side_executables "${binaries[@]}"
ROUNDS=${ROUNDS:-5}
side_by_side_rounds
seed=${SEED:-7}
[ -x /usr/bin/time ] || { echo "$0: needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
all_five=allreduce,reduce_scatter,allgather,broadcast,reduce

echo "# $(date -u +%FT%TZ), $rounds rounds, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %-18s %-10s %8s %8s %8s %9s %7s\n' tree binary collectives median least most \
  "peak MB" ratio
for tree in "$@"; do
  file=$tree
  if [[ $tree =~ ^[0-9]+$ ]]; then
    file="$work/tree-$tree.json"
    /usr/bin/python3 "$here/asymmetric_tree_json.py" "$tree" "$seed" > "$file"
  fi
  [ -r "$file" ] || { echo "$0: cannot read '$file'" >&2; exit 2; }
  for b in "${!binaries[@]}"; do : > "$work/one-$b.txt"; : > "$work/five-$b.txt"; done
  for ((round = 0; round < rounds; ++round)); do
    runs=()
    for b in "${!binaries[@]}"; do runs+=("one $b" "five $b"); done
    if ((round % 2 == 1)); then
      reversed=()
      for ((i = ${#runs[@]} - 1; i >= 0; --i)); do reversed+=("${runs[$i]}"); done
      runs=("${reversed[@]}")
    fi
    for run in "${runs[@]}"; do
      read -r which b <<< "$run"
      extra=(--collectives allreduce)
      [ "$which" = five ] && extra=(--collectives "$all_five")
      if ! /usr/bin/time -f '%e %M' -o "$work/time.txt" "${binaries[$b]}" "$file" "${extra[@]}" \
           -o "$work/plan.bin" > /dev/null 2> "$work/log.txt"; then
        echo "$0: ${binaries[$b]} ${extra[*]} failed on $tree:" >&2
        tail -5 "$work/log.txt" >&2
        exit 1
      fi
      tail -1 "$work/time.txt" >> "$work/$which-$b.txt"
    done
  done
  for b in "${!binaries[@]}"; do
    one=$(cut -d' ' -f1 "$work/one-$b.txt" | side_by_side_median)
    five=$(cut -d' ' -f1 "$work/five-$b.txt" | side_by_side_median)
    for which in one five; do
      seconds=$(cut -d' ' -f1 "$work/$which-$b.txt")
      peak=$(cut -d' ' -f2 "$work/$which-$b.txt" | sort -g | tail -1)
      printf '%-16s %-18s %-10s %8s %8s %8s %9d %7s\n' "$(basename "$tree" .json)" \
        "$(basename "${binaries[$b]}")" "$([ "$which" = one ] && echo allreduce || echo all-five)" \
        "$(side_by_side_median <<< "$seconds")" "$(sort -g <<< "$seconds" | head -1)" \
        "$(sort -g <<< "$seconds" | tail -1)" "$((peak / 1024))" \
        "$([ "$which" = five ] && awk -v a="$five" -v b="$one" 'BEGIN {printf "%.2f", a / b}' || echo -)"
    done
  done
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
