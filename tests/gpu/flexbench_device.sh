#!/bin/sh
# flexbench --device over the emulation: plans a bundled topology, runs the device benchmark on
# 4 ranks through NCCL and through the staged UCX path (out-of-place and in-place columns,
# results checked), every other collective both ways, and checks that a plan for another world
# size exits 2 naming the mismatch and that --staged without --device exits 2.
# Usage: flexbench_device.sh MPIRUN FLEXPLAN FLEXBENCH_EMULATED SOURCE_DIR
set -eu
mpirun=$1 flexplan=$2 flexbench=$3 source=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$flexplan" "$source/topologies/paper-2m-4.json" -o "$dir/plan4.bin" > /dev/null
"$flexplan" "$source/topologies/two-machines-2+3.json" -o "$dir/plan5.bin" > /dev/null
# Exit 1 from flexbench means wrong results: the table says where.
"$mpirun" --oversubscribe --mca mpi_yield_when_idle 1 -np 4 "$flexbench" "$dir/plan4.bin" --device \
  -b 8 -e 1M -f 16 -n 3 -w 1 -t float32 > "$dir/out.txt" || { cat "$dir/out.txt"; echo "FAIL: flexbench --device"; exit 1; }
cat "$dir/out.txt"
grep -q "out-of-place" "$dir/out.txt"
rows=$(grep -c "^ .* float32 " "$dir/out.txt")
[ "$rows" -eq 5 ] || { echo "FAIL: expected 5 size rows, got $rows"; exit 1; }
# Every row's two #wrong columns are 0.
awk '/^ .* float32 / { if ($9 != 0 || $13 != 0) bad = 1 } END { exit bad }' "$dir/out.txt" \
  || { echo "FAIL: wrong results"; exit 1; }
"$mpirun" --oversubscribe --mca mpi_yield_when_idle 1 -np 4 "$flexbench" "$dir/plan4.bin" --device --staged \
  -b 8 -e 1M -f 16 -n 3 -w 1 -t float32 > "$dir/staged.txt" || { cat "$dir/staged.txt"; echo "FAIL: --staged"; exit 1; }
cat "$dir/staged.txt"
grep -q "UCX staged through pinned host memory" "$dir/staged.txt" || { echo "FAIL: --staged header"; exit 1; }
rows=$(grep -c "^ .* float32 " "$dir/staged.txt")
[ "$rows" -eq 5 ] || { echo "FAIL: --staged: expected 5 size rows, got $rows"; exit 1; }
awk '/^ .* float32 / { if ($9 != 0 || $13 != 0) bad = 1 } END { exit bad }' "$dir/staged.txt" \
  || { echo "FAIL: --staged: wrong results"; exit 1; }
# Reduce-scatter, all-gather, broadcast and reduce (root 2) through NCCL and staged.
"$flexplan" "$source/topologies/paper-2m-4.json" -o "$dir/every4.bin" --roots 2 \
  --collectives allreduce,reduce_scatter,allgather,broadcast,reduce > /dev/null
for collective in reduce_scatter allgather broadcast reduce; do
  for path in "" --staged; do
    "$mpirun" --oversubscribe --mca mpi_yield_when_idle 1 -np 4 "$flexbench" "$dir/every4.bin" --device $path \
      --collective $collective -r 2 -b 8 -e 64K -f 32 -n 2 -w 1 -t float32 > "$dir/c.txt" \
      || { cat "$dir/c.txt"; echo "FAIL: --device $path --collective $collective"; exit 1; }
    grep -q "# flexbench --device.* $collective of plan" "$dir/c.txt" || { cat "$dir/c.txt"; echo "FAIL: $collective header"; exit 1; }
    rows=$(grep -c "^ .* float32 " "$dir/c.txt")
    [ "$rows" -eq 3 ] || { cat "$dir/c.txt"; echo "FAIL: $collective $path: expected 3 size rows, got $rows"; exit 1; }
    awk '/^ .* float32 / { if ($9 != 0 || $13 != 0) bad = 1 } END { exit bad }' "$dir/c.txt" \
      || { cat "$dir/c.txt"; echo "FAIL: $collective $path: wrong results"; exit 1; }
  done
done
echo "every collective: #wrong 0 through NCCL and staged"
set +e
"$flexbench" "$dir/plan4.bin" --staged > "$dir/usage.txt" 2>&1
code=$?
[ "$code" -eq 2 ] || { cat "$dir/usage.txt"; echo "FAIL: --staged alone exited $code, expected 2"; exit 1; }
"$mpirun" --oversubscribe --mca mpi_yield_when_idle 1 -np 4 "$flexbench" "$dir/plan5.bin" --device \
  -b 8 -e 8 > "$dir/bad.txt" 2>&1
code=$?
set -e
cat "$dir/bad.txt"
[ "$code" -eq 2 ] || { echo "FAIL: a 5-rank plan on 4 ranks exited $code, expected 2"; exit 1; }
grep -q "the plan is for 5 ranks, the job has 4 processes" "$dir/bad.txt" || { echo "FAIL: reason not named"; exit 1; }
echo "PASS: flexbench --device"
