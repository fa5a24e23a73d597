"""Times the PyTorch backend's all-gather (all_gather_into_tensor) natively, through the plan's
all-gather schedule, against the all-reduce-based path it replaces (Options(via_allreduce=True)),
and gloo's all_gather, side by side in one job.

    bench/pytorch/allgather_torch.py --flexplan build/flexplan --np 3 4 5 [--mib 16 ...] [--iters 20]
    MASTER_ADDR=... MASTER_PORT=... mpirun -np P bench/pytorch/allgather_torch.py --launcher mpirun \
        --plan plan.bin [--mib 1 4 16 64] [--iters 20] [--json out.json]

One host (the first form): for each rank count, plans a one-machine topology of that many
learners with `--collectives allreduce,allgather` and starts the ranks itself. Under a launcher
(the second form; bench/cluster/torch_collectives.sh runs it on the emulated cluster): this
process is one rank, RANK/WORLD_SIZE from OMPI_COMM_WORLD_RANK/SIZE (or RANK/WORLD_SIZE), the
store at MASTER_ADDR:MASTER_PORT (rank 0's address), and the plan is the caller's, which must
hold allreduce and allgather. Each rank is also in a gloo group. For each size the three paths
run one round each per iteration (interleaved, the order rotating, so that load on the host and
the links' state weigh on all alike), after two warm-up rounds. The all-gather's output is
--mib MiB of float32 (each rank contributes 1/P of it, rounded down to whole elements). Every
round is checked: every rank's block must arrive. Prints the median time over the iterations
(the slowest rank's, per round) of each path and the ratio native / all-reduce path; --json
writes every round's times too. docs/pytorch.md and docs/results.md have results.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PATHS = ["native", "via_allreduce", "gloo"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def topology(np_):
    return {"name": f"one-machine-{np_}",
            "root": {"name": "switch", "children": [
                {"name": "m0", "link": {"bandwidth": "10 Gbit/s", "latency": "50 us"},
                 "children": [{"name": "gpu{i}", "count": np_,
                               "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}}


def job_rank_and_size():
    """The one-host mode sets RANK/WORLD_SIZE; mpirun sets OMPI_COMM_WORLD_*."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "OMPI_COMM_WORLD_RANK" not in os.environ:
        sys.exit("allgather_torch.py: --launcher: neither RANK/WORLD_SIZE nor OMPI_COMM_WORLD_RANK/SIZE is set "
                 "(start it with mpirun)")
    return int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])


def measure(dist, torch, groups, rank, world, mib, iters):
    """Times the three paths at one size, interleaved; every round checked. Returns every
    round's time of each path (the slowest rank's), warm-up rounds left out."""
    native, old, gloo = groups
    count = mib * 2 ** 20 // 4 // world
    shard = torch.full((count,), float(rank + 1))
    out = torch.empty(count * world)
    outs = [torch.empty(count) for _ in range(world)]
    want = torch.arange(1, world + 1, dtype=torch.float32).repeat_interleave(count)
    paths = {
        "native": lambda: dist.all_gather_into_tensor(out, shard, group=native),
        "via_allreduce": lambda: dist.all_gather_into_tensor(out, shard, group=old),
        "gloo": lambda: dist.all_gather(outs, shard, group=gloo),
    }
    times = {name: [] for name in paths}
    for it in range(iters + 2):
        for k in range(len(PATHS)):
            name = PATHS[(it + k) % len(PATHS)]
            out.zero_()
            for o in outs:
                o.zero_()
            dist.barrier(group=gloo)
            start = time.perf_counter()
            paths[name]()
            elapsed = time.perf_counter() - start
            got = torch.cat(outs) if name == "gloo" else out
            # Every rank's verdict travels with its time: a wrong block anywhere fails the run.
            wrong = 0.0 if torch.equal(got, want) else 1.0
            slowest = torch.tensor([elapsed, wrong], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=gloo)
            if slowest[1].item() != 0:
                raise AssertionError(f"{name}, {mib} MiB, round {it}: a rank's result is wrong"
                                     + (" (this one)" if wrong else ""))
            if it >= 2:
                times[name].append(slowest[0].item())
    return times


def rank_main(args):
    import torch
    import torch.distributed as dist
    import flexplan_torch

    rank, world = job_rank_and_size()
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        sys.exit("allgather_torch.py: set MASTER_ADDR and MASTER_PORT (rank 0's address and a free port)")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("flexplan", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=args.timeout),
                            pg_options=flexplan_torch.Options(plan=args.plan))
    native = dist.distributed_c10d._get_default_group()
    old = dist.new_group(backend="flexplan", pg_options=flexplan_torch.Options(plan=args.plan, via_allreduce=True))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=args.timeout))
    results = []
    for mib in args.mib:
        times = measure(dist, torch, (native, old, gloo), rank, world, mib, args.iters)
        median = {name: statistics.median(t) for name, t in times.items()}
        results.append({"mib": mib, "ranks": world, "iters": args.iters, "median_s": median, "rounds_s": times})
        if rank == 0:
            print("RESULT " + json.dumps({"mib": mib, **median}), flush=True)
    assert native.fallbacks == [], native.fallbacks
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "load": open("/proc/loadavg").read().split()[:3]}, f, indent=1)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flexplan", help="the flexplan binary (plans; one-host mode)")
    parser.add_argument("--np", type=int, nargs="+", default=[3, 4, 5], help="rank counts (one-host mode)")
    parser.add_argument("--mib", type=int, nargs="+", default=[16], help="the all-gather's output, MiB")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--launcher", choices=["mpirun"],
                        help="this process is one rank of a job another launcher started (needs --plan)")
    parser.add_argument("--plan", help="the plan (--launcher): allreduce and allgather planned")
    parser.add_argument("--json", help="write every round's times here (rank 0; --launcher)")
    parser.add_argument("--timeout", type=float, default=300, help="process group timeout, seconds")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)  # one rank of the one-host job
    args = parser.parse_args()
    if args.iters < 1 or any(m < 1 for m in args.mib):
        parser.error("--iters and --mib must be positive")
    if args.rank or args.launcher:
        if not args.plan:
            parser.error("--launcher needs --plan")
        rank_main(args)
        return
    if not args.flexplan:
        parser.error("--flexplan is required (or --launcher)")
    rows = []
    for np_ in args.np:
        with tempfile.TemporaryDirectory(prefix="flexplan-allgather-") as scratch:
            topo = os.path.join(scratch, "topology.json")
            with open(topo, "w") as f:
                json.dump(topology(np_), f)
            plan = os.path.join(scratch, "plan.bin")
            subprocess.run([args.flexplan, topo, "--collectives", "allreduce,allgather", "-o", plan],
                           check=True, stdout=subprocess.DEVNULL)
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(np_))
            env.setdefault("OMP_NUM_THREADS", "1")
            procs = [subprocess.Popen([sys.executable, __file__, "--rank", "--plan", plan,
                                       "--mib", *map(str, args.mib), "--iters", str(args.iters),
                                       "--timeout", str(args.timeout)],
                                      env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True) for r in range(np_)]
            outputs = [p.communicate()[0] for p in procs]
            if any(p.returncode for p in procs):
                for r, out in enumerate(outputs):
                    print(f"----- rank {r}\n{out}")
                sys.exit(f"{np_} ranks: a rank failed")
            for line in outputs[0].splitlines():
                if line.startswith("RESULT "):
                    rows.append((np_, json.loads(line[len("RESULT "):])))
    print(f"all_gather_into_tensor (float32 output), one host, median of {args.iters}, slowest rank per round")
    print(f"{'ranks':>5}  {'MiB':>4}  {'native ms':>10}  {'via all-reduce ms':>17}  {'gloo ms':>8}  "
          f"{'native / via all-reduce':>23}")
    for np_, r in rows:
        print(f"{np_:>5}  {r['mib']:>4}  {r['native'] * 1e3:>10.2f}  {r['via_allreduce'] * 1e3:>17.2f}  "
              f"{r['gloo'] * 1e3:>8.2f}  {r['native'] / r['via_allreduce']:>23.2f}")


if __name__ == "__main__":
    main()
