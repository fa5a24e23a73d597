#!/usr/bin/env python3
"""Bytes each machine link carries, per step, when a plan runs: the plan's ops lowered to hops
as codegen/lowering.hpp lowers them (a reduce is a chain through its group in cyclic order
after the root, ending at the root; a broadcast the mirror), hops between machines counted on
both machines' links. The busiest link of a step bounds that step's time, so the sum over steps
of (busiest link bytes / its bandwidth) is the plan's bandwidth term on the emulated cluster.

    link_load.py PLAN.json LEARNERS_PER_MACHINE [--bytes N]      e.g.  plan.json 3,3,4

PLAN.json is `flexplan inspect plan.bin --format json`. Prints, per step, each machine's bytes
out and in as multiples of n (the message size), and the total of the busiest links.
"""
import argparse
import json
import sys


def chain(op):
    group, root = op["group"], op["root"]
    if root not in group:
        return ([root] + group) if op["op"] == "broadcast" else (group + [root])
    r = group.index(root)
    rest = [group[(r + i) % len(group)] for i in range(1, len(group))]
    return [root] + rest if op["op"] == "broadcast" else rest + [root]


def machine_of_rank(learners):
    out = []
    for m, count in enumerate(learners):
        out += [m] * count
    return out


def step_loads(plan, learners, schedule=0):
    """Per step: (phase, level, out[m], in[m]) in fractions of the message."""
    machine = machine_of_rank(learners)
    sched = plan["schedules"][schedule]
    units = sched["units"]
    result = []
    for step in sched["steps"]:
        out, inn = [0.0] * len(learners), [0.0] * len(learners)
        for op in step["ops"]:
            size = (op["end"] - op["begin"]) / units
            c = chain(op)
            for src, dst in zip(c, c[1:]):
                if machine[src] != machine[dst]:
                    out[machine[src]] += size
                    inn[machine[dst]] += size
        result.append((step["phase"], step["level"], out, inn))
    return result


def busiest_total(loads):
    """Sum over steps of the busiest link direction, in multiples of n (equal link rates)."""
    return sum(max(out + inn) for _, _, out, inn in loads)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("learners", help="learners per machine, comma-separated, in rank order")
    args = parser.parse_args()
    learners = [int(x) for x in args.learners.split(",")]
    with open(args.plan) as f:
        plan = json.load(f)
    if sum(learners) != plan["world_size"]:
        print(f"link_load.py: {sum(learners)} learners given, the plan has {plan['world_size']}",
              file=sys.stderr)
        return 2
    loads = step_loads(plan, learners)
    for phase, level, out, inn in loads:
        print(f"{phase:>15} level {level}: out " + " ".join(f"{x:.3f}" for x in out)
              + "  in " + " ".join(f"{x:.3f}" for x in inn))
    print(f"busiest link, summed over steps: {busiest_total(loads):.3f} n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
