#!/usr/bin/env bash
# Installs the build into a scratch prefix, builds examples/cpp against it with
# find_package(flexplan), links the same object with pkg-config's flags, and runs the example
# and the installed flexplan and flexbench under mpirun -np 2.
#
#   install_consumer.sh CMAKE BUILD_DIR SOURCE_DIR GENERATOR CXX MPICXX MPIRUN [MPIRUN_ARGS...]
set -euo pipefail
cmake=$1 build=$(realpath "$2") source=$(realpath "$3") generator=$4 cxx=$5 mpicxx=$6
shift 6
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*"; exit 1; }

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/flexplan bin/flexbench bin/flexplan-probe lib/cmake/flexplan/flexplanConfig.cmake \
         lib/cmake/flexplan/flexplanConfigVersion.cmake lib/cmake/flexplan/flexplanTargets.cmake \
         lib/pkgconfig/flexplan.pc lib/libflexplan_runtime.a lib/libflexplan_sparse.a \
         lib/libflexplan_planner.a include/flexplan/runtime/communicator.hpp \
         include/flexplan/planner/plan_builder.hpp include/flexplan/version.hpp; do
  [ -e "$prefix/$f" ] || fail "cmake --install left out $f"
done
# Nothing of the build or source tree leaks into the package (it must work once they are gone).
if grep -lF -e "$build" -e "$source" "$prefix"/lib/cmake/flexplan/*.cmake "$prefix/lib/pkgconfig/flexplan.pc"; then
  fail "the installed package names the build or source tree"
fi

# The example against the installed tree, exactly as a user builds it.
"$cmake" -S "$source/examples/cpp" -B "$work/example" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
         -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring examples/cpp"; }
grep -q "^flexplan_DIR:PATH=$prefix/lib/cmake/flexplan$" "$work/example/CMakeCache.txt" ||
  fail "find_package(flexplan) found another flexplan: $(grep '^flexplan_DIR' "$work/example/CMakeCache.txt")"
"$cmake" --build "$work/example" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building examples/cpp"; }

run() {  # run NAME COMMAND...: runs under mpirun -np 2, output to $work/NAME.out
  local name=$1
  shift
  local rc=0
  "${mpirun[@]}" -np 2 "$@" >"$work/$name.out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || { cat "$work/$name.out"; fail "$name exited $rc"; }
}
run example "$work/example/plan_and_allreduce" "$source/examples/cpp/two-learners.json"
cat "$work/example.out"
grep -q "1 MiB all-reduce by .*, predicted " "$work/example.out" || fail "no prediction printed"
for r in 0 1; do
  grep -q "^rank $r of 2: sum correct" "$work/example.out" || fail "rank $r: no correct sum"
done

# pkg-config's link line (static libraries: sparse included) links the same object.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
object=$(find "$work/example" -name 'plan_and_allreduce.cpp.o' | head -1)
[ -n "$object" ] || fail "no object file of the example"
# shellcheck disable=SC2046
"$mpicxx" -o "$work/pc_example" "$object" $(pkg-config --libs flexplan) 2>"$work/pc.log" ||
  { cat "$work/pc.log"; fail "linking with pkg-config --libs flexplan"; }
run pc_example "$work/pc_example" "$source/examples/cpp/two-learners.json"
grep -q "^rank 1 of 2: sum correct" "$work/pc_example.out" || fail "pkg-config-linked example: no correct sum"
includedir=$(pkg-config --variable=includedir flexplan)
[ "$(realpath "$includedir")" = "$(realpath "$prefix/include")" ] || fail "flexplan.pc's includedir is $includedir"
pkg-config --cflags flexplan | grep -q -- "-I$includedir/flexplan" || fail "pkg-config --cflags: $(pkg-config --cflags flexplan)"

# The installed programs: plan, then time the plan.
"$prefix/bin/flexplan" "$source/examples/cpp/two-learners.json" -o "$work/plan.bin" >"$work/plan.out" 2>&1 ||
  { cat "$work/plan.out"; fail "installed flexplan"; }
run flexbench "$prefix/bin/flexbench" "$work/plan.bin" -b 1K -e 4K -f 2
grep -q "4096" "$work/flexbench.out" || { cat "$work/flexbench.out"; fail "installed flexbench printed no 4096-byte row"; }
# `flexplan probe` runs the flexplan-probe installed beside it.
run probe "$prefix/bin/flexplan" probe -o "$work/probed.json" --budget 5s
[ -s "$work/probed.json" ] || { cat "$work/probe.out"; fail "installed flexplan probe wrote no topology"; }
echo "PASS: installed into a scratch prefix; examples/cpp built with find_package(flexplan) and linked with pkg-config; both ran on 2 ranks, and so did the installed flexbench and flexplan probe"
