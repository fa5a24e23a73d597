#!/bin/bash
# One host, every collective: flexplan against Open MPI's same collective (MPI_Reduce_scatter_block,
# MPI_Allgather, MPI_Bcast, MPI_Reduce, MPI_Allreduce) for 2, 4 and 8 ranks at 1-64 MB, side by
# side in one run (docs/flexbench.md, "Every collective on one host"). The plans come from
# bench/flexbench/loopback-N.json style topologies (N learners on one machine), planned for all five
# collectives; the runtime blocks and MPI yields, since the ranks do not have cores of their own.
#   bench/flexbench/collective_ratios.sh BUILD_DIR OUT_DIR [ITERATIONS]
set -eu
# Every rank runs on this one host, standing in for the plan's machines: allowed, not an error
# (docs/runtime.md, "The plan's machines and the job's hosts").
export FLEXPLAN_ALLOW_HOST_MISMATCH=${FLEXPLAN_ALLOW_HOST_MISMATCH:-1}
build=$1 out=$2 iterations=${3:-10}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" > "$out/conditions.txt"
for ranks in 2 4 8; do
  # The loopback topology of this size (same links and reduction rate as loopback-5.json).
  sed -e "s/loopback-5/loopback-$ranks/g" -e "s/\"count\": 5/\"count\": $ranks/" -e "s/5 learners/$ranks learners/" \
    "$source_dir/bench/flexbench/loopback-5.json" > "$out/loopback-$ranks.json"
  "$build/flexplan" "$out/loopback-$ranks.json" --collectives allreduce,reduce_scatter,allgather,broadcast,reduce \
    -o "$out/plan-$ranks.bin" > /dev/null
done
for ranks in 2 4 8; do
  for collective in reduce_scatter allgather broadcast reduce allreduce; do
    echo "== $collective, $ranks ranks"
    mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1 "$build/flexbench" "$out/plan-$ranks.bin" \
      --collective "$collective" -b 1M -e 64M -f 2 -n "$iterations" -w 2 --blocking \
      --json "$out/$collective-$ranks.json" | tee "$out/$collective-$ranks.txt"
  done
done
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/conditions.txt"
cat "$out/conditions.txt"
/usr/bin/python3 - "$out" <<'PY'
import json, math, sys
from pathlib import Path
out = Path(sys.argv[1])
print("\nGeometric mean of flexplan/MPI over 1-64 MB (below 1: flexplan faster); #wrong summed:\n")
print("| collective | 2 ranks | 4 ranks | 8 ranks |")
print("|---|---|---|---|")
for collective in ("reduce_scatter", "allgather", "broadcast", "reduce", "allreduce"):
    cells = []
    for ranks in (2, 4, 8):
        path = out / f"{collective}-{ranks}.json"
        if not path.exists():
            cells.append("")
            continue
        records = json.loads(path.read_text())["records"]
        ratios = [r["time_us_median"] / r["mpi_time_us_median"] for r in records if r["mpi_time_us_median"]]
        wrong = sum(r["wrong"] or 0 for r in records)
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        cells.append(f"{geo:.2f}" + (f" ({wrong} wrong)" if wrong else ""))
    print(f"| {collective} | " + " | ".join(cells) + " |")
PY
