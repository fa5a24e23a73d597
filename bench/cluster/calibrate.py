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

With --learners-at-once, a learner's link gets instead the bandwidth measured with every learner
of every machine sending and receiving at the same time (in each machine with two or more
learners, a ring of ucx_perftest pairs, all running together), with the runtime's eager 1 MiB
messages: the emulated machines share this host's cores and memory, so a step that moves data
inside every machine at once sees that rate, not one pair's (docs/sparse.md).

    calibrate.py [-o calibration.json] [--learners-at-once]   (needs root and a cluster that passed check)
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


BLOCKING = ("-E", "sleep", "-I")  # ucx_perftest waits as the runtime's blocking mode does


def perftest_result(out, what):
    """ucx_perftest's final result line as numbers: iterations, latency p50/avg/overall (us,
    one-way), bandwidth avg/overall (MiB/s), msg rates."""
    fields = out.split()
    if len(fields) < 8:
        raise CalibrationError(f"ucx_perftest {what} printed no result")
    return [float(x) for x in fields[:8]]


def perftest(server, client, *args):
    """One ucx_perftest run in blocking mode (perftest_result)."""
    out = cluster("perftest", str(server), str(client), "13381", *args, *BLOCKING)
    return perftest_result(out, f"{server}<-{client} {' '.join(args)}")


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


def intra_bandwidth_all_learners_bytes_per_s(learners, alone_bytes_per_s):
    """The median rate of one ucx_perftest pair while every learner sends to the next one of its
    machine (a ring per machine) and all pairs run at once: each learner is one pair's sender and
    another's receiver, as in a reduce-scatter step inside every machine. Sent as the runtime
    sends: 1 MiB messages (its chunk size), eager (UCX_RNDV_THRESH=inf, as the runtime sets it).
    Each run moves what one pair alone moves in 1 s, shared among all pairs: runs last several
    seconds (at once, ten learners on two cores moved as little as 1/67 of the rate of one pair
    alone), so the pairs' half-second start-up stagger is a small part of each."""
    pairs = [machine for machine, count in enumerate(learners) if count >= 2 for _ in range(count)]
    if not pairs:
        raise CalibrationError("--learners-at-once: no machine has two learners")
    message = 1 << 20
    iterations = str(max(200, int(alone_bytes_per_s / len(pairs) / message)))
    env = dict(os.environ, UCX_RNDV_THRESH="inf")
    rates = []
    for _ in range(REPEATS):
        runs = [subprocess.Popen([CLUSTER, "perftest", str(machine), str(machine), str(13400 + i),
                                  "-t", "tag_bw", "-s", str(message), "-n", iterations, "-w", "20",
                                  *BLOCKING], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env)
                for i, machine in enumerate(pairs)]
        for run in runs:
            out, err = run.communicate()
            what = f"with every learner at once ({err.strip()[-200:]})"
            if run.returncode != 0:
                raise CalibrationError(f"ucx_perftest {what} failed")
            rates.append(perftest_result(out, what)[5] * 2**20)
    return statistics.median(rates)


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


def calibrate(learners_at_once=False):
    config = cluster_config()
    machines = len(config["rates"])
    delays = config["delays_us"]
    goodput = link_goodput_mbit(config["run_dir"], machines)

    intra_us = one_way_latency_us(0, 0, 20)
    intra_bw = intra_bandwidth_bytes_per_s()
    all_bw = (intra_bandwidth_all_learners_bytes_per_s(config["learners"], intra_bw) if learners_at_once
              else None)
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
            "intra_machine_bandwidth_all_learners_bytes_per_s": all_bw,
            "cross_machine_latency_us": pairs,
        },
        "model": {
            "learner_link": {"bandwidth_bytes_per_s": all_bw if learners_at_once else intra_bw,
                             "latency_s": learner_latency,
                             "bandwidth_measured": ("every learner at once" if learners_at_once
                                                    else "one pair alone")},
            "machine_links": machine_links,
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", help="write the JSON here (default: stdout)")
    parser.add_argument("--learners-at-once", action="store_true",
                        help="learner links at the rate measured with every learner sending at once")
    args = parser.parse_args()
    try:
        result = calibrate(args.learners_at_once)
    except (CalibrationError, KeyError, ValueError) as e:
        print(f"calibrate.py: {e}", file=sys.stderr)
        return 1
    write_json(result, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
