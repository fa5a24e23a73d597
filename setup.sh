#!/usr/bin/env bash
# Sets up and builds flexplan on Debian 12: installs the Debian packages that are missing
# (idempotent; does nothing when all are there), configures with CMake and builds.
#
#   ./setup.sh            install what is missing, build into build/ (gcc)
#   ./setup.sh deps       only install what is missing
#   ./setup.sh test       ... then run every test (ctest)
#   ./setup.sh asan       build with clang, AddressSanitizer and UBSan into build-asan/, then
#                         run the unit and MPI tests there
#   ./setup.sh fuzz       build the libFuzzer harnesses with clang into build-fuzz/ and run each
#                         for FUZZ_SECONDS (default 60) from its corpus in fuzz/corpus/; a crash
#                         fails (the input that crashed is kept under build-fuzz/crashes/)
#
# Environment: BUILD_DIR (default per mode above), JOBS (default: all cores), FUZZ_SECONDS.
#
# Debug information is line tables only (-g1): backtraces and debuggers still name file and
# line, and a build compiles about 30% faster than with full -g (cli/cmd_predict.cpp with
# gcc 12: 25.6 s against 17.8 s of CPU). The sanitizer build has none at -O1: with clang 14
# even line tables cost as much as -g (36.8 s against 22.6 s for the same file); its reports
# still name every function, and a developer chasing one rebuilds with -g.
set -euo pipefail
cd "$(dirname "$0")"

mode=${1:-build}
case "$mode" in
  deps|build|test|asan|fuzz) ;;
  *) echo "setup: unknown mode '$mode' (deps, build, test, asan, fuzz)" >&2; exit 2 ;;
esac

packages=(cmake g++ ninja-build pkg-config make
          libboost-graph-dev nlohmann-json3-dev libfmt-dev libcli11-dev libgtest-dev
          libucx-dev ucx-utils libopenmpi-dev openmpi-bin coinor-libclp-dev
          # the PyTorch backend (python/, tests/torch): Debian's CPU torch for /usr/bin/python3
          python3-torch libtorch-dev pybind11-dev
          # `flexplan codegen --target dot` output is checked with Graphviz, docs render with it
          graphviz
          # clang builds: asan mode and the libFuzzer harnesses (libclang-rt-14-dev has the
          # sanitizer and fuzzer runtimes, llvm-14 the symbolizer for readable reports)
          clang-14 libclang-rt-14-dev llvm-14
          # `flexplan whatif --report` pages are rendered in headless Chromium by a test
          chromium
          # the emulated cluster (bench/cluster, tests/cluster): namespaces, shaping, delay
          iproute2 iptables kmod procps util-linux python3 iperf3 gcc libc6-dev
          libnetfilter-queue-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "$mode" = deps ] && exit 0

jobs=${JOBS:-$(nproc)}
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
clang=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)
case "$mode" in
  build|test) build_dir=${BUILD_DIR:-build} ;;
  asan) build_dir=${BUILD_DIR:-build-asan}
        cmake_args+=("${clang[@]}" -DFLEXPLAN_SANITIZE=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG") ;;
  fuzz) build_dir=${BUILD_DIR:-build-fuzz}; cmake_args+=("${clang[@]}" -DFLEXPLAN_FUZZ=ON) ;;
esac

cmake -S . -B "$build_dir" "${cmake_args[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs"

# Open MPI refuses to start as root unless told; the tests launch it as whoever runs them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer

case "$mode" in
  build) ;;
  test) ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" ;;
  # The emulated cluster's timing test is left out: it compares speeds, which the sanitizers
  # distort. So are jobs of 4 ranks and more: on 2 cores they run each rank's code 4-12 times
  # over at 3-5x the cost, through the paths the jobs of 1-3 ranks take.
  asan) ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" -LE cluster -E '_np([4-9]|[1-9][0-9])' ;;
  fuzz)
    mkdir -p "$build_dir/crashes"
    for harness in topology plan_binary plan_text topo_import; do
      # New inputs go to a scratch copy; the checked-in corpus stays as it is.
      work=$(mktemp -d)
      dict=()
      [ -f "fuzz/$harness.dict" ] && dict=(-dict="fuzz/$harness.dict")
      echo "setup: fuzzing $harness for ${FUZZ_SECONDS:-60} s"
      "$build_dir/fuzz/fuzz_$harness" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
        -artifact_prefix="$build_dir/crashes/$harness-" "$work" "fuzz/corpus/$harness"
      rm -rf "$work"
    done
    ;;
esac
