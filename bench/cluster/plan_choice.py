#!/usr/bin/env python3
"""Names the schedules a plan runs at a sweep of message sizes, comma-separated and each once.

    plan_choice.py PLAN.json MIN_BYTES MAX_BYTES FACTOR     # PLAN.json: `flexplan inspect --format json`

Sizes are MIN, MIN*FACTOR, ... up to MAX (flexbench's sweep with float32 items). run-experiments.sh
predicts the default plan's time with `flexplan predict -a` these names.
"""
import json
import sys


def chosen(plan, sizes, collective="allreduce"):
    """The algorithms serving `sizes` among the plan's schedules of `collective` (a plan holds
    every collective by default; a schedule without the field is an all-reduce's)."""
    names = []
    schedules = [s for s in plan["schedules"] if s.get("collective", "allreduce") == collective]
    for size in sizes:
        for s in schedules:
            top = s["max_bytes"]
            if s["min_bytes"] <= size and (top is None or size < top):
                if s["algorithm"] not in names:
                    names.append(s["algorithm"])
                break
        else:
            raise ValueError(f"no schedule serves {size} bytes")
    return names


def sweep(low, high, factor):
    size, sizes = low, []
    while size <= high:
        sizes.append(max(4, size // 4 * 4))
        size *= factor
    return sizes


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1]) as f:
            plan = json.load(f)
        low, high, factor = (int(x) for x in sys.argv[2:5])
        print(",".join(chosen(plan, sweep(low, high, factor))))
    except (OSError, ValueError, KeyError) as e:
        print(f"plan_choice.py: {sys.argv[1]}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
