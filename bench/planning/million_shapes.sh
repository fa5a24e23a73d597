#!/usr/bin/env bash
# Plans a million learners in each of four shapes (issue 39; goal: at most 10 s and 4 GB each)
# and prints the seconds and peak memory of each run, as /usr/bin/time -v measures them:
#
#   bench/planning/million_shapes.sh FLEXPLAN [SHAPE...]   (default: flat wide deep generated)
#
# The shapes come from million_shapes.py, written to a scratch folder on the fly: flat (one
# switch of 1,000,000 learners), wide (1,000 machines of 1,000), deep (a binary tree of switches
# 18 levels deep, 4 learners under each bottom one: 1,048,576), generated (asymmetric_tree_json.py's
# uneven tree, seed 1). Each is planned with the default command, `FLEXPLAN TOPO -o plan.bin`
# (all-reduce), under `ulimit -v` of 8 GB so that a run past the goal fails instead of swapping.
# The host's load average is printed before each run: on a shared host the wall time says little,
# user + sys says more (the planner uses two threads).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 FLEXPLAN [flat|wide|deep|generated ...]" >&2
  exit 2
fi
flexplan=$(realpath "$1")
shift
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(flat wide deep generated)
[ -x /usr/bin/time ] || { echo "$0: needs /usr/bin/time (GNU time)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-10s %9s %8s %8s %8s %9s %10s %6s  %s\n' shape learners wall_s user_s sys_s peak_GB plan_MiB rc load
for shape in "${shapes[@]}"; do
  /usr/bin/python3 "$here/million_shapes.py" "$shape" > "$work/$shape.json"
  load=$(cut -d' ' -f1 /proc/loadavg)
  set +e
  ( ulimit -v 8000000; /usr/bin/time -v "$flexplan" "$work/$shape.json" -o "$work/$shape.bin" \
      > "$work/$shape.out" 2> "$work/$shape.err" )
  rc=$?
  set -e
  field() { sed -n "s/^[[:space:]]*$1: //p" "$work/$shape.err"; }
  elapsed=$(field 'Elapsed (wall clock) time (h:mm:ss or m:ss)')
  wall=$(awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; printf "%.2f", s }' <<< "$elapsed")
  learners=$(sed -n 's/.*topology loaded: \([0-9]*\) learners.*/\1/p' "$work/$shape.err")
  size=$([ -f "$work/$shape.bin" ] && awk '{ printf "%.1f", $1 / 1048576 }' <<< "$(stat -c %s "$work/$shape.bin")" || echo -)
  printf '%-10s %9s %8s %8s %8s %9.2f %10s %6s  %s\n' "$shape" "${learners:--}" "$wall" \
    "$(field 'User time (seconds)')" "$(field 'System time (seconds)')" \
    "$(awk '{ print $1 / 1048576 }' <<< "$(field 'Maximum resident set size (kbytes)')")" "$size" "$rc" "$load"
  if [ "$rc" -ne 0 ]; then grep -v '^\s' "$work/$shape.err" | tail -3 >&2; fi
  if [ -n "${KEEP:-}" ]; then cp "$work/$shape.err" "$work/$shape.out" "$KEEP/" 2>/dev/null || true; fi
done
