#!/bin/bash
# epoch_time.sh - time per epoch of a small CNN on synthetic data (examples/pytorch/train_cnn.py)
# with DDP over flexplan against PyTorch's gloo, on asymmetric emulated clusters
# (docs/results.md, "Training with PyTorch").
#
#   bench/cluster/epoch_time.sh [--build DIR] [--out DIR] [--only ID[,ID...]]
#                               [--backends flexplan,gloo[,hook]] [--repeats N] [--epochs N]
#                               [--samples N] [--batch N] [--width N] [--report-only DIR]
#
# For each configuration: bring the cluster up, pass `cluster.sh check`, calibrate, write the
# topology, plan it (the default race), then run train_cnn.py under `cluster.sh mpirun` once per
# backend, --repeats times, backends alternating (so that a slow spell of the host hits both):
#   flexplan  DDP on the flexplan process group (the plan)
#   gloo      DDP on gloo (TCP between all ranks, through the same links)
#   hook      DDP on gloo with flexplan's communication hook for the gradients
# torch's MPI backend is left out: Debian's torch is built without it
# (torch.distributed.is_mpi_available() is False); the table says so.
# Rank 0 (machine 0) hosts the TCPStore at its own address, which every machine reaches;
# gloo binds to eth0 (GLOO_SOCKET_IFNAME), as machine names do not resolve.
# epoch_table.py prints the table (markdown) and writes it to DIR/epochs.md.
#
# Raw data: DIR/<configuration>/ (default BUILD/epoch-time). Needs root, python3-torch and the
# extension (BUILD/python). The defaults take about 5 minutes on two idle cores.
# Environment: EMU_PREFIX / EMU_SUBNET choose the cluster's names and subnet (cluster.sh).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CLUSTER=$HERE/cluster.sh
PYTHON=/usr/bin/python3    # Debian's torch is installed for the system Python only

BUILD=${FLEXPLAN_BUILD:-$ROOT/build}
OUT=""
ONLY=""
BACKENDS="flexplan,gloo"
REPEATS=1
EPOCHS=3
SAMPLES=64
BATCH=4
WIDTH=64
REPORT_ONLY=""
die() { echo "epoch_time.sh: $*" >&2; exit 2; }
whole() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1: '$2' is not a positive whole number"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=${2:?--build needs a directory}; shift ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --only) ONLY=${2:?--only needs configuration ids}; shift ;;
    --backends) BACKENDS=${2:?--backends needs a list}; shift ;;
    --repeats) whole "$1" "${2:-}"; REPEATS=$2; shift ;;
    --epochs) whole "$1" "${2:-}"; EPOCHS=$2; shift ;;
    --samples) whole "$1" "${2:-}"; SAMPLES=$2; shift ;;
    --batch) whole "$1" "${2:-}"; BATCH=$2; shift ;;
    --width) whole "$1" "${2:-}"; WIDTH=$2; shift ;;
    --report-only) REPORT_ONLY=${2:?--report-only needs a directory}; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
table() { "$PYTHON" "$HERE/epoch_table.py" "$1" -o "$1/epochs.md"; }
if [ -n "$REPORT_ONLY" ]; then table "$REPORT_ONLY"; exit; fi

# id | learners per machine | link rates: the asymmetry is in the machines and in the links
CONFIGS=(
  "2+3-400-100      2,3    400mbit,100mbit"
  "2+3+2-400-100-200 2,3,2 400mbit,100mbit,200mbit"
)
ids=$(for c in "${CONFIGS[@]}"; do set -- $c; printf '%s ' "$1"; done)
for id in ${ONLY//,/ }; do [[ " $ids" == *" $id "* ]] || die "--only: no configuration '$id' (there are: $ids)"; done
for b in ${BACKENDS//,/ }; do
  case $b in flexplan|gloo|hook) ;; *) die "--backends: '$b' is not flexplan, gloo or hook" ;; esac
done

BUILD=$(cd "$BUILD" 2>/dev/null && pwd) || die "no build directory $BUILD"
OUT=${OUT:-$BUILD/epoch-time}
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
FLEXPLAN=$BUILD/flexplan
[ -x "$FLEXPLAN" ] || die "$FLEXPLAN is missing: cmake --build $BUILD"
export PYTHONPATH=$BUILD/python:$ROOT/python
"$PYTHON" -c "import torch, flexplan_torch" 2> /dev/null \
  || die "cannot import torch and flexplan_torch with $PYTHON (PYTHONPATH=$PYTHONPATH): ./setup.sh installs python3-torch, the build makes $BUILD/python"
MPI_NOTE=$("$PYTHON" -c 'import torch.distributed as d; print("available" if d.is_mpi_available() else "not available: this torch is built without MPI")')

mkdir -p "$OUT"
. "$HERE/steps.sh"   # log, checked, calibrated_topology
echo "$MPI_NOTE" > "$OUT/mpi-backend.txt"

PORT=29500
train() {  # dir np backend repeat
  local dir=$1 np=$2 backend=$3 repeat=$4 subnet args=()
  subnet=$("$CLUSTER" config | sed -n 's/^SUBNET="\(.*\)"$/\1/p')
  PORT=$((PORT + 1))    # a fresh port per run: the last run's store may linger in TIME_WAIT
  case $backend in
    flexplan) args=(--backend flexplan --plan "$dir/plan.bin") ;;
    gloo) args=(--backend gloo) ;;
    hook) args=(--backend gloo --hook --plan "$dir/plan.bin") ;;
  esac
  log "  $backend (run $repeat)"
  if ! MASTER_ADDR=$subnet.10 MASTER_PORT=$PORT GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
       nice -n -10 "$CLUSTER" mpirun -np "$np" -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME \
         -x OMP_NUM_THREADS -x PYTHONPATH \
         "$PYTHON" "$ROOT/examples/pytorch/train_cnn.py" "${args[@]}" --epochs "$EPOCHS" \
         --samples "$SAMPLES" --batch "$BATCH" --width "$WIDTH" --threads 1 --timeout 120 \
         > "$dir/$backend-$repeat.txt" 2>&1; then
    log "  $backend FAILED: $(grep -v '^\s*$' "$dir/$backend-$repeat.txt" | tail -3 | tr '\n' ' ')"
    return 0
  fi
  log "    $(grep 'median epoch' "$dir/$backend-$repeat.txt" || echo 'no summary line')"
}

run_config() {
  local id=$1 learners=${2//,/ } rates=${3//,/ } dir=$OUT/$1 np=0 l r b
  for l in $learners; do np=$((np + l)); done
  rm -rf "$dir"; mkdir -p "$dir"
  printf 'id=%s\nlearners=%s\nrates=%s\nepochs=%s\nsamples=%s\nbatch=%s\nwidth=%s\nrepeats=%s\nenv=%s\n' \
    "$id" "$learners" "$rates" "$EPOCHS" "$SAMPLES" "$BATCH" "$WIDTH" "$REPEATS" \
    "$(env | grep -E '^(UCX|FLEXPLAN)_' | sort | tr '\n' ' ')" > "$dir/config.txt"
  log "$id: learners $learners, rates $rates"
  skip() { log "  $id: SKIPPED, $1"; echo "$1" > "$dir/skipped.txt"; "$CLUSTER" down > /dev/null; }
  EMU_LEARNERS="$learners" EMU_RATES="$rates" "$CLUSTER" up > "$dir/up.txt"
  if ! checked "$dir" 3 30; then skip "the links never passed the check (see $dir/check.txt)"; return 0; fi
  if ! calibrated_topology "$dir"; then
    skip "calibration failed: $(tail -1 "$dir/calibrate.err")"; return 0
  fi
  if ! "$FLEXPLAN" "$dir/topology.json" -o "$dir/plan.bin" > "$dir/plan.txt" 2>&1; then
    skip "planning failed: $(tail -1 "$dir/plan.txt")"; return 0
  fi
  for ((r = 1; r <= REPEATS; r++)); do
    for b in ${BACKENDS//,/ }; do train "$dir" "$np" "$b" "$r"; done
  done
  cut -d' ' -f1-3 /proc/loadavg > "$dir/load.txt"
  "$CLUSTER" down > /dev/null
}

"$CLUSTER" down > /dev/null 2>&1 || true     # what a killed earlier run left behind
trap '"$CLUSTER" down > /dev/null 2>&1 || true' EXIT
log "epoch_time: build $BUILD, out $OUT, backends $BACKENDS x $REPEATS, $EPOCHS epochs of $SAMPLES images per rank, batch $BATCH, width $WIDTH"
log "  torch $("$PYTHON" -c 'import torch; print(torch.__version__)'), MPI backend $MPI_NOTE; load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in "${CONFIGS[@]}"; do
  set -- $c
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$1,"* ]]; then continue; fi
  run_config "$@"
done
log "measurements done"
table "$OUT"
