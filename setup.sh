#!/usr/bin/env bash
# Sets up and builds flexplan on Debian 12: installs the Debian packages that are missing
# (idempotent; does nothing when all are there), configures with CMake and builds.
#
#   ./setup.sh            install what is missing, build into build/
#   ./setup.sh test       ... then run every test (ctest)
#   ./setup.sh asan       build into build-asan/ with AddressSanitizer+UBSan and run the tests
#
# Environment: BUILD_DIR (default build), JOBS (default: all cores).
set -euo pipefail
cd "$(dirname "$0")"

packages=(cmake g++ ninja-build pkg-config make
          libboost-graph-dev nlohmann-json3-dev libfmt-dev libcli11-dev libgtest-dev
          libucx-dev ucx-utils libopenmpi-dev openmpi-bin coinor-libclp-dev
          # the PyTorch backend (python/, tests/torch): Debian's CPU torch for /usr/bin/python3
          python3-torch libtorch-dev pybind11-dev
          # `flexplan codegen --target dot` output is checked with Graphviz, docs render with it
          graphviz
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

mode=${1:-build}
build_dir=${BUILD_DIR:-build}
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "$mode" = asan ]; then
  build_dir=${BUILD_DIR:-build-asan}
  cmake_args+=(-DFLEXPLAN_SANITIZE=ON)
fi
jobs=${JOBS:-$(nproc)}

cmake -S . -B "$build_dir" "${cmake_args[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs"

# Open MPI refuses to start as root unless told; the tests launch it as whoever runs them.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

case "$mode" in
  build) ;;
  test|asan) ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" ;;
  *) echo "setup: unknown mode '$mode' (build, test, asan)" >&2; exit 2 ;;
esac
