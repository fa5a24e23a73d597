"""Times the PyTorch backend's all-gather (all_gather_into_tensor) natively, through the plan's
all-gather schedule, against the all-reduce-based path it replaces (Options(via_allreduce=True)),
and gloo's all_gather, side by side in one job on this host.

    bench/pytorch/allgather_torch.py --flexplan build/flexplan --np 3 4 5 [--mib 16] [--iters 20]

For each rank count: plans a one-machine topology of that many learners with
`--collectives allreduce,allgather`, starts the ranks (each also a gloo group), and runs the
three paths in turn, one round each per iteration (interleaved, so that load on the host
weighs on all alike), after two warm-up rounds. The all-gather's output is --mib MiB of
float32 (each rank contributes 1/np of it, rounded down to whole elements). Every round is
checked: every rank's block must arrive. Prints the median time over the iterations (the slowest
rank's, per round) of each path and the ratio native / all-reduce path. docs/pytorch.md has a
result.
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


def rank_main(args):
    import torch
    import torch.distributed as dist
    import flexplan_torch

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("flexplan", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120),
                            pg_options=flexplan_torch.Options(plan=args.plan))
    native = dist.distributed_c10d._get_default_group()
    old = dist.new_group(backend="flexplan", pg_options=flexplan_torch.Options(plan=args.plan, via_allreduce=True))
    gloo = dist.new_group(backend="gloo")
    count = args.mib * 2 ** 20 // 4 // world
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
    for it in range(args.iters + 2):
        for name, run in paths.items():
            out.zero_()
            for o in outs:
                o.zero_()
            dist.barrier(group=gloo)
            start = time.perf_counter()
            run()
            elapsed = time.perf_counter() - start
            got = torch.cat(outs) if name == "gloo" else out
            if not torch.equal(got, want):
                raise AssertionError(f"{name}: wrong result on rank {rank}")
            # The slowest rank's time is the collective's.
            slowest = torch.tensor([elapsed], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=gloo)
            if it >= 2:
                times[name].append(slowest.item())
    assert native.fallbacks == [], native.fallbacks
    if rank == 0:
        print("RESULT " + json.dumps({name: statistics.median(t) for name, t in times.items()}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flexplan", help="the flexplan binary (plans)")
    parser.add_argument("--np", type=int, nargs="+", default=[3, 4, 5])
    parser.add_argument("--mib", type=int, default=16, help="the all-gather's output, MiB")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)  # one rank of the job
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        rank_main(args)
        return
    if not args.flexplan:
        parser.error("--flexplan is required")
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
            procs = [subprocess.Popen([sys.executable, __file__, "--rank", "--plan", plan, "--mib", str(args.mib),
                                       "--iters", str(args.iters)],
                                      env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True) for r in range(np_)]
            outputs = [p.communicate()[0] for p in procs]
            if any(p.returncode for p in procs):
                for r, out in enumerate(outputs):
                    print(f"----- rank {r}\n{out}")
                sys.exit(f"{np_} ranks: a rank failed")
            result = json.loads(outputs[0].split("RESULT ", 1)[1].splitlines()[0])
            rows.append((np_, result))
    print(f"all_gather_into_tensor of {args.mib} MiB (float32 output), one host, median of {args.iters}, "
          f"slowest rank per round")
    print(f"{'ranks':>5}  {'native ms':>10}  {'via all-reduce ms':>17}  {'gloo ms':>8}  {'native / via all-reduce':>23}")
    for np_, r in rows:
        print(f"{np_:>5}  {r['native'] * 1e3:>10.2f}  {r['via_allreduce'] * 1e3:>17.2f}  {r['gloo'] * 1e3:>8.2f}  "
              f"{r['native'] / r['via_allreduce']:>23.2f}")


if __name__ == "__main__":
    main()
