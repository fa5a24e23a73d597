"""flexplan's probe under torchrun: measures the cluster this job runs on and writes its topology.

    torchrun --nproc_per_node 4 --redirects 1 --tee 1 -m flexplan_torch.probe -o topology.json

One process per learner, as for training. The processes meet through torchrun's key-value store
(the env:// rendezvous: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) and measure over UCX with
flexplan's own transport, exactly as `mpirun -np P flexplan-probe` does; the arguments and exit
status are flexplan-probe's (docs/probe.md; --help lists them).
"""
import datetime
import os
import sys

import torch.distributed as dist

from _flexplan_torch import probe as _probe
from _flexplan_torch import probe_time_limit as _probe_time_limit


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    missing = [v for v in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE") if v not in os.environ]
    if missing:
        print(f"flexplan: error: flexplan_torch.probe runs under torchrun (one process per learner); "
              f"{', '.join(missing)} not set", file=sys.stderr)
        return 2
    # Every exchange waits at most as long as the probe's own watchdog allows the whole run.
    timeout = datetime.timedelta(seconds=_probe_time_limit(["flexplan_torch.probe"] + argv))
    store, rank, size = next(dist.rendezvous("env://", timeout=timeout))
    store.set_timeout(timeout)
    return _probe(store, rank, size, int(timeout.total_seconds() * 1000), ["flexplan_torch.probe"] + argv)


if __name__ == "__main__":
    sys.exit(main())
