#!/bin/bash
# flexbench reports the progress mode the runtime runs in, in its header and in the JSON
# "blocking" field: FLEXPLAN_BLOCKING=1 blocks as --blocking does (both once read only the flag);
# and -m's calls back to back per timed iteration.
#   flexbench_mode.sh MPIEXEC FLEXPLAN FLEXBENCH SOURCE_DIR
set -u
mpiexec=$1 flexplan=$2 flexbench=$3 source_dir=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$flexplan" "$source_dir/bench/flexbench/loopback-2.json" -o "$work/plan-2.bin" > /dev/null || exit 1

status=0
# expect DESCRIPTION HEADER_MODE JSON_VALUE FLEXPLAN_BLOCKING [FLEXBENCH-FLAGS...]
expect() {
  local what=$1 mode=$2 json=$3 setting=$4; shift 4
  local output
  output=$(FLEXPLAN_BLOCKING=$setting timeout 60 "$mpiexec" -np 2 --oversubscribe --mca mpi_yield_when_idle 1 \
           "$flexbench" "$work/plan-2.bin" -b 8 -e 8 -n 1 -w 0 --mpi 0 --json "$work/out.json" "$@" 2>&1)
  local got=$?
  if [ "$got" -ne 0 ]; then
    echo "FAIL: $what: exit $got"; echo "$output" | head -20; status=1; return
  fi
  if ! grep -q "^# flexbench: .*, $mode progress$" <<< "$output"; then
    echo "FAIL: $what: the header does not say '$mode progress'"; echo "$output" | head -3; status=1; return
  fi
  if ! grep -q "\"blocking\": $json," "$work/out.json"; then
    echo "FAIL: $what: the JSON does not say \"blocking\": $json"; grep blocking "$work/out.json"; status=1; return
  fi
  echo "ok: $what"
}
expect "FLEXPLAN_BLOCKING=1 alone" blocking true 1
expect "--blocking alone" blocking true 0 --blocking
expect "neither" busy-polling false 0
# Ranks outnumbering the cores they may run on block by default, and say why; --polling polls.
crowded() {
  local what=$1 pattern=$2; shift 2
  local output
  output=$(env -u FLEXPLAN_BLOCKING taskset -c 0 timeout 60 "$mpiexec" -np 2 --oversubscribe --bind-to none \
           --mca mpi_yield_when_idle 1 "$flexbench" "$work/plan-2.bin" -b 8 -e 8 -n 1 -w 0 --mpi 0 "$@" 2>&1)
  if [ $? -ne 0 ] || ! grep -q "^# flexbench: .*, $pattern" <<< "$output"; then
    echo "FAIL: $what: expected a header saying '$pattern'"; echo "$output" | head -3; status=1; return
  fi
  echo "ok: $what"
}
crowded "two ranks on one core" "blocking progress (2 ranks share 1 core on this host; --polling to busy-poll)"
crowded "two ranks on one core, --polling" "busy-polling progress$" --polling
# -m N: N calls back to back in each timed iteration, said in the header and the JSON, and
# every call's result still right (each call overwrites the same output).
output=$(timeout 60 "$mpiexec" -np 2 --oversubscribe --mca mpi_yield_when_idle 1 "$flexbench" "$work/plan-2.bin" \
         -b 8 -e 1K -f 128 -n 2 -w 1 -m 5 --blocking --json "$work/agg.json" 2>&1)
if [ $? -ne 0 ] || ! grep -q "times are medians of the slowest rank per iteration of 5 calls back to back, per call" <<< "$output" \
   || ! grep -q '"agg_iters": 5,' "$work/agg.json" || [ "$(grep -c '"wrong": 0' "$work/agg.json")" -ne 2 ]; then
  echo "FAIL: -m 5: expected the header and the JSON to say so and two right rows"; echo "$output" | head -12
  grep -E 'agg_iters|wrong' "$work/agg.json"; status=1
else
  echo "ok: -m 5"
fi
"$flexbench" "$work/plan-2.bin" -m 0 > "$work/m0.txt" 2>&1
if [ $? -ne 2 ]; then echo "FAIL: -m 0: expected exit 2"; head -3 "$work/m0.txt"; status=1; else echo "ok: -m 0 refused"; fi
[ $status -eq 0 ] && echo "PASS: flexbench reports the runtime's progress mode and its calls per iteration"
exit $status
