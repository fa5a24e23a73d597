#!/bin/bash
# What timing calls costs (docs/runtime.md, Following the network): flexbench's 8-byte
# all-reduce on 2 ranks of this host, alternating a build without it (BEFORE), this build with
# timing off (the default) and with FLEXPLAN_STATS=1, ROUNDS times; prints one line per run.
#   stats_overhead.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]   (builds with flexplan and flexbench)
set -eu
before=$1 after=$2 rounds=${3:-4}
plan=$(mktemp --suffix=.bin)
trap 'rm -f "$plan"' EXIT
"$after/flexplan" "$(dirname "$0")/loopback-2.json" -o "$plan" > /dev/null
export FLEXPLAN_ALLOW_HOST_MISMATCH=1
run() {  # BUILD STATS: the 8-byte median (us) of the slowest rank per iteration
  FLEXPLAN_STATS=$2 mpirun -np 2 -x FLEXPLAN_ALLOW_HOST_MISMATCH -x FLEXPLAN_STATS \
    "$1/flexbench" "$plan" -b 8 -e 8 -n 20000 -w 1000 2>/dev/null | awk '$1 == 8 { print $6 }'
}
echo "round before(us) off(us) on(us)"
for round in $(seq "$rounds"); do
  echo "$round $(run "$before" 0) $(run "$after" 0) $(run "$after" 1)"
done
