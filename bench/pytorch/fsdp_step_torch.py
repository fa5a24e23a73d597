"""Times a training step of an FSDP-style loop on the flexplan backend against the same loop on
gloo, side by side in one job, and compares their losses step by step.

    bench/pytorch/fsdp_step_torch.py --flexplan build/flexplan --np 3 [--steps 10] [--width 1024]
    MASTER_ADDR=... MASTER_PORT=... mpirun -np P bench/pytorch/fsdp_step_torch.py --launcher mpirun \\
        --plan plan.bin [--steps 10] [--width 1024] [--json out.json]

The model: --layers Linear(width, width) + ReLU units and a Linear(width, 10) head, each unit
sharded as FSDP shards it (tests/torch/collectives_worker.py, `fsdp`; docs/pytorch.md, ZeRO and
FSDP): its parameters flattened, padded to a multiple of the world size, one shard per rank.
A step gathers every unit's parameters (all asynchronous, each awaited before its unit
computes), runs forward and backward on this rank's batch, reduce-scatters every unit's
gradient (asynchronous, in backward order) and steps SGD on the shard. Per backend:
  flexplan  all_gather_into_tensor and reduce_scatter_tensor: the plan's all-gather and
            reduce-scatter (the plan must hold allgather and reduce_scatter)
  gloo      torch 1.13's gloo has neither: all_gather into views of the same flat buffer, and
            all_reduce of the flat gradient of which the rank keeps its block
Both start from the same model and see the same batches; their steps alternate (interleaved, so
that the host's load weighs on both alike), after --warmup steps of each. Step time: from the
first gather to the updated shard, the slowest rank's; forward and backward alone (the slowest
rank's) are timed too, the compute inside the step. Prints the medians of each and the largest
relative difference of the losses (sums in another order differ in the last bits). One
host (the first form) starts the ranks itself on a one-machine plan; under a launcher, as
allgather_torch.py (bench/cluster/torch_collectives.sh runs it on the emulated cluster).
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

BACKENDS = ["flexplan", "gloo"]


def job_rank_and_size():
    """The one-host mode sets RANK/WORLD_SIZE; mpirun sets OMPI_COMM_WORLD_*."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "OMPI_COMM_WORLD_RANK" not in os.environ:
        sys.exit("fsdp_step_torch.py: --launcher: neither RANK/WORLD_SIZE nor OMPI_COMM_WORLD_RANK/SIZE is set")
    return int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])


def rank_main(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import flexplan_torch

    rank, world = job_rank_and_size()
    if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        sys.exit("fsdp_step_torch.py: set MASTER_ADDR and MASTER_PORT (rank 0's address and a free port)")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group("flexplan", rank=rank, world_size=world, timeout=timeout,
                            pg_options=flexplan_torch.Options(plan=args.plan))
    fx = dist.distributed_c10d._get_default_group()
    gloo = dist.new_group(backend="gloo", timeout=timeout)

    class Unit:
        def __init__(self, module):
            self.params = list(module.parameters())
            flat = torch.cat([p.detach().flatten() for p in self.params])
            self.numel = flat.numel()
            self.shard_size = -(-self.numel // world)
            padded = torch.zeros(self.shard_size * world)
            padded[:self.numel] = flat
            self.shard = padded[rank * self.shard_size:(rank + 1) * self.shard_size].clone()
            self.full = torch.empty_like(padded)
            self.blocks = list(self.full.chunk(world))   # views: gloo's all_gather writes into the buffer
            self.grad = torch.zeros_like(padded)
            self.grad_shard = torch.empty_like(self.shard)

        def gather(self, backend):
            if backend == "flexplan":
                return dist.all_gather_into_tensor(self.full, self.shard, group=fx, async_op=True)
            return dist.all_gather(self.blocks, self.shard, group=gloo, async_op=True)

        def use_full(self):
            offset = 0
            for p in self.params:
                p.data = self.full[offset:offset + p.numel()].view_as(p)
                p.grad = None
                offset += p.numel()

        def reduce_grads(self, backend):
            self.grad[:self.numel] = torch.cat([p.grad.flatten() for p in self.params])
            if backend == "flexplan":
                return dist.reduce_scatter_tensor(self.grad_shard, self.grad, group=fx, async_op=True)
            return dist.all_reduce(self.grad, group=gloo, async_op=True)

        def step(self, backend, lr):
            if backend == "gloo":
                self.grad_shard.copy_(self.grad[rank * self.shard_size:(rank + 1) * self.shard_size])
            self.shard -= lr * self.grad_shard

    def model():
        torch.manual_seed(7)  # the same initial model on every rank and for both backends
        layers = []
        for _ in range(args.layers):
            layers += [nn.Linear(args.width, args.width), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(args.width, 10))

    runs = {}
    for backend in BACKENDS:
        m = model()
        runs[backend] = (m, [Unit(mod) for mod in m if isinstance(mod, nn.Linear)])
    lr = 0.05 / world
    params = sum(u.numel for u in runs["flexplan"][1])
    times = {b: [] for b in BACKENDS}
    computes = {b: [] for b in BACKENDS}  # forward + backward alone, the slowest rank's
    losses = {b: [] for b in BACKENDS}
    for step in range(args.warmup + args.steps):
        gen = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(args.batch, args.width, generator=gen)
        target = torch.randint(0, 10, (args.batch,), generator=gen)
        for k in range(len(BACKENDS)):
            backend = BACKENDS[(step + k) % len(BACKENDS)]
            m, units = runs[backend]
            dist.barrier(group=gloo)
            start = time.perf_counter()
            gathers = [u.gather(backend) for u in units]
            for u, w in zip(units, gathers):
                w.wait()
                u.use_full()
            compute_start = time.perf_counter()
            loss = nn.functional.cross_entropy(m(x), target)
            loss.backward()
            compute = time.perf_counter() - compute_start
            reductions = [u.reduce_grads(backend) for u in reversed(units)]
            for w in reductions:
                w.wait()
            for u in units:
                u.step(backend, lr)
            elapsed = time.perf_counter() - start
            slowest = torch.tensor([elapsed, compute], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=gloo)
            if step >= args.warmup:
                times[backend].append(slowest[0].item())
                computes[backend].append(slowest[1].item())
            losses[backend].append(loss.item())
    # The losses of every rank, both backends: equal but for the order of the sums.
    rel = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses["flexplan"], losses["gloo"]))
    worst = torch.tensor([rel], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=gloo)
    assert fx.fallbacks == [], fx.fallbacks
    if worst.item() > args.tolerance:
        raise AssertionError(f"the losses differ by {worst.item():.3g} (relative) between flexplan and gloo")
    result = {"ranks": world, "params": params, "mib": params * 4 / 2 ** 20, "width": args.width,
              "layers": args.layers, "batch": args.batch, "steps": args.steps,
              "median_s": {b: statistics.median(t) for b, t in times.items()}, "steps_s": times,
              "median_compute_s": {b: statistics.median(t) for b, t in computes.items()}, "compute_s": computes,
              "losses_rank0": losses, "loss_max_rel_diff": worst.item(),
              "load": open("/proc/loadavg").read().split()[:3]}
    if rank == 0:
        print("RESULT " + json.dumps({k: result[k] for k in ("ranks", "mib", "median_s", "median_compute_s",
                                                        "loss_max_rel_diff")}),
              flush=True)
        for i, (a, b) in enumerate(zip(losses["flexplan"], losses["gloo"])):
            print(f"step {i}: loss flexplan {a:.7f} gloo {b:.7f}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flexplan", help="the flexplan binary (plans; one-host mode)")
    parser.add_argument("--np", type=int, default=3, help="ranks (one-host mode)")
    parser.add_argument("--launcher", choices=["mpirun"], help="this process is one rank (needs --plan)")
    parser.add_argument("--plan", help="the plan (--launcher): allgather and reduce_scatter planned")
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4, help="hidden Linear+ReLU units (one more Linear heads them)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10, help="timed steps of each backend")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest relative difference of the losses")
    parser.add_argument("--json", help="write the result here (rank 0; --launcher)")
    parser.add_argument("--timeout", type=float, default=300, help="process group timeout, seconds")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.width, args.layers, args.batch, args.steps) < 1 or args.warmup < 0:
        parser.error("--width, --layers, --batch and --steps must be positive")
    if args.rank or args.launcher:
        if not args.plan:
            parser.error("--launcher needs --plan")
        rank_main(args)
        return
    if not args.flexplan:
        parser.error("--flexplan is required (or --launcher)")
    with tempfile.TemporaryDirectory(prefix="flexplan-fsdp-") as scratch:
        topo = os.path.join(scratch, "topology.json")
        with open(topo, "w") as f:
            json.dump({"name": f"one-machine-{args.np}", "root": {"name": "switch", "children": [
                {"name": "m0", "link": {"bandwidth": "10 Gbit/s", "latency": "50 us"},
                 "children": [{"name": "gpu{i}", "count": args.np,
                               "link": {"bandwidth": "10 GB/s", "latency": "5 us"}}]}]}}, f)
        plan = os.path.join(scratch, "plan.bin")
        subprocess.run([args.flexplan, topo, "--collectives", "allreduce,allgather,reduce_scatter", "-o", plan],
                       check=True, stdout=subprocess.DEVNULL)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(args.np))
        env.setdefault("OMP_NUM_THREADS", "1")
        argv = [sys.executable, __file__, "--rank", "--plan", plan, "--width", str(args.width),
                "--layers", str(args.layers), "--batch", str(args.batch), "--steps", str(args.steps),
                "--warmup", str(args.warmup), "--tolerance", str(args.tolerance), "--timeout", str(args.timeout)]
        procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for r in range(args.np)]
        outputs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        for r, out in enumerate(outputs):
            print(f"----- rank {r}\n{out}")
        sys.exit("a rank failed")
    print(outputs[0], end="")


if __name__ == "__main__":
    main()
