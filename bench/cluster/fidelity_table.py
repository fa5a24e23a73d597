#!/usr/bin/env python3
"""Prints whatif_fidelity.sh's results as markdown tables: predicted beside measured.

    fidelity_table.py DIR [-o fidelity.md]

DIR/<cluster>/<rate>mbit/ holds one point: train_step.json (flexplan_train_step --json), and
whatif.json, whatif-hops.json, whatif-swept.json (flexplan whatif --format json on the point's
calibrated topology, the same with the measured hop cost, and from the first rate's calibration
with the machine links set to this rate). A ratio is predicted / measured; one off by more
than 10% is marked *.
"""
import argparse
import json
import os
import re
import sys

TOLERANCE = 0.10


def read_json(path):
    with open(path) as f:
        return json.load(f)


def points(root):
    """(cluster, rate, directory) in cluster order as run, rates ascending."""
    found = []
    for cluster in sorted(os.listdir(root)):
        cdir = os.path.join(root, cluster)
        if not os.path.isdir(cdir) or not re.fullmatch(r"\d+(\+\d+)+", cluster):
            continue
        for name in os.listdir(cdir):
            m = re.fullmatch(r"(\d+)mbit", name)
            if m:
                found.append((cluster, int(m.group(1)), os.path.join(cdir, name)))
    return sorted(found, key=lambda p: (len(p[0]), p[0], p[1]))


def ratio(predicted, measured):
    if predicted is None or not measured:
        return "n/a"
    r = predicted / measured
    return f"{r:.2f}{'*' if abs(r - 1) > TOLERANCE else ''}"


def seconds(value):
    return "n/a" if value is None else f"{value:.3f}"


def whatif_point(path):
    if not os.path.exists(path):
        return None
    data = read_json(path)
    if len(data["points"]) != 1:
        raise ValueError(f"{path}: expected one point, found {len(data['points'])}")
    return data["points"][0]


def size_time(point, size):
    if point is None:
        return None
    for s in point["sizes"]:
        if s["bytes"] == size:
            return s["time_s"]
    return None


def tables(root):
    step_rows, allreduce_rows, failed = [], [], []
    for cluster, rate, d in points(root):
        if os.path.exists(os.path.join(d, "failed.txt")):
            with open(os.path.join(d, "failed.txt")) as f:
                failed.append(f"- {cluster} at {rate} Mbit/s: {f.read().strip()}")
            continue
        step = read_json(os.path.join(d, "train_step.json"))
        plain = whatif_point(os.path.join(d, "whatif.json"))
        hops = whatif_point(os.path.join(d, "whatif-hops.json"))
        swept = whatif_point(os.path.join(d, "whatif-swept.json"))
        hop_us = read_json(os.path.join(d, "hops.json"))["hop_overhead_s"] * 1e6
        load = open(os.path.join(d, "load.txt")).read().split()[0] if os.path.exists(os.path.join(d, "load.txt")) else "?"
        measured = step["step_s"]["median"]
        algorithms = ", ".join(dict.fromkeys(b["algorithm"] for b in step["buckets"]))
        predicted = {k: (p["step"]["step_s"] if p and p.get("step") else None)
                     for k, p in (("plain", plain), ("hops", hops), ("swept", swept))}
        step_rows.append(
            f"| {cluster} | {rate} | {algorithms} | {measured:.3f} ({step['step_s']['min']:.3f}-{step['step_s']['max']:.3f}) "
            f"| {seconds(predicted['plain'])} | {ratio(predicted['plain'], measured)} "
            f"| {seconds(predicted['hops'])} | {ratio(predicted['hops'], measured)} "
            f"| {seconds(predicted['swept'])} | {ratio(predicted['swept'], measured)} "
            f"| {seconds(step['model_with_alone_s'])} | {ratio(step['model_with_alone_s'], measured)} "
            f"| {step['workload']['compute_s']:.3f} | {load} |")
        by_size = {}
        for b in step["buckets"]:
            by_size.setdefault(b["bytes"], []).append(b)
        for size, buckets in by_size.items():
            alone = buckets[0]["alone_s"]
            in_step = sorted(b["allreduce_s"] for b in buckets)[len(buckets) // 2]
            p, ph = size_time(plain, size), size_time(hops, size)
            allreduce_rows.append(
                f"| {cluster} | {rate} | {size} | {buckets[0]['algorithm']} | {seconds(alone)} | {seconds(in_step)} "
                f"| {seconds(p)} | {ratio(p, alone)} | {seconds(ph)} | {ratio(ph, alone)} | {hop_us:.0f} |")
    out = ["Training step (median of the timed steps, slowest rank; ratio = predicted / measured, "
           "* where off by more than 10%):", "",
           "| cluster | link Mbit/s | algorithm | measured s (min-max) | predicted s | ratio "
           "| with hop cost s | ratio | from the first rate's calibration s | ratio "
           "| step model on the all-reduces timed alone s | ratio | compute s | load |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", *step_rows, "",
           "One bucket's all-reduce (timed alone, and inside the step: the median bucket):", "",
           "| cluster | link Mbit/s | bytes | algorithm | alone s | in the step s | predicted s | ratio "
           "| with hop cost s | ratio | hop cost us |",
           "|---|---|---|---|---|---|---|---|---|---|---|", *allreduce_rows]
    if failed:
        out += ["", "Points that failed:", *failed]
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="whatif_fidelity.sh's output directory")
    parser.add_argument("-o", "--output", help="also write the tables here")
    args = parser.parse_args()
    try:
        text = tables(args.dir)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"fidelity_table.py: {args.dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
