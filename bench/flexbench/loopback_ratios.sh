#!/bin/bash
# The loopback measurements of docs/flexbench.md: flexplan vs MPI_Allreduce on this host for 2,
# 4, 5 and 8 ranks, small (8 B - 64 KB) and large (1 - 128 MB) float32 sums, for one build or
# several side by side.
#   bench/flexbench/loopback_ratios.sh OUT_DIR NAME=BUILD_DIR[+PLANNER_ARGS] [...]
# Plans: bench/flexbench/loopback-{2,4,5,8}.json (N learners on one machine, with this host's
# reduction rate), planned by each build's own flexplan, with the plan's own choice of
# schedule; PLANNER_ARGS (spaces as '+', e.g. off=build+--reduce-bandwidth=none) are passed to
# that flexplan, so that one build can run under two plans side by side. A build older than the
# topology field "reduce_bandwidth" refuses these files (unknown field). With several builds, each
# (ranks, sizes) run goes through the builds back to back, so that they see the same load; the
# records land in OUT_DIR/NAME/, and OUT_DIR/conditions.txt gets the date and load averages.
# The runtime runs in blocking mode and MPI with mpi_yield_when_idle, so that waiting ranks
# yield their core: the ranks do not have cores of their own (5 and 8 ranks on 2 cores, and a
# machine shared with other work). FLEXBENCH_EXTRA adds flexbench options (e.g. "-n 5").
set -eu
# Every rank runs on this one host, standing in for the plan's machines: allowed, not an error
# (docs/runtime.md, "The plan's machines and the job's hosts").
export FLEXPLAN_ALLOW_HOST_MISMATCH=${FLEXPLAN_ALLOW_HOST_MISMATCH:-1}
out=$1
shift
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR NAME=BUILD_DIR [NAME=BUILD_DIR ...]" >&2; exit 2; }
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{ echo "start: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$out/conditions.txt"
names=()
for build_spec in "$@"; do
  name=${build_spec%%=*} build=${build_spec#*=}
  planner_args=()
  if [[ $build == *+* ]]; then
    IFS=+ read -r -a planner_args <<< "${build#*+}"
    build=${build%%+*}
  fi
  names+=("$name")
  mkdir -p "$out/$name"
  for ranks in 2 4 5 8; do
    "$build/flexplan" "$source_dir/bench/flexbench/loopback-$ranks.json" -o "$out/$name/plan-$ranks.bin" \
      ${planner_args[@]+"${planner_args[@]}"} > /dev/null
  done
done
for ranks in 2 4 5 8; do
  mpirun=(mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1)
  for band in small large; do
    case $band in
      # 400 iterations: with 5-8 ranks on 2 cores the iteration times are bimodal, and medians
      # of 50 moved 2x between runs at a size.
      small) sizes=(-b 8 -e 64K -f 2 -n 400 -w 40) ;;
      large) sizes=(-b 1M -e 128M -f 2 -n 10 -w 2) ;;
    esac
    for build_spec in "$@"; do
      name=${build_spec%%=*} build=${build_spec#*=}
      build=${build%%+*}
      echo "== $name, $ranks ranks, $band"
      # shellcheck disable=SC2086
      "${mpirun[@]}" "$build/flexbench" "$out/$name/plan-$ranks.bin" "${sizes[@]}" --blocking \
        ${FLEXBENCH_EXTRA:-} --json "$out/$name/$band-$ranks.json" | tee "$out/$name/$band-$ranks.txt"
    done
  done
done
echo "end: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/conditions.txt"
cat "$out/conditions.txt"
python3 "$source_dir/bench/flexbench/ratio_table.py" "$out" "${names[@]}"
