"""Starts N ranks of ddp_worker.py the way torchrun does (RANK, WORLD_SIZE, MASTER_ADDR/PORT),
plans the topology first, and checks every rank's outcome within a time limit:

  launch.py --flexplan build/flexplan --topology T.json --np 3 --expect ok -- --scenario train
  launch.py ... --expect error --dies 2 --pattern "rank 2" -- --scenario dead-peer

--worker names another worker script of this directory (collectives_worker.py). --collectives
and --roots go to the planner; with them an all-reduce-only plan is written too, as
plan-allreduce.bin in the scratch folder that the worker is given.

--expect ok: every rank exits 0, having printed every --pattern. --expect error: every rank except those named by --dies exits
3 having printed EXPECTED-ERROR with every --pattern in it. A rank still running at --limit
seconds is a hang: all are killed and the test fails. The worker's own launchers are torchrun and
mpirun (tests/torch/CMakeLists.txt); this one keeps every rank alive when one dies, as torchrun
would not, to see what the survivors say.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flexplan", required=True)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--np", type=int, required=True)
    # Algorithms the runtime executes today (star ops have no lowering yet).
    parser.add_argument("--algorithms", default="", help="narrow the planner's race (default: all)")
    parser.add_argument("--worker", default="ddp_worker.py")
    parser.add_argument("--collectives", default="", help="collectives to plan (default: the planner's)")
    parser.add_argument("--roots", default="", help="roots to plan broadcast and reduce for; 'all': every rank")
    parser.add_argument("--expect", choices=["ok", "error"], required=True)
    parser.add_argument("--dies", type=int, action="append", default=[])
    parser.add_argument("--pattern", action="append", default=[])
    parser.add_argument("--limit", type=float, default=120)
    parser.add_argument("worker_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    worker_args = [a for a in args.worker_args if a != "--"]

    with tempfile.TemporaryDirectory(prefix="flexplan-torch-") as scratch:
        plan = os.path.join(scratch, "plan.bin")
        narrow = ["--algorithms", args.algorithms] if args.algorithms else []
        roots = ",".join(map(str, range(args.np))) if args.roots == "all" else args.roots
        subprocess.run([args.flexplan, args.topology, "-o", plan] + narrow
                       + (["--collectives", args.collectives] if args.collectives else [])
                       + (["--roots", roots] if roots else []),
                       check=True, stdout=subprocess.DEVNULL)
        if args.collectives:
            subprocess.run([args.flexplan, args.topology, "--collectives", "allreduce",
                            "-o", os.path.join(scratch, "plan-allreduce.bin")] + narrow,
                           check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   WORLD_SIZE=str(args.np), LOCAL_WORLD_SIZE=str(args.np))
        procs = []
        start = time.monotonic()
        for rank in range(args.np):
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(HERE, args.worker), "--plan", plan,
                 "--scratch", scratch, *worker_args],
                env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True))
        outputs, hung = [], False
        for proc in procs:
            left = max(0.1, args.limit - (time.monotonic() - start))
            try:
                out, _ = proc.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                hung = True
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            outputs.append(out)
        elapsed = time.monotonic() - start

    failures = []
    for rank, (proc, out) in enumerate(zip(procs, outputs)):
        print(f"----- rank {rank}: exit {proc.returncode}\n{out.rstrip()}")
        if rank in args.dies:
            continue
        if args.expect == "ok":
            if proc.returncode != 0:
                failures.append(f"rank {rank} exited {proc.returncode}")
            for pattern in args.pattern:
                if pattern not in out:
                    failures.append(f"rank {rank}: the output does not mention '{pattern}'")
            continue
        if proc.returncode != 3:
            failures.append(f"rank {rank} exited {proc.returncode}, not 3 (a clear Python exception)")
            continue
        message = out.split("EXPECTED-ERROR:", 1)[1] if "EXPECTED-ERROR:" in out else ""
        for pattern in args.pattern:
            if pattern not in message:
                failures.append(f"rank {rank}: the error does not mention '{pattern}'")
    if hung:
        failures.append(f"ranks still running after {args.limit} s were killed (a hang)")
    print(f"----- {args.np} ranks finished in {elapsed:.1f} s")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
