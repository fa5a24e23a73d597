#!/bin/bash
# The checks that need a real GPU, in one run (docs/gpu.md, "On a real GPU"): unpacks the
# bundle of tests/gpu/make_device_bundle.sh, finds the machine's libcudart and libnccl, relocates
# Open MPI, then runs the device tests at world size 1 (NCCL) and on 3 processes sharing the GPU
# (staged UCX), the sparse CUDA tests, compute-sanitizer over both, the MSTopK benchmark and
# flexbench --device --staged. Exits 1 if any check failed.
# Logs go to OUT_DIR (and, after every check, into ARCHIVE.tar.gz when given, so that a run cut
# short still returns what it did); the last lines are a summary, one line per check.
# CHECKS (default "backend sparse sanitizer flexbench"; also "staged", "foldserver",
# "disturb", "collectives" and "sparse_sanitizer", the sparse half of "sanitizer") picks groups
# of checks.
# Usage: [CHECKS="..."] on_device.sh BUNDLE.tar.xz OUT_DIR [ARCHIVE.tar.gz]
set -u
# Every rank runs on this one host, standing in for the plan's machines: allowed, not an error
# (docs/runtime.md, "The plan's machines and the job's hosts").
export FLEXPLAN_ALLOW_HOST_MISMATCH=${FLEXPLAN_ALLOW_HOST_MISMATCH:-1}
bundle=$1 out=$2 archive=${3:-}
mkdir -p "$out"
b=$(mktemp -d)
tar -C "$b" -xJf "$bundle" || { echo "on_device: cannot unpack $bundle"; exit 2; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/gpu.txt"
# libnccl from NCCL's Python wheel or the CUDA tree; libcudart likewise.
find_lib() {
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
    [ -d "$dir" ] && find "$dir/" -maxdepth 5 -name "$1" 2>/dev/null | head -1
  done | head -1
}
# The libcudart the binaries were linked against (its soname, read from the test binary).
cudart_name=$(grep -ao 'libcudart\.so\.[0-9]*' "$b/bin/flexplan_gpu_device_tests" | head -1)
nccl=$(find_lib 'libnccl.so.2') cudart=$(find_lib "${cudart_name:-libcudart.so.13}")
echo "libnccl: ${nccl:-not found}; libcudart: ${cudart:-not found}" | tee -a "$out/gpu.txt"
[ -n "$nccl" ] && [ -n "$cudart" ] || exit 2

usr=$b/root/usr
export LD_LIBRARY_PATH=$usr/lib/x86_64-linux-gnu:$b/lib:$(dirname "$nccl"):$(dirname "$cudart")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$usr PMIX_INSTALL_PREFIX=$usr/lib/x86_64-linux-gnu/pmix2 PATH=$usr/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mca_base_component_show_load_errors=0
export FLEXPLAN_BLOCKING=1 FLEXPLAN_TIMEOUT_MS=60000
mpirun="$usr/bin/orterun --oversubscribe"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)

summary=()
failed=0
check() {  # check NAME SECONDS COMMAND...: runs it with a time limit, logs to OUT_DIR/NAME.txt
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local code=$?
  summary+=("$(printf '%-28s exit %3d  %4ds' "$name" "$code" $((SECONDS - start)))")
  [ "$code" -eq 0 ] || failed=$((failed + 1))
  printf '%s\n' "${summary[@]}" > "$out/summary.txt"
  [ -z "$archive" ] || tar -C "$out" -czf "$archive" .
  tail -25 "$out/$name.txt"
}

checks=${CHECKS:-backend sparse sanitizer flexbench}
wants() { case " $checks " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if wants backend; then
  check device_np1 90 $mpirun -np 1 "$b/bin/flexplan_gpu_device_tests"
  check device_np3_staged 60 $mpirun -np 3 "$b/bin/flexplan_gpu_device_tests"
fi
if wants disturb; then
  # The staged device arithmetic on 3 processes while another thread of each synchronizes the
  # device, allocates device memory or allocates pinned memory: one at a time, then none. (On
  # an H100 the two allocating runs hang: docs/gpu.md.)
  for what in sync device pinned none; do
    FLEXPLAN_TIMEOUT_MS=8000 FLEXPLAN_TEST_DISTURB=$what check "disturb_${what}_np3" 25 $mpirun \
      -x FLEXPLAN_TEST_DISTURB -x FLEXPLAN_TIMEOUT_MS -np 3 \
      "$b/bin/flexplan_gpu_device_tests" --gtest_filter=*UnderDeviceWide*
  done
fi
if wants staged; then
  # The staged UCX path alone: 3 processes on the GPU. (With "backend", device_np3_staged has
  # run these tests; "disturb" is a diagnosis of one of them.) A hang is diagnosed with eager
  # kernel loading.
  if ! wants backend && ! wants disturb; then
    check staged_np3 45 $mpirun -np 3 "$b/bin/flexplan_gpu_device_tests" --gtest_filter=*Staged*
    [ "$failed" -eq 0 ] || CUDA_MODULE_LOADING=EAGER check staged_np3_eager_loading 45 $mpirun -x CUDA_MODULE_LOADING \
      -np 3 "$b/bin/flexplan_gpu_device_tests" --gtest_filter=*Staged*
  fi
  # flexbench with the local reductions in the fold server and on the host (the default), side
  # by side.
  here=$(cd "$(dirname "$0")/../.." && pwd)
  "$b/bin/flexplan" "$here/topologies/paper-2m-4.json" -o "$b/plan4.bin" > /dev/null &&
    "$b/bin/flexplan" "$here/bench/flexbench/loopback-2.json" -o "$b/plan2.bin" > /dev/null
  for ranks in 2 4; do
    for arithmetic in device host; do
      FLEXPLAN_BLOCKING=0 FLEXPLAN_STAGED_ARITHMETIC=$arithmetic check "staged_${arithmetic}_np$ranks" ${STAGED_LIMIT:-60} \
        $mpirun -x FLEXPLAN_STAGED_ARITHMETIC -np $ranks "$b/bin/flexbench" "$b/plan$ranks.bin" --device --staged \
        -b 8 -e 128M -f 4 -n 10 -w 3
    done
  done
fi
if wants collectives; then
  # Reduce-scatter, all-gather, broadcast and reduce (root 1) on device buffers through the staged
  # UCX path, 2 and 4 processes on the GPU, every element checked, in and out of place.
  here=$(cd "$(dirname "$0")/../.." && pwd)
  every="--roots 1 --collectives allreduce,reduce_scatter,allgather,broadcast,reduce"
  "$b/bin/flexplan" "$here/topologies/paper-2m-4.json" $every -o "$b/every4.bin" > /dev/null &&
    "$b/bin/flexplan" "$here/bench/flexbench/loopback-2.json" $every -o "$b/every2.bin" > /dev/null ||
    summary+=("flexplan could not write the collectives' plans")
  for ranks in 2 4; do
    for collective in reduce_scatter allgather broadcast reduce; do
      FLEXPLAN_BLOCKING=0 check "collective_${collective}_np$ranks" ${COLLECTIVE_LIMIT:-60} $mpirun -np $ranks \
        "$b/bin/flexbench" "$b/every$ranks.bin" --device --staged --collective $collective -r 1 \
        -b 8 -e 64M -f 8 -n 5 -w 2
    done
  done
fi
if wants foldserver && [ -n "$sanitizer" ]; then
  # The staged path's fold server (a kernel polling pinned memory) under memcheck and synccheck.
  check sanitizer_fold_server 60 $mpirun -np 1 "$sanitizer" --tool memcheck --report-api-errors no \
    --error-exitcode 9 "$b/bin/flexplan_gpu_device_tests" --gtest_filter='*FoldServer*'
  check synccheck_fold_server 45 $mpirun -np 1 "$sanitizer" --tool synccheck --error-exitcode 9 \
    "$b/bin/flexplan_gpu_device_tests" --gtest_filter='*FoldServer*'
fi
if wants sparse; then
  check sparse_cuda 120 "$b/bin/flexplan_sparse_cuda_tests"
  check mstopk_bench 150 "$b/bin/flexplan_mstopk_cuda_bench"
  # Other builds of the benchmark given to make_device_bundle.sh (flexplan_mstopk_cuda_bench_LABEL,
  # say an earlier commit's), timed in the same run.
  for other in "$b"/bin/flexplan_mstopk_cuda_bench_*; do
    [ -x "$other" ] && check "mstopk_bench_${other##*_bench_}" 120 "$other"
  done
fi
if wants sanitizer && [ -n "$sanitizer" ]; then
  # NCCL's init asks for the attributes of kernels its build has no image of for this GPU and
  # takes the error as the answer (8 reports of error 209, all in ncclInitKernelsForDevice):
  # API errors are not reported; memory errors are.
  check sanitizer_device_np1 120 $mpirun -np 1 "$sanitizer" --tool memcheck --report-api-errors no \
    --error-exitcode 9 "$b/bin/flexplan_gpu_device_tests" --gtest_filter=-*Bandwidth*
fi
if { wants sanitizer || wants sparse_sanitizer; } && [ -n "$sanitizer" ]; then
  check sanitizer_sparse 120 "$sanitizer" --tool memcheck --error-exitcode 9 "$b/bin/flexplan_sparse_cuda_tests"
  for tool in racecheck synccheck initcheck; do
    check ${tool}_sparse 60 "$sanitizer" --tool $tool --error-exitcode 9 \
      "$b/bin/flexplan_sparse_cuda_tests" --gtest_filter=*SixPasses*
  done
elif wants sanitizer || wants sparse_sanitizer; then
  summary+=("compute-sanitizer not found")
fi
if wants flexbench; then
  # nccl-tests columns on device buffers through the staged UCX path, every rank on the one GPU,
  # beside the same plan on host buffers (what the staging costs).
  here=$(cd "$(dirname "$0")/../.." && pwd)
  "$b/bin/flexplan" "$here/topologies/paper-2m-4.json" -o "$b/plan4.bin" > /dev/null &&
    "$b/bin/flexplan" "$here/bench/flexbench/loopback-2.json" -o "$b/plan2.bin" > /dev/null ||
    summary+=("flexplan could not write the benchmark's plans")
  # The staged path's local reductions on the host (the default), then in the fold server.
  for plan in plan2 plan4; do
    ranks=${plan#plan}
    FLEXPLAN_BLOCKING=0 check "flexbench_staged_np$ranks" 150 $mpirun -np "$ranks" "$b/bin/flexbench" "$b/$plan.bin" --device --staged \
      -b 8 -e 256M -f 4 -n 10 -w 3
    FLEXPLAN_BLOCKING=0 FLEXPLAN_STAGED_ARITHMETIC=device check "flexbench_staged_device_arith_np$ranks" 150 \
      $mpirun -x FLEXPLAN_STAGED_ARITHMETIC -np "$ranks" "$b/bin/flexbench" "$b/$plan.bin" --device --staged \
      -b 8 -e 256M -f 4 -n 10 -w 3
    FLEXPLAN_BLOCKING=0 check "flexbench_host_np$ranks" 150 $mpirun -np "$ranks" "$b/bin/flexbench" "$b/$plan.bin" \
      -b 8 -e 256M -f 4 -n 10 -w 3 --mpi 0
  done
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
[ "$failed" -eq 0 ] || { echo "on_device: $failed check(s) failed"; exit 1; }
