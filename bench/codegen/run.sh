#!/usr/bin/env bash
# Plans TOPOLOGY, generates and builds its per-rank programs, and runs codegen_latency with one
# rank per learner: the generated programs against the runtime's own lowering, side by side.
#   bench/codegen/run.sh [TOPOLOGY.json] [extra codegen_latency arguments]
set -euo pipefail
# Every rank runs on this one host, standing in for the plan's machines: allowed, not an error
# (docs/runtime.md, "The plan's machines and the job's hosts").
export FLEXPLAN_ALLOW_HOST_MISMATCH=${FLEXPLAN_ALLOW_HOST_MISMATCH:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
topology=${1:-$root/topologies/paper-2m-4.json}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/flexplan" "$topology" -o "$work/plan.bin" > /dev/null
"$build/flexplan" codegen "$work/plan.bin" --target cpp -o "$work/gen" > /dev/null
"${CXX:-c++}" -std=c++17 -O2 -shared -fPIC -fvisibility=hidden -o "$work/libplan.so" "$work"/gen/*.cpp
ranks=$("$build/flexplan" inspect "$work/plan.bin" | awk '/^world_size/ {print $2}')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Ranks may outnumber cores here: block instead of busy-polling (docs/runtime.md), unless set.
export FLEXPLAN_BLOCKING=${FLEXPLAN_BLOCKING:-1}
mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1 "$build/codegen_latency" "$work/plan.bin" "$work/libplan.so" "$@"
