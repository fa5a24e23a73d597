#!/usr/bin/env python3
"""Writes a topology JSON of the same shape as the planning benchmark's generated trees
(asymmetric_trees.hpp: zones of 4-12 pods, pods of 4-10 racks, racks of 6-20 machines, machines
of 1-8 GPUs, uneven link speeds), to time the `flexplan` command end to end on a big cluster.
Same shape, not the same tree: Python's random numbers are not the C++ ones.

    bench/planning/asymmetric_tree_json.py 128000 > /tmp/gen128k.json
    build/flexplan /tmp/gen128k.json -o /tmp/plan.bin
"""
import json
import random
import sys


def machine(rng, index):
    gpus = rng.choice([1, 2, 3, 4, 4, 6, 8, 8])
    big = gpus >= 4
    return gpus, {
        "name": f"m{index}",
        "link": {"bandwidth": "100 Gbit/s" if big else "25 Gbit/s", "latency": "5 us" if big else "10 us"},
        "children": [{"name": "gpu{i}", "count": gpus, "link": {"bandwidth": "12 GB/s", "latency": "2 us"}}],
    }


def pod(rng):
    learners, racks = 0, []
    for r in range(rng.randint(4, 10)):
        machines = []
        for m in range(rng.randint(6, 20)):
            gpus, node = machine(rng, m)
            learners += gpus
            machines.append(node)
        speed = "200 Gbit/s" if rng.random() < 0.5 else "100 Gbit/s"
        racks.append({"name": f"rack{r}", "link": {"bandwidth": speed, "latency": "2 us"}, "children": machines})
    return learners, racks


def tree(target, seed):
    rng = random.Random(seed)
    pods, learners = [], 0
    while learners < target:
        count, racks = pod(rng)
        learners += count
        pods.append(racks)
    zones, next_pod = [], 0
    while next_pod < len(pods):
        members = []
        for p in range(rng.randint(4, 12)):
            if next_pod == len(pods):
                break
            speed = "400 Gbit/s" if rng.random() < 0.5 else "200 Gbit/s"
            members.append({"name": f"pod{p}", "link": {"bandwidth": speed, "latency": "2 us"},
                            "children": pods[next_pod]})
            next_pod += 1
        zones.append({"name": f"zone{len(zones)}", "link": {"bandwidth": "800 Gbit/s", "latency": "3 us"},
                      "children": members})
    return {"name": f"generated-{learners}", "root": {"name": "core", "children": zones}}


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: asymmetric_tree_json.py LEARNERS [SEED] > topology.json")
    json.dump(tree(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 1), sys.stdout)
