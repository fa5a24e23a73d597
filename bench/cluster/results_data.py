"""Reads one run-experiments.sh result directory into plain Python data.

    configs = load_results(DIR)   # one dict per configuration, in run order

A configuration dict holds: id, set, learners [per machine], rates, delays_us, skipped (a
reason or None), calibration (calibrate.py's JSON), algorithms (those measured),
measured[algorithm][bytes] = {median, min, max, wrong} in seconds, mpi[bytes] = {median, min,
max}, predicted[algorithm][bytes] = seconds, floor[bytes] = seconds (the physical lower bound),
chosen[bytes] = the schedule the default plan ran, calls (reduce calls per learner of the
FlexReduce plan), load. "default" is the plan flexplan writes when no algorithm is forced.
"""
import json
import math
import os
import statistics
import sys

ALGORITHMS = ["default", "flexreduce", "ring", "blueconnect", "hierarchical"]
OLD_RUN_ALGORITHMS = ["flexreduce", "ring", "blueconnect", "hierarchical"]  # before "algorithms="


def _read_config(path):
    config = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            config[key] = value
    return config


def load_flexbench(path):
    """flexbench --json: {"records": [...]}, one record per size: bytes, algorithm,
    time_us_median/min/max, wrong (null when unchecked), mpi_time_us_median (null if none).
    Returns measured[algorithm][bytes] = {median, min, max (seconds), wrong} and
    mpi[bytes] = [{median}]."""
    with open(path) as f:
        data = json.load(f)
    measured, mpi = {}, {}
    for r in data["records"]:
        size = int(r["bytes"])
        measured.setdefault(r["algorithm"], {})[size] = {
            "median": r["time_us_median"] * 1e-6,
            "min": r["time_us_min"] * 1e-6,
            "max": r["time_us_max"] * 1e-6,
            "wrong": r["wrong"],  # None: the run did not check
        }
        if r.get("mpi_time_us_median") is not None:
            mpi.setdefault(size, []).append({"median": r["mpi_time_us_median"] * 1e-6})
    return measured, mpi


def load_predictions(path):
    with open(path) as f:
        return parse_predictions(f.read())


def parse_predictions(text):
    """`flexplan predict -a A,B,... --format json` (what run-experiments.sh writes now), or the
    wide text table of results written before 2026-11-29: size, count, then time/algbw/busbw per
    algorithm, then best, /floor and the floor in us, then (from 2026-11-28) the schedule the
    plan command writes and its time in us. Returns times[algorithm][bytes]; the floor goes
    under the key "floor" (absent in files from before predict printed it)."""
    if text.lstrip().startswith("{"):
        times = {}
        for record in json.loads(text)["records"]:
            for algorithm, seconds in record["seconds"].items():
                if seconds is not None:
                    times.setdefault(algorithm, {})[record["bytes"]] = seconds
            times.setdefault("floor", {})[record["bytes"]] = record["floor_seconds"]
        return times
    algorithms, times = [], {}
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("#"):
            if len(fields) >= 3 and fields[2] in ("priced", "no"):
                algorithms.append(fields[1])
            continue
        if len(fields) < 2 + 3 * len(algorithms):
            continue
        size = int(fields[0])
        for k, algorithm in enumerate(algorithms):
            cell = fields[2 + 3 * k]
            if cell != "-":
                times.setdefault(algorithm, {})[size] = float(cell) * 1e-6
        tail = len(fields) - (2 + 3 * len(algorithms))
        floor = fields[-1] if tail == 3 else fields[-3] if tail == 5 else "-"
        if floor != "-":
            times.setdefault("floor", {})[size] = float(floor) * 1e-6
    return times


def reduce_calls(plan_path):
    """Reduce ops per learner in each reduce-scatter step of the plan's first schedule:
    rooted = ops whose result the learner receives (Eq. 12 counts these), joined = ops it
    takes part in. Returns the top step's figures and the totals over all steps."""
    with open(plan_path) as f:
        plan = json.load(f)
    world = plan["world_size"]
    steps = [s for s in plan["schedules"][0]["steps"] if s["phase"] == "reduce_scatter"]
    if not steps:
        return None
    per_step = []
    for step in steps:
        rooted, joined = [0] * world, [0] * world
        for op in step["ops"]:
            if op["op"] != "reduce":
                continue
            rooted[op["root"]] += 1
            for r in set(op["group"]) | {op["root"]}:
                joined[r] += 1
        per_step.append({"level": step["level"], "rooted": rooted, "joined": joined})
    top = max(per_step, key=lambda s: s["level"])
    total = [sum(s["rooted"][r] for s in per_step) for r in range(world)]
    return {"top_level": top["level"], "top_rooted": top["rooted"], "top_joined": top["joined"],
            "total_rooted": total}


def eq12_bound(learners):
    """Eq. 12 for a two-level tree (machines under one switch): the upper bound on the reduce
    calls of a learner at the root step, per learner in rank order."""
    machines = len(learners)
    bounds = []
    for d_v in learners:
        bound = sum(math.ceil(d_m / (d_v * machines)) for d_m in learners) + 1
        bounds += [bound] * d_v
    return bounds


def load_results(directory):
    order = []
    log = os.path.join(directory, "run.log")
    entries = sorted(e for e in os.listdir(directory) if os.path.isdir(os.path.join(directory, e)))
    for entry in entries:
        path = os.path.join(directory, entry)
        if not os.path.exists(os.path.join(path, "config.txt")):
            continue
        raw = _read_config(os.path.join(path, "config.txt"))
        c = {
            "id": raw["id"], "set": raw["set"],
            "learners": [int(x) for x in raw["learners"].split()],
            "rates": raw["rates"].split(), "delays_us": [int(x) for x in raw["delays_us"].split()],
            "iters": int(raw.get("iters", 0)), "skipped": None, "calibration": None,
            "algorithms": raw["algorithms"].split() if "algorithms" in raw else OLD_RUN_ALGORITHMS,
            "measured": {}, "mpi": {}, "predicted": {}, "floor": {}, "chosen": {},
            "calls": None, "load": None,
            "errors": [], "env": raw.get("env", "").strip(),
            # cluster.sh's EMU_CC as the cluster came up; runs before it was recorded ran with
            # the host's default
            "congestion_control": raw.get("congestion_control", "not recorded"),
        }
        skipped = os.path.join(path, "skipped.txt")
        if os.path.exists(skipped):
            c["skipped"] = open(skipped).read().strip()
        if os.path.exists(os.path.join(path, "calibration.json")):
            with open(os.path.join(path, "calibration.json")) as f:
                c["calibration"] = json.load(f)
        if os.path.exists(os.path.join(path, "predict.txt")):
            c["predicted"] = load_predictions(os.path.join(path, "predict.txt"))
            c["floor"] = c["predicted"].pop("floor", {})
        # the default plan's schedules, predicted by name (predict-default.txt)
        by_name = os.path.join(path, "predict-default.txt")
        default_predictions = load_predictions(by_name) if os.path.exists(by_name) else {}
        default_predictions.pop("floor", None)
        # the same model with the runtime's per-hop cost (calibrate_hops.py) added
        with_hops = os.path.join(path, "predict-hops.txt")
        c["predicted_hops"] = load_predictions(with_hops) if os.path.exists(with_hops) else {}
        hops = os.path.join(path, "hops.json")
        c["hops"] = json.load(open(hops)) if os.path.exists(hops) else None
        mpi_runs = {}
        for algorithm in c["algorithms"]:
            bench = os.path.join(path, f"bench-{algorithm}.json")
            if not os.path.exists(bench):
                if not c["skipped"]:
                    c["errors"].append(f"{algorithm}: no flexbench result")
                continue
            try:
                measured, mpi = load_flexbench(bench)
            except (ValueError, KeyError) as e:
                c["errors"].append(f"{algorithm}: unreadable flexbench JSON: {e}")
                continue
            # a plan forced to one algorithm: its records are that algorithm's, whatever label;
            # the default plan's labels name the schedule it ran at each size
            merged = {}
            for label, per_size in measured.items():
                merged.update(per_size)
                if algorithm == "default":
                    for size in per_size:
                        c["chosen"][size] = label
                        t = default_predictions.get(label, {}).get(size)
                        if t is not None:
                            c["predicted"].setdefault("default", {})[size] = t
            c["measured"][algorithm] = merged
            for size, runs in mpi.items():
                mpi_runs.setdefault(size, []).extend(runs)
        # flexbench times MPI_Allreduce in every run (one per algorithm): the median of those
        # medians, with their spread as min and max
        for size, runs in mpi_runs.items():
            medians = [r["median"] for r in runs]
            c["mpi"][size] = {"median": statistics.median(medians), "min": min(medians),
                              "max": max(medians)}
        plan = os.path.join(path, "plan-flexreduce.json")
        if os.path.exists(plan):
            c["calls"] = reduce_calls(plan)
        if os.path.exists(os.path.join(path, "load.txt")):
            c["load"] = open(os.path.join(path, "load.txt")).read().strip()
        order.append(c)
    # keep the order the runner used (run.log lists ids as they start)
    if os.path.exists(log):
        seen = []
        with open(log) as f:
            for line in f:
                word = line.split("] ", 1)[-1].split(":", 1)[0]
                if word not in seen:
                    seen.append(word)
        rank = {cid: i for i, cid in enumerate(seen)}
        order.sort(key=lambda c: rank.get(c["id"], len(rank)))
    return order


def write_json(obj, path=None):
    """Writes obj as indented JSON to path, or to stdout when path is None (the scripts' -o)."""
    text = json.dumps(obj, indent=2) + "\n"
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
