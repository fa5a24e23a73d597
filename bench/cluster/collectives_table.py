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
print("| config | collective | size | default plan, ms (algorithm) | ring | hierarchical | Open MPI | floor | "
      "predicted | plan/floor | plan/predicted | #wrong |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
within, points, worst_floor = 0, 0, {}
for config in sorted(p for p in out.iterdir() if p.is_dir()):
    for collective in ("allgather", "reduce_scatter", "broadcast"):
        default = records(config / f"bench-{collective}-default.json")
        ring = records(config / f"bench-{collective}-ring.json")
        hier = records(config / f"bench-{collective}-hierarchical.json")
        predict_path = config / f"predict-{collective}.json"
        prediction = json.loads(predict_path.read_text()) if predict_path.exists() else None
        for size in sorted(default):
            d = default[size]
            measured = d["time_us_median"] / 1e3
            ms = lambda r: f"{r['time_us_median'] / 1e3:.1f}" if r else ""
            mpi = f"{d['mpi_time_us_median'] / 1e3:.1f}" if d.get("mpi_time_us_median") else ""
            floor = plan_s = None
            if prediction:
                # The floor is linear in bytes; flexbench's sizes are whole elements per rank
                # (a few bytes under the predicted sizes): the nearest prediction, scaled.
                f = prediction["floor"]
                floor = (f["latency_seconds"] + f["seconds_per_byte"] * size) * 1e3
                near = min(prediction["records"], key=lambda r: abs(r["bytes"] - size))
                if near.get("plan"):
                    plan_s = near["plan"]["seconds"] * 1e3 * size / near["bytes"]
            if plan_s:
                points += 1
                within += abs(measured / plan_s - 1) <= 0.10
            if floor:
                key = (config.name, collective)
                worst_floor[key] = max(worst_floor.get(key, 0), measured / floor)
            wrong = sum((r or {}).get("wrong") or 0 for r in (d, ring.get(size), hier.get(size)))
            cell = lambda x: f"{x:.1f}" if x else ""
            ratio = lambda a, b: f"{a / b:.2f}" if a and b else ""
            print(f"| {config.name} | {collective} | {size / 2**20:.0f} MiB | {measured:.1f} ({d['algorithm']}) | "
                  f"{ms(ring.get(size))} | {ms(hier.get(size))} | {mpi} | {cell(floor)} | {cell(plan_s)} | "
                  f"{ratio(measured, floor)} | {ratio(measured, plan_s)} | {wrong} |")
print(f"\nPoints within 10% of their prediction: {within} of {points}.")
print("Worst measured/floor per configuration and collective: " +
      ", ".join(f"{c} {k}: {v:.2f}" for (c, k), v in sorted(worst_floor.items())))
