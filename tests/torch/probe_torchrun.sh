#!/bin/bash
# flexplan's probe under torchrun (docs/probe.md): 3 processes made 2 machines by
# --machine-of-rank meet through torchrun's store, write a topology that groups them so and
# plans; bad input exits 2 on every rank; outside torchrun it says how to run it.
#   probe_torchrun.sh PYTHON FLEXPLAN
set -u
python=$1 flexplan=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
torchrun() { timeout 150 "$python" -m torch.distributed.run --standalone --nproc_per_node "$1" --redirects 1 --tee 1 \
  -m flexplan_torch.probe "${@:2}"; }
source "$(dirname "$0")/../expect_exit.sh"

expect 0 "probe 3 ranks as 2 machines under torchrun" torchrun 3 --machine-of-rank a,a,b --budget 3s --blocking -o "$work/probed.json"
contains "machine a: out" "the figures are printed"
contains "wrote $work/probed.json" "the topology is written"
# The store's exchanges must not dominate: the run ends near its budget (3 s), not minutes later.
seconds=$(echo "$LAST_OUTPUT" | sed -n 's/.*flexplan-probe: done in \([0-9.]*\) s.*/\1/p' | head -1)
if [ -n "$seconds" ] && awk -v s="$seconds" 'BEGIN { exit !(s < 20) }'; then echo "ok: done in $seconds s"; else echo "FAIL: done in '$seconds' s"; status=1; fi
"$python" - "$work/probed.json" <<'PY' || status=1
import json, sys
t = json.load(open(sys.argv[1]))
machines = t["root"]["children"]
assert [m["name"] for m in machines] == ["a", "b"], machines
assert [[l["rank"] for l in m["children"]] for m in machines] == [[0, 1], [2]], machines
print("ok: the machines group the ranks as given")
PY
expect 0 "the probed topology plans" "$flexplan" "$work/probed.json" -o "$work/plan.bin" --collectives allreduce
expect 1 "bad input fails every rank (torchrun exits 1)" torchrun 2 --budget soon
contains "flexplan: error: --budget" "the bad value is named"
expect 2 "outside torchrun" "$python" -m flexplan_torch.probe -o "$work/x.json"
contains "runs under torchrun" "says how to run it"
exit $status
