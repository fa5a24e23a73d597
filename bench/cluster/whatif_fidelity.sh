#!/bin/bash
# whatif_fidelity.sh - `flexplan whatif`'s training-step prediction set beside a synthetic
# training step run for real on the emulated cluster (docs/whatif.md, "Fidelity").
#
#   bench/cluster/whatif_fidelity.sh [--build DIR] [--out DIR] [--clusters 2+3,3+3+4]
#                                    [--rates 100,200,400,800] [--workload FILE] [--steps N]
#                                    [--warmup N] [--report-only DIR]
#
# For each cluster (learners per machine) the cluster comes up once; for each rate (Mbit/s, every
# machine link at that rate, set with `cluster.sh shape`): pass `cluster.sh check`, calibrate,
# write the topology, plan it (the default race), measure the runtime's cost per hop
# (calibrate_hops.py, a 4 KiB ring), run flexplan_train_step (compute sleeps, bucketed
# iallreduce, the workload's buckets) under `cluster.sh mpirun`, and predict the same step with
# `flexplan whatif` racing the algorithms the plan ran: on this rate's calibrated topology (links
# alone, and with the hop cost), and as a what-if from the first rate's calibration
# (`machines.bandwidth=` set to this rate). Then fidelity_table.py prints the tables (markdown)
# and writes them to DIR/fidelity.md.
#
# Raw data: DIR/<cluster>/<rate>mbit/ (default BUILD/whatif-fidelity). Needs root. The defaults
# take about 8 minutes on two idle cores. UCX_* and FLEXPLAN_* variables reach the learners.
# Environment: EMU_PREFIX / EMU_SUBNET choose the cluster's names and subnet (cluster.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh

BUILD=${FLEXPLAN_BUILD:-$ROOT/build}
OUT=""
CLUSTERS="2+3,3+3+4"
RATES="100,200,400,800"
WORKLOAD=$HERE/fidelity-workload.json
STEPS=10
WARMUP=2
REPORT_ONLY=""
die() { echo "whatif_fidelity.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=${2:?--build needs a directory}; shift ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --clusters) CLUSTERS=${2:?--clusters needs a list}; shift ;;
    --rates) RATES=${2:?--rates needs a list}; shift ;;
    --workload) WORKLOAD=${2:?--workload needs a file}; shift ;;
    --steps) STEPS=${2:?--steps needs a number}; shift ;;
    --warmup) WARMUP=${2:?--warmup needs a number}; shift ;;
    --report-only) REPORT_ONLY=${2:?--report-only needs a directory}; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
table() { python3 "$HERE/fidelity_table.py" "$1" -o "$1/fidelity.md"; }
if [ -n "$REPORT_ONLY" ]; then table "$REPORT_ONLY"; exit; fi

for c in ${CLUSTERS//,/ }; do
  [[ $c =~ ^[1-9][0-9]*(\+[1-9][0-9]*)+$ ]] || die "--clusters: '$c' is not learners per machine joined by + (2+3)"
done
for r in ${RATES//,/ }; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "--rates: '$r' is not Mbit/s (a whole number)"; done
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || die "--steps: '$STEPS' is not a positive number"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "--warmup: '$WARMUP' is not a number"
[ -f "$WORKLOAD" ] || die "--workload: no file $WORKLOAD"
WORKLOAD=$(cd "$(dirname "$WORKLOAD")" && pwd)/$(basename "$WORKLOAD")
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build directory $BUILD"
OUT=${OUT:-$BUILD/whatif-fidelity}
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
FLEXPLAN=$BUILD/flexplan
FLEXBENCH=$BUILD/flexbench
TRAIN=$BUILD/flexplan_train_step
for b in "$FLEXPLAN" "$FLEXBENCH" "$TRAIN"; do
  [ -x "$b" ] || die "$b is missing: cmake --build $BUILD --target flexplan flexbench flexplan_train_step"
done
"$FLEXPLAN" whatif --print-workload "$WORKLOAD" > /dev/null || die "--workload: $WORKLOAD is not a workload"

mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology
fail() { log "  $1: FAILED: $2"; echo "$2" > "$3/failed.txt"; }

# A link rate as the payload bandwidth calibrate.py gives it (TCP/IP/Ethernet: 1448 of 1514).
payload_mb_per_s() { awk -v r="$1" 'BEGIN{printf "%.2f MB/s", r * 1e6 / 8 * 1448 / 1514 / 1e6}'; }

# The algorithms the train step ran, for whatif's race: comma-separated, no repeats.
step_algorithms() {
  python3 -c 'import json,sys; print(",".join(dict.fromkeys(b["algorithm"] for b in json.load(open(sys.argv[1]))["buckets"])))' "$1"
}
bucket_sizes() {
  python3 -c 'import json,sys; print(",".join(str(s) for s in dict.fromkeys(b["bytes"] for b in json.load(open(sys.argv[1]))["buckets"])))' "$1"
}

# One point: the cluster is up with every link at $rate. $first: the first rate's directory.
run_point() {
  local cluster=$1 np=$2 rate=$3 dir=$4 first=$5
  mkdir -p "$dir"
  log "$cluster at $rate Mbit/s"
  printf 'cluster=%s\nrate_mbit=%s\nworkload=%s\nsteps=%s\nwarmup=%s\nenv=%s\n' "$cluster" "$rate" \
    "$WORKLOAD" "$STEPS" "$WARMUP" "$(env | grep -E '^(UCX|FLEXPLAN)_' | sort | tr '\n' ' ')" > "$dir/config.txt"
  if ! checked "$dir" 3 30; then fail "$cluster@$rate" "the links never passed the check (see $dir/check.txt)" "$dir"; return 0; fi
  if ! calibrated_topology "$dir"; then
    fail "$cluster@$rate" "calibration: $(tail -1 "$dir/calibrate.err")" "$dir"; return 0
  fi
  if ! "$FLEXPLAN" "$dir/topology.json" -o "$dir/plan.bin" > "$dir/plan.txt" 2>&1 \
     || ! "$FLEXPLAN" "$dir/topology.json" -o "$dir/plan-ring.bin" --algorithms ring > "$dir/plan-ring.txt" 2>&1; then
    fail "$cluster@$rate" "planning: $(tail -1 "$dir/plan.txt" "$dir/plan-ring.txt" | tr '\n' ' ')" "$dir"; return 0
  fi
  # The runtime's cost per hop, as run-experiments.sh measures it (docs/testbed.md).
  if ! nice -n -10 "$CLUSTER" mpirun -np "$np" "$FLEXBENCH" "$dir/plan-ring.bin" -b 4K -e 4K -n 30 -w 5 \
         --blocking --check 1 --mpi 0 --json "$dir/bench-hop.json" > "$dir/bench-hop.txt" 2>&1 \
     || ! python3 "$HERE/calibrate_hops.py" --flexplan "$FLEXPLAN" --topology "$dir/topology.json" \
         --bench "$dir/bench-hop.json" -o "$dir/hops.json" 2> "$dir/hops.err"; then
    fail "$cluster@$rate" "hop calibration: $(tail -2 "$dir/bench-hop.txt" "$dir/hops.err" | tr '\n' ' ')" "$dir"; return 0
  fi
  local hop_us
  hop_us=$(python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["hop_overhead_s"] * 1e6))' "$dir/hops.json")
  log "  hop overhead $hop_us us; train step"
  if ! nice -n -10 "$CLUSTER" mpirun -np "$np" "$TRAIN" "$dir/plan.bin" --workload "$WORKLOAD" \
         -n "$STEPS" -w "$WARMUP" --blocking --check 1 --json "$dir/train_step.json" > "$dir/train_step.txt" 2>&1; then
    fail "$cluster@$rate" "train step: $(tail -3 "$dir/train_step.txt" | tr '\n' ' ')" "$dir"; return 0
  fi
  tail -1 "$dir/train_step.txt" | sed 's/^/    /' | tee -a "$OUT/run.log"
  local algos sizes
  algos=$(step_algorithms "$dir/train_step.json")
  sizes=$(bucket_sizes "$dir/train_step.json")
  local common=(--workload "$WORKLOAD" -a "$algos" --sizes "$sizes" --format json --no-advice -q)
  if ! "$FLEXPLAN" whatif "$dir/topology.json" "${common[@]}" > "$dir/whatif.json" 2> "$dir/whatif.err" \
     || ! "$FLEXPLAN" whatif "$dir/topology.json" "${common[@]}" --hop-overhead "$hop_us us" \
          > "$dir/whatif-hops.json" 2>> "$dir/whatif.err" \
     || ! "$FLEXPLAN" whatif "$first/topology.json" "machines.bandwidth=$(payload_mb_per_s "$rate")" "${common[@]}" \
          > "$dir/whatif-swept.json" 2>> "$dir/whatif.err"; then
    fail "$cluster@$rate" "whatif: $(tail -2 "$dir/whatif.err" | tr '\n' ' ')" "$dir"; return 0
  fi
  cut -d' ' -f1-3 /proc/loadavg > "$dir/load.txt"
}

run_cluster() {
  local cluster=$1 learners=${1//+/ } np=0 l first_rate rates r m dir first
  for l in $learners; do np=$((np + l)); done
  rates=${RATES//,/ }
  first_rate=${rates%% *}
  first=$OUT/$cluster/${first_rate}mbit
  rm -rf "${OUT:?}/$cluster"
  EMU_LEARNERS="$learners" EMU_RATES="$(for l in $learners; do printf '%smbit ' "$first_rate"; done)" \
    "$CLUSTER" up > "$OUT/up-$cluster.txt" || { log "$cluster: cluster.sh up failed (see $OUT/up-$cluster.txt)"; return 0; }
  for r in $rates; do
    m=0
    for l in $learners; do "$CLUSTER" shape $m "${r}mbit"; m=$((m + 1)); done
    dir=$OUT/$cluster/${r}mbit
    run_point "$cluster" "$np" "$r" "$dir" "$first"
  done
  "$CLUSTER" down > /dev/null
}

"$CLUSTER" down > /dev/null 2>&1 || true     # what a killed earlier run left behind
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "whatif_fidelity: build $BUILD ($("$FLEXPLAN" --version)), out $OUT, clusters $CLUSTERS, rates $RATES Mbit/s"
log "  workload $WORKLOAD, $STEPS steps after $WARMUP; load $(cut -d' ' -f1-3 /proc/loadavg)"
log "  learners' settings: $(env | grep -E '^(UCX|FLEXPLAN)_' | sort | tr '\n' ' ')"
for c in ${CLUSTERS//,/ }; do run_cluster "$c"; done
log "measurements done"
table "$OUT"
