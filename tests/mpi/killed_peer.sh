#!/bin/bash
# Kills (SIGKILL) or stalls the last rank in the middle of an all-reduce and checks that every
# survivor reports, none hangs, at least one reports a RuntimeError within the timeout and
# naming the cause, and any that finished (it had all it needed from the victim before the
# victim stopped: a rank on another machine, once the victim's share had left) has the right
# result. mpirun runs with --enable-recovery so
# that it does not tear the survivors down first.
#   killed_peer.sh MPIEXEC RANKS BINARY TIMEOUT_MS kill|kill-default|stall
# kill: FLEXPLAN_PEER_FAILURE=all, so UCX reports the dead local peer at once.
# kill-default, stall: the default mode, where local endpoints leave dead peers to the timeout.
set -u
mpiexec=$1 ranks=$2 binary=$3 timeout_ms=$4 mode=$5
peer_failure=remote
[ "$mode" = kill ] && peer_failure=all
action=$mode
[ "$mode" = kill-default ] && action=kill
output=$(FLEXPLAN_TIMEOUT_MS=$timeout_ms FLEXPLAN_PEER_FAILURE=$peer_failure timeout 120 \
  "$mpiexec" -np "$ranks" --oversubscribe --enable-recovery --mca mpi_yield_when_idle 1 \
  "$binary" "$action" 2>&1)
echo "$output" | grep -v "PMIX ERROR"

survivors=$((ranks - 1))
errors=$(echo "$output" | grep -c "^killed-peer-test: rank [0-9]* caught RuntimeError after")
finished=$(echo "$output" | grep -c "^killed-peer-test: rank [0-9]* completed with the right result")
if [ "$errors" -eq 0 ] || [ $((errors + finished)) -ne "$survivors" ]; then
  echo "FAIL: of $survivors survivors, $errors reported a RuntimeError and $finished finished right"
  exit 1
fi
# In peer-failure mode UCX reports the dead peer at once, by rank and name: through its error
# callback, or as the failed status of a send to it when that send completes first; or a
# single-copy read from it fails first (the kernel finds no such process), or the ack of a
# chunk read from it just before it died. Otherwise a
# transfer to it may fail (naming it), or the timeout fires; a stalled peer always trips the
# timeout.
case $mode in
  kill) expected="UCX reports peer rank $survivors \(.*\) failed|sending chunk [0-9]+ to rank $survivors \(.*\) failed|by single copy from rank $survivors \(.*\) failed|acknowledging .*chunk.* to rank $survivors \(.*\) failed"
        limit_ms=$timeout_ms ;;
  kill-default) expected="rank $survivors \(.*\) failed|no progress for $timeout_ms ms"
                limit_ms=$((2 * timeout_ms)) ;;
  *) expected="no progress for $timeout_ms ms"; limit_ms=$((2 * timeout_ms)) ;;
esac
status=0
while read -r line; do
  ms=$(echo "$line" | sed -E 's/.* after ([0-9]+) ms: .*/\1/')
  if [ "$ms" -gt "$limit_ms" ]; then
    echo "FAIL: took $ms ms (limit $limit_ms): $line"; status=1
  fi
  if ! echo "$line" | grep -Eq "$expected"; then
    echo "FAIL: the message lacks '$expected': $line"; status=1
  fi
done < <(echo "$output" | grep "^killed-peer-test: rank [0-9]* caught")
[ $status -eq 0 ] && echo "PASS: $errors survivors failed cleanly within $limit_ms ms, $finished finished right"
exit $status
