#!/usr/bin/env python3
"""The experiment scripts' readers of flexplan's output (bench/cluster): predict's JSON with the
floor per size, and the default plan's schedule per measured size.

    report_scripts_test.py FLEXPLAN SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

FLEXPLAN, SOURCE = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SOURCE, "bench", "cluster"))
from calibrate_hops import calibrate  # noqa: E402
from plan_choice import chosen, sweep  # noqa: E402
from results_data import parse_predictions  # noqa: E402

TOPOLOGY = os.path.join(SOURCE, "topologies", "two-machines-2+3.json")


def flexplan(*args):
    return subprocess.run([FLEXPLAN, *args], check=True, capture_output=True, text=True).stdout


class PredictTable(unittest.TestCase):
    def test_times_and_floor_per_size(self):
        text = flexplan("predict", TOPOLOGY, "-b", "64K", "-e", "1M", "-f", "4", "-a", "ring,flexreduce", "--format", "json")
        times = parse_predictions(text)
        self.assertEqual(sorted(times), ["flexreduce", "floor", "ring"])
        for name in times:
            self.assertEqual(sorted(times[name]), [65536, 262144, 1048576])
        for size, bound in times["floor"].items():
            self.assertGreater(bound, 0)
            self.assertGreaterEqual(times["ring"][size], bound * 0.999)  # a floor is a lower bound
            self.assertGreaterEqual(times["flexreduce"][size], bound * 0.999)

    def test_names_with_slices_are_columns(self):
        text = flexplan("predict", TOPOLOGY, "-b", "1M", "-e", "1M", "-a", "flexreduce@4", "--format", "json")
        self.assertIn(1048576, parse_predictions(text)["flexreduce@4"])


class CalibrateHops(unittest.TestCase):
    """The cost per hop found from a ring's measured time gives that time back when predicted
    with it: the latency-bound answer without --host-cores, the cores' floor's with them."""

    def ring_bench(self, work, seconds):
        path = os.path.join(work, "ring.json")
        us = seconds * 1e6
        with open(path, "w") as f:
            json.dump({"records": [{"bytes": 64, "algorithm": "ring", "time_us_median": us, "time_us_min": us,
                                    "time_us_max": us, "wrong": 0, "mpi_time_us_median": None}]}, f)
        return path

    def predicted(self, overhead_s, cores):
        text = flexplan("predict", TOPOLOGY, "-b", "64", "-e", "64", "-a", "ring", "--hop-overhead",
                        f"{overhead_s * 1e6:.6f} us", "--host-cores", str(cores), "--format", "json")
        return parse_predictions(text)["ring"][64]

    def test_the_overhead_found_predicts_the_measured_time(self):
        with tempfile.TemporaryDirectory() as work:
            measured = 4 * self.predicted(0, 0)  # well above the ring's path without overheads
            bench = self.ring_bench(work, measured)
            apart = calibrate(FLEXPLAN, TOPOLOGY, bench)
            shared = calibrate(FLEXPLAN, TOPOLOGY, bench, host_cores=2)
        self.assertEqual(apart["ring_hops"], 8)  # 2 (P - 1) for the 5 learners
        self.assertAlmostEqual(self.predicted(apart["hop_overhead_s"], 0) / measured, 1, places=3)
        self.assertAlmostEqual(self.predicted(shared["hop_overhead_s"], 2) / measured, 1, places=3)
        # 40 hops over 2 cores reach the measured time before the path's 8 do
        self.assertLess(shared["hop_overhead_s"], apart["hop_overhead_s"])
        self.assertEqual(shared["host_cores"], 2)


class PlanChoice(unittest.TestCase):
    def test_every_size_finds_the_schedule_serving_it(self):
        with tempfile.TemporaryDirectory() as work:
            plan = os.path.join(work, "plan.bin")
            flexplan(TOPOLOGY, "-o", plan)
            data = json.loads(flexplan("inspect", plan, "--format", "json"))
        sizes = sweep(8, 1 << 30, 2)
        self.assertEqual(sizes[0], 8)
        self.assertEqual(sizes[-1], 1 << 30)
        names = chosen(data, sizes)
        all_reduce = [s for s in data["schedules"] if s["collective"] == "allreduce"]
        self.assertLess(len(all_reduce), len(data["schedules"]))  # every collective by default
        ranges = {s["algorithm"] for s in all_reduce}
        self.assertTrue(set(names) <= ranges, names)
        # a size past every finite bound is served by the open-ended last all-reduce schedule
        # (which may start beyond the sweep: per slice, leader-direct@16 serves 2+3 to 310 TB)
        self.assertIsNone(all_reduce[-1]["max_bytes"])
        beyond = max(s["min_bytes"] for s in all_reduce)
        self.assertEqual(chosen(data, [beyond]), [all_reduce[-1]["algorithm"]])

    def test_a_gap_is_an_error(self):
        plan = {"schedules": [{"algorithm": "ring", "min_bytes": 0, "max_bytes": 100}]}
        with self.assertRaises(ValueError):
            chosen(plan, [200])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
