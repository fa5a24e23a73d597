#!/bin/bash
# Overlapping steps against step by step (FLEXPLAN_STEP_OVERLAP=1 / 0, docs/runtime.md) on one
# host: a plan forced to one pipelined algorithm, the two modes alternated ROUNDS times in one
# run, each a flexbench of the sizes given; prints flexbench's rows tagged with the mode and the
# load average before each run (docs/flexbench.md, Overlapping steps).
#
#   bench/flexbench/step_overlap.sh BUILD TOPOLOGY ALGORITHM RANKS [ROUNDS] [SIZES...]
#   bench/flexbench/step_overlap.sh build topologies/two-machines-2+3.json switch-tree@4 5 3 64K 1M
set -euo pipefail
build=$1 topology=$2 algorithm=$3 ranks=$4 rounds=${5:-3}
shift $(( $# < 5 ? $# : 5 ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(64K 1M)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/flexplan" "$topology" -a "$algorithm" --collectives allreduce -o "$work/plan.bin" > /dev/null
for round in $(seq 1 "$rounds"); do
  for overlap in 1 0; do
    for size in "${sizes[@]}"; do
      echo "# round $round overlap $overlap size $size load $(cut -d' ' -f1-3 /proc/loadavg)"
      FLEXPLAN_ALLOW_HOST_MISMATCH=1 FLEXPLAN_STEP_OVERLAP=$overlap \
        mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1 \
        "$build/flexbench" "$work/plan.bin" -b "$size" -e "$size" -n 40 -w 10 --blocking --mpi "$((overlap))" |
        grep -E "^ *[0-9]+ " | sed "s/^/overlap=$overlap /"
    done
  done
done
