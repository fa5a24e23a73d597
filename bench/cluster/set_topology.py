#!/usr/bin/env python3
"""Writes the topology JSON of the emulated cluster from the figures it was set up with (no
calibration): every machine link and rack uplink at its set rate as TCP payload (rate x
1448/1514, what `cluster.sh check` confirms each link carries), machine latency its added delay
plus a base, learner links a fixed shared-memory figure. The probe's benchmark plans from it as
the "true" topology (docs/probe.md).

    set_topology.py CONFIG [-o topology.json] [--base-latency-us 20] [--learner "1 GB/s"]

CONFIG is the cluster's config file (`cluster.sh config` prints it; /run/PREFIX/config).
"""
import argparse
import json
import shlex
import sys

PAYLOAD = 1448 / 1514


def mbit(rate):
    if rate.endswith("gbit"):
        return float(rate[:-4]) * 1000
    if rate.endswith("mbit"):
        return float(rate[:-4])
    if rate.endswith("kbit"):
        return float(rate[:-4]) / 1000
    raise ValueError(f"rate {rate!r}: only shaped rates (NUMgbit, NUMmbit, NUMkbit) have a set figure")


def read_config(path):
    config = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            if key:
                config[key] = " ".join(shlex.split(value))
    return config


def topology(config, base_us, learner_bw, learner_lat):
    rates = config["RATES"].split()
    learners = [int(x) for x in config["LEARNERS"].split()]
    delays = [int(x) for x in config["DELAYS"].split()]
    racks = config.get("RACKS", "").split()
    rack_rates = config.get("RACK_RATES", "").split()
    learner_link = {"bandwidth": learner_bw, "latency": learner_lat}
    rank = 0

    def machine(i):
        nonlocal rank
        kids = []
        for _ in range(learners[i]):
            kids.append({"name": f"learner{rank}", "rank": rank, "link": learner_link})
            rank += 1
        return {"name": f"n{i}",
                "link": {"bandwidth": f"{mbit(rates[i]) * PAYLOAD:.4f} Mbit/s",
                         "latency": f"{delays[i] + base_us:.2f} us"},
                "children": kids}

    children, placed = [], set()
    for i in range(len(rates)):
        if i in placed:
            continue
        k = racks[i] if racks else "-"
        if k == "-":
            children.append(machine(i))
            placed.add(i)
            continue
        members = [j for j in range(len(rates)) if racks[j] == k]
        placed.update(members)
        children.append({"name": f"rack{k}",
                         "link": {"bandwidth": f"{mbit(rack_rates[int(k)]) * PAYLOAD:.4f} Mbit/s",
                                  "latency": "0 us"},
                         "children": [machine(j) for j in members]})
    shape = "+".join(map(str, learners))
    return {"name": f"emu-set-{shape}",
            "description": f"Emulated cluster as set: rates {' '.join(rates)}, learners {shape}, "
                           f"racks {' '.join(racks) or 'none'} at {' '.join(rack_rates) or '-'}",
            "root": {"name": "switch", "children": children}}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("-o", "--output")
    p.add_argument("--base-latency-us", type=float, default=20)
    p.add_argument("--learner", default="1 GB/s")
    p.add_argument("--learner-latency", default="5 us")
    a = p.parse_args()
    try:
        t = topology(read_config(a.config), a.base_latency_us, a.learner, a.learner_latency)
    except (OSError, ValueError, KeyError, IndexError) as e:
        print(f"set_topology.py: {a.config}: {e}", file=sys.stderr)
        return 2
    text = json.dumps(t, indent=1) + "\n"
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
