"""One rank of the PyTorch backend tests, started by torchrun, mpirun or launch.py.

Scenarios (--scenario):
  train        DDP on flexplan, the DDP hook on gloo+flexplan and plain DDP on gloo train the same
               model on the same data; after every step the parameters must equal gloo's (exactly
               for --data integer, within float tolerance for --data float).
  collectives  all_reduce for every supported dtype and op, async calls outstanding together,
               broadcast, all_gather, barrier, and the errors for what is not supported.
  wrong-plan   rank 1 is given a corrupt plan: every rank must raise.
  wrong-size   the plan is for another world size: every rank must raise.
  bad-setting  rank 1 alone has a malformed FLEXPLAN_TIMEOUT_MS: every rank must raise, naming it.
  dead-peer    the last rank dies after two steps: every other rank must raise, not hang.
  early-exit   the last rank exits (status 0) after two steps, as under torchrun, which then
               waits for the others: they must raise, and UCX must not add its own complaints.
  replan       DDP on flexplan with FLEXPLAN_REPLAN=auto beside gloo, an explicit re-plan mid-run:
               every rank switches at the same call, losses and parameters equal gloo's
               throughout, and the report (flexplan_torch.stats) shows both plans' calls.
Expected failures print "EXPECTED-ERROR: <message>" and exit 3; anything else exits non-zero
with a traceback. launch.py checks the outcome of every rank.
"""
import argparse
import copy
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import flexplan_torch


def job_rank_and_size():
    """torchrun and launch.py set RANK/WORLD_SIZE; mpirun sets OMPI_COMM_WORLD_*."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])


def init(args, plan=None):
    rank, world = job_rank_and_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("flexplan", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout),
                            pg_options=flexplan_torch.Options(plan=plan or args.plan))
    return rank, world


def integer_model():
    """Integer weights: with integer inputs every gradient is an integer, every sum exact."""
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-3, 4, p.shape, dtype=torch.float64))
    return model


def float_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * 4 * 4, 10))


def batch(kind, rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    if kind == "integer":
        x = torch.randint(-4, 5, (6, 8), generator=g).double()
        target = torch.randint(-2, 3, (6, 4), generator=g).double()
        return x, target
    return torch.randn(6, 3, 8, 8, generator=g), torch.randint(0, 10, (6,), generator=g)


def loss_of(kind, out, target):
    # Linear in the output for integer data, so that gradients stay integers.
    return (out * target).sum() if kind == "integer" else nn.functional.cross_entropy(out, target)


def check_equal(kind, name, got, want, step, rank):
    for (pname, a), (_, b) in zip(got.named_parameters(), want.named_parameters()):
        if kind == "integer":
            ok = torch.equal(a, b)
        else:
            ok = torch.allclose(a, b, rtol=1e-5, atol=1e-6)
        if not ok:
            diff = (a - b).abs().max().item()
            raise AssertionError(f"rank {rank} step {step}: {name} parameter {pname} differs from "
                                 f"gloo's by up to {diff}")


def train(args):
    rank, world = init(args)
    gloo = dist.new_group(backend="gloo")
    # Different initial weights per rank: DDP must broadcast rank 0's (over flexplan here).
    torch.manual_seed(7 + rank)
    base = integer_model() if args.data == "integer" else float_model()
    reference = DDP(copy.deepcopy(base), process_group=gloo)
    models = {"backend": DDP(copy.deepcopy(base))}  # the default group: flexplan
    hooked = DDP(copy.deepcopy(base), process_group=gloo)
    hooked.register_comm_hook(flexplan_torch.hook_state(plan=args.plan), flexplan_torch.allreduce_hook)
    models["hook"] = hooked
    for name, model in models.items():
        check_equal(args.data, name + " (initial broadcast)", model.module, reference.module, 0, rank)
    lr = 2.0 ** -5 if args.data == "integer" else 0.05
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=lr) for name, m in [("gloo", reference), *models.items()]}
    for step in range(1, args.steps + 1):
        x, target = batch(args.data, rank, step)
        for name, model in [("gloo", reference), *models.items()]:
            optimizers[name].zero_grad()
            loss_of(args.data, model(x), target).backward()
            optimizers[name].step()
        for name, model in models.items():
            check_equal(args.data, name, model.module, reference.module, step, rank)
    print(f"rank {rank}: {args.steps} steps, parameters equal gloo's after each "
          f"({args.data} data, backend and hook, learner {dist.distributed_c10d._get_default_group().learner_name})")


def expected_allreduce(dtype, op, world, make):
    inputs = [make(r) for r in range(world)]
    stack = torch.stack([t.double() for t in inputs])
    if op == dist.ReduceOp.SUM:
        out = stack.sum(0)
    elif op == dist.ReduceOp.PRODUCT:
        out = stack.prod(0)
    elif op == dist.ReduceOp.MIN:
        out = stack.min(0).values
    elif op == dist.ReduceOp.MAX:
        out = stack.max(0).values
    else:  # AVG: integers truncate toward zero
        out = stack.sum(0) / world
        if not dtype.is_floating_point:
            out = torch.trunc(out)
    return out.to(dtype)


def collectives(args):
    rank, world = init(args)
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT]
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8]
    for dtype in dtypes:
        for op in ops:
            # Small integers (exact in every type; uint8 sums and products stay below 256).
            def make(r, dtype=dtype):
                g = torch.Generator().manual_seed(r * 31 + 5)
                low = 0 if dtype == torch.uint8 else -3
                return torch.randint(low, 4, (1003,), generator=g).to(dtype)
            t = make(rank)
            dist.all_reduce(t, op=op)
            want = expected_allreduce(dtype, op, world, make)
            if not torch.equal(t, want):
                raise AssertionError(f"all_reduce {dtype} {op}: got {t[:8]} want {want[:8]}")
    # Several outstanding, completed in reverse order, one of them non-contiguous.
    tensors = [torch.full((n,), float(rank + 1)) for n in (10, 100000, 7, 3000)]
    tensors.append(torch.arange(12.0).reshape(3, 4).t() * (rank + 1))
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in reversed(works):
        w.wait()
        assert w.is_completed()
    total = world * (world + 1) / 2
    for t in tensors[:4]:
        assert torch.equal(t, torch.full_like(t, total)), t[:4]
    assert torch.equal(tensors[4], torch.arange(12.0).reshape(3, 4).t() * total)
    fut = dist.all_reduce(torch.ones(5), async_op=True).get_future()
    assert torch.equal(fut.wait()[0], torch.full((5,), float(world)))
    # Broadcast: exact bytes (NaN payloads and -0.0 included) from a non-zero root, into a
    # non-contiguous tensor.
    root = world - 1
    src = torch.tensor([float("nan"), -0.0, 1e-40, 3.5, -7.25, float("inf")])
    t = src.clone() if rank == root else torch.full((6,), 9.0)
    dist.broadcast(t, src=root)
    assert torch.equal(t.view(torch.int32), src.view(torch.int32)), t
    nc = torch.zeros(4, 3).t() if rank != root else torch.arange(12, dtype=torch.float64).reshape(4, 3).t().clone()
    nc = nc.double()
    dist.broadcast(nc, src=root)
    assert torch.equal(nc, torch.arange(12, dtype=torch.float64).reshape(4, 3).t()), nc
    # all_gather and barrier.
    gathered = [torch.empty(3, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([rank, -rank, 100 + rank]))
    for r, g in enumerate(gathered):
        assert torch.equal(g, torch.tensor([r, -r, 100 + r])), gathered
    dist.barrier()
    # What is not supported: a clear error, and the group still works afterwards.
    for what, call, needle in [
        ("int8", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int8)), "not supported"),
        ("bool", lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)), "not supported"),
        ("BAND", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND), "not supported"),
        ("gather", lambda: dist.gather(torch.ones(1), [torch.ones(1)] * world if rank == 0 else None), "does not support"),
        ("send", lambda: dist.send(torch.ones(1), dst=(rank + 1) % world), "does not support"),
    ]:
        try:
            call()
        except RuntimeError as e:
            if needle not in str(e):
                raise AssertionError(f"{what}: unclear error: {e}")
        else:
            raise AssertionError(f"{what} did not raise")
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(world)))
    print(f"rank {rank}: collectives correct")


def replan(args):
    os.environ["FLEXPLAN_TOPOLOGY"] = args.topology
    os.environ["FLEXPLAN_REPLAN"] = "auto"
    os.environ.setdefault("FLEXPLAN_DRIFT_WINDOW", "4")
    rank, world = init(args)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(7 + rank)
    base = integer_model()
    reference = DDP(copy.deepcopy(base), process_group=gloo)
    model = DDP(copy.deepcopy(base))  # the default group: flexplan
    optimizers = [torch.optim.SGD(m.parameters(), lr=2.0 ** -5) for m in (reference, model)]
    result = None
    for step in range(1, args.steps + 1):
        if step == args.replan_at:
            result = flexplan_torch.replan()
        x, target = batch("integer", rank, step)
        losses = []
        for m, opt in zip((reference, model), optimizers):
            opt.zero_grad()
            loss = loss_of("integer", m(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        if losses[0] != losses[1]:
            raise AssertionError(f"rank {rank} step {step}: loss {losses[1]} on flexplan, {losses[0]} on gloo")
        check_equal("integer", "backend", model.module, reference.module, step, rank)
    report = flexplan_torch.stats()
    assert result is not None and result["switched"], result
    assert report["timed"] and report["plan_generation"] >= 1, report
    generations = {s["plan_generation"] for s in report["schedules"] if s["calls"] > 0}
    assert {0, 1} <= generations, report["schedules"]
    assert any("re-planned (requested)" in e for e in report["events"]), report["events"]
    # Every rank switched at the same call, to the same plan (its hash is in the event).
    mine = (result["call"], [e.split(" (planned in")[0] for e in report["events"] if "re-planned" in e])
    everyone = [None] * world
    dist.all_gather_object(everyone, mine, group=gloo)
    assert all(e == everyone[0] for e in everyone), everyone
    print(f"rank {rank}: re-planned at call #{result['call']} on every rank; {args.steps} steps, losses and "
          f"parameters equal gloo's; {sum(s['calls'] for s in report['schedules'])} calls timed")


def expect_failure(args):
    rank, world = job_rank_and_size()
    plan = args.plan
    if args.scenario == "wrong-plan" and rank == 1:
        plan = os.path.join(args.scratch, f"corrupt-{os.getpid()}.bin")
        with open(plan, "wb") as f:
            f.write(b"this is not a plan" * 10)
    if args.scenario == "bad-setting" and rank == 1:
        os.environ["FLEXPLAN_TIMEOUT_MS"] = "abc"
    try:
        init(args, plan)
        if args.scenario not in ("dead-peer", "early-exit"):
            raise AssertionError("init_process_group accepted the bad setup")
        if args.scenario == "early-exit":
            # 256 KiB: large enough for UCX's rendezvous, whose attach of the gone peer's
            # shared memory is what complained
            for step in range(1, 6):
                if step == 3 and rank == world - 1:
                    os._exit(0)
                dist.all_reduce(torch.ones(1 << 16))
            raise AssertionError("all-reduces went on without a peer")
        torch.manual_seed(0)
        model = DDP(float_model())
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        for step in range(1, 6):
            if step == 3 and rank == world - 1:
                os._exit(17)  # dies without a word, as a crashed process does
            x, target = batch("float", rank, step)
            opt.zero_grad()
            loss_of("float", model(x), target).backward()
            opt.step()
        raise AssertionError("training went on with a dead peer")
    except RuntimeError as e:
        print(f"EXPECTED-ERROR: {e}", flush=True)
        os._exit(3)  # the survivors' teardown must not be what the test waits on


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True,
                        choices=["train", "collectives", "wrong-plan", "wrong-size", "bad-setting", "dead-peer",
                                 "early-exit", "replan"])
    parser.add_argument("--plan", required=True)
    parser.add_argument("--data", choices=["integer", "float"], default="integer")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60, help="process group timeout, seconds")
    parser.add_argument("--scratch", default="/tmp")
    parser.add_argument("--topology", help="replan: the topology the plan was made from")
    parser.add_argument("--replan-at", type=int, default=5, help="replan: the step before which to re-plan")
    args = parser.parse_args()
    start = time.monotonic()
    if args.scenario == "train":
        train(args)
    elif args.scenario == "collectives":
        collectives(args)
    elif args.scenario == "replan":
        replan(args)
    else:
        expect_failure(args)
    dist.destroy_process_group()
    print(f"done in {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
