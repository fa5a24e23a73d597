#!/bin/bash
# A malformed FLEXPLAN_* value on some ranks, or a setting that must agree and differs, fails
# creation on EVERY rank with an error naming the rank, the variable and the value, within a
# hard time limit (before, only the bad rank threw and the others waited in creation forever).
# Runs settings_agreed (the default Options of the C++ API) and flexbench, 3 ranks on this host.
#   settings_agreed.sh MPIEXEC FLEXPLAN SETTINGS_AGREED FLEXBENCH SOURCE_DIR
set -u
mpiexec=$1 flexplan=$2 driver=$3 flexbench=$4 source_dir=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$flexplan" "$source_dir/tests/torch/two-machines-1+2.json" -o "$work/p3.bin" > /dev/null || exit 1

status=0
fail() { echo "FAIL: $*"; status=1; }

# run WHAT SETUP PROGRAM ARGS...: 3 ranks, each running SETUP (bash, may export by rank) first.
run() {
  local setup=$1; shift
  timeout 60 "$mpiexec" -np 3 --oversubscribe --mca mpi_yield_when_idle 1 \
    bash -c "$setup"' exec "$@"' bash "$@" 2>&1
}

# expect_every_rank DESCRIPTION EXIT OUTPUT NEEDLE...: the job ended (not killed by the time
# limit) with EXIT, and each of ranks 0-2 printed a line holding every NEEDLE.
expect_every_rank() {
  local what=$1 want=$2 got=$3 output=$4; shift 4
  if [ "$got" -eq 124 ]; then fail "$what: still running after 60 s (a hang)"; echo "$output" | head -20; return; fi
  [ "$got" -eq "$want" ] || fail "$what: exit $got, expected $want"
  for r in 0 1 2; do
    local line
    line=$(echo "$output" | grep "^settings-agreed: rank $r caught: ")
    for needle in "$@"; do
      if ! grep -qF -- "$needle" <<< "$line"; then
        fail "$what: rank $r did not report '$needle'"
        echo "$output" | head -20
        return
      fi
    done
  done
  echo "ok: $what"
}

for mode in path memory; do
  output=$(run '[ $OMPI_COMM_WORLD_RANK = 1 ] && export FLEXPLAN_TIMEOUT_MS=abc;' "$driver" "$work/p3.bin" $mode)
  expect_every_rank "bad FLEXPLAN_TIMEOUT_MS on rank 1 ($mode)" 2 $? "$output" \
    "MPI rank 1: FLEXPLAN_TIMEOUT_MS='abc': expected a positive integer"
done

# Two bad ranks, two variables: both named everywhere, the good rank named by neither.
output=$(run 'case $OMPI_COMM_WORLD_RANK in 0) export FLEXPLAN_WINDOW=0;; 2) export FLEXPLAN_BLOCKING=maybe;; esac;' \
             "$driver" "$work/p3.bin")
expect_every_rank "bad values on ranks 0 and 2" 2 $? "$output" \
  "MPI rank 0: FLEXPLAN_WINDOW='0'" "MPI rank 2: FLEXPLAN_BLOCKING='maybe'"
if echo "$output" | grep -q "MPI rank 1:"; then fail "rank 1's good settings were reported as bad"; fi

# A setting that must agree: named with its value and the ranks of each value.
output=$(run '[ $OMPI_COMM_WORLD_RANK = 2 ] && export FLEXPLAN_PEER_FAILURE=all;' "$driver" "$work/p3.bin")
expect_every_rank "FLEXPLAN_PEER_FAILURE differing on rank 2" 2 $? "$output" \
  "FLEXPLAN_PEER_FAILURE" "'remote': MPI ranks 0, 1" "'all': MPI rank 2"

# The same settings everywhere still make a communicator.
output=$(run 'export FLEXPLAN_PEER_FAILURE=all;' "$driver" "$work/p3.bin")
got=$?
if [ "$got" -ne 0 ] || [ "$(echo "$output" | grep -c "created the communicator")" -ne 3 ]; then
  fail "good settings: exit $got"; echo "$output" | head -20
else
  echo "ok: good settings"
fi

# The issue's reproduction: flexbench prints creation errors on rank 0 and exits 2 on every
# rank (mpirun's status), within the limit.
output=$(run '[ $OMPI_COMM_WORLD_RANK = 1 ] && export FLEXPLAN_TIMEOUT_MS=abc;' \
             "$flexbench" "$work/p3.bin" -b 1M -e 1M -n 2 --mpi 0)
got=$?
if [ "$got" -ne 2 ] || ! grep -qF "MPI rank 1: FLEXPLAN_TIMEOUT_MS='abc'" <<< "$output"; then
  fail "flexbench with a bad FLEXPLAN_TIMEOUT_MS on rank 1: exit $got"; echo "$output" | head -20
else
  echo "ok: flexbench with a bad FLEXPLAN_TIMEOUT_MS on rank 1"
fi

[ $status -eq 0 ] && echo "PASS: bad or differing settings fail every rank, naming them"
exit $status
