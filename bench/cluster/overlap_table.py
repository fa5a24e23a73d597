#!/usr/bin/env python3
"""The table of overlap.sh: per configuration and size, each mode's measured time (the median over
rounds of flexbench's medians) beside its prediction, and Open MPI's MPI_Allreduce.

    overlap_table.py OUT [--markdown]

Modes: a = the plan priced per slice, run with its steps overlapping (FLEXPLAN_STEP_OVERLAP=1),
predicted per slice; b = the same plan step by step (FLEXPLAN_STEP_OVERLAP=0), its rows predicted
per rank; c = the default plan (priced per rank) with overlap, predicted per rank; m = (a) with
Open MPI's MPI_Allreduce timed beside it (older runs: MPI beside a itself), whose flexplan times
the table leaves out.
"""
import glob
import json
import os
import re
import statistics
import sys


def records(path):
    with open(path) as f:
        return json.load(f)["records"]


def load_config(d):
    # measured[mode][bytes] = [median seconds per round]; rows[mode][bytes] = the schedule run
    measured, rows, mpi, wrong = {}, {}, {}, 0
    for path in sorted(glob.glob(os.path.join(d, "bench-*.json"))):
        m = re.match(r"bench-([abcm])\d+-\d+\.json", os.path.basename(path))
        if not m:
            continue
        mode = m.group(1)
        for r in records(path):
            size = int(r["bytes"])
            measured.setdefault(mode, {}).setdefault(size, []).append(r["time_us_median"] * 1e-6)
            rows.setdefault(mode, {})[size] = r["algorithm"]
            wrong += r["wrong"] or 0
            if r.get("mpi_time_us_median") is not None:
                mpi.setdefault(size, []).append(r["mpi_time_us_median"] * 1e-6)
    with open(os.path.join(d, "predict-slice.json")) as f:
        per_slice = {int(r["bytes"]): r for r in json.load(f)["records"]}
    with open(os.path.join(d, "predict-rank.json")) as f:
        per_rank = {int(r["bytes"]): r for r in json.load(f)["records"]}
    return measured, rows, mpi, wrong, per_slice, per_rank


def prediction(mode, size, row, per_slice, per_rank):
    """The prediction of the schedule `row` (slices included) at `size`, priced as mode runs it:
    per slice with the steps overlapping (a), per rank otherwise."""
    rec = (per_slice if mode == "a" else per_rank).get(size)
    return rec["seconds"].get(row) if rec else None


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = sys.argv[1]
    for d in sorted(glob.glob(os.path.join(out, "*"))):
        if not os.path.exists(os.path.join(d, "predict-rank.json")):
            continue
        measured, rows, mpi, wrong, per_slice, per_rank = load_config(d)
        hop = open(os.path.join(d, "hop.txt")).read().strip()
        rounds = max((len(v) for m in measured.values() for v in m.values()), default=0)
        print(f"\n{os.path.basename(d)}: hop overhead {hop}, {rounds} rounds, #wrong {wrong}")
        print("| size | plan row (a, b) | a ms | pred | a/pred | b ms | pred | b/pred | a/b "
              "| plan row (c) | c ms | pred | c/pred | MPI ms |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
        for size in sorted(measured.get("a", {})):
            cells = [str(size)]
            ms = {}
            for mode in "abc":
                times = measured.get(mode, {}).get(size)
                if not times:
                    cells += ["-"] * 4
                    continue
                row = rows[mode][size]
                t = statistics.median(times)
                ms[mode] = t
                pred = prediction(mode, size, row, per_slice, per_rank)
                if mode in "ac":
                    cells.append(row)
                cells += [f"{t * 1e3:.3f}", f"{pred * 1e3:.3f}" if pred else "-",
                          f"{t / pred:.2f}" if pred else "-"]
                if mode == "b":
                    cells.append(f"{ms['a'] / t:.2f}" if "a" in ms else "-")
            cells.append(f"{statistics.median(mpi[size]) * 1e3:.3f}" if size in mpi else "-")
            print("| " + " | ".join(cells) + " |")
        load = open(os.path.join(d, "load.txt")).read().split("\n") if os.path.exists(
            os.path.join(d, "load.txt")) else []
        print("load averages after each run: " + "; ".join(l for l in load if l))
    return 0


if __name__ == "__main__":
    sys.exit(main())
