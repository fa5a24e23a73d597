#!/usr/bin/env bash
# Plans every bundled topology with the plan command's defaults and exports each plan as MSCCL
# XML, printing per topology the exit codes, the files written, the notes (schedules exported as
# a shallower pipeline or as another schedule) and the seconds; then runs the unit test that does
# the same for FLEXPLAN_EXPORT_TREES random trees (default 20), as drawn and of at least 20
# learners, and checks every file it writes.
#   bench/codegen/msccl_sweep.sh [TOPOLOGY.json ...]     (docs/codegen.md, "Every plan exports")
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -eq 0 ]; then set -- "$root"/topologies/*.json; fi
printf '%-22s %5s %8s %6s %6s %5s %9s\n' topology plan plan_s export files notes export_s
for topology in "$@"; do
  name=$(basename "$topology" .json)
  start=$(date +%s.%N)
  "$build/flexplan" "$topology" -o "$work/$name.bin" > "$work/$name.plan.txt" 2>&1
  plan_rc=$?
  planned=$(date +%s.%N)
  "$build/flexplan" codegen "$work/$name.bin" --target msccl-xml -o "$work/$name" > "$work/$name.txt" 2>&1
  export_rc=$?
  done_at=$(date +%s.%N)
  files=$(ls "$work/$name" 2>/dev/null | wc -l)
  notes=$(grep -o 'flexplan: note:' "$work/$name.txt" | wc -l)
  printf '%-22s %5s %8.2f %6s %6s %5s %9.2f\n' "$name" "$plan_rc" "$(echo "$planned - $start" | bc)" "$export_rc" \
    "$files" "$notes" "$(echo "$done_at - $planned" | bc)"
  grep -oE 'flexplan: (note|refused).*' "$work/$name.txt" | cut -c1-300 | sed 's/^/    /'
done
# 20 random trees as drawn (many are small), then 20 of at least 20 learners.
FLEXPLAN_EXPORT_TREES=${FLEXPLAN_EXPORT_TREES:-20} "$build/tests/flexplan_unit_tests" --gtest_filter='Exports.RandomTreesExport'
FLEXPLAN_EXPORT_TREES=${FLEXPLAN_EXPORT_TREES:-20} FLEXPLAN_EXPORT_MIN_LEARNERS=20 \
  "$build/tests/flexplan_unit_tests" --gtest_filter='Exports.RandomTreesExport'
