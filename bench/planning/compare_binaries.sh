#!/usr/bin/env bash
# Times two flexplan binaries side by side on the same generated trees, interleaved, and says
# whether they wrote the same plan.bin: the before/after measurement of docs/planning-speed.md.
#
#   bench/planning/compare_binaries.sh BEFORE AFTER [LEARNERS...]   (default: 16000)
#
# Environment: ROUNDS (default 3) runs of each binary per size, interleaved (before first in
# even rounds, after first in odd ones); OUT (default a new temporary folder, printed) keeps the
# trees, plans and each run's log. Prints one line per run: binary, learners, wall and user
# seconds, peak KiB; then, per size, the median wall and user time of each binary. A binary that
# fails stops the script (exit 1) with its log's tail.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../side_by_side.sh"
if [ $# -lt 2 ]; then
  echo "usage: $0 BEFORE AFTER [LEARNERS...]" >&2
  exit 2
fi
before=$1 after=$2
shift 2
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16000)
side_by_side_rounds
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
side_by_side_executables "$before" "$after"

echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds, files in $out"
for learners in "${sizes[@]}"; do
  tree="$out/tree-$learners.json"
  /usr/bin/python3 "$here/asymmetric_tree_json.py" "$learners" > "$tree"
  : > "$out/times-$learners.txt"
  rm -f "$out/plan-before-$learners.bin" "$out/plan-after-$learners.bin"
  for ((round = 0; round < rounds; ++round)); do
    for which in $(side_by_side_order "$round"); do
      binary=$before
      [ "$which" = after ] && binary=$after
      log="$out/log-$which-$learners.txt"
      if ! /usr/bin/time -f "%e %U %M" -o "$out/time.txt" "$binary" "$tree" \
          -o "$out/plan-$which-$learners.bin" > "$log" 2>&1; then
        echo "$0: $which ($binary) failed on $tree; the end of its output ($log):" >&2
        tail -5 "$log" >&2
        exit 1
      fi
      read -r wall user peak < "$out/time.txt"
      echo "$which $learners ${wall} s wall ${user} s user ${peak} KiB"
      echo "$which $wall $user" >> "$out/times-$learners.txt"
    done
  done
  for which in before after; do
    wall=$(awk -v w="$which" '$1 == w {print $2}' "$out/times-$learners.txt" | side_by_side_median)
    user=$(awk -v w="$which" '$1 == w {print $3}' "$out/times-$learners.txt" | side_by_side_median)
    echo "median $which $learners: ${wall} s wall ${user} s user"
  done
  if cmp -s "$out/plan-before-$learners.bin" "$out/plan-after-$learners.bin"; then
    echo "plan.bin at $learners: identical"
  else
    echo "plan.bin at $learners: differs"
  fi
done
