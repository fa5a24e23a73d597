#!/usr/bin/env python3
"""The time per call of bench/cluster/replan.sh's runs as an SVG line chart (docs/results.md).

    replan_plot.py OUT.svg off.txt auto.txt ...   (lines "call seconds wrong generation"; the
    legend names each run by its file name)
"""
import sys

from svgplot import Chart


def read(path):
    points = []
    for line in open(path):
        words = line.split()
        if len(words) == 4 and not line.startswith("#"):
            points.append((int(words[0]), float(words[1])))
    return points


def main():
    out, runs = sys.argv[1], sys.argv[2:]
    chart = Chart("8 MiB all-reduce, 2+3+2 learners; machine 0 at 50 Mbit/s after call 20, back after 45",
                  "call", "seconds per call (slowest rank)")
    colors = ["#7f7f7f", "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]
    for i, path in enumerate(runs):
        name = path.rsplit("/", 1)[-1].split(".")[0]  # off, auto-run1, ...
        chart.add(f"FLEXPLAN_REPLAN={name}", read(path), color=colors[i % len(colors)])
    open(out, "w").write(chart.svg())


if __name__ == "__main__":
    main()
