#!/usr/bin/env python3
"""The sparse-vs-dense table of sparse_vs_dense.sh: measured beside predicted, as markdown.

Reads DIR/<cluster>/<rate>mbit/{topology.json,bench-*.json}; predicts every point with
`flexplan predict --sparse --format json` on that point's calibrated topology, pricing the dense
plan's own algorithm at that size, MSTopK at the time per element measured in the point (its
slowest rank's time alone over the largest slice, which is what the cost model charges), and
the learners' sums at the rate measured at that size with every rank summing at once (the
bench's sum_bytes_per_s, given as --reduce-bandwidth; absent in records of older benches).
The learner links are those of the calibrated topology, or with --learner-links runtime (the
default where the bench measured them) each machine's learner links are set, per size, from the
runtime's own time for that machine's dense steps with every machine at once (the bench's
machine_steps_us: steps 1 and 4 move 2 (n-1)/n of the vector over each learner link and sum
(n-1)/n of it, so the rate is that volume over the time less the sums at the measured rate);
the topology so written is kept beside the point's as topology-runtime-<bytes>.json.
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


def runtime_learner_rates(record, machines, sum_rate):
    """Per machine, the learner-link rate (bytes/s) at which the cost model's steps 1 and 4 take
    the time the runtime took for them (None for a machine of one learner); None when the
    record has no such times or the sums alone exceed one."""
    times = record.get("machine_steps_us")
    if not times:
        return None
    rates = []
    for n, t_us in zip(machines, times):
        if n < 2:
            rates.append(None)
            continue
        moved = 2 * (n - 1) / n * record["bytes"]
        sums = (n - 1) / n * record["bytes"] / sum_rate if sum_rate else 0
        transfers = t_us / 1e6 - sums
        if t_us <= 0 or transfers <= 0:
            print(f"sparse_table.py: {record['bytes']} B: a machine of {n} took {t_us:.0f} us, no more than "
                  f"its sums at the measured rate ({sums * 1e6:.0f} us): its learner links stay as calibrated",
                  file=sys.stderr)
            return None
        rates.append(moved / transfers)
    return rates


def with_learner_rates(topology, rates, path):
    """The topology with each machine's learner links at its rate (machines in the order of the
    root's children, as make_topology.py writes them and the ranks are placed), written to path."""
    tree = json.load(open(topology))
    children = tree["root"]["children"]
    if len(children) != len(rates):
        raise SystemExit(f"sparse_table.py: {topology} has {len(children)} machines, the bench {len(rates)}")
    for machine, rate in zip(children, rates):
        if rate is not None:
            machine["children"][0]["link"]["bandwidth"] = f"{rate / 1e6:.2f} MB/s"
    with open(path, "w") as out:
        json.dump(tree, out, indent=2)
    return path


def rows(directory, flexplan, learner_links):
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
            records += [(r, bench["machines"]) for r in bench["records"]]
        for record, machines in sorted(records, key=lambda x: x[0]["bytes"]):
            largest_slice = math.ceil(record["count"] / min(machines))
            sum_rate = record.get("sum_bytes_per_s") or 0
            rates = runtime_learner_rates(record, machines, sum_rate) if learner_links == "runtime" else None
            point_topology = topology
            if rates:
                point_topology = with_learner_rates(
                    topology, rates, os.path.join(point, f"topology-runtime-{record['bytes']}.json"))
            for s in record["sparse"]:
                mstopk_ns = max(s["mstopk_us"] * 1e3 / largest_slice, 1e-6)
                dense_pred, sparse_pred = predict(flexplan, point_topology, record["dense_algorithm"],
                                                  record["bytes"], s["density"], mstopk_ns, sum_rate)
                yield {
                    "cluster": cluster, "rate": rate, "bytes": record["bytes"], "density": s["density"],
                    "dense_algorithm": record["dense_algorithm"],
                    "dense_s": record["dense_time_us_median"] / 1e6, "dense_pred_s": dense_pred,
                    "sparse_s": s["time_us_median"] / 1e6, "sparse_min_s": s["time_us_min"] / 1e6,
                    "sparse_max_s": s["time_us_max"] / 1e6, "sparse_pred_s": sparse_pred["seconds"],
                    "mstopk_ns": mstopk_ns, "sum_rate": sum_rate, "wrong": s["wrong"], "load": load,
                    "learner_rates": [r for r in rates if r is not None] if rates else None,
                }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--flexplan", required=True, help="the flexplan program")
    parser.add_argument("-o", "--output", help="also write the table here")
    parser.add_argument("--learner-links", choices=["runtime", "topology"], default="runtime",
                        help="runtime: set from the bench's timing of the dense steps within the machines "
                             "where it has one (default); topology: as calibrated")
    args = parser.parse_args()
    lines = [
        "| cluster | link Mbit/s | MiB | density | dense algorithm | dense s | predicted | ratio "
        "| sparse s (min-max) | predicted | ratio | sparse speedup | predicted | MSTopK ns/elem | sums GB/s "
        "| learner links GB/s | #wrong | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    all_rows = list(rows(args.directory, args.flexplan, args.learner_links))
    found = bool(all_rows)
    for r in all_rows:
        sparse_ratio = r["sparse_pred_s"] / r["sparse_s"]
        mark = "*" if abs(sparse_ratio - 1) > 0.15 else ""
        sums = f"{r['sum_rate'] / 1e9:.2f}" if r["sum_rate"] else "-"
        learners = "; ".join(f"{x / 1e9:.2f}" for x in r["learner_rates"]) if r["learner_rates"] else "as calibrated"
        lines.append(
            f"| {r['cluster']} | {r['rate']} | {r['bytes'] / 2**20:g} | {r['density']:g} | {r['dense_algorithm']} "
            f"| {r['dense_s']:.3f} | {r['dense_pred_s']:.3f} | {r['dense_pred_s'] / r['dense_s']:.2f} "
            f"| {r['sparse_s']:.3f} ({r['sparse_min_s']:.3f}-{r['sparse_max_s']:.3f}) | {r['sparse_pred_s']:.3f} "
            f"| {sparse_ratio:.2f}{mark} | {r['dense_s'] / r['sparse_s']:.1f}x "
            f"| {r['dense_pred_s'] / r['sparse_pred_s']:.1f}x | {r['mstopk_ns']:.2f} | {sums} | {learners} "
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
