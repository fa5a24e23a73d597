#!/usr/bin/env python3
"""The sparse-vs-dense table of sparse_vs_dense.sh: measured beside predicted, as markdown.

Reads DIR/<cluster>/<rate>mbit/{topology.json,bench-*.json}; predicts every point with
`flexplan predict --sparse --format json` on that point's calibrated topology, pricing the dense
plan's own algorithm at that size, MSTopK at the time per element measured in the point (its
slowest rank's time alone over the largest slice, which is what the cost model charges), and
the learners' sums at the rate measured at that size with every rank summing at once (the
bench's sum_bytes_per_s, given as --reduce-bandwidth; absent in records of older benches).
Ratio = predicted / measured; * marks a sparse prediction off by more than 15%.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys


def predict(flexplan, topology, algorithm, size, density, mstopk_ns, sum_rate):
    command = [flexplan, "predict", topology, "-a", algorithm, "-b", str(size), "-e", str(size),
               "--sparse", "--densities", repr(density), "--mstopk-ns", repr(mstopk_ns),
               "--format", "json"]
    if sum_rate:
        command += ["--reduce-bandwidth", f"{sum_rate / 1e9:.6g} GB/s"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    record = json.loads(out)["records"][0]
    return record["seconds"][algorithm], record["sparse"][0]


def rows(directory, flexplan):
    for point in sorted(glob.glob(os.path.join(directory, "*", "*mbit"))):
        cluster = os.path.basename(os.path.dirname(point))
        rate = int(os.path.basename(point)[:-len("mbit")])
        topology = os.path.join(point, "topology.json")
        load = ""
        if os.path.exists(os.path.join(point, "load.txt")):
            load = open(os.path.join(point, "load.txt")).read().split()[0]
        benches = glob.glob(os.path.join(point, "bench-*.json"))
        records = []
        for path in benches:
            bench = json.load(open(path))
            smallest_machine = min(bench["machines"])
            records += [(r, smallest_machine) for r in bench["records"]]
        for record, smallest_machine in sorted(records, key=lambda x: x[0]["bytes"]):
            largest_slice = math.ceil(record["count"] / smallest_machine)
            for s in record["sparse"]:
                mstopk_ns = max(s["mstopk_us"] * 1e3 / largest_slice, 1e-6)
                sum_rate = record.get("sum_bytes_per_s") or 0
                dense_pred, sparse_pred = predict(flexplan, topology, record["dense_algorithm"],
                                                  record["bytes"], s["density"], mstopk_ns, sum_rate)
                yield {
                    "cluster": cluster, "rate": rate, "bytes": record["bytes"], "density": s["density"],
                    "dense_algorithm": record["dense_algorithm"],
                    "dense_s": record["dense_time_us_median"] / 1e6, "dense_pred_s": dense_pred,
                    "sparse_s": s["time_us_median"] / 1e6, "sparse_min_s": s["time_us_min"] / 1e6,
                    "sparse_max_s": s["time_us_max"] / 1e6, "sparse_pred_s": sparse_pred["seconds"],
                    "mstopk_ns": mstopk_ns, "sum_rate": sum_rate, "wrong": s["wrong"], "load": load,
                }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--flexplan", required=True, help="the flexplan program")
    parser.add_argument("-o", "--output", help="also write the table here")
    args = parser.parse_args()
    lines = [
        "| cluster | link Mbit/s | MiB | density | dense algorithm | dense s | predicted | ratio "
        "| sparse s (min-max) | predicted | ratio | sparse speedup | predicted | MSTopK ns/elem | sums GB/s | #wrong | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    all_rows = list(rows(args.directory, args.flexplan))
    found = bool(all_rows)
    for r in all_rows:
        sparse_ratio = r["sparse_pred_s"] / r["sparse_s"]
        mark = "*" if abs(sparse_ratio - 1) > 0.15 else ""
        sums = f"{r['sum_rate'] / 1e9:.2f}" if r["sum_rate"] else "-"
        lines.append(
            f"| {r['cluster']} | {r['rate']} | {r['bytes'] / 2**20:g} | {r['density']:g} | {r['dense_algorithm']} "
            f"| {r['dense_s']:.3f} | {r['dense_pred_s']:.3f} | {r['dense_pred_s'] / r['dense_s']:.2f} "
            f"| {r['sparse_s']:.3f} ({r['sparse_min_s']:.3f}-{r['sparse_max_s']:.3f}) | {r['sparse_pred_s']:.3f} "
            f"| {sparse_ratio:.2f}{mark} | {r['dense_s'] / r['sparse_s']:.1f}x "
            f"| {r['dense_pred_s'] / r['sparse_pred_s']:.1f}x | {r['mstopk_ns']:.2f} | {sums} "
            f"| {int(r['wrong'])} | {r['load']} |")
    # What grows with the density (the pairs over the slow links, MSTopK's search) against what
    # does not (the dense steps within machines): the measured and predicted change from the
    # lowest to the highest density of each size, and the part left at the lowest density.
    by_size = {}
    for r in all_rows:
        by_size.setdefault((r["cluster"], r["rate"], r["bytes"]), []).append(r)
    lines += ["", "From the lowest to the highest density of each size (the part that grows with the "
              "density), and the time at the lowest density, measured and predicted:", "",
              "| cluster | link Mbit/s | MiB | densities | measured change s | predicted change s | ratio "
              "| measured at the lowest s | predicted at the lowest s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for (cluster, rate, size), points in sorted(by_size.items()):
        points.sort(key=lambda r: r["density"])
        lo, hi = points[0], points[-1]
        if lo is hi:
            continue
        measured = hi["sparse_s"] - lo["sparse_s"]
        predicted = hi["sparse_pred_s"] - lo["sparse_pred_s"]
        lines.append(f"| {cluster} | {rate} | {size / 2**20:g} | {lo['density']:g}-{hi['density']:g} "
                     f"| {measured:.3f} | {predicted:.3f} | {predicted / measured:.2f} "
                     f"| {lo['sparse_s']:.3f} | {lo['sparse_pred_s']:.3f} |")
    if not found:
        print(f"sparse_table.py: no bench-*.json under {args.directory}/<cluster>/<rate>mbit/", file=sys.stderr)
        return 2
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output:
        with open(args.output, "w") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
