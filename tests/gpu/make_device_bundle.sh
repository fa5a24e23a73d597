#!/bin/sh
# Packs what the GPU checks need on a machine that has CUDA and NCCL but none of the project's
# Debian packages: the binaries, the shared libraries they load (not glibc, libstdc++, libcudart
# or libnccl, which that machine has), and Open MPI's tree (mpirun, its plugins, help files) to
# be relocated with OPAL_PREFIX. tests/gpu/on_device.sh unpacks and runs it (docs/gpu.md).
# Usage: make_device_bundle.sh BUILD_DIR OUTPUT.tar.xz [EXTRA_BINARY...]
# (extra binaries, such as a build of an earlier commit to time beside this one, go to bin/ too)
set -eu
build=$1 output=$2
shift 2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/root"

binaries="tests/gpu/flexplan_gpu_device_tests sparse/cuda/flexplan_sparse_cuda_tests flexplan flexbench
          bench/sparse/flexplan_mstopk_cuda_bench"
for b in $binaries; do
  [ -x "$build/$b" ] || { echo "make_device_bundle: $build/$b is missing: build it first" >&2; exit 2; }
  cp "$build/$b" "$stage/bin/"
  strip "$stage/bin/$(basename "$b")"
done
for b in "$@"; do
  cp "$b" "$stage/bin/"
  strip "$stage/bin/$(basename "$b")"
done

# Open MPI, its runtime (PMIx, hwloc, libevent) and UCX with their plugins, at their install
# paths under root/, so that OPAL_PREFIX=root/usr finds them.
for package in openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libucx0 \
               libevent-core-2.1-7 libevent-pthreads-2.1-7; do
  # The names are Debian 12's (setup.sh installs them); elsewhere say which is missing.
  dpkg -s "$package" > /dev/null 2>&1 || { echo "make_device_bundle: package $package is not installed" >&2; exit 2; }
  dpkg -L "$package" | while read -r f; do
    case $f in */doc/*|*/man/*|*.a|*/lintian/*) continue ;; esac
    if [ -L "$f" ] || [ -f "$f" ]; then mkdir -p "$stage/root$(dirname "$f")" && cp -a "$f" "$stage/root$f"; fi
  done
done

# Every other library the binaries load, except those the GPU machine brings (its CUDA and
# NCCL, and its own newer C and C++ runtimes).
for b in "$stage"/bin/*; do
  if ldd "$b" | grep -q "not found"; then
    echo "make_device_bundle: $(basename "$b") needs a library this machine lacks:" >&2
    ldd "$b" | grep "not found" >&2
    exit 2
  fi
done
for b in "$stage"/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    libcudart.so*|libnccl.so*|libcuda.so*) ;;
    *) [ -e "$stage/root/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ] || cp -L "$lib" "$stage/lib/" ;;
  esac
done

tar -C "$stage" -cJf "$output" bin lib root
echo "make_device_bundle: $output ($(du -h "$output" | cut -f1))"
