#!/bin/bash
# The loopback measurements of docs/flexbench.md: flexplan vs MPI_Allreduce on this host for 2,
# 5 and 8 ranks, small (8 B - 64 KB) and large (1 - 128 MB) float32 sums.
#   bench/flexbench/loopback_ratios.sh BUILD_DIR OUT_DIR
# Plans: 2 ranks bench/flexbench/loopback-2.json, 5 and 8 ranks topologies/paper-2m-{5,8}.json,
# each with the plan's own choice of schedule. The runtime runs in blocking mode and MPI with
# mpi_yield_when_idle, so that waiting ranks yield their core: the ranks do not have cores of
# their own (5 and 8 ranks on 2 cores, and a machine shared with other work).
set -eu
build=$1 out=$2
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for ranks in 2 5 8; do
  case $ranks in
    2) topology=$source_dir/bench/flexbench/loopback-2.json ;;
    *) topology=$source_dir/topologies/paper-2m-$ranks.json ;;
  esac
  "$build/flexplan" "$topology" -o "$out/plan-$ranks.bin" > /dev/null
  blocking=--blocking
  mpirun=(mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1)
  "${mpirun[@]}" "$build/flexbench" "$out/plan-$ranks.bin" -b 8 -e 64K -f 2 -n 50 -w 10 $blocking \
    --json "$out/small-$ranks.json" | tee "$out/small-$ranks.txt"
  "${mpirun[@]}" "$build/flexbench" "$out/plan-$ranks.bin" -b 1M -e 128M -f 2 -n 10 -w 2 $blocking \
    --json "$out/large-$ranks.json" | tee "$out/large-$ranks.txt"
done
python3 "$source_dir/bench/flexbench/ratio_table.py" "$out"
