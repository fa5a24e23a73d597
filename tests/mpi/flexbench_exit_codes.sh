#!/bin/bash
# flexbench's exit status (docs/flexbench.md): 0 success, 1 wrong results, 2 bad input (its
# arguments, a missing, corrupt or unverifiable plan, a plan for another world size, a malformed
# FLEXPLAN_* variable), 3 the runtime failed. Runs 2-rank jobs on this host.
#   flexbench_exit_codes.sh MPIEXEC FLEXPLAN FLEXBENCH SOURCE_DIR
set -u
mpiexec=$1 flexplan=$2 flexbench=$3 source_dir=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$flexplan" "$source_dir/topologies/paper-2m-5.json" -o "$work/plan-5.bin" > /dev/null || exit 1
# all-reduce alone: the collectives it lacks are refused below
"$flexplan" "$source_dir/bench/flexbench/loopback-2.json" --collectives allreduce -o "$work/plan-2.bin" > /dev/null || exit 1
"$flexplan" "$source_dir/bench/flexbench/loopback-2.json" -o "$work/plan-2-all.bin" \
  --collectives allreduce,reduce_scatter,allgather,broadcast,reduce --roots 0,1 > /dev/null || exit 1
printf 'not a plan at all' > "$work/corrupt.bin"
head -c 100 "$work/plan-2.bin" > "$work/truncated.bin"

status=0
expect() {  # expect CODE DESCRIPTION [VAR=VALUE ...] -- FLEXBENCH-ARGS...
  local code=$1 what=$2; shift 2
  local vars=()
  while [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  local output
  output=$(env "${vars[@]}" timeout 120 "$mpiexec" -np 2 --oversubscribe --mca mpi_yield_when_idle 1 \
           "$flexbench" "$@" 2>&1)
  local got=$?
  if [ "$got" -ne "$code" ]; then
    echo "FAIL: $what: exit $got, expected $code"
    echo "$output" | grep -v "^\s*$" | head -20
    status=1
  else
    echo "ok: $what: exit $got"
  fi
  last_output=$output
}
said() {  # said TEXT: the last run's output holds TEXT
  if ! grep -qF -- "$1" <<< "$last_output"; then
    echo "FAIL: the output lacks '$1'"; echo "$last_output" | head -10; status=1
  fi
}
expect 0 "a good plan" -- "$work/plan-2.bin" -b 8 -e 64 -n 1 -w 0 --blocking
expect 0 "a good plan without MPI_Allreduce beside it" -- "$work/plan-2.bin" -b 8 -e 64 -n 1 -w 0 --blocking --mpi 0
expect 2 "a bad --mpi value" -- "$work/plan-2.bin" -b 8 -e 64 -n 1 --blocking --mpi 2
expect 2 "a missing plan" -- "$work/no-such-plan.bin" -b 8 -e 64 -n 1 --blocking
expect 2 "a corrupt plan" -- "$work/corrupt.bin" -b 8 -e 64 -n 1 --blocking
expect 2 "a truncated plan" -- "$work/truncated.bin" -b 8 -e 64 -n 1 --blocking
expect 2 "a plan for 5 ranks" -- "$work/plan-5.bin" -b 8 -e 64 -n 1 --blocking
expect 2 "a malformed FLEXPLAN_TIMEOUT_MS" FLEXPLAN_TIMEOUT_MS=soon -- "$work/plan-2.bin" -b 8 -e 64 -n 1 --blocking
expect 2 "a bad size argument" -- "$work/plan-2.bin" -b 8X -e 64 -n 1 --blocking
said "flexbench: error: -b/--minbytes: bad size"
# Sizes and data types as every flexplan command reads them (docs/topology.md, "Sizes").
expect 0 "sizes '1 K' and 1.5K, -t float32" -- "$work/plan-2.bin" -b "1 K" -e 1.5K -n 1 -w 0 --blocking -t float32
expect 0 "16KB read as KiB, with a warning" -- "$work/plan-2.bin" -b 16KB -e 16KB -n 1 -w 0 --blocking
said 'is read as 16 KiB'
expect 0 "the older -d float, with warnings" -- "$work/plan-2.bin" -b 8 -e 64 -n 1 -w 0 --blocking -d float
said "-d/--datatype is deprecated"
said "data type 'float' is now spelled 'float32'"
expect 2 "an unknown -t" -- "$work/plan-2.bin" -b 8 -e 64 -n 1 --blocking -t complex
expect 2 "a fraction that is no whole byte" -- "$work/plan-2.bin" -b 1.3K -e 64K -n 1 --blocking
expect 2 "an algorithm the plan lacks" -- "$work/plan-2.bin" -a no-such-algorithm -b 8 -e 64 -n 1 --blocking
for collective in reduce_scatter allgather broadcast reduce; do
  expect 0 "$collective, checked" -- "$work/plan-2-all.bin" --collective $collective -r 1 -b 8 -e 64K -f 64 -n 1 -w 0 --blocking
  expect 2 "$collective that the plan lacks" -- "$work/plan-2.bin" --collective $collective -b 8 -e 64 -n 1 --blocking
done
"$flexplan" "$source_dir/bench/flexbench/loopback-2.json" -o "$work/plan-2-root0.bin" \
  --collectives allreduce,broadcast,reduce --roots 0 > /dev/null || exit 1
expect 0 "broadcast from a root the plan lacks (a derived chain)" -- "$work/plan-2-root0.bin" --collective broadcast -r 1 -b 8 -e 64K -f 64 -n 1 -w 0 --blocking
expect 2 "a root beyond the ranks" -- "$work/plan-2-all.bin" --collective broadcast -r 2 -b 8 -e 64 -n 1 --blocking
expect 2 "an unknown collective" -- "$work/plan-2-all.bin" --collective alltoall -b 8 -e 64 -n 1 --blocking
[ $status -eq 0 ] && echo "PASS: every exit status as documented"
exit $status
