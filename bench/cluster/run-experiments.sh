#!/bin/bash
# run-experiments.sh - the FlexReduce paper's all-reduce experiments, measured with real
# processes on the emulated cluster (cluster.sh) and set beside flexplan's predictions.
#
#   bench/cluster/run-experiments.sh [--quick] [--build DIR] [--out DIR] [--rate MBIT]
#                                    [--set paper|links] [--only ID[,ID...]]
#                                    [--report-only DIR] [--compare DIR]
#
# For every configuration: bring the cluster up, pass `cluster.sh check` (lanes and link rates),
# calibrate, write the topology from the calibration, plan the default plan (every algorithm
# racing, as a user runs flexplan) and each algorithm alone with the CLI, measure the runtime's
# cost per hop (calibrate_hops.py), `flexplan predict` the sizes (and the floor), run flexbench
# under mpirun (blocking learners, results checked; MPI_Allreduce timed in the ring's run);
# tear the cluster down. Then report.py writes docs/results.md and the SVG plots in
# docs/results/. Raw data: DIR/<configuration>/ (default BUILD/cluster-results). --compare DIR
# sets an earlier run's results (other settings, other build) beside this one in the report.
#
# UCX_* and FLEXPLAN_* variables set in the environment reach every learner (and Open MPI's
# UCX pml) and are recorded with the results, as is EMU_SYSCTLS (cluster.sh: network sysctls in
# every machine). Needs root (network namespaces).
# --set: only the paper set (every link at --rate, asymmetric learner counts) or only the links
# set (asymmetric link rates and latencies); default both.
# --quick: three configurations, smaller sizes, fewer iterations (a few minutes); the full run
# takes about 50 minutes on two cores.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
# "default" is the plan flexplan writes when no algorithm is forced.
PAPER_ALGORITHMS=(default flexreduce ring blueconnect hierarchical)
LINKS_ALGORITHMS=(default flexreduce ring hierarchical)   # BlueConnect is the ring on these

QUICK=0
BUILD=${FLEXPLAN_BUILD:-$ROOT/build}
OUT=""
RATE=200          # Mbit/s of every link in the paper set
ONLY=""
SET=""
REPORT_ONLY=""
COMPARE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --set) SET=$2; shift ;;
    --report-only) REPORT_ONLY=$2; shift ;;
    --compare) COMPARE=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run-experiments.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -z $SET || $SET == paper || $SET == links ]] || { echo "run-experiments.sh: --set takes paper or links" >&2; exit 2; }
[[ $RATE =~ ^[1-9][0-9]*$ ]] || { echo "run-experiments.sh: --rate takes Mbit/s, a whole number" >&2; exit 2; }
BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || { echo "run-experiments.sh: no build directory $BUILD" >&2; exit 2; }
OUT=${OUT:-$BUILD/cluster-results}

report() { python3 "$HERE/report.py" "$1" --docs "$ROOT/docs" ${COMPARE:+--compare "$COMPARE"}; }
if [ -n "$REPORT_ONLY" ]; then report "$REPORT_ONLY"; exit; fi

[ "$(id -u)" = 0 ] || { echo "run-experiments.sh: needs root (network namespaces)" >&2; exit 2; }
FLEXPLAN=$BUILD/flexplan
FLEXBENCH=$BUILD/flexbench
for b in "$FLEXPLAN" "$FLEXBENCH"; do
  [ -x "$b" ] || { echo "run-experiments.sh: $b is missing: cmake --build $BUILD --target flexplan flexbench" >&2; exit 2; }
done

# Message sizes. SMALL stands for the paper's 120K float32 items, LARGE scales its 120M items
# down to what the emulated links move in about half a second (ring, 200 Mbit/s).
SMALL=512K
if [ $QUICK = 1 ]; then LARGE=4M; ITERS=3; WARMUP=1
else LARGE=8M; ITERS=5; WARMUP=1; fi
bytes() { numfmt --from=iec "$1"; }

# id | set | learners per machine | link rates | one-way delays (us) | sizes
#   sizes: "pair" = SMALL and LARGE, "sweep" = 64K..LARGE by 2
# The paper set has every link at --rate; the links set puts the asymmetry in the links: 2 to 4
# machines, rate ratios 1:5 and 1:2:4, added latency, equal and unequal learner counts.
R=${RATE}mbit
CONFIGS=(
  "fig4-4       paper 2,2   $R,$R       0,0    pair"
  "fig4-5       paper 2,3   $R,$R       0,0    pair"
  "fig4-6       paper 3,3   $R,$R       0,0    pair"
  "fig4-7       paper 3,4   $R,$R       0,0    pair"
  "fig4-8       paper 4,4   $R,$R       0,0    pair"
  "fig4-9       paper 3,3,3 $R,$R,$R    0,0,0  pair"
  "fig4-10      paper 3,3,4 $R,$R,$R    0,0,0  sweep"
  "fig4-11      paper 3,4,4 $R,$R,$R    0,0,0  pair"
  "fig4-12      paper 4,4,4 $R,$R,$R    0,0,0  sweep"
  "rate-3+3       links 3,3     500mbit,100mbit                 0,0          pair"
  "rate-2+3       links 2,3     500mbit,100mbit                 0,0          pair"
  "rate-2+3+2     links 2,3,2   400mbit,100mbit,200mbit         0,0,0        sweep"
  "rate-3+3+3     links 3,3,3   400mbit,200mbit,100mbit         0,0,0        pair"
  "rate-4+4+4     links 4,4,4   500mbit,500mbit,100mbit         0,0,0        pair"
  "rate-2+2+2+2   links 2,2,2,2 400mbit,200mbit,100mbit,400mbit 0,0,0,0      pair"
  "delay-2+3      links 2,3     200mbit,200mbit                 0,1000       pair"
  "mixed-3+3+4    links 3,3,4   500mbit,200mbit,100mbit         0,200,1000   pair"
  "mixed-1+2+3+2  links 1,2,3,2 100mbit,400mbit,200mbit,400mbit 0,500,0,200  pair"
)
[ $QUICK = 1 ] && CONFIGS=("${CONFIGS[1]}" "${CONFIGS[2]}" "${CONFIGS[16]}")

. "$HERE/steps.sh"   # log, checked, calibrated_topology

run_config() {
  local id=$1 set=$2 learners=${3//,/ } rates=${4//,/ } delays=${5//,/ } sizes=$6
  local dir=$OUT/$id min max factor np=0 l algo
  local algorithms=("${PAPER_ALGORITHMS[@]}")
  [ "$set" = links ] && algorithms=("${LINKS_ALGORITHMS[@]}")
  for l in $learners; do np=$((np + l)); done
  case $sizes in
    pair) min=$SMALL; max=$LARGE; factor=$(( $(bytes $LARGE) / $(bytes $SMALL) )) ;;
    sweep) min=64K; max=$LARGE; factor=2 ;;
  esac
  rm -rf "$dir"; mkdir -p "$dir"
  printf 'id=%s\nset=%s\nlearners=%s\nrates=%s\ndelays_us=%s\nsizes=%s..%s/x%s\niters=%s\nwarmup=%s\nalgorithms=%s\nenv=%s\n' \
    "$id" "$set" "$learners" "$rates" "$delays" "$min" "$max" "$factor" "$ITERS" "$WARMUP" "${algorithms[*]}" \
    "$(env | grep -E '^(UCX_|FLEXPLAN_|EMU_SYSCTLS=|EMU_CC=)' | sort | tr '\n' ' ')" > "$dir/config.txt"
  log "$id: learners $learners, rates $rates, delays $delays us, sizes $min..$max (x$factor)"

  skip() { log "  $id: SKIPPED, $1"; echo "$1" > "$dir/skipped.txt"; "$CLUSTER" down > /dev/null; }
  EMU_LEARNERS="$learners" EMU_RATES="$rates" EMU_DELAYS="$delays" "$CLUSTER" up > "$dir/up.txt"
  echo "congestion_control=$("$CLUSTER" config | sed -n 's/^CC="\(.*\)"$/\1/p')" >> "$dir/config.txt"
  if ! checked "$dir" 5 60; then
    skip "the links never passed the check (see $dir/check.txt)"; return 0
  fi
  if ! calibrated_topology "$dir"; then
    skip "calibration failed: $(cat "$dir/calibrate.err")"; return 0
  fi
  for algo in "${algorithms[@]}"; do
    local force=(--algorithms "$algo")
    [ "$algo" = default ] && force=()
    if ! "$FLEXPLAN" "$dir/topology.json" -o "$dir/plan-$algo.bin" "${force[@]}" > "$dir/plan-$algo.txt" 2>&1 \
       || ! "$FLEXPLAN" inspect "$dir/plan-$algo.bin" --format json > "$dir/plan-$algo.json"; then
      skip "planning $algo failed: $(tail -2 "$dir/plan-$algo.txt" | tr '\n' ' ')"; return 0
    fi
  done
  # The runtime's cost per hop (a blocked learner waking, matching, posting), from a 4 KiB
  # ring all-reduce: 2(P-1) hops in a row. predict.txt is the model from the link figures;
  # predict-hops.txt adds this cost to every hop.
  local algos; algos=$(IFS=,; echo "${algorithms[*]:1}")   # all but the default plan
  # the default plan's schedules that serve the measured sizes, to predict them by name
  local chosen
  chosen=$(python3 "$HERE/plan_choice.py" "$dir/plan-default.json" $(bytes $min) $(bytes $max) $factor)
  if ! nice -n -10 "$CLUSTER" mpirun -np $np "$FLEXBENCH" "$dir/plan-ring.bin" -b 4K -e 4K -n 30 -w 5 \
         --blocking --check 1 --mpi 0 --json "$dir/bench-hop.json" > "$dir/bench-hop.txt" 2>&1 \
     || ! python3 "$HERE/calibrate_hops.py" --flexplan "$FLEXPLAN" --topology "$dir/topology.json" \
         --bench "$dir/bench-hop.json" -o "$dir/hops.json" 2> "$dir/calibrate.err"; then
    skip "hop calibration failed: $(tail -2 "$dir/bench-hop.txt" "$dir/calibrate.err" | tr '\n' ' ')"; return 0
  fi
  local hop_us
  hop_us=$(python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["hop_overhead_s"] * 1e6))' "$dir/hops.json")
  if ! "$FLEXPLAN" predict "$dir/topology.json" -b $min -e $max -f $factor -a "$algos" --format json \
         > "$dir/predict.txt" \
     || ! "$FLEXPLAN" predict "$dir/topology.json" -b $min -e $max -f $factor -a "$algos" --format json \
         --hop-overhead "$hop_us us" > "$dir/predict-hops.txt" \
     || ! "$FLEXPLAN" predict "$dir/topology.json" -b $min -e $max -f $factor -a "$chosen" --format json \
         > "$dir/predict-default.txt"; then
    skip "prediction failed"; return 0
  fi
  log "  hop overhead $hop_us us"
  for algo in "${algorithms[@]}"; do
    log "  $algo"
    local mpi=0
    [ "$algo" = ring ] && mpi=1   # the MPI_Allreduce baseline once per configuration
    # nice -10: learners (and their orteds) go ahead of other jobs on the host
    if ! nice -n -10 "$CLUSTER" mpirun -np $np "$FLEXBENCH" "$dir/plan-$algo.bin" \
          -b $min -e $max -f $factor -n $ITERS -w $WARMUP --blocking --check 1 --mpi $mpi \
          --json "$dir/bench-$algo.json" > "$dir/bench-$algo.txt" 2>&1; then
      log "  $algo FAILED: $(tail -3 "$dir/bench-$algo.txt" | tr '\n' ' ')"
    fi
  done
  echo "$(cut -d' ' -f1-3 /proc/loadavg)" > "$dir/load.txt"
  "$CLUSTER" down > /dev/null
}

mkdir -p "$OUT"
"$CLUSTER" down > /dev/null 2>&1 || true
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "run-experiments: build $BUILD ($("$FLEXPLAN" --version)), out $OUT, rate $RATE Mbit/s, quick=$QUICK"
log "  load $(cut -d' ' -f1-3 /proc/loadavg); learners' settings: $(env | grep -E '^(UCX|FLEXPLAN)_' | sort | tr '\n' ' ')"
for c in "${CONFIGS[@]}"; do
  set -- $c
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$1,"* ]]; then continue; fi
  if [ -n "$SET" ] && [ "$2" != "$SET" ]; then continue; fi
  run_config "$@"
done
log "measurements done; writing the report"
report "$OUT"
