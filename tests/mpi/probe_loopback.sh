#!/bin/bash
# flexplan probe on one host (docs/probe.md): 4 ranks made 2 machines by --machine-of-rank
# write a topology that reads back and plans; the tree from --topology and from Slurm's
# topology.conf (--slurm); --compare's exit codes
# (0 agree, 1 a link off, 2 bad input), with two files and after measuring; bad input exits 2;
# `flexplan probe` under mpirun runs flexplan-probe, and outside a launcher says how to run it.
#   probe_loopback.sh MPIEXEC FLEXPLAN FLEXPLAN_PROBE
set -u
mpiexec=$1 flexplan=$2 probe=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
mpi() { timeout 120 "$mpiexec" --oversubscribe --mca mpi_yield_when_idle 1 "$@"; }
source "$(dirname "$0")/../expect_exit.sh"

expect 0 "probe 4 ranks as 2 machines" mpi -np 4 "$probe" --machine-of-rank a,a,b,b --budget 3s --blocking \
  -o "$work/probed.json" --report "$work/report.json"
contains "machine a: out" "the figures are printed"
contains "learner links (pass 2)" "a progress line per phase and pass"
contains "hop overhead: the runtime's ring all-reduce" "the hop-overhead test ran the runtime"
contains "  hop overhead " "the hop overhead is in the summary"
expect 0 "the probed topology reads back" "$flexplan" topo show "$work/probed.json"
contains "a  " "machine a is in the tree"
expect 0 "and plans" "$flexplan" "$work/probed.json" -o "$work/plan.bin"
/usr/bin/python3 - "$work/probed.json" "$work/declared.json" "$work/wrong-tree.json" "$work/rack.json" <<'PY' || status=1
import json, sys
t = json.load(open(sys.argv[1]))
machines = t["root"]["children"]
assert [m["name"] for m in machines] == ["a", "b"], machines
assert [[l["rank"] for l in m["children"]] for m in machines] == [[0, 1], [2, 3]]
# the hop overhead: written as a latency, from the report's five batches
assert t["hop_overhead"].endswith(" us"), t.get("hop_overhead")
report = json.load(open(sys.argv[1].replace("probed.json", "report.json")))
hop = report["hop_overhead"]
assert len(hop["samples_s"]) == 5 and len(hop["allreduce_s"]) == 5, hop
assert abs(hop["hops"] - 6) < 1e-6 and all(s >= 0 for s in hop["samples_s"]), hop  # a ring of 4: 2(4-1) steps
assert abs(float(t["hop_overhead"].split()[0]) * 1e-6 - hop["value_s"]) <= 1e-9 + 1e-6 * hop["value_s"], (t["hop_overhead"], hop)
# declared: the same tree with machine a's link a tenth of the measured figure (below it, so
# that a measurement that is only a floor, ">=", on a busy host still finds it off)
for m in machines:
    m["link"]["bandwidth"] = m["link"]["bandwidth"]
d = json.loads(json.dumps(t))
bw, unit = d["root"]["children"][0]["link"]["bandwidth"].split()
d["root"]["children"][0]["link"]["bandwidth"] = f"{float(bw) / 10} {unit}"
json.dump(d, open(sys.argv[2], "w"))
# a tree whose machines group the ranks otherwise: 0 | 1,2,3
w = {"name": "w", "root": {"name": "s", "children": [
    {"name": "x", "link": {"bandwidth": "1 GB/s"}, "children": [{"name": "g", "count": 1, "link": {"bandwidth": "1 GB/s"}}]},
    {"name": "y", "link": {"bandwidth": "1 GB/s"}, "children": [{"name": "g", "count": 3, "link": {"bandwidth": "1 GB/s"}}]}]}}
json.dump(w, open(sys.argv[3], "w"))
# the right grouping under a rack switch
r = {"name": "r", "root": {"name": "top", "children": [{"name": "rack", "link": {"bandwidth": "1 GB/s"}, "children": [
    {"name": "x", "link": {"bandwidth": "1 GB/s"}, "children": [{"name": "g", "count": 2, "link": {"bandwidth": "1 GB/s"}}]},
    {"name": "y", "link": {"bandwidth": "1 GB/s"}, "children": [{"name": "g", "count": 2, "link": {"bandwidth": "1 GB/s"}}]}]}]}}
json.dump(r, open(sys.argv[4], "w"))
PY
expect 0 "--compare of a file with itself" "$flexplan" probe --compare "$work/probed.json" "$work/probed.json"
contains "0 of 6 links off" "no link off"
contains "hop overhead: declared" "the hop overhead is shown"
expect 1 "--compare with a link ten times off" "$flexplan" probe --compare "$work/declared.json" "$work/probed.json"
contains "1 of 6 links off" "one link off"
expect 2 "--compare with a missing file" "$flexplan" probe --compare "$work/none.json" "$work/probed.json"
expect 2 "flexplan probe outside a launcher" "$flexplan" probe --budget 5s
contains "mpirun" "says how to launch it"
expect 1 "measured against a topology with a link ten times off" mpi -np 4 "$flexplan" probe --machine-of-rank a,a,b,b \
  --budget 3s --blocking -o "$work/again.json" --compare "$work/declared.json"
contains "links off by more than 10%" "the comparison is printed"
expect 0 "the tree from --topology" mpi -np 4 "$probe" --machine-of-rank a,a,b,b --budget 3s --blocking \
  --topology "$work/rack.json" -o "$work/racked.json"
expect 0 "with its switch" "$flexplan" topo show "$work/racked.json"
contains "rack" "the rack is in the tree"
expect 2 "--topology grouping the ranks otherwise" mpi -np 4 "$probe" --machine-of-rank a,a,b,b --budget 3s \
  --topology "$work/wrong-tree.json"
contains "the job's machines" "the error lists both groupings"
expect 2 "a bad --budget" mpi -np 2 "$probe" --budget soon
expect 2 "--machine-of-rank for another job size" mpi -np 2 "$probe" --machine-of-rank a,b,c
printf 'SwitchName=top Switches=rack\nSwitchName=rack Nodes=a,b\n' > "$work/topology.conf"
expect 0 "the tree from --slurm" mpi -np 4 "$probe" --machine-of-rank a,a,b,b --budget 3s --blocking \
  --slurm "$work/topology.conf" -o "$work/slurm.json"
expect 0 "with Slurm's switch" "$flexplan" topo show "$work/slurm.json"
contains "rack" "the rack is in the tree"
printf 'SwitchName=top Nodes=a,c\n' > "$work/other.conf"
expect 2 "--slurm without one of the job's machines" mpi -np 4 "$probe" --machine-of-rank a,a,b,b --budget 3s \
  --slurm "$work/other.conf"
contains "no switch lists the job's machine b" "the error names the machine"
expect 2 "--slurm and --topology together" mpi -np 2 "$probe" --slurm "$work/topology.conf" --topology "$work/rack.json"
expect 2 "an unknown option" mpi -np 2 "$probe" --no-such-option
[ $status -eq 0 ] && echo "PASS: flexplan probe on one host"
exit $status
