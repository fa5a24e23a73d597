#!/bin/bash
# The emulated cluster, every collective: reduce-scatter, all-gather and broadcast of 1-16 MiB on
# 2+3 (200 Mbit/s), 2+3+2 (400/100/200 Mbit/s) and 3+3+4 (100 Mbit/s) learners. Per configuration:
# bring the cluster up, pass the link check, calibrate, write the topology, plan every collective
# (the default plan, and plans narrowed to ring and to hierarchical), `flexplan predict` each
# collective (its floor, every algorithm, the plan's choice), then flexbench each collective with
# the default plan (Open MPI's same collective beside it) and with the ring and hierarchical plans.
# Results: OUT/CONFIG/*.json, and the table of collectives_table.py (docs/results.md).
#   bench/cluster/collectives.sh [--build build] [--out DIR] [--iters N] [--only 2+3,...]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
BUILD=$ROOT/build OUT="" ITERS=5 WARMUP=1 ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    --iters) ITERS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    *) echo "collectives.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD=$(cd "$BUILD" && pwd) || exit 2
OUT=${OUT:-$BUILD/cluster-collectives}
FLEXPLAN=$BUILD/flexplan
FLEXBENCH=$BUILD/flexbench
mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology

CONFIGS=(
  "2+3     2,3     200mbit,200mbit"
  "2+3+2   2,3,2   400mbit,100mbit,200mbit"
  "3+3+4   3,3,4   100mbit,100mbit,100mbit"
)
COLLECTIVES="allgather reduce_scatter broadcast"

run_config() {
  local id=$1 learners=${2//,/ } rates=${3//,/ }
  local dir=$OUT/$id np=0 l
  for l in $learners; do np=$((np + l)); done
  rm -rf "$dir"; mkdir -p "$dir"
  log "$id: learners $learners, rates $rates"
  EMU_LEARNERS="$learners" EMU_RATES="$rates" EMU_DELAYS="$(echo $learners | sed 's/[0-9]\+/0/g')" \
    "$CLUSTER" up > "$dir/up.txt"
  if ! checked "$dir" 5 30 || ! calibrated_topology "$dir"; then
    log "  $id: SKIPPED (check or calibration failed)"; "$CLUSTER" down > /dev/null; return 0
  fi
  local all=allreduce,reduce_scatter,allgather,broadcast,reduce
  "$FLEXPLAN" "$dir/topology.json" --collectives $all -o "$dir/plan-default.bin" > "$dir/plan-default.txt"
  "$FLEXPLAN" "$dir/topology.json" --collectives allreduce,reduce_scatter,allgather --algorithms ring \
    -o "$dir/plan-ring.bin" > "$dir/plan-ring.txt"
  "$FLEXPLAN" "$dir/topology.json" --collectives allreduce,reduce_scatter,allgather --algorithms hierarchical \
    -o "$dir/plan-hierarchical.bin" > "$dir/plan-hierarchical.txt"
  local c plan
  for c in $COLLECTIVES; do
    "$FLEXPLAN" predict "$dir/topology.json" --collective $c -b 1M -e 16M -f 2 --format json > "$dir/predict-$c.json"
    for plan in default ring hierarchical; do
      [ "$c" = broadcast ] && [ $plan != default ] && continue
      local mpi=0
      [ $plan = default ] && mpi=1
      log "  $c, $plan plan"
      if ! nice -n -10 "$CLUSTER" mpirun -np $np "$FLEXBENCH" "$dir/plan-$plan.bin" --collective $c \
            -b 1M -e 16M -f 2 -n $ITERS -w $WARMUP --blocking --check 1 --mpi $mpi \
            --json "$dir/bench-$c-$plan.json" > "$dir/bench-$c-$plan.txt" 2>&1; then
        log "  $c $plan FAILED: $(tail -3 "$dir/bench-$c-$plan.txt" | tr '\n' ' ')"
      fi
    done
  done
  "$CLUSTER" down > /dev/null
}

"$CLUSTER" down > /dev/null 2>&1 || true
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "collectives: build $BUILD, out $OUT, load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in "${CONFIGS[@]}"; do
  set -- $c
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$1,"* ]]; then continue; fi
  run_config "$@"
done
log "done, load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$HERE/collectives_table.py" "$OUT"
