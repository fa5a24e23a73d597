"""Data-parallel training of a small CNN on synthetic data, printing the time per epoch: the
end-to-end comparison of flexplan against PyTorch's own backends (docs/pytorch.md).

  torchrun --nproc_per_node 4 --redirects 1 --tee 1 examples/pytorch/train_cnn.py --backend flexplan --plan plan.bin
  torchrun --nproc_per_node 4 --redirects 1 --tee 1 examples/pytorch/train_cnn.py --backend gloo
  torchrun --nproc_per_node 4 --redirects 1 --tee 1 examples/pytorch/train_cnn.py --backend gloo --hook --plan plan.bin
  MASTER_ADDR=host0 MASTER_PORT=29500 mpirun -np 4 -x MASTER_ADDR -x MASTER_PORT \\
      python3 examples/pytorch/train_cnn.py --backend flexplan --plan plan.bin

Every rank trains on its own synthetic images (fixed seeds: runs are comparable); rank 0
prints one line per epoch and a summary line with the median epoch time.
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def rank_and_size():
    """torchrun sets RANK/WORLD_SIZE; Open MPI's mpirun sets OMPI_COMM_WORLD_*."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if "OMPI_COMM_WORLD_RANK" in os.environ:
        return int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    sys.exit("train_cnn: launch with torchrun or mpirun (no RANK or OMPI_COMM_WORLD_RANK set)")


def small_cnn(width, classes=10):
    """Conv-BN-ReLU blocks on 32x32 images; `width` scales the gradient (0.14 M parameters
    at width 32, 0.56 M at 64, 2.2 M at 128)."""
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True))
    return nn.Sequential(block(3, width), block(width, width), nn.MaxPool2d(2),
                         block(width, 2 * width), block(2 * width, 2 * width), nn.MaxPool2d(2),
                         block(2 * width, 4 * width), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4 * width, classes))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="flexplan", choices=["flexplan", "gloo", "mpi"])
    parser.add_argument("--plan", help="plan.bin for flexplan (default: FLEXPLAN_PLAN)")
    parser.add_argument("--hook", action="store_true",
                        help="keep --backend for everything else, all-reduce gradients with "
                             "flexplan's DDP communication hook")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=512, help="synthetic images per rank per epoch")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    parser.add_argument("--timeout", type=float, default=300, help="process group timeout, seconds")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    rank, world = rank_and_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    pg_options = None
    if args.backend == "flexplan" or args.hook:
        import flexplan_torch  # registers the "flexplan" backend
        pg_options = flexplan_torch.Options(plan=args.plan) if args.backend == "flexplan" else None
    if args.backend == "mpi" and not dist.is_mpi_available():
        sys.exit("train_cnn: this torch was built without MPI support (torch.distributed.is_mpi_available() is False)")
    timeout = datetime.timedelta(seconds=args.timeout)
    if args.backend == "mpi":
        dist.init_process_group("mpi")
    else:
        dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=timeout,
                                pg_options=pg_options)

    torch.manual_seed(0)
    model = DDP(small_cnn(args.width))
    if args.hook:
        model.register_comm_hook(flexplan_torch.hook_state(plan=args.plan, timeout=timeout),
                                 flexplan_torch.allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1 + rank)
    images = torch.randn(args.samples, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (args.samples,), generator=g)
    parameters = sum(p.numel() for p in model.parameters())
    what = f"{args.backend}" + (" + flexplan hook" if args.hook else "")
    if rank == 0:
        print(f"train_cnn: {world} ranks, {what}, {parameters} parameters "
              f"({parameters * 4 / 2**20:.1f} MiB of gradients), {args.samples} images per rank "
              f"per epoch in batches of {args.batch}", flush=True)

    times = []
    for epoch in range(1, args.epochs + 1):
        dist.barrier()
        start = time.perf_counter()
        total = 0.0
        for i in range(0, args.samples, args.batch):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images[i:i + args.batch]), labels[i:i + args.batch])
            loss.backward()
            optimizer.step()
            total += loss.item()
        dist.barrier()
        times.append(time.perf_counter() - start)
        if rank == 0:
            steps = (args.samples + args.batch - 1) // args.batch
            print(f"epoch {epoch}: {times[-1]:.2f} s ({world * args.samples / times[-1]:.0f} images/s, "
                  f"mean loss {total / steps:.3f})", flush=True)
    if rank == 0:
        print(f"train_cnn: {what}: median epoch {statistics.median(times):.2f} s over {args.epochs} epochs", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
