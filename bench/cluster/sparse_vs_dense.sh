#!/bin/bash
# sparse_vs_dense.sh - the sparse all-reduce against the plan's dense all-reduce on the
# emulated cluster, predicted beside measured (docs/sparse.md, "Measured on the emulated cluster").
#
#   bench/cluster/sparse_vs_dense.sh [--build DIR] [--out DIR] [--clusters 2+3,3+3+4]
#                                    [--rates 100] [--sizes 8M,16M,32M,64M]
#                                    [--densities 0.001,0.005,0.01,0.05] [-n 3] [-w 1]
#                                    [--learner-links runtime|at-once|alone] [--report-only DIR]
#
# For each cluster (learners per machine) and rate (Mbit/s, every machine link at that rate, set
# with `cluster.sh shape`): pass `cluster.sh check`, calibrate and write the topology, plan it
# (the default race), run flexplan_sparse_bench (Gaussian float32 vectors; the plan's dense
# all-reduce, then the sparse all-reduce at each density, results checked; MSTopK's time alone
# on each rank's slice) under `cluster.sh mpirun`. sparse_table.py then predicts every point
# with `flexplan predict --sparse --format json` on the calibrated topology (the dense plan's
# own algorithm; MSTopK at the time per element measured in that point) and writes the table to
# DIR/sparse.md. The learner links (the machines share this host's cores, so the rate a learner
# link gives depends on how many learners use theirs at once):
#   runtime  (default) calibrated with one pair alone for planning; the table then sets each
#            machine's learner links, per size, from the runtime's own time for the dense steps
#            within the machines, every machine at once (the bench's machine_steps_us);
#   at-once  calibrate.py --learners-at-once (a ucx_perftest ring in every machine at once);
#   alone    one pair alone, as the other experiments do.
#
# The links' tbf bucket is 16 KB over 8000-byte GSO packets here (EMU_BURST=16kb, EMU_GSO=8000),
# not cluster.sh's 64 KB over 32 KB: a link idle long enough passes its whole bucket at once,
# and at 100 Mbit/s 64 KB is 5 ms free, a third of a whole 8 MiB call at density 0.005. A real
# link of that rate has no such allowance, and neither has the cost model. 8 KB over MTU-sized
# packets costs the learners cores on 3+3+4 (docs/results.md, "The emulator's bucket"). Set
# EMU_BURST / EMU_GSO to choose others.
#
# Raw data: DIR/<cluster>/<rate>mbit/ (default BUILD/sparse-vs-dense). Needs root. The defaults
# took about 10 minutes on two cores (2026-11-24; 7 before the learner links were measured at
# once). Environment: EMU_PREFIX / EMU_SUBNET / EMU_BURST / EMU_GSO (cluster.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh

BUILD=${FLEXPLAN_BUILD:-$ROOT/build}
OUT=""
CLUSTERS="2+3,3+3+4"
RATES="100"
SIZES="8M,16M,32M,64M"
DENSITIES="0.001,0.005,0.01,0.05"
ITERS=3
WARMUP=1
LEARNER_LINKS=runtime
REPORT_ONLY=""
die() { echo "sparse_vs_dense.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=${2:?--build needs a directory}; shift ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --clusters) CLUSTERS=${2:?--clusters needs a list}; shift ;;
    --rates) RATES=${2:?--rates needs a list}; shift ;;
    --sizes) SIZES=${2:?--sizes needs a list}; shift ;;
    --densities) DENSITIES=${2:?--densities needs a list}; shift ;;
    -n) ITERS=${2:?-n needs a number}; shift ;;
    -w) WARMUP=${2:?-w needs a number}; shift ;;
    --learner-links) LEARNER_LINKS=${2:?--learner-links needs runtime, at-once or alone}; shift ;;
    --report-only) REPORT_ONLY=${2:?--report-only needs a directory}; shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build directory $BUILD"
FLEXPLAN=$BUILD/flexplan
SPARSE_BENCH=$BUILD/flexplan_sparse_bench
table() {
  local links=topology
  [ "$LEARNER_LINKS" = runtime ] && links=runtime
  python3 "$HERE/sparse_table.py" "$1" --flexplan "$FLEXPLAN" --learner-links $links -o "$1/sparse.md"
}
if [ -n "$REPORT_ONLY" ]; then table "$REPORT_ONLY"; exit; fi

for c in ${CLUSTERS//,/ }; do
  [[ $c =~ ^[1-9][0-9]*(\+[1-9][0-9]*)+$ ]] || die "--clusters: '$c' is not learners per machine joined by + (2+3)"
done
for r in ${RATES//,/ }; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "--rates: '$r' is not Mbit/s (a whole number)"; done
for s in ${SIZES//,/ }; do [[ $s =~ ^[1-9][0-9]*[KMG]?$ ]] || die "--sizes: '$s' is not a size (8M)"; done
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "-n: '$ITERS' is not a positive number"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "-w: '$WARMUP' is not a number"
case $LEARNER_LINKS in
  at-once) CALIBRATE_ARGS=(--learners-at-once) ;;
  alone|runtime) CALIBRATE_ARGS=() ;;
  *) die "--learner-links: '$LEARNER_LINKS' is none of runtime, at-once, alone" ;;
esac
OUT=${OUT:-$BUILD/sparse-vs-dense}
export EMU_BURST=${EMU_BURST:-16kb} EMU_GSO=${EMU_GSO:-8000}
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
for b in "$FLEXPLAN" "$SPARSE_BENCH"; do
  [ -x "$b" ] || die "$b is missing: cmake --build $BUILD --target flexplan flexplan_sparse_bench"
done

mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology
fail() { log "  $1: FAILED: $2"; echo "$2" > "$3/failed.txt"; }

run_point() {
  local cluster=$1 np=$2 rate=$3 dir=$4 size
  mkdir -p "$dir"
  log "$cluster at $rate Mbit/s"
  printf 'cluster=%s\nrate_mbit=%s\nsizes=%s\ndensities=%s\niterations=%s\nwarmup=%s\nlearner_links=%s\ntbf_burst=%s\ngso_max_size=%s\n' \
    "$cluster" "$rate" "$SIZES" "$DENSITIES" "$ITERS" "$WARMUP" "$LEARNER_LINKS" "$EMU_BURST" "$EMU_GSO" > "$dir/config.txt"
  if ! checked "$dir" 3 30; then fail "$cluster@$rate" "the links never passed the check (see $dir/check.txt)" "$dir"; return 0; fi
  if ! calibrated_topology "$dir" ${CALIBRATE_ARGS[@]+"${CALIBRATE_ARGS[@]}"}; then
    fail "$cluster@$rate" "calibration: $(tail -1 "$dir/calibrate.err")" "$dir"; return 0
  fi
  if ! "$FLEXPLAN" "$dir/topology.json" -o "$dir/plan.bin" > "$dir/plan.txt" 2>&1; then
    fail "$cluster@$rate" "planning: $(tail -1 "$dir/plan.txt")" "$dir"; return 0
  fi
  # One bench run per size, so that a size's vectors are allocated for that size alone.
  for size in ${SIZES//,/ }; do
    if ! nice -n -10 "$CLUSTER" mpirun -np "$np" "$SPARSE_BENCH" "$dir/plan.bin" -b "$size" -e "$size" \
           --densities "$DENSITIES" -n "$ITERS" -w "$WARMUP" --blocking --json "$dir/bench-$size.json" \
           > "$dir/bench-$size.txt" 2>&1; then
      fail "$cluster@$rate" "sparse bench at $size: $(tail -3 "$dir/bench-$size.txt" | tr '\n' ' ')" "$dir"; return 0
    fi
    grep -v '^#' "$dir/bench-$size.txt" | sed 's/^/    /' | tee -a "$OUT/run.log"
  done
  cut -d' ' -f1-3 /proc/loadavg > "$dir/load.txt"
}

run_cluster() {
  local cluster=$1 learners=${1//+/ } np=0 l rates r m
  for l in $learners; do np=$((np + l)); done
  rates=${RATES//,/ }
  rm -rf "${OUT:?}/$cluster"
  EMU_LEARNERS="$learners" EMU_RATES="$(for l in $learners; do printf '%smbit ' "${rates%% *}"; done)" \
    "$CLUSTER" up > "$OUT/up-$cluster.txt" || { log "$cluster: cluster.sh up failed (see $OUT/up-$cluster.txt)"; return 0; }
  for r in $rates; do
    m=0
    for l in $learners; do "$CLUSTER" shape $m "${r}mbit"; m=$((m + 1)); done
    run_point "$cluster" "$np" "$r" "$OUT/$cluster/${r}mbit"
  done
  "$CLUSTER" down > /dev/null
}

"$CLUSTER" down > /dev/null 2>&1 || true     # what a killed earlier run left behind
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "sparse_vs_dense: build $BUILD ($("$FLEXPLAN" --version)), out $OUT, clusters $CLUSTERS, rates $RATES Mbit/s"
log "  sizes $SIZES, densities $DENSITIES, $ITERS iterations after $WARMUP, learner links calibrated $LEARNER_LINKS; tbf bucket $EMU_BURST, GSO $EMU_GSO; load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in ${CLUSTERS//,/ }; do run_cluster "$c"; done
log "measurements done"
table "$OUT"
