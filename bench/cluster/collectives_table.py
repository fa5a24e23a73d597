#!/usr/bin/env python3
"""The table of bench/cluster/collectives.sh: per configuration, collective and size, the measured
median of the default plan, the ring, hierarchical and Open MPI beside the floor and the default
plan's prediction, with measured/floor and measured/predicted.
   collectives_table.py OUT_DIR"""
import json
import math
import sys
from pathlib import Path


def records(path):
    if not path.exists():
        return {}
    return {r["bytes"]: r for r in json.loads(path.read_text())["records"]}


out = Path(sys.argv[1])
print("| config | collective | size | default plan (algorithm) | ring | hierarchical | Open MPI | floor | "
      "predicted | plan/floor | plan/predicted | #wrong |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
within, points, worst_floor = 0, 0, {}
for config in sorted(p for p in out.iterdir() if p.is_dir()):
    for collective in ("allgather", "reduce_scatter", "broadcast"):
        default = records(config / f"bench-{collective}-default.json")
        ring = records(config / f"bench-{collective}-ring.json")
        hier = records(config / f"bench-{collective}-hierarchical.json")
        predict_path = config / f"predict-{collective}.json"
        predicted = {}
        if predict_path.exists():
            predicted = {r["bytes"]: r for r in json.loads(predict_path.read_text())["records"]}
        for size in sorted(default):
            d = default[size]
            p = predicted.get(size)
            ms = lambda r: f"{r['time_us_median'] / 1e3:.1f}" if r else ""
            mpi = f"{d['mpi_time_us_median'] / 1e3:.1f}" if d.get("mpi_time_us_median") else ""
            floor = p["floor_seconds"] * 1e3 if p else None
            plan_s = p["plan"]["seconds"] * 1e3 if p and p.get("plan") else None
            measured = d["time_us_median"] / 1e3
            if plan_s:
                points += 1
                within += abs(measured / plan_s - 1) <= 0.10
            if floor:
                key = (config.name, collective)
                worst_floor[key] = max(worst_floor.get(key, 0), measured / floor)
            wrong = sum((r or {}).get("wrong") or 0 for r in (d, ring.get(size), hier.get(size)))
            print(f"| {config.name} | {collective} | {size >> 20} MiB | {measured:.1f} ({d['algorithm']}) | "
                  f"{ms(ring.get(size))} | {ms(hier.get(size))} | {mpi} | "
                  f"{floor:.1f} | {plan_s:.1f} | {measured / floor:.2f} | {measured / plan_s:.2f} | {wrong} |"
                  if floor and plan_s else
                  f"| {config.name} | {collective} | {size >> 20} MiB | {measured:.1f} | | | {mpi} | | | | | {wrong} |")
print(f"\nPoints within 10% of their prediction: {within} of {points}.")
print("Worst measured/floor per configuration and collective: " +
      ", ".join(f"{c} {k}: {v:.2f}" for (c, k), v in sorted(worst_floor.items())))
