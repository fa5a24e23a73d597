#!/usr/bin/env python3
"""Summarizes loopback_ratios.sh's JSON records: flexplan/MPI median time ratio per size, and
the geometric mean over the small sizes, the large ones and the large ones up to 64 MB, per rank count and build (markdown).
   ratio_table.py OUT_DIR NAME [NAME ...]"""
import json
import math
import sys
from pathlib import Path

out = Path(sys.argv[1])
names = sys.argv[2:]


def ratios(name, band, ranks):
    path = out / name / f"{band}-{ranks}.json"
    if not path.exists():
        return None, False
    records = json.loads(path.read_text())["records"]
    wrong = sum(r["wrong"] or 0 for r in records) > 0
    return [(r["bytes"], r["time_us_median"] / r["mpi_time_us_median"]) for r in records
            if r["mpi_time_us_median"]], wrong


def geo(values):
    return math.exp(sum(math.log(x) for _, x in values) / len(values))


print("Geometric mean of flexplan/MPI (below 1: flexplan faster):\n")
print("| ranks | " + " | ".join(f"{n}: 8 B - 64 KB | {n}: 1 - 128 MB | {n}: 1 - 64 MB" for n in names) + " |")
print("|---|" + "---|---|---|" * len(names))
for ranks in (2, 4, 5, 8):
    cells = []
    for name in names:
        for band, most in (("small", None), ("large", None), ("large", 64 << 20)):
            values, wrong = ratios(name, band, ranks)
            if values and most:
                values = [(b, x) for b, x in values if b <= most]  # the band, 1-64 MB
            cells.append("" if not values else f"{geo(values):.2f}{' (WRONG RESULTS)' if wrong else ''}")
    print(f"| {ranks} | " + " | ".join(cells) + " |")
print("\nPer size (bytes: flexplan/MPI):\n")
print("| build | ranks | range | per size |")
print("|---|---|---|---|")
for ranks in (2, 4, 5, 8):
    for band in ("small", "large"):
        for name in names:
            values, _ = ratios(name, band, ranks)
            if values:
                cells = ", ".join(f"{b}: {x:.2f}" for b, x in values)
                print(f"| {name} | {ranks} | {band} | {cells} |")
