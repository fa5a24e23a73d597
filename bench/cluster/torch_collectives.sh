#!/bin/bash
# torch_collectives.sh - the PyTorch backend on the emulated cluster: all_gather_into_tensor
# native (the plan's all-gather) against the all-reduce-based path it replaced and gloo
# (bench/pytorch/allgather_torch.py), and a step of an FSDP-style loop on flexplan against gloo
# (bench/pytorch/fsdp_step_torch.py), on 2+3+2 learners at 400/100/200 Mbit/s
# (docs/results.md, "PyTorch on the emulated cluster").
#
#   bench/cluster/torch_collectives.sh [--build DIR] [--out DIR] [--mib "1 4 16 64"] [--iters N]
#                                      [--fsdp-steps N] [--width N] [--skip-allgather] [--skip-fsdp]
#                                      [--check-tries N]
#
# Per run: bring the cluster up, pass `cluster.sh check` (up to --check-tries times, 30 s apart;
# default 5), calibrate, write the topology, plan it with --collectives
# allreduce,allgather,reduce_scatter, then each benchmark in one job under
# `cluster.sh mpirun` (every path of it interleaved round by round, every round checked).
# Rank 0 (machine 0) hosts the store at its address; gloo binds to eth0 (GLOO_SOCKET_IFNAME).
# Raw data: DIR (default BUILD/torch-cluster): allgather.json, fsdp.json, their logs, the plan.
# Needs root, python3-torch and the extension (BUILD/python). Environment: EMU_PREFIX /
# EMU_SUBNET choose the cluster's names and subnet (cluster.sh), to run beside another cluster.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
PYTHON=/usr/bin/python3    # Debian's torch is installed for the system Python only

BUILD=${FLEXPLAN_BUILD:-$ROOT/build}
OUT=""
MIB="1 4 16 64"
ITERS=5
FSDP_STEPS=8
WIDTH=1024
ALLGATHER=1
FSDP=1
TRIES=5
die() { echo "torch_collectives.sh: $*" >&2; exit 2; }
whole() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1: '$2' is not a positive whole number"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=${2:?--build needs a directory}; shift ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --mib) MIB=${2:?--mib needs sizes}; for m in $MIB; do whole --mib "$m"; done; shift ;;
    --iters) whole "$1" "${2:-}"; ITERS=$2; shift ;;
    --fsdp-steps) whole "$1" "${2:-}"; FSDP_STEPS=$2; shift ;;
    --width) whole "$1" "${2:-}"; WIDTH=$2; shift ;;
    --skip-allgather) ALLGATHER=0 ;;
    --skip-fsdp) FSDP=0 ;;
    --check-tries) whole "$1" "${2:-}"; TRIES=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done

BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build directory $BUILD"
OUT=${OUT:-$BUILD/torch-cluster}
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
FLEXPLAN=$BUILD/flexplan
[ -x "$FLEXPLAN" ] || die "$FLEXPLAN is missing: cmake --build $BUILD"
export PYTHONPATH=$BUILD/python:$ROOT/python
"$PYTHON" -c "import torch, flexplan_torch" 2> /dev/null \
  || die "cannot import torch and flexplan_torch with $PYTHON (PYTHONPATH=$PYTHONPATH)"

mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology

LEARNERS="2 3 2"
RATES="400mbit 100mbit 200mbit"
NP=7
PORT=29600
launch() {  # name logfile program args...: one job on the cluster, rank 0's address hosting the store
  local name=$1 logfile=$2 subnet; shift 2
  subnet=$("$CLUSTER" config | sed -n 's/^SUBNET="\(.*\)"$/\1/p')
  PORT=$((PORT + 1))    # a fresh port per job: the last job's store may linger in TIME_WAIT
  log "  $name: load $(cut -d' ' -f1-3 /proc/loadavg)"
  if ! MASTER_ADDR=$subnet.10 MASTER_PORT=$PORT GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
       nice -n -10 "$CLUSTER" mpirun -np $NP -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME \
         -x OMP_NUM_THREADS -x PYTHONPATH "$PYTHON" "$@" > "$logfile" 2>&1; then
    log "  $name FAILED: $(grep -v '^\s*$' "$logfile" | tail -3 | tr '\n' ' ')"
    return 1
  fi
  grep '^RESULT' "$logfile" | while read -r line; do log "    $line"; done
}

"$CLUSTER" down > /dev/null 2>&1 || true     # what a killed earlier run left behind
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "torch_collectives: build $BUILD, out $OUT, commit $(git -C "$ROOT" rev-parse --short HEAD), learners $LEARNERS, rates $RATES"
log "  torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), load $(cut -d' ' -f1-3 /proc/loadavg)"
EMU_LEARNERS="$LEARNERS" EMU_RATES="$RATES" "$CLUSTER" up > "$OUT/up.txt"
checked "$OUT" "$TRIES" 30 || die "the links never passed the check (see $OUT/check.txt)"
calibrated_topology "$OUT" || die "calibration failed: $(tail -1 "$OUT/calibrate.err")"
"$FLEXPLAN" "$OUT/topology.json" --collectives allreduce,allgather,reduce_scatter -o "$OUT/plan.bin" \
  > "$OUT/plan.txt" 2>&1 || die "planning failed: $(tail -1 "$OUT/plan.txt")"
status=0
if [ $ALLGATHER = 1 ]; then
  "$FLEXPLAN" predict "$OUT/topology.json" --collective allgather -b 1M -e 64M -f 2 > "$OUT/predict-allgather.txt" 2>&1 || true
  launch "all_gather_into_tensor, $MIB MiB, $ITERS rounds" "$OUT/allgather.txt" \
    "$ROOT/bench/pytorch/allgather_torch.py" --launcher mpirun --plan "$OUT/plan.bin" --mib $MIB \
    --iters "$ITERS" --json "$OUT/allgather.json" || status=1
fi
if [ $FSDP = 1 ]; then
  launch "FSDP-style step, width $WIDTH, $FSDP_STEPS steps" "$OUT/fsdp.txt" \
    "$ROOT/bench/pytorch/fsdp_step_torch.py" --launcher mpirun --plan "$OUT/plan.bin" --width "$WIDTH" \
    --steps "$FSDP_STEPS" --json "$OUT/fsdp.json" || status=1
fi
cut -d' ' -f1-3 /proc/loadavg > "$OUT/load.txt"
"$CLUSTER" down > /dev/null
log "done, load $(cat "$OUT/load.txt")"
exit $status
