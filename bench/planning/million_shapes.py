#!/usr/bin/env python3
"""Writes the topology JSON of one of the four shapes of a million-learner cluster that the
planner must plan in 10 s and 4 GB (issue 39, docs/planning-speed.md):

    flat       one switch of LEARNERS learners ("count", one link kind)
    wide       LEARNERS / 1000 machines of 1,000 learners each behind one switch
    deep       a binary tree of switches 18 levels deep, 4 learners under each bottom one
               (2^20 = 1,048,576 learners in 19 levels; LEARNERS ignored; a binary tree of
               learners would pass the reader's limit of 2 million nodes)
    generated  bench/planning/asymmetric_tree_json.py's uneven tree (zones, pods, racks, machines)

    bench/planning/million_shapes.py flat 1000000 > /tmp/flat.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import asymmetric_tree_json  # noqa: E402


def link(bandwidth, latency):
    return {"bandwidth": bandwidth, "latency": latency}


def flat(learners):
    return {"name": f"flat-{learners}",
            "root": {"name": "switch", "children": [
                {"name": "gpu", "count": learners, "link": link("100 Gbit/s", "5 us")}]}}


def wide(learners):
    machines = max(1, learners // 1000)
    return {"name": f"wide-{machines}x1000",
            "root": {"name": "switch", "children": [
                {"name": "m", "count": machines, "link": link("400 Gbit/s", "5 us"),
                 "children": [{"name": "gpu", "count": 1000, "link": link("50 GB/s", "1 us")}]}]}}


def deep(levels=19):
    # Learners at depth `levels`; link speeds vary by level, as in real fabrics.
    node = {"name": "gpu", "count": 4, "link": link("50 GB/s", "1 us")}
    for level in range(1, levels):
        speed = ["400 Gbit/s", "200 Gbit/s", "100 Gbit/s"][level % 3]
        node = {"name": f"s{level}_", "count": 2, "link": link(speed, "2 us"), "children": [node]}
    return {"name": f"deep-{levels}-levels", "root": {"name": "root", "children": [node]}}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("flat", "wide", "deep", "generated"):
        sys.exit("usage: million_shapes.py flat|wide|deep|generated [LEARNERS] [SEED]")
    shape = sys.argv[1]
    learners = int(sys.argv[2]) if len(sys.argv) > 2 else 1000000
    if shape == "flat":
        topo = flat(learners)
    elif shape == "wide":
        topo = wide(learners)
    elif shape == "deep":
        topo = deep()
    else:
        seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
        topo = asymmetric_tree_json.tree(learners, seed)
    json.dump(topo, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
