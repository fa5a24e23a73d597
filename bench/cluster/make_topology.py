#!/usr/bin/env python3
"""Writes the topology JSON of the emulated cluster from its calibration (calibrate.py).

One switch at the root, one machine per emulated machine with its measured link, and under
each machine its learners, each with the measured shared-memory link. Learners are written in
machine order, so their ranks (depth-first) match the ranks `cluster.sh mpirun` places on
each machine.

    make_topology.py calibration.json [-o topology.json] [--name NAME]
"""
import argparse
import json
import sys

from results_data import write_json


def mb_per_s(bytes_per_s):
    return f"{bytes_per_s / 1e6:.2f} MB/s"


def microseconds(seconds):
    return f"{seconds * 1e6:.2f} us"


def default_name(calibration):
    c = calibration["cluster"]
    shape = "+".join(str(n) for n in c["learners"])
    rates = "-".join(c["rates"]) if len(set(c["rates"])) > 1 else c["rates"][0]
    name = f"emu-{shape}-{rates}"
    if any(c["delays_us"]):
        name += "-delay" + "-".join(f"{d}us" for d in c["delays_us"])
    return name


def topology(calibration, name=None):
    c = calibration["cluster"]
    model = calibration["model"]
    learner = model["learner_link"]
    learner_link = {"bandwidth": mb_per_s(learner["bandwidth_bytes_per_s"]),
                    "latency": microseconds(learner["latency_s"])}
    machines = []
    for i, (count, link) in enumerate(zip(c["learners"], model["machine_links"])):
        machines.append({
            "name": f"n{i}",
            "link": {"bandwidth": mb_per_s(link["bandwidth_bytes_per_s"]),
                     "latency": microseconds(link["latency_s"])},
            "children": [{"name": "learner{i}", "count": count, "link": learner_link}],
        })
    description = (
        f"Emulated cluster: {len(machines)} machines with {'+'.join(map(str, c['learners']))} "
        f"learners, links set to {', '.join(c['rates'])}, added one-way delay "
        f"{', '.join(str(d) for d in c['delays_us'])} us; figures calibrated by calibrate.py.")
    return {"name": name or default_name(calibration), "description": description,
            "root": {"name": "switch", "children": machines}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("calibration", help="calibrate.py's JSON")
    parser.add_argument("-o", "--output", help="write here (default: stdout)")
    parser.add_argument("--name", help="topology name (default: from the configuration)")
    args = parser.parse_args()
    try:
        with open(args.calibration) as f:
            calibration = json.load(f)
        result = topology(calibration, args.name)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"make_topology.py: {args.calibration}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    write_json(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
