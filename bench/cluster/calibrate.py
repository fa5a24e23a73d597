#!/usr/bin/env python3
"""Measures the emulated cluster that is up and writes the figures its topology is built from.

The planner's model prices a message from learner a to learner b as the latencies of the links
it crosses plus its size over the slowest of them. This script measures, with ucx_perftest (the
transport the runtime uses) and with learners that block rather than spin:
  - the one-way latency and the bandwidth between two learners of one machine (shared memory);
  - the one-way latency between every pair of machines (TCP through both machines' links);
  - each machine link's payload rate, as `cluster.sh check` measured it (check must pass first);
and solves for per-link figures: a learner's link has half the intra-machine latency and the
shared-memory bandwidth; a machine's link has its set rate as payload (check verified it) and
its configured delay plus a measured base latency, fitted over all machine pairs.

    calibrate.py [-o calibration.json]          (needs root and a cluster that passed check)
"""
import argparse
import itertools
import os
import statistics
import subprocess
import sys

from results_data import write_json

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "cluster.sh")
REPEATS = 3  # each latency/bandwidth figure is the median of this many ucx_perftest runs
# A machine link's latency beyond its configured delay must lie in this range (seconds), or the
# delay the packets see is not the delay that was set.
BASE_LATENCY_RANGE = (-20e-6, 300e-6)


# TCP payload per byte on the wire: 1448 of every 1514 (TCP/IP/Ethernet headers, timestamps on)
PAYLOAD_PER_WIRE_BYTE = 1448 / 1514


class CalibrationError(RuntimeError):
    pass


def rate_mbit(rate):
    for suffix, scale in (("gbit", 1000.0), ("mbit", 1.0), ("kbit", 1e-3)):
        if rate.endswith(suffix):
            return float(rate[: -len(suffix)]) * scale
    raise CalibrationError(f"link rate '{rate}' is not NUMgbit, NUMmbit or NUMkbit")


def cluster(*args):
    done = subprocess.run([CLUSTER, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise CalibrationError(f"cluster.sh {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def cluster_config():
    config = {}
    for line in cluster("config").splitlines():
        key, _, value = line.partition("=")
        config[key] = value.strip('"')
    return {
        "rates": config["RATES"].split(),
        "learners": [int(x) for x in config["LEARNERS"].split()],
        "delays_us": [int(x) for x in config["DELAYS"].split()],
        "run_dir": config["RUN"],
    }


def perftest(server, client, *args):
    """One ucx_perftest run in blocking mode; returns its final result line as numbers:
    iterations, latency p50/avg/overall (us, one-way), bandwidth avg/overall (MiB/s), msg rates."""
    out = cluster("perftest", str(server), str(client), "13381", *args, "-E", "sleep", "-I").split()
    if len(out) < 8:
        raise CalibrationError(f"ucx_perftest {server}<-{client} {' '.join(args)} printed no result")
    return [float(x) for x in out[:8]]


def one_way_latency_us(server, client, expected_us):
    # about half a second per run, whatever the delay
    iters = int(max(200, min(5000, 0.5e6 / (2 * expected_us))))
    runs = [perftest(server, client, "-t", "tag_lat", "-s", "8", "-n", str(iters), "-w", "50")[3]
            for _ in range(REPEATS)]
    return statistics.median(runs)


def intra_bandwidth_bytes_per_s():
    runs = [perftest(0, 0, "-t", "tag_bw", "-s", str(4 << 20), "-n", "300", "-w", "20")[5]
            for _ in range(REPEATS)]
    return statistics.median(runs) * 2**20


def link_goodput_mbit(run_dir, machines):
    path = os.path.join(run_dir, "goodput")
    if not os.path.exists(path):
        raise CalibrationError("no link rates measured since the cluster last changed: run "
                               "`cluster.sh check` first (it is the gate before any figure)")
    rates = [{} for _ in range(machines)]
    with open(path) as f:
        for line in f:
            machine, direction, mbit = line.split()
            rates[int(machine)][direction] = float(mbit)
    return rates


def calibrate():
    config = cluster_config()
    machines = len(config["rates"])
    delays = config["delays_us"]
    goodput = link_goodput_mbit(config["run_dir"], machines)

    intra_us = one_way_latency_us(0, 0, 20)
    intra_bw = intra_bandwidth_bytes_per_s()
    pairs = []
    for a, b in itertools.combinations(range(machines), 2):
        pairs.append({"a": a, "b": b,
                      "latency_us": one_way_latency_us(a, b, 50 + delays[a] + delays[b])})

    # a -> b crosses: learner link, machine a's link, machine b's link, learner link.
    learner_latency = intra_us * 1e-6 / 2
    bases = [((p["latency_us"] * 1e-6 - 2 * learner_latency)
              - (delays[p["a"]] + delays[p["b"]]) * 1e-6) / 2 for p in pairs]
    base = statistics.mean(bases)
    for p, b in zip(pairs, bases):
        if not BASE_LATENCY_RANGE[0] <= b <= BASE_LATENCY_RANGE[1]:
            raise CalibrationError(
                f"machines {p['a']}-{p['b']}: one-way latency {p['latency_us']:.1f} us does not fit "
                f"the configured delays {delays[p['a']]} + {delays[p['b']]} us (base {b * 1e6:.1f} us "
                f"per link, outside {BASE_LATENCY_RANGE[0] * 1e6:.0f}..{BASE_LATENCY_RANGE[1] * 1e6:.0f})")
    machine_links = []
    for i, rate in enumerate(config["rates"]):
        if not goodput[i]:
            raise CalibrationError(f"link {i} is unshaped: its rate was not measured")
        machine_links.append({
            # The set rate, as payload: check has just shown the link carries it (within a few
            # percent, which is the noise of a reading, not of the shaper).
            "bandwidth_bytes_per_s": rate_mbit(rate) * 1e6 / 8 * PAYLOAD_PER_WIRE_BYTE,
            "latency_s": max(0.0, base) + delays[i] * 1e-6,
        })
    for p in pairs:
        p["model_us"] = (2 * learner_latency + machine_links[p["a"]]["latency_s"]
                         + machine_links[p["b"]]["latency_s"]) * 1e6

    return {
        "cluster": {k: config[k] for k in ("rates", "learners", "delays_us")},
        "measured": {
            "link_goodput_mbit": goodput,
            "intra_machine_latency_us": intra_us,
            "intra_machine_bandwidth_bytes_per_s": intra_bw,
            "cross_machine_latency_us": pairs,
        },
        "model": {
            "learner_link": {"bandwidth_bytes_per_s": intra_bw, "latency_s": learner_latency},
            "machine_links": machine_links,
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", help="write the JSON here (default: stdout)")
    args = parser.parse_args()
    try:
        result = calibrate()
    except (CalibrationError, KeyError, ValueError) as e:
        print(f"calibrate.py: {e}", file=sys.stderr)
        return 1
    write_json(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
