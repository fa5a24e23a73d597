#!/usr/bin/env python3
"""Summarizes loopback_ratios.sh's JSON records: flexplan/MPI median time ratio per size, and
the geometric mean over the small and the large sizes, per rank count (markdown)."""
import json
import math
import sys
from pathlib import Path

out = Path(sys.argv[1])
print("| ranks | range | geo-mean flexplan/MPI | per size (bytes: ratio) |")
print("|---|---|---|---|")
for ranks in (2, 5, 8):
    for band in ("small", "large"):
        path = out / f"{band}-{ranks}.json"
        if not path.exists():
            continue
        records = json.loads(path.read_text())["records"]
        ratios = [(r["bytes"], r["time_us_median"] / r["mpi_time_us_median"]) for r in records
                  if r["mpi_time_us_median"]]
        wrong = sum(r["wrong"] or 0 for r in records)
        geo = math.exp(sum(math.log(x) for _, x in ratios) / len(ratios))
        cells = ", ".join(f"{b}: {x:.2f}" for b, x in ratios)
        print(f"| {ranks} | {band} | {geo:.2f}{' (WRONG RESULTS)' if wrong else ''} | {cells} |")
