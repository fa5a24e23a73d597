"""One rank of the tests of the backend's native collectives, started by launch.py --worker.

Scenarios (--scenario):
  against-gloo  every collective (broadcast from every root, all_gather, all_gather_into_tensor,
                reduce_scatter, reduce_scatter_tensor, reduce to every root, all_to_all_single
                with even and uneven splits, barrier, several outstanding at once) on flexplan and
                on gloo in the same job: the results must be equal, and none may fall back.
                With --reversed LEARNERS (the plan's learner names in plan rank order), group
                rank r plays plan rank P-1-r (FLEXPLAN_RANK_MAPPING=name): blocks and roots
                must still be in torch's rank order. On a plan of broadcast and reduce from
                some roots only, the others run the runtime's derived chains: no fallback either.
  fallback      the same on a plan of all-reduce only (every collective falls back, and says so)
                and on Options(via_allreduce=True): still equal to gloo's.
  zero          DDP + ZeroRedundancyOptimizer on flexplan against the same on gloo: the losses and
                parameters equal at every step (exactly on 2^k ranks: integer data, dyadic learning
                rate, DDP's division by the world size exact; else within 1e-12, DDP dividing
                each gradient before the sums, whose order differs).
  fsdp          an FSDP-style loop: two units whose flat parameters are sharded across ranks,
                gathered with all_gather_into_tensor before use and whose gradients are
                reduce_scatter_tensor'ed to their shards, against an unsharded run of every rank's
                batch on every rank: parameters and losses equal at every step.
Data are small integers held exactly in every type, so every sum is exact whatever its order.
"""
import argparse
import copy
import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

import flexplan_torch
from ddp_worker import batch, integer_model, job_rank_and_size, loss_of

OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
       "product": dist.ReduceOp.PRODUCT}


def init(args):
    rank, world = job_rank_and_size()
    if args.reversed:
        os.environ["FLEXPLAN_RANK_MAPPING"] = "name"
        os.environ["FLEXPLAN_LEARNER_NAME"] = args.reversed.split(",")[world - 1 - rank]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("flexplan", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout),
                            pg_options=flexplan_torch.Options(plan=args.plan))
    return rank, world


def values(seed, shape, dtype, low=-3, high=4):
    """Small integers, different per seed: exact in every type, sums and products included."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint8:
        low = 0
    return torch.randint(low, high, shape, generator=g).to(dtype)


def same(a, b):
    """Equal bytes (so NaN and -0.0 count), shape and type."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8))


GLOO_TYPES = (torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32, torch.int64)


def as_gloo(t):
    """Gloo's view of a tensor: its bytes where gloo lacks its type (int16, bool), which
    the copying collectives move alike."""
    return t if t.dtype in GLOO_TYPES else t.view(torch.uint8)


def expect(what, got, want):
    if not same(got, want):
        raise AssertionError(f"{what}: flexplan gave {got.flatten()[:8]}, gloo {want.flatten()[:8]}")


def check_broadcast(fx, gloo, rank, world):
    for root in range(world):
        for dtype in (torch.float32, torch.float64, torch.int64, torch.int8, torch.int16, torch.bool):
            mine = values(100 * rank + root, (37,), dtype)
            a, b = mine.clone(), as_gloo(mine.clone())
            dist.broadcast(a, src=root, group=fx)
            dist.broadcast(b, src=root, group=gloo)
            expect(f"broadcast {dtype} from {root}", as_gloo(a), b)
    # Exact bytes from the last rank (NaN, -0.0, a subnormal), into a non-contiguous tensor.
    root = world - 1
    special = torch.tensor([float("nan"), -0.0, 1e-40, 3.5, -7.25, float("inf")])
    t = special.clone() if rank == root else torch.full((6,), 9.0)
    dist.broadcast(t, src=root, group=fx)
    expect("broadcast of special values", t, special)
    want = torch.arange(12.0).reshape(4, 3).t()
    nc = want.clone() if rank == root else torch.zeros(4, 3).t()
    dist.broadcast(nc, src=root, group=fx)
    assert not nc.is_contiguous() and torch.equal(nc, want), nc


def check_allgather(fx, gloo, rank, world):
    for dtype in (torch.float32, torch.int64, torch.int16):
        mine = values(7 * rank + 1, (5, 3), dtype)
        a = [torch.empty_like(mine) for _ in range(world)]
        b = [torch.empty_like(as_gloo(mine)) for _ in range(world)]
        dist.all_gather(a, mine, group=fx)
        dist.all_gather(b, as_gloo(mine), group=gloo)
        for r in range(world):
            expect(f"all_gather {dtype} block {r}", as_gloo(a[r]), b[r])
        # all_gather_into_tensor (gloo has none: its all_gather, concatenated).
        out = torch.empty((world * 5, 3), dtype=dtype)
        dist.all_gather_into_tensor(out, mine, group=fx)
        expect(f"all_gather_into_tensor {dtype}", as_gloo(out), torch.cat(b))
    # Into a non-contiguous output, from a non-contiguous input.
    mine = values(rank, (3, 4), torch.float64).t()
    out = torch.zeros((3, 4 * world), dtype=torch.float64).t()
    dist.all_gather_into_tensor(out, mine, group=fx)
    b = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(b, mine.contiguous(), group=gloo)
    expect("all_gather_into_tensor non-contiguous", out.contiguous(), torch.cat(b))
    # In place, as FSDP does it when its shard is a view of the gathered parameter.
    out = torch.zeros(world * 4)
    shard = out.narrow(0, rank * 4, 4)
    shard.copy_(values(rank + 50, (4,), torch.float32))
    dist.all_gather_into_tensor(out, shard, group=fx)
    want = torch.cat([values(r + 50, (4,), torch.float32) for r in range(world)])
    expect("all_gather_into_tensor in place", out, want)


def gloo_reduce_scatter(gloo, blocks, op, world, rank):
    """Gloo has no reduce-scatter in torch 1.13: its all-reduce, this rank's block."""
    whole = torch.cat([b.flatten() for b in blocks])
    gloo_op = dist.ReduceOp.SUM if op == dist.ReduceOp.AVG else op
    dist.all_reduce(whole, op=gloo_op, group=gloo)
    if op == dist.ReduceOp.AVG:
        whole = whole / world
    n = blocks[0].numel()
    return whole[rank * n:(rank + 1) * n].view(blocks[0].shape)


def check_reduce_scatter(fx, gloo, rank, world):
    cases = [(torch.float64, op) for op in (*OPS.values(), dist.ReduceOp.AVG)]
    cases += [(torch.int32, dist.ReduceOp.SUM), (torch.float32, dist.ReduceOp.MAX)]
    for dtype, op in cases:
        high = 3 if op == dist.ReduceOp.PRODUCT else 4  # products of 8 ranks stay small
        blocks = [values(1000 * rank + 10 * d, (6,), dtype, -2, high) for d in range(world)]
        want = gloo_reduce_scatter(gloo, blocks, op, world, rank)
        out = torch.full((6,), 99).to(dtype)
        dist.reduce_scatter(out, [b.clone() for b in blocks], op=op, group=fx)
        expect(f"reduce_scatter {dtype} {op}", out, want)
        # reduce_scatter_tensor (FSDP's flat gradient): the blocks as one tensor.
        out = torch.full((6,), 99).to(dtype)
        flat = torch.cat(blocks)
        dist.reduce_scatter_tensor(out, flat, op=op, group=fx)
        expect(f"reduce_scatter_tensor {dtype} {op}", out, want)
        assert torch.equal(flat, torch.cat(blocks)), "reduce_scatter_tensor changed its input"
    # A non-contiguous input and output.
    blocks = [values(rank * 3 + d, (2, 3), torch.float32) for d in range(world)]
    want = gloo_reduce_scatter(gloo, [b.t().contiguous() for b in blocks], dist.ReduceOp.SUM, world, rank)
    src = torch.cat(blocks, dim=1).t()  # (3 world, 2): block d is blocks[d].t()
    assert not src.is_contiguous()
    out = torch.zeros(2, 3).t()
    dist.reduce_scatter_tensor(out, src, group=fx)
    expect("reduce_scatter_tensor non-contiguous", out.contiguous(), want)


def check_reduce(fx, gloo, rank, world):
    for root in range(world):
        for dtype, op in ((torch.float32, dist.ReduceOp.SUM), (torch.int64, dist.ReduceOp.MAX),
                          (torch.float64, dist.ReduceOp.PRODUCT)):
            mine = values(10 * rank + root, (9,), dtype, -2, 3)
            a, b = mine.clone(), mine.clone()
            dist.reduce(a, dst=root, op=op, group=fx)
            dist.reduce(b, dst=root, op=op, group=gloo)
            if rank == root:
                expect(f"reduce {dtype} {op} to {root}", a, b)
            else:  # the other ranks' tensors are left as they were (docs/pytorch.md)
                expect(f"reduce {dtype} {op} to {root}: rank {rank}'s input", a, mine)


def check_alltoall(fx, gloo, rank, world):
    # Even splits: 3 rows of 2 to each rank.
    mine = values(rank + 300, (3 * world, 2), torch.float32)
    a, b = torch.empty_like(mine), torch.empty_like(mine)
    dist.all_to_all_single(a, mine, group=fx)
    dist.all_to_all_single(b, mine, group=gloo)
    expect("all_to_all_single even", a, b)
    # Uneven: rank s sends (s + d) % 3 rows to rank d (none, sometimes).
    sends = [(rank + d) % 3 for d in range(world)]
    receives = [(s + rank) % 3 for s in range(world)]
    mine = values(rank + 400, (sum(sends), 4), torch.int64)
    a = torch.empty((sum(receives), 4), dtype=torch.int64)
    b = torch.empty_like(a)
    dist.all_to_all_single(a, mine, receives, sends, group=fx)
    dist.all_to_all_single(b, mine, receives, sends, group=gloo)
    expect("all_to_all_single uneven", a, b)


def check_outstanding(fx, gloo, rank, world):
    """Several collectives of every kind outstanding at once, waited for in reverse order, one
    through its future."""
    shard = values(rank + 500, (8,), torch.float32)
    gathered = torch.empty(8 * world)
    flat = values(rank + 600, (4 * world,), torch.float64)
    scattered = torch.empty(4, dtype=torch.float64)
    bcast = values(rank + 700, (5,), torch.int64)
    red = values(rank + 800, (5,), torch.float32)
    summed = values(rank + 900, (3,), torch.float32)
    works = [dist.all_gather_into_tensor(gathered, shard, group=fx, async_op=True),
             dist.reduce_scatter_tensor(scattered, flat, group=fx, async_op=True),
             dist.broadcast(bcast, src=world - 1, group=fx, async_op=True),
             dist.reduce(red, dst=0, group=fx, async_op=True),
             dist.all_reduce(summed, group=fx, async_op=True)]
    future = works[0].get_future()
    for w in reversed(works[1:]):
        w.wait()
        assert w.is_completed()
    assert same(future.wait()[0], gathered)
    b = [torch.empty(8) for _ in range(world)]
    dist.all_gather(b, values(rank + 500, (8,), torch.float32), group=gloo)
    expect("outstanding all_gather_into_tensor", gathered, torch.cat(b))
    blocks = [flat[d * 4:(d + 1) * 4] for d in range(world)]
    expect("outstanding reduce_scatter_tensor", scattered,
           gloo_reduce_scatter(gloo, blocks, dist.ReduceOp.SUM, world, rank))
    expect("outstanding broadcast", bcast, values(world - 1 + 700, (5,), torch.int64))
    want = values(rank + 800, (5,), torch.float32)
    dist.reduce(want, dst=0, group=gloo)
    expect("outstanding reduce", red, want if rank == 0 else values(rank + 800, (5,), torch.float32))
    want = values(rank + 900, (3,), torch.float32)
    dist.all_reduce(want, group=gloo)
    expect("outstanding all_reduce", summed, want)


def check_edges(fx, gloo, rank, world):
    """Empty and zero-dimensional tensors, and reduce's AVG (which gloo lacks: its sum / world)."""
    empty = torch.empty(0)
    dist.broadcast(empty, src=world - 1, group=fx)
    dist.all_gather_into_tensor(torch.empty(0), empty, group=fx)
    dist.reduce_scatter_tensor(torch.empty(0), torch.empty(0), group=fx)
    dist.reduce(empty, dst=0, group=fx)
    dist.all_to_all_single(torch.empty(0), torch.empty(0), group=fx)
    scalar = torch.tensor(3.0 + rank)
    dist.broadcast(scalar, src=world - 1, group=fx)
    expect("broadcast of a zero-dimensional tensor", scalar, torch.tensor(2.0 + world))
    t = values(rank + 40, (5,), torch.float64)
    want = t.clone()
    dist.reduce(t, dst=world - 1, op=dist.ReduceOp.AVG, group=fx)
    dist.reduce(want, dst=world - 1, group=gloo)
    if rank == world - 1:
        expect("reduce AVG", t, want / world)


def check_errors(fx, rank, world):
    """Bad calls raise a clear error at the call, on every rank, and the group goes on."""
    for what, call, needle in [
        ("all_gather_into_tensor of a wrong size",
         lambda: dist.all_gather_into_tensor(torch.empty(world * 3 + 1), torch.ones(3), group=fx),
         "not world size"),
        ("all_gather_into_tensor of two types",
         lambda: dist.all_gather_into_tensor(torch.empty(world * 3, dtype=torch.float64), torch.ones(3), group=fx),
         "but its input"),
        ("reduce_scatter_tensor of int8",
         lambda: dist.reduce_scatter_tensor(torch.ones(2, dtype=torch.int8), torch.ones(2 * world, dtype=torch.int8),
                                            group=fx), "not supported"),
        ("reduce_scatter_tensor of a wrong size",
         lambda: dist.reduce_scatter_tensor(torch.ones(2), torch.ones(2 * world + 1), group=fx), "not world size"),
        ("reduce with BAND",
         lambda: dist.reduce(torch.ones(2, dtype=torch.int32), dst=0, op=dist.ReduceOp.BAND, group=fx), "not supported"),
        ("all_to_all_single with splits that do not add up",
         lambda: dist.all_to_all_single(torch.empty(world), torch.ones(world), [1] * world, [2] * world, group=fx),
         "do not add up"),
        ("gather", lambda: dist.gather(torch.ones(1), [torch.ones(1)] * world if rank == 0 else None, group=fx),
         "does not support"),
    ]:
        try:
            call()
        except (RuntimeError, ValueError) as e:
            if needle not in str(e):
                raise AssertionError(f"{what}: unclear error: {e}")
        else:
            raise AssertionError(f"{what} did not raise")
    t = torch.ones(3)
    dist.all_reduce(t, group=fx)
    assert torch.equal(t, torch.full((3,), float(world)))


def check_all(fx, gloo, rank, world):
    check_broadcast(fx, gloo, rank, world)
    check_allgather(fx, gloo, rank, world)
    check_reduce_scatter(fx, gloo, rank, world)
    check_reduce(fx, gloo, rank, world)
    check_alltoall(fx, gloo, rank, world)
    check_outstanding(fx, gloo, rank, world)
    check_edges(fx, gloo, rank, world)
    dist.barrier(group=fx)


def against_gloo(args):
    rank, world = init(args)
    gloo = dist.new_group(backend="gloo")
    fx = dist.distributed_c10d._get_default_group()
    check_all(fx, gloo, rank, world)
    check_errors(fx, rank, world)
    assert fx.fallbacks == [], f"collectives fell back to all-reduces: {fx.fallbacks}"
    if args.reversed:
        want = args.reversed.split(",")[world - 1 - rank]
        assert fx.learner_name.endswith(want), (fx.learner_name, want)
    print(f"rank {rank}: every collective equals gloo's, each through its own schedule "
          f"(learner {fx.learner_name})")


def fallback(args):
    rank, world = init(args)
    gloo = dist.new_group(backend="gloo")
    old = dist.new_group(backend="flexplan", pg_options=flexplan_torch.Options(plan=args.allreduce_plan))
    check_all(old, gloo, rank, world)
    # Each once, though called many times (broadcast and reduce from every root).
    assert sorted(old.fallbacks) == ["allgather", "broadcast", "reduce", "reduce_scatter"], old.fallbacks
    # All-reduces asked for, on a plan that has every collective: no warning, the same results.
    via = dist.new_group(backend="flexplan", pg_options=flexplan_torch.Options(plan=args.plan, via_allreduce=True))
    assert via.via_allreduce
    check_all(via, gloo, rank, world)
    assert via.fallbacks == [], via.fallbacks
    print(f"rank {rank}: on an all-reduce plan ({', '.join(old.fallbacks)} fell back) and via "
          f"all-reduces, every collective equals gloo's")


def zero(args):
    rank, world = init(args)
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(11 + rank)  # different weights per rank: DDP broadcasts rank 0's
    base = integer_model()
    runs = {}
    for name, group in (("flexplan", None), ("gloo", gloo)):
        model = DDP(copy.deepcopy(base), process_group=group)
        # Small parameters so that each rank owns some; SGD with a dyadic rate keeps every
        # value exact, so the two runs agree bit for bit.
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD,
                                      process_group=group, lr=2.0 ** -6)
        runs[name] = (model, opt)
    for step in range(1, args.steps + 1):
        x, target = batch("integer", rank, step)
        losses = {}
        for name, (model, opt) in runs.items():
            opt.zero_grad()
            loss = loss_of("integer", model(x), target)
            loss.backward()
            opt.step()
            losses[name] = loss.item()
        exact = world & (world - 1) == 0

        def equal(a, b):
            return a == b if exact else abs(a - b) <= 1e-12 * max(1.0, abs(b))
        if not equal(losses["flexplan"], losses["gloo"]):
            raise AssertionError(f"rank {rank} step {step}: loss {losses['flexplan']} with flexplan, "
                                 f"{losses['gloo']} with gloo")
        for (pname, a), (_, b) in zip(runs["flexplan"][0].named_parameters(), runs["gloo"][0].named_parameters()):
            if not (torch.equal(a, b) if exact else torch.allclose(a, b, rtol=1e-12, atol=1e-12)):
                raise AssertionError(f"rank {rank} step {step}: parameter {pname} differs by "
                                     f"{(a - b).abs().max().item()}")
        print(f"rank {rank} step {step}: loss {losses['flexplan']} (flexplan) = {losses['gloo']} (gloo)")
    # The optimizer's state gathered to rank 0 (broadcasts from every owner).
    runs["flexplan"][1].consolidate_state_dict(to=0)
    if rank == 0:
        assert len(runs["flexplan"][1].state_dict()["param_groups"]) >= 1
    fx = dist.distributed_c10d._get_default_group()
    assert fx.fallbacks == [], fx.fallbacks
    print(f"rank {rank}: ZeRO on flexplan matched gloo for {args.steps} steps")


class Unit:
    """One FSDP unit: its module's parameters flattened, padded to a multiple of the world size
    and sharded; this rank keeps shard `rank` (and the optimizer state of it) between uses."""

    def __init__(self, module, rank, world):
        self.module, self.rank, self.world = module, rank, world
        self.params = list(module.parameters())
        flat = torch.cat([p.detach().flatten() for p in self.params])
        self.numel = flat.numel()
        self.shard_size = -(-self.numel // world)
        padded = torch.zeros(self.shard_size * world, dtype=flat.dtype)
        padded[:self.numel] = flat
        self.shard = padded[rank * self.shard_size:(rank + 1) * self.shard_size].clone()
        self.full = torch.empty_like(padded)

    def gather(self, group):
        return dist.all_gather_into_tensor(self.full, self.shard, group=group, async_op=True)

    def use_full(self):
        """Points the module's parameters at the gathered flat buffer, as FSDP does."""
        offset = 0
        for p in self.params:
            p.data = self.full[offset:offset + p.numel()].view_as(p)
            offset += p.numel()

    def reduce_grads(self, group):
        grad = torch.zeros_like(self.full)
        grad[:self.numel] = torch.cat([p.grad.flatten() for p in self.params])
        self.grad_shard = torch.empty_like(self.shard)
        return dist.reduce_scatter_tensor(self.grad_shard, grad, group=group, async_op=True)


def fsdp(args):
    rank, world = init(args)
    group = dist.distributed_c10d._get_default_group()
    torch.manual_seed(5)  # the same initial model everywhere, as FSDP's sync_module_states
    reference = integer_model()
    sharded = copy.deepcopy(reference)
    units = [Unit(sharded[0], rank, world), Unit(sharded[2], rank, world)]
    lr = 2.0 ** -6
    ref_opt = torch.optim.SGD(reference.parameters(), lr=lr)
    for step in range(1, args.steps + 1):
        # Prefetch every unit's parameters, then compute with each once it has arrived.
        gathers = [u.gather(group) for u in units]
        for u, w in zip(units, gathers):
            w.wait()
            u.use_full()
            for p in u.params:
                p.grad = None
        x, target = batch("integer", rank, step)
        loss = loss_of("integer", sharded(x), target)
        loss.backward()
        # Gradients summed over ranks (a dyadic rate: exact), each rank keeping its shard.
        reductions = [u.reduce_grads(group) for u in reversed(units)]
        for w in reductions:
            w.wait()
        for u in units:
            u.shard -= lr * u.grad_shard
        # The unsharded run: every rank's batch on one model, gradients summed.
        ref_opt.zero_grad()
        ref_losses = []
        for r in range(world):
            xr, tr = batch("integer", r, step)
            ref_loss = loss_of("integer", reference(xr), tr)
            ref_loss.backward()
            ref_losses.append(ref_loss.item())
        ref_opt.step()
        if loss.item() != ref_losses[rank]:
            raise AssertionError(f"rank {rank} step {step}: loss {loss.item()} sharded, {ref_losses[rank]} unsharded")
        # Every shard, gathered, must be the unsharded model's parameters.
        for i, u in enumerate(units):
            u.gather(group).wait()
            want = torch.cat([p.detach().flatten() for p in (reference[0] if i == 0 else reference[2]).parameters()])
            if not torch.equal(u.full[:u.numel], want):
                raise AssertionError(f"rank {rank} step {step}: unit {i}'s parameters differ from the unsharded "
                                     f"run's by {(u.full[:u.numel] - want).abs().max().item()}")
        print(f"rank {rank} step {step}: loss {loss.item()}, parameters equal the unsharded run's")
    assert group.fallbacks == [], group.fallbacks
    print(f"rank {rank}: FSDP-style loop matched the unsharded run for {args.steps} steps")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True, choices=["against-gloo", "fallback", "zero", "fsdp"])
    parser.add_argument("--plan", required=True)
    parser.add_argument("--scratch", default="/tmp")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--reversed", default="", help="the plan's learner names, plan rank order: play them reversed")
    parser.add_argument("--timeout", type=float, default=60, help="process group timeout, seconds")
    args = parser.parse_args()
    args.allreduce_plan = os.path.join(args.scratch, "plan-allreduce.bin")
    start = time.monotonic()
    {"against-gloo": against_gloo, "fallback": fallback, "zero": zero, "fsdp": fsdp}[args.scenario](args)
    dist.destroy_process_group()
    print(f"done in {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
