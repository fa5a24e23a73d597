#!/bin/bash
# flexplan_train_step on this host: its buckets are the step model's (`flexplan whatif`'s JSON),
# every step's results are right, the sleeps happened (no step is shorter than its compute, no
# all-reduce starts before its bucket is complete), and bad input exits 2.
#   train_step_test.sh MPIEXEC FLEXPLAN TRAIN_STEP SOURCE_DIR
set -u
mpiexec=$1 flexplan=$2 train=$3 source_dir=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$flexplan" "$source_dir/bench/flexbench/loopback-2.json" -o "$work/plan-2.bin" > /dev/null || exit 1
"$flexplan" "$source_dir/bench/flexbench/loopback-5.json" -o "$work/plan-5.bin" > /dev/null || exit 1
# layers: buckets of 128K and 64K (gradients arrive from the last layer)
cat > "$work/layers.json" <<'JSON'
{"name": "layers", "forward_seconds": 0.02, "other_seconds": 0.005, "bucket_bytes": "100K",
 "layers": [{"gradient_bytes": "64K", "backward_seconds": 0.01},
            {"gradient_bytes": "64K", "backward_seconds": 0.01},
            {"gradient_bytes": "64K", "backward_seconds": 0.01}]}
JSON
# the short form: 100 slices of 3,000 bytes, buckets of 22 slices and a last one of 12
echo '{"name": "short", "gradient_bytes": 300000, "compute_seconds": 0.06, "bucket_bytes": "64K"}' > "$work/short.json"
echo '{"name": "bad", "forward_seconds": 0.1, "layers": [{"gradient_bytes": "1M"}]}' > "$work/bad.json"

status=0
run() {  # run NP PLAN ARGS... -> exit status; output in $work/out.txt
  local np=$1; shift
  timeout 120 "$mpiexec" -np "$np" --oversubscribe --mca mpi_yield_when_idle 1 "$train" "$@" \
    > "$work/out.txt" 2>&1
}
expect_exit() {  # expect_exit CODE DESCRIPTION NP ARGS...
  local code=$1 what=$2; shift 2
  run "$@"
  local got=$?
  if [ "$got" -ne "$code" ]; then
    echo "FAIL: $what: exit $got, expected $code"; grep -v '^\s*$' "$work/out.txt" | head -20; status=1
  else
    echo "ok: $what: exit $got"
  fi
}
check_run() {  # check_run WORKLOAD NP PLAN
  local workload=$1 np=$2 plan=$3
  expect_exit 0 "$(basename "$workload") on $np ranks" "$np" "$plan" --workload "$workload" -n 3 -w 1 \
    --blocking --alone 2 --json "$work/step.json" || return
  "$flexplan" whatif "$source_dir/bench/flexbench/loopback-$np.json" --workload "$workload" \
    --format json --no-advice -q -a ring > "$work/whatif.json" || { echo "FAIL: whatif"; status=1; return; }
  python3 - "$work/step.json" "$work/whatif.json" <<'PY' || status=1
import json, sys
step, whatif = (json.load(open(p)) for p in sys.argv[1:3])
model = whatif["points"][0]["step"]
errors = []
if step["wrong"] != 0:
    errors.append(f"#wrong {step['wrong']}")
got = [(b["bytes"], round(b["ready_s"], 9)) for b in step["buckets"]]
want = [(int(b["bytes"]), round(b["ready_s"], 9)) for b in model["buckets"]]
if got != want:
    errors.append(f"buckets (bytes, ready) {got}, the model's {want}")
compute = step["workload"]["compute_s"]
if abs(compute - model["compute_s"]) > 1e-9:
    errors.append(f"compute {compute} s, the model's {model['compute_s']} s")
if min(step["steps_s"]) < compute:
    errors.append(f"a step took {min(step['steps_s'])} s, less than its compute {compute} s")
for i, b in enumerate(step["buckets"]):
    if b["start_s"] < b["ready_s"] or b["end_s"] < b["start_s"] or b["alone_s"] is None or b["alone_s"] <= 0:
        errors.append(f"bucket {i}: ready {b['ready_s']}, start {b['start_s']}, end {b['end_s']}, alone {b['alone_s']}")
if step["model_with_alone_s"] is None or step["model_with_alone_s"] < compute:
    errors.append(f"step model on the timed all-reduces: {step['model_with_alone_s']}")
if len(step["steps_s"]) != 3:
    errors.append(f"{len(step['steps_s'])} timed steps, asked for 3")
for e in errors:
    print(f"FAIL: {step['workload']['name']}: {e}")
if not errors:
    print(f"ok: {step['workload']['name']}: {len(got)} buckets as the model's, results right, sleeps kept")
sys.exit(1 if errors else 0)
PY
}
check_run "$work/layers.json" 2 "$work/plan-2.bin"
check_run "$work/short.json" 5 "$work/plan-5.bin"
expect_exit 2 "a missing workload file" 2 "$work/plan-2.bin" --workload "$work/none.json" --blocking
expect_exit 2 "a layer without backward_seconds" 2 "$work/plan-2.bin" --workload "$work/bad.json" --blocking
expect_exit 2 "a plan for 5 ranks" 2 "$work/plan-5.bin" --workload "$work/layers.json" --blocking
expect_exit 2 "an algorithm the plan lacks" 2 "$work/plan-2.bin" --workload "$work/layers.json" -a nothing --blocking
expect_exit 2 "no --workload" 2 "$work/plan-2.bin" --blocking
[ $status -eq 0 ] && echo "PASS: flexplan_train_step runs the model's step and checks its input"
exit $status
