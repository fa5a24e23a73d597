#!/bin/bash
# flexplan_sparse_bench end to end on 5 ranks of this host (the 2+3 tree): exit 0 with results
# that pass its checks, one JSON record per size with every density, sparse_table.py's table
# from that JSON and `flexplan predict --format json`, and exit 2 for bad input.
#   sparse_bench_test.sh MPIEXEC FLEXPLAN SPARSE_BENCH SOURCE_DIR
set -u
mpiexec=$1 flexplan=$2 bench=$3 source_dir=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun() { timeout 180 "$mpiexec" -np "$1" --oversubscribe --mca mpi_yield_when_idle 1 "${@:2}"; }
"$flexplan" "$source_dir/topologies/two-machines-2+3.json" -o "$work/plan.bin" > /dev/null || exit 1
status=0
fail() { echo "FAIL: $*"; status=1; }

mpirun 5 "$bench" "$work/plan.bin" -b 64K -e 128K --densities 0.01,1 -n 2 -w 1 --blocking \
  --json "$work/bench.json" > "$work/out.txt" 2>&1 || fail "exit $? on a good run: $(tail -5 "$work/out.txt")"
grep -q '2+3' "$work/out.txt" || fail "the header does not name the machines (2+3)"
/usr/bin/python3 - "$work/bench.json" <<'PY' || status=1
import json, sys
doc = json.load(open(sys.argv[1]))
ok = doc["machines"] == [2, 3] and [r["bytes"] for r in doc["records"]] == [65536, 131072]
for r in doc["records"]:
    ok &= [s["density"] for s in r["sparse"]] == [0.01, 1]
    for s in r["sparse"]:
        ok &= not s["wrong"] and s["time_us_median"] > 0 and s["nonzero"] <= s["selected_bound"]
    # density 1 selects every element of every slice: all of them nonzero
    ok &= r["sparse"][1]["nonzero"] == r["count"]
    # the dense steps within each machine, timed with every machine at once: one time per machine
    ok &= len(r["machine_steps_us"]) == 2 and all(t > 0 for t in r["machine_steps_us"])
print("bench JSON ok" if ok else "FAIL: bench JSON " + json.dumps(doc)[:600])
sys.exit(0 if ok else 1)
PY
mkdir -p "$work/table/2+3/100mbit"
cp "$source_dir/topologies/two-machines-2+3.json" "$work/table/2+3/100mbit/topology.json"
cp "$work/bench.json" "$work/table/2+3/100mbit/bench-64K.json"
/usr/bin/python3 "$source_dir/bench/cluster/sparse_table.py" "$work/table" --flexplan "$flexplan" \
  > "$work/table.md" 2>&1 || fail "sparse_table.py: $(cat "$work/table.md")"
rows=$(grep -c '^| 2+3 | 100 | [0-9.]* | [0-9.]* |' "$work/table.md")
[ "$rows" = 4 ] || fail "sparse_table.py printed $rows point rows, expected 4: $(cat "$work/table.md")"
# the learner links set from the bench's times within the machines (one rate per machine)
rows=$(grep -c '| [0-9.]*; [0-9.]* | 0 |' "$work/table.md")
[ "$rows" = 4 ] || fail "sparse_table.py set the learner links from the runtime in $rows rows, expected 4: $(cat "$work/table.md")"
[ -f "$work/table/2+3/100mbit/topology-runtime-65536.json" ] || fail "sparse_table.py wrote no topology-runtime-65536.json"
/usr/bin/python3 "$source_dir/bench/cluster/sparse_table.py" "$work/table" --flexplan "$flexplan" \
  --learner-links topology > "$work/table-topology.md" 2>&1 || fail "sparse_table.py --learner-links topology failed"
rows=$(grep -c '| as calibrated | 0 |' "$work/table-topology.md")
[ "$rows" = 4 ] || fail "sparse_table.py --learner-links topology: $rows rows as calibrated, expected 4"
rows=$(grep -c '^| 2+3 | 100 | [0-9.]* | [0-9.]*-[0-9.]* |' "$work/table.md")
[ "$rows" = 2 ] || fail "sparse_table.py printed $rows density-change rows, expected 2: $(cat "$work/table.md")"

expect2() {  # expect2 DESCRIPTION ARGS...
  local what=$1; shift
  mpirun 2 "$bench" "$@" > "$work/bad.txt" 2>&1
  local got=$?
  [ $got = 2 ] || fail "$what: exit $got, expected 2: $(head -3 "$work/bad.txt")"
}
"$flexplan" "$source_dir/bench/flexbench/loopback-2.json" -o "$work/plan-2.bin" > /dev/null || exit 1
expect2 "a density of 0" "$work/plan-2.bin" --densities 0
expect2 "a density above 1" "$work/plan-2.bin" --densities 1.5
expect2 "an integer type" "$work/plan-2.bin" -d int32
expect2 "a missing plan" "$work/none.bin"
expect2 "a plan for 5 ranks" "$work/plan.bin"
[ $status = 0 ] && echo "PASS: flexplan_sparse_bench"
exit $status
