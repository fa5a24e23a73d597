#!/usr/bin/env python3
"""Prints epoch_time.sh's results as a markdown table: median epoch time per backend.

    epoch_table.py DIR [-o epochs.md]

DIR/<configuration>/<backend>-<run>.txt is train_cnn.py's output (rank 0): one line per epoch,
"epoch K: T s (...)". The first epoch of each run is left out when a run has more than one
(it includes DDP's start and the first connections); the median is over the rest of all runs.
"""
import argparse
import os
import re
import statistics
import sys

BACKENDS = {"flexplan": "flexplan", "gloo": "gloo", "hook": "gloo + flexplan hook"}


def read_config(path):
    config = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            config[key] = value
    return config


def epochs_of(path):
    with open(path) as f:
        times = [float(m.group(1)) for m in re.finditer(r"^epoch \d+: ([0-9.]+) s", f.read(), re.M)]
    return times[1:] if len(times) > 1 else times


def table(root):
    rows, notes = [], []
    configs = sorted(d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "config.txt")))
    for cid in configs:
        d = os.path.join(root, cid)
        config = read_config(os.path.join(d, "config.txt"))
        where = f"{cid} | {config['learners'].replace(' ', '+')} | {config['rates'].replace(' ', ', ')}"
        if os.path.exists(os.path.join(d, "skipped.txt")):
            with open(os.path.join(d, "skipped.txt")) as f:
                notes.append(f"- {cid}: skipped: {f.read().strip()}")
            continue
        medians = {}
        for backend in BACKENDS:
            runs = sorted(f for f in os.listdir(d) if re.fullmatch(rf"{backend}-\d+\.txt", f))
            if not runs:
                continue
            times = [t for run in runs for t in epochs_of(os.path.join(d, run))]
            if not times:
                notes.append(f"- {cid}: {BACKENDS[backend]}: no epoch finished (see {d}/{runs[0]})")
                continue
            medians[backend] = (statistics.median(times), times, len(runs))
        for backend, (median, times, runs) in medians.items():
            gloo = medians.get("gloo", (None,))[0]
            versus = f"{median / gloo:.2f}" if gloo else "n/a"
            rows.append(f"| {where} | {BACKENDS[backend]} | {median:.2f} | {runs} | "
                        f"{' '.join(f'{t:.2f}' for t in times)} | {versus} |")
        settings = f"{config['epochs']} epochs of {config['samples']} images per rank, batch {config['batch']}, width {config['width']}"
    mpi = os.path.join(root, "mpi-backend.txt")
    if os.path.exists(mpi):
        with open(mpi) as f:
            notes.append(f"- torch's MPI backend: {f.read().strip()}")
    head = ["Median epoch time (the first epoch of each run left out), train_cnn.py on the emulated cluster:", "",
            "| configuration | learners | link rates | backend | median epoch s | runs | epochs s | / gloo |",
            "|---|---|---|---|---|---|---|---|"]
    tail = [""] + ([f"Settings: {settings}."] if rows else []) + notes
    return "\n".join(head + rows + tail) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="epoch_time.sh's output directory")
    parser.add_argument("-o", "--output", help="also write the table here")
    args = parser.parse_args()
    try:
        text = table(args.dir)
    except (OSError, ValueError, KeyError) as e:
        print(f"epoch_table.py: {args.dir}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
