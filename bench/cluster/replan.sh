#!/bin/bash
# A plan that follows the network on the emulated 2+3+2 cluster (400/100/200 Mbit/s): 8 MiB
# all-reduces back to back; after call THROTTLE_AFTER machine 0's link drops to 50 Mbit/s (tc),
# and after call RESTORE_AFTER it comes back. Once with FLEXPLAN_REPLAN=off, once with auto
# (drift window 5 calls). Per-call times, wrong elements and plan generation go to
# OUT/{off,auto}.txt; docs/results.md holds a run's table.
#   bench/cluster/replan.sh [--build build] [--out DIR] [--calls 60] [--throttle-after 20] [--restore-after 45]
#                           [--modes "off auto"]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
BUILD=$ROOT/build OUT="" CALLS=60 THROTTLE_AFTER=20 RESTORE_AFTER=45 MODES="off auto"
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    --calls) CALLS=$2; shift ;;
    --throttle-after) THROTTLE_AFTER=$2; shift ;;
    --restore-after) RESTORE_AFTER=$2; shift ;;
    --modes) MODES=$2; shift ;;
    *) echo "replan.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD=$(cd "$BUILD" && pwd) || exit 2
OUT=${OUT:-$BUILD/cluster-replan}
mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology

dir=$OUT
EMU_LEARNERS="2 3 2" EMU_RATES="400mbit 100mbit 200mbit" EMU_DELAYS="0 0 0" "$CLUSTER" up > "$dir/up.txt" || exit 1
trap '"$CLUSTER" down > /dev/null' EXIT
if ! checked "$dir" 3 20 || ! calibrated_topology "$dir"; then log "check or calibration failed"; exit 1; fi
"$BUILD/flexplan" "$dir/topology.json" -o "$dir/plan.bin" > "$dir/plan.txt" || exit 1

# run MODE: one job; the throttle and the restore as the job's marks appear.
run() {
  local mode=$1 mark=$dir/mark-$1
  rm -f "$mark" "$mark.restore"
  "$CLUSTER" shape 0 400mbit > /dev/null
  FLEXPLAN_REPLAN=$mode FLEXPLAN_TOPOLOGY=$dir/topology.json FLEXPLAN_DRIFT_WINDOW=5 FLEXPLAN_STATS=1 \
    FLEXPLAN_BLOCKING=1 FLEXPLAN_ALLOW_HOST_MISMATCH=1 FLEXPLAN_REPLAN_OUT=$dir/replanned-$mode.bin \
    timeout 1200 "$CLUSTER" mpirun -np 7 "$BUILD/flexplan_replan_run" "$dir/plan.bin" $((8 << 20)) "$CALLS" \
    "$THROTTLE_AFTER" "$mark" > "$dir/$mode.txt" 2> "$dir/$mode.err" &
  local job=$!
  while [ ! -f "$mark" ] && kill -0 $job 2> /dev/null; do sleep 0.2; done
  if [ -f "$mark" ]; then  # (a run of fewer calls stays steady throughout)
    "$CLUSTER" shape 0 50mbit > /dev/null
    log "$mode: machine 0 at 50 Mbit/s after call $THROTTLE_AFTER"
  fi
  while kill -0 $job 2> /dev/null; do
    if [ "$(awk 'NF == 4 && $1 !~ /#/ { n = $1 } END { print n + 0 }' "$dir/$mode.txt")" -ge "$RESTORE_AFTER" ]; then
      "$CLUSTER" shape 0 400mbit > /dev/null
      log "$mode: machine 0 back at 400 Mbit/s after call $RESTORE_AFTER"
      break
    fi
    sleep 0.2
  done
  wait $job
  log "$mode: exit $?, $(grep -c . "$dir/$mode.txt") lines"
}
for mode in $MODES; do run "$mode"; done
