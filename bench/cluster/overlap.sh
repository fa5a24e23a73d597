#!/bin/bash
# The overlapped runtime against its per-slice predictions: per configuration (2+3+2 at
# 400/100/200 Mbit/s, 2+3 at 200 Mbit/s, 3+3+4 at 100 Mbit/s), bring the cluster up, pass the
# link check, calibrate, measure the runtime's cost per hop (calibrate_hops.py, a 64 B ring timed
# AGG calls back to back), write two all-reduce plans with that hop cost and the host's cores
# (--host-cores: every learner runs on this host), one priced per slice (--slice-progress slice)
# and one per rank, and predict both with each pricing; then, ROUNDS times in turn, flexbench
# all-reduce at 8 B (AGG calls back to back per timed iteration: -m) and 64 KiB-4 MiB in three
# modes: (a) the per-slice plan with FLEXPLAN_STEP_OVERLAP=1, (b) the same plan with
# FLEXPLAN_STEP_OVERLAP=0, (c) the default plan with FLEXPLAN_STEP_OVERLAP=1, then (m) Open
# MPI's MPI_Allreduce beside (a) in a run of its own. Results: OUT/CONFIG/*; the table: overlap_table.py OUT (docs/results.md).
#   bench/cluster/overlap.sh [--build build] [--out DIR] [--iters N] [--rounds R] [--only 2+3+2,2+3]
#                            [--sizes MIN,MAX] [--skip-8] [--agg N] [--agg-sweep]
# --sizes: the second sweep's range (default 64K,4M, by 4); --skip-8: no 8 B sweep; --agg: calls
# back to back per timed iteration at 8 B and in the hop calibration (default 20; 1: one call
# after each barrier, which at 8 B mostly times how far apart the ranks leave the barrier);
# --agg-sweep: the second sweep's calls back to back too (for its small sizes).
# EMU_PREFIX / EMU_SUBNET (cluster.sh) keep this cluster apart from others on the host.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
BUILD=$ROOT/build OUT="" ITERS=5 WARMUP=1 ROUNDS=3 ONLY="" SIZES=64K,4M SKIP8=0 AGG=20 AGG_SWEEP=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    --iters) ITERS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --sizes) SIZES=$2; shift ;;
    --skip-8) SKIP8=1 ;;
    --agg) AGG=$2; shift ;;
    --agg-sweep) AGG_SWEEP=1 ;;
    *) echo "overlap.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD=$(cd "$BUILD" && pwd) || exit 2
OUT=${OUT:-$BUILD/cluster-overlap}
FLEXPLAN=$BUILD/flexplan
FLEXBENCH=$BUILD/flexbench
mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology

CONFIGS=(
  "2+3+2   2,3,2   400mbit,100mbit,200mbit"
  "2+3     2,3     200mbit,200mbit"
  "3+3+4   3,3,4   100mbit,100mbit,100mbit"
)
CORES=$(nproc)  # every learner runs on this host: the plans and predictions are told so
# flexbench sweeps: 8 B alone, then MIN to MAX by 4 (64 KiB to 4 MiB by default)
MIN=${SIZES%,*} MAX=${SIZES#*,}
bytes() { python3 -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$1"; }
MIN_B=$(bytes "$MIN") MAX_B=$(bytes "$MAX")
SWEEPS=("-b $MIN -e $MAX -f 4")
[ "$AGG_SWEEP" = 1 ] && SWEEPS=("-b $MIN -e $MAX -f 4 -m $AGG")
[ "$SKIP8" = 1 ] || SWEEPS=("-b 8 -e 8 -m $AGG" "${SWEEPS[@]}")

bench() {  # DIR NAME PLAN OVERLAP MPI
  local dir=$1 name=$2 plan=$3 overlap=$4 mpi=$5 s i=0
  for s in "${SWEEPS[@]}"; do
    i=$((i + 1))
    # nice -10: learners (and their orteds) go ahead of other jobs on the host
    if ! FLEXPLAN_STEP_OVERLAP=$overlap nice -n -10 "$CLUSTER" mpirun -np $NP "$FLEXBENCH" "$dir/$plan" \
          $s -n $ITERS -w $WARMUP --blocking --check 1 --mpi $mpi \
          --json "$dir/bench-$name-$i.json" > "$dir/bench-$name-$i.txt" 2>&1; then
      log "  $name FAILED: $(tail -3 "$dir/bench-$name-$i.txt" | tr '\n' ' ')"
    fi
  done
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$dir/load.txt"
}

run_config() {
  local id=$1 learners=${2//,/ } rates=${3//,/ }
  local dir=$OUT/$id l
  NP=0
  for l in $learners; do NP=$((NP + l)); done
  rm -rf "$dir"; mkdir -p "$dir"
  log "$id: learners $learners, rates $rates, load $(cut -d' ' -f1-3 /proc/loadavg)"
  EMU_LEARNERS="$learners" EMU_RATES="$rates" EMU_DELAYS="$(echo $learners | sed 's/[0-9]\+/0/g')" \
    "$CLUSTER" up > "$dir/up.txt"
  if ! checked "$dir" 5 30 || ! calibrated_topology "$dir"; then
    log "  $id: SKIPPED (check or calibration failed)"; "$CLUSTER" down > /dev/null; return 0
  fi
  # The runtime's cost per hop, from a 64 B ring all-reduce (at least one element per learner;
  # latency-bound, where 4 KiB at 100 Mbit/s is half bandwidth), calls back to back
  "$FLEXPLAN" "$dir/topology.json" --collectives allreduce --algorithms ring -o "$dir/plan-ring.bin" \
    > "$dir/plan-ring.txt"
  if ! nice -n -10 "$CLUSTER" mpirun -np $NP "$FLEXBENCH" "$dir/plan-ring.bin" -b 64 -e 64 -n 30 -w 5 -m $AGG \
         --blocking --check 1 --mpi 0 --json "$dir/bench-hop.json" > "$dir/bench-hop.txt" 2>&1 \
     || ! python3 "$HERE/calibrate_hops.py" --flexplan "$FLEXPLAN" --topology "$dir/topology.json" \
         --bench "$dir/bench-hop.json" --host-cores $CORES -o "$dir/hops.json" 2> "$dir/calibrate.err"; then
    log "  $id: SKIPPED (hop calibration failed)"; "$CLUSTER" down > /dev/null; return 0
  fi
  local hop
  hop="$(python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["hop_overhead_s"] * 1e6))' "$dir/hops.json") us"
  echo "$hop" > "$dir/hop.txt"
  log "  hop overhead $hop"
  local p rows=""
  for p in slice rank; do
    "$FLEXPLAN" "$dir/topology.json" --collectives allreduce --hop-overhead "$hop" --host-cores $CORES --slice-progress $p \
      -o "$dir/plan-$p.bin" > "$dir/plan-$p.txt" || { log "  planning $p failed"; return 0; }
    "$FLEXPLAN" inspect "$dir/plan-$p.bin" --format json > "$dir/plan-$p.json"
    rows="$rows,$(python3 "$HERE/plan_choice.py" "$dir/plan-$p.json" 8 8 2),$(python3 "$HERE/plan_choice.py" "$dir/plan-$p.json" $MIN_B $MAX_B 4)"
  done
  rows=$(echo "$rows" | tr ',' '\n' | grep -v '^$' | sort -u | paste -sd,)
  log "  rows the plans run: $rows"
  # the plans' rows (slices included) priced both ways, 8 B to MAX by 2
  for p in slice rank; do
    "$FLEXPLAN" predict "$dir/topology.json" -b 8 -e "$MAX" -f 2 -a "$rows" --hop-overhead "$hop" --host-cores $CORES \
      --slice-progress $p --format json > "$dir/predict-$p.json"
  done
  local r
  for ((r = 1; r <= ROUNDS; r++)); do
    log "  round $r: a (per-slice plan, overlap), b (per-slice plan, step by step), c (default plan, overlap), m (MPI beside a)"
    bench "$dir" a$r plan-slice.bin 1 0
    bench "$dir" b$r plan-slice.bin 0 0
    bench "$dir" c$r plan-rank.bin 1 0
    # MPI in a run of its own: timed side by side, its calls alternate with (a)'s and slow them
    bench "$dir" m$r plan-slice.bin 1 1
  done
  "$CLUSTER" down > /dev/null
}

"$CLUSTER" down > /dev/null 2>&1 || true
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "overlap: build $BUILD, out $OUT, iters $ITERS, rounds $ROUNDS, cluster ${EMU_PREFIX:-fxemu} ${EMU_SUBNET:-10.77.0}"
for c in "${CONFIGS[@]}"; do
  set -- $c
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$1,"* ]]; then continue; fi
  run_config "$@"
done
log "done, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$HERE/overlap_table.py" "$OUT"
