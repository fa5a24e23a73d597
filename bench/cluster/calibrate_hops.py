#!/usr/bin/env python3
"""Calibrates the runtime's software cost per hop on the emulated cluster.

A hop costs more than the latency of the links it crosses: the receiving learner must wake
(learners block), match the message and post the next one, on 2 cores shared by all learners.
The cost model takes this as `flexplan predict --hop-overhead`. We measure it with a ring
all-reduce of a tiny message, whose 2(P-1) steps are each one hop on every learner at once:

    hop overhead = (measured time - predicted time without overhead) / (2 (P - 1))

With --host-cores C (the learners share one host's C cores: flexplan's --host-cores), a call
also takes at least its hops' overheads over the C cores, so the overhead is the one at which
`flexplan predict --host-cores C` gives the measured time (found by bisection: the price only
grows with the overhead).

    calibrate_hops.py --flexplan BIN --topology TOPO.json --bench RING_BENCH.json
                      [--host-cores C] [-o out.json]

RING_BENCH.json is flexbench --json of the ring plan at one small size (4 KiB, or 64 B timed
with -m: at least one element per learner, so that no step is empty, and a small bandwidth
term).
"""
import argparse
import json
import subprocess
import sys

from results_data import load_flexbench, parse_predictions, write_json


def predicted(flexplan, topology, size, overhead_s, host_cores):
    done = subprocess.run([flexplan, "predict", topology, "-b", str(size), "-e", str(size),
                           "-a", "ring", "--hop-overhead", f"{overhead_s * 1e6:.6f} us",
                           "--host-cores", str(host_cores), "--format", "json"],
                          capture_output=True, text=True, check=True)
    return parse_predictions(done.stdout)["ring"][size]


def calibrate(flexplan, topology, bench, host_cores=0):
    measured, _ = load_flexbench(bench)
    points = [(size, p) for per_size in measured.values() for size, p in per_size.items()]
    if len(points) != 1:
        raise ValueError(f"{bench}: expected one size, found {len(points)}")
    size, point = points[0]
    if point["wrong"] != 0:
        raise ValueError(f"{bench}: the ring run was wrong or unchecked (#wrong = {point['wrong']})")
    with open(topology) as f:
        world = sum(m["children"][0]["count"] for m in json.load(f)["root"]["children"])
    without = predicted(flexplan, topology, size, 0.0, host_cores)
    hops = 2 * (world - 1)
    overhead = max(0.0, (point["median"] - without) / hops)
    if host_cores > 0 and overhead > 0:
        # The latency-bound answer is the most it can be; the cores' floor can reach the
        # measured time sooner.
        low, high = 0.0, overhead
        for _ in range(30):
            middle = (low + high) / 2
            if predicted(flexplan, topology, size, middle, host_cores) < point["median"]:
                low = middle
            else:
                high = middle
        overhead = high
    return {"bytes": size, "learners": world, "ring_hops": hops, "measured_s": point["median"],
            "predicted_without_overhead_s": without, "host_cores": host_cores, "hop_overhead_s": overhead}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flexplan", required=True)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--bench", required=True, help="flexbench --json of the ring plan, one size")
    parser.add_argument("--host-cores", type=int, default=0,
                        help="the learners share one host's cores (flexplan --host-cores); 0: not modelled")
    parser.add_argument("-o", "--output", help="write the JSON here (default: stdout)")
    args = parser.parse_args()
    try:
        result = calibrate(args.flexplan, args.topology, args.bench, args.host_cores)
    except (OSError, ValueError, KeyError, subprocess.CalledProcessError) as e:
        print(f"calibrate_hops.py: {e}", file=sys.stderr)
        return 1
    write_json(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
