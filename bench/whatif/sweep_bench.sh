#!/usr/bin/env bash
# What-if sweep speed (docs/whatif.md, "Speed"): a 1,000-point grid (10 machine-uplink
# bandwidths x 10 scalings of one rack x 10 latency scalings) over the 1,000-learner cluster
# cluster-1000.json, priced with the closed-form algorithms (ring, hierarchical), with and
# without the upgrade advice, side by side in one run.
#   bench/whatif/sweep_bench.sh [FLEXPLAN]   (default build/flexplan)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
flexplan=${1:-$here/../../build/flexplan}
topology=$here/cluster-1000.json
grid=('machines.bandwidth=10Gbit/s,25Gbit/s,40Gbit/s,50Gbit/s,100Gbit/s,200Gbit/s,400Gbit/s,800Gbit/s,1Tbit/s,2Tbit/s'
      'under:core/rack4.bandwidth*=0.5,0.75,1,1.5,2,3,4,6,8,10'
      'all.latency*=0.5,1,1.5,2,2.5,3,4,5,6,8')
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$flexplan" topo show "$topology" | head -1)"
run() {  # run LABEL ARGS...
  local label=$1; shift
  local out
  out=$( { /usr/bin/time -f '%e %U %S' "$flexplan" whatif "$topology" "${grid[@]}" -b 1M -e 256M -f 256 \
             --format csv -q "$@" >/tmp/whatif-bench.$$.csv; } 2>&1 | tail -1)
  local rows; rows=$(($(wc -l </tmp/whatif-bench.$$.csv) - 1))
  read -r wall user sys <<<"$out"
  printf '%-40s %6d rows  wall %6.2f s  user %6.2f s  sys %5.2f s\n' "$label" "$rows" "$wall" "$user" "$sys"
}
run "ring,hierarchical, advice, -j $(nproc)" -a ring,hierarchical
run "ring,hierarchical, advice, -j 1" -a ring,hierarchical -j 1
run "ring,hierarchical, no advice, -j $(nproc)" -a ring,hierarchical --no-advice
run "ring,hierarchical,flexreduce, no advice" -a ring,hierarchical,flexreduce --no-advice
rm -f /tmp/whatif-bench.$$.csv
