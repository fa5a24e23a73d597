#!/bin/bash
# probe_repeat.sh - `flexplan probe` run N times on one emulated cluster, no plans: how reliably
# it finds the switch tree (docs/results.md, "The probe"). One line per run: exit status, wall
# seconds, the tree it inferred and what the uplink test made of each group.
#
#   EMU_RATES="100mbit ..." EMU_LEARNERS="1 ..." [EMU_RACKS="0 0 - -" EMU_RACK_RATES=200mbit] \
#     bench/cluster/probe_repeat.sh [--build build] [--out DIR] [--runs 3] [--budget 60s]
#
# Needs root and what cluster.sh needs. Uses its own cluster (EMU_PREFIX, EMU_SUBNET: fxpb,
# 10.79.0 unless set); brings it up, runs the gate once (its result is reported, not enforced)
# and takes it down.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$ROOT/build OUT="" RUNS=3 BUDGET=60s
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
: "${EMU_RATES:?set EMU_RATES}" "${EMU_LEARNERS:?set EMU_LEARNERS}"
export EMU_PREFIX=${EMU_PREFIX:-fxpb} EMU_SUBNET=${EMU_SUBNET:-10.79.0}
CLUSTER=$HERE/cluster.sh
OUT=${OUT:-$BUILD/probe-repeat}
mkdir -p "$OUT"
trap '"$CLUSTER" down >/dev/null 2>&1' EXIT
ranks=0; for l in $EMU_LEARNERS; do ranks=$((ranks + l)); done
"$CLUSTER" down >/dev/null 2>&1
"$CLUSTER" up > "$OUT/up.txt" 2>&1 || { echo "probe_repeat.sh: cluster up failed (see $OUT/up.txt)" >&2; exit 1; }
if nice -n -10 "$CLUSTER" check > "$OUT/check.txt" 2>&1; then echo "gate: passed"; else echo "gate: FAILED: $(tail -1 "$OUT/check.txt")"; fi
for i in $(seq 1 "$RUNS"); do
  start=$(date +%s.%N)
  FLEXPLAN_BLOCKING=1 timeout 300 "$CLUSTER" mpirun -np $ranks "$BUILD/flexplan-probe" --budget "$BUDGET" \
    -o "$OUT/probed-$i.json" --report "$OUT/report-$i.json" > /dev/null 2> "$OUT/probe-$i.log"
  code=$?
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e - s}')
  tree=$(grep -o 'inferred: [^;]*' "$OUT/probe-$i.log" | head -1)
  verdicts=$(grep -o 'group[0-9]* (machines [^)]*) [a-z]*' "$OUT/probe-$i.log" | paste -sd ';' -)
  echo "run $i: exit $code, $seconds s; $tree; ${verdicts:-no uplink verdict}" | tee -a "$OUT/summary.txt"
done
