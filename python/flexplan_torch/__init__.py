"""flexplan for PyTorch: a torch.distributed backend named "flexplan" and a DDP communication hook.

    import flexplan_torch                     # registers the backend
    dist.init_process_group("flexplan", pg_options=flexplan_torch.Options(plan="plan.bin"))
    model = DistributedDataParallel(model)    # gradients are all-reduced by the plan

or, keeping another backend for everything else:

    dist.init_process_group("gloo")
    model = DistributedDataParallel(model)
    model.register_comm_hook(flexplan_torch.hook_state(plan="plan.bin"), flexplan_torch.allreduce_hook)

Broadcast, reduce, all-gather (all_gather_into_tensor) and reduce-scatter (reduce_scatter_tensor)
run the plan's own schedules when it has them (`flexplan TOPOLOGY --collectives
allreduce,reduce_scatter,allgather,broadcast,reduce --roots 0,1,...`), else all-reduces, with
a warning: ZeRO and FSDP-style sharding run on the backend.

The plan comes from Options(plan=...) or the FLEXPLAN_PLAN variable; the runtime's other
FLEXPLAN_* variables apply (docs/runtime.md). docs/pytorch.md has launching and errors.
"""
import datetime

import torch
import torch.distributed as dist

from _flexplan_torch import ProcessGroupFlexplan

__all__ = ["Options", "ProcessGroupFlexplan", "hook_state", "allreduce_hook", "stats", "replan"]


class Options:
    """pg_options for init_process_group("flexplan") and new_group(backend="flexplan").

    via_allreduce=True runs broadcast, reduce, all-gather and reduce-scatter as all-reduces
    (the backend's path before its native collectives; also FLEXPLAN_TORCH_VIA_ALLREDUCE=1),
    for comparison. Every rank must pass the same."""

    def __init__(self, plan=None, via_allreduce=False):
        self.plan = plan
        self.via_allreduce = via_allreduce

    def __repr__(self):
        return f"flexplan_torch.Options(plan={self.plan!r}, via_allreduce={self.via_allreduce!r})"


def _milliseconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        return max(1, int(timeout.total_seconds() * 1000))
    return max(1, int(timeout))


def _create_process_group(backend_options, pg_options):
    if pg_options is not None and not isinstance(pg_options, Options):
        raise TypeError(f"flexplan: pg_options must be flexplan_torch.Options, got {type(pg_options).__name__}")
    plan = pg_options.plan if pg_options is not None and pg_options.plan else ""
    return ProcessGroupFlexplan(backend_options.store, backend_options.group_rank,
                                backend_options.group_size, _milliseconds(backend_options.timeout),
                                str(plan), bool(getattr(pg_options, "via_allreduce", False)))


if "FLEXPLAN" not in dist.Backend._plugins:
    dist.Backend.register_backend("flexplan", _create_process_group, extended_api=True)


def hook_state(plan=None, timeout=None):
    """A flexplan process group over every rank of the default group, for allreduce_hook.
    Collective: every rank calls it alike."""
    kwargs = {"timeout": timeout} if timeout is not None else {}
    return dist.new_group(backend="flexplan", pg_options=Options(plan), **kwargs)


def allreduce_hook(state, bucket):
    """DDP communication hook: averages the bucket over the flexplan group `state` (hook_state)."""
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    work = state.allreduce([bucket.buffer()], opts)
    return work.get_future().then(lambda fut: fut.value()[0])


def _flexplan_group(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupFlexplan):
        raise TypeError(f"flexplan: {type(pg).__name__} is not a flexplan process group "
                        "(pass the group from hook_state, or init_process_group(\"flexplan\"))")
    return pg


def stats(group=None):
    """What the calls cost on this rank, as a dict (docs/pytorch.md, Following the network):
    per schedule its calls, measured and predicted seconds and steps, the re-plans so far
    (plan_generation) and the drift and re-plan events. Calls are timed with FLEXPLAN_STATS=1 or
    FLEXPLAN_REPLAN=detect|auto. Local; `group` defaults to the default group."""
    return _flexplan_group(group).stats()


def replan(group=None):
    """Re-plans for the links measured, switching every rank at the same call if all made the
    same plan (needs FLEXPLAN_TOPOLOGY): {"switched", "call", "message"}. Collective: every
    rank calls it at the same point among its collectives."""
    return _flexplan_group(group).replan()
