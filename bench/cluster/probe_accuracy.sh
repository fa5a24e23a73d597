#!/bin/bash
# probe_accuracy.sh - `flexplan probe` on the emulated cluster against the figures the cluster
# was set up with (docs/probe.md, docs/results.md "The probe"). Per configuration: bring the
# cluster up (racks where it has them), run the gate, write the true topology from the set
# figures (set_topology.py), run the probe with --compare against it, plan both topologies and
# time the two plans' all-reduces with flexbench, alternately (true, probed, true, probed). The
# probed topology carries the measured hop overhead, which its plan is made with; the true one
# has none (the commands' default), as a user's hand-written file. With --hop-overhead T both
# are also planned and timed with T given on the command line (none: skipped).
#
#   bench/cluster/probe_accuracy.sh [--build build] [--out DIR] [--only NAME,...] [--budget 60s]
#                                   [--size 8M] [--iters 4] [--hop-overhead 1ms|none]
#
# Needs root and what cluster.sh needs. Uses its own cluster (EMU_PREFIX, EMU_SUBNET: fxpb, 10.79.0
# unless set).
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$ROOT/build OUT="" ONLY="" BUDGET=60s SIZE=8M ITERS=4 HOP=1ms
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --hop-overhead) HOP=$2; shift 2 ;;
    *) sed -n '2,12p' "$0"; exit 2 ;;
  esac
done
export EMU_PREFIX=${EMU_PREFIX:-fxpb} EMU_SUBNET=${EMU_SUBNET:-10.79.0}
CLUSTER=$HERE/cluster.sh
OUT=${OUT:-$BUILD/probe-results}
mkdir -p "$OUT"
trap '"$CLUSTER" down >/dev/null 2>&1' EXIT
. "$HERE/steps.sh"

# name | rates | learners | racks | rack rates | probe arguments
CONFIGS=(
  "m8-rack|100mbit 100mbit 100mbit 100mbit 100mbit 100mbit 100mbit 100mbit|1 1 1 1 1 1 1 1|0 0 0 0 - - - -|200mbit|"
  "m4-200|200mbit 200mbit 200mbit 200mbit|1 2 3 4||"
  "m3-rack|200mbit 100mbit 200mbit|2 2 2|0 0 -|200mbit|"
  "m4-rack|200mbit 200mbit 100mbit 100mbit|2 2 1 1|0 0 - -|200mbit|"
  "m4-rack-given|200mbit 200mbit 100mbit 100mbit|2 2 1 1|0 0 - -|200mbit|--topology TRUE"
  "m4-rack2|200mbit 200mbit 200mbit 200mbit|2 2 1 1|0 0 - -|200mbit|"
  "m4-rack250|200mbit 200mbit 100mbit 100mbit|2 2 1 1|0 0 - -|250mbit|"
  "m4-rack250-given|200mbit 200mbit 100mbit 100mbit|2 2 1 1|0 0 - -|250mbit|--topology TRUE"
  "m2-100-200|100mbit 200mbit|2 3||"
  "m2-100-400|100mbit 400mbit|2 3||"
  "m3-mixed|400mbit 100mbit 200mbit|1 4 2||"
)

median_us() {  # flexbench JSON files... -> median over them of the records' median time at SIZE
  python3 - "$@" <<'PY'
import json, sys, statistics
times = [r["time_us_median"] for f in sys.argv[1:] for r in json.load(open(f))["records"]]
print(f"{statistics.median(times):.0f}")
PY
}

printf '%-16s %5s %6s %8s %9s %10s %10s %10s %7s %10s %10s %7s\n' config ranks probe_s compare links_off probed_hop \
  true_us probed_us ratio hop_true hop_probed ratio | tee "$OUT/summary.txt"
variants="true probed"
[ "$HOP" != none ] && variants="true probed true-hop probed-hop"
for entry in "${CONFIGS[@]}"; do
  IFS='|' read -r name rates learners racks rack_rates args <<< "$entry"
  [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]] && continue
  dir=$OUT/$name; mkdir -p "$dir"
  "$CLUSTER" down >/dev/null 2>&1
  EMU_RATES="$rates" EMU_LEARNERS="$learners" EMU_RACKS="$racks" EMU_RACK_RATES="$rack_rates" \
    "$CLUSTER" up > "$dir/up.txt" 2>&1 || { log "$name: up failed"; continue; }
  if ! checked "$dir" 2 10; then log "$name: check failed; skipped"; continue; fi
  "$HERE/set_topology.py" "/run/$EMU_PREFIX/config" -o "$dir/true.json" || continue
  ranks=0; for l in $learners; do ranks=$((ranks + l)); done
  args=${args//TRUE/$dir/true.json}
  start=$(date +%s.%N)
  FLEXPLAN_BLOCKING=1 timeout 300 "$CLUSTER" mpirun -np $ranks "$BUILD/flexplan-probe" --budget "$BUDGET" \
    -o "$dir/probed.json" --report "$dir/report.json" --compare "$dir/true.json" $args \
    > "$dir/compare.txt" 2> "$dir/probe.log"
  code=$?
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e - s}')
  # machine and switch links off (learner links have no set figure: set_topology.py guesses 1 GB/s)
  off=$(grep -v '/learner' "$dir/compare.txt" | grep -v 'marked !' | grep -c '!')
  # Each topology planned as is, and with the runtime's cost per hop (HOP, --hop-overhead: this
  # host's is 0-1.2 ms, docs/testbed.md), which decides how deep a pipeline pays.
  for t in true probed; do
    "$BUILD/flexplan" "$dir/$t.json" -o "$dir/$t.bin" > "$dir/plan-$t.txt" 2>&1 || log "$name: planning $t failed"
    [ "$HOP" = none ] && continue
    "$BUILD/flexplan" "$dir/$t.json" -o "$dir/$t-hop.bin" --hop-overhead "$HOP" > "$dir/plan-$t-hop.txt" 2>&1 \
      || log "$name: planning $t with --hop-overhead failed"
  done
  for round in 1 2; do
    for t in $variants; do
      FLEXPLAN_BLOCKING=1 timeout 300 "$CLUSTER" mpirun -np $ranks nice -n -10 "$BUILD/flexbench" "$dir/$t.bin" \
        -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 1 --mpi 0 --blocking --json "$dir/bench-$t-$round.json" \
        > "$dir/bench-$t-$round.txt" 2>&1 || log "$name: flexbench $t failed"
    done
  done
  t_true=$(median_us "$dir"/bench-true-[0-9].json 2>/dev/null || echo nan)
  t_probed=$(median_us "$dir"/bench-probed-[0-9].json 2>/dev/null || echo nan)
  ratio=$(awk -v a="$t_probed" -v b="$t_true" 'BEGIN{if (b > 0) printf "%.3f", a / b; else print "nan"}')
  h_true=$(median_us "$dir"/bench-true-hop-*.json 2>/dev/null || echo nan)
  h_probed=$(median_us "$dir"/bench-probed-hop-*.json 2>/dev/null || echo nan)
  h_ratio=$(awk -v a="$h_probed" -v b="$h_true" 'BEGIN{if (b > 0) printf "%.3f", a / b; else print "nan"}')
  hop=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("hop_overhead", "-"))' "$dir/probed.json" \
    2>/dev/null | tr -d ' ' || echo -)
  printf '%-16s %5s %6s %8s %9s %10s %10s %10s %7s %10s %10s %7s\n' "$name" $ranks "$seconds" "exit$code" "$off" "$hop" \
    "$t_true" "$t_probed" "$ratio" "$h_true" "$h_probed" "$h_ratio" | tee -a "$OUT/summary.txt"
  "$CLUSTER" down >/dev/null 2>&1
done
