#!/usr/bin/env bash
# Times two flexplan binaries side by side on the same generated trees, interleaved, and says
# whether they wrote the same plan.bin: the before/after measurement of docs/planning-speed.md.
#
#   bench/planning/compare_binaries.sh BEFORE AFTER [LEARNERS...]   (default: 16000)
#
# Environment: ROUNDS (default 3) runs of each binary per size, alternating; OUT (default a
# temporary folder) keeps the trees and plans. Prints one line per run: binary, learners, wall
# and user seconds, peak KiB; then, per size, the median wall and user time of each binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
  echo "usage: $0 BEFORE AFTER [LEARNERS...]" >&2
  exit 2
fi
before=$1 after=$2
shift 2
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16000)
rounds=${ROUNDS:-3}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
for binary in "$before" "$after"; do
  [ -x "$binary" ] || { echo "$0: '$binary' is not an executable" >&2; exit 2; }
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds"
for learners in "${sizes[@]}"; do
  tree="$out/tree-$learners.json"
  /usr/bin/python3 "$here/asymmetric_tree_json.py" "$learners" > "$tree"
  : > "$out/times-$learners.txt"
  for ((round = 0; round < rounds; ++round)); do
    for which in before after; do
      binary=$before
      [ "$which" = after ] && binary=$after
      /usr/bin/time -f "%e %U %M" -o "$out/time.txt" "$binary" "$tree" -o "$out/plan-$which-$learners.bin" \
        > /dev/null 2>&1
      read -r wall user peak < "$out/time.txt"
      echo "$which $learners ${wall} s wall ${user} s user ${peak} KiB"
      echo "$which $wall $user" >> "$out/times-$learners.txt"
    done
  done
  for which in before after; do
    wall=$(awk -v w="$which" '$1 == w {print $2}' "$out/times-$learners.txt" | median)
    user=$(awk -v w="$which" '$1 == w {print $3}' "$out/times-$learners.txt" | median)
    echo "median $which $learners: ${wall} s wall ${user} s user"
  done
  if cmp -s "$out/plan-before-$learners.bin" "$out/plan-after-$learners.bin"; then
    echo "plan.bin at $learners: identical"
  else
    echo "plan.bin at $learners: differs"
  fi
done
