# Shared by the before/after scripts (bench/planning/compare_binaries.sh,
# bench/verify/compare_load.sh), which source it: two binaries run in turn, round after round,
# so that a noisy shared host slows both alike.

# Sets `rounds` from ROUNDS (default 3); exits 2 when it is not a positive number.
side_by_side_rounds() {
  rounds=${ROUNDS:-3}
  [[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
}

# Exits 2 unless every argument is an executable.
side_by_side_executables() {
  local binary
  for binary in "$@"; do
    [ -x "$binary" ] || { echo "$0: '$binary' is not an executable" >&2; exit 2; }
  done
}

# The order of round $1: "before after" in even rounds, "after before" in odd ones, so that
# neither binary always runs on a cache the other warmed.
side_by_side_order() {
  if (($1 % 2 == 0)); then echo before after; else echo after before; fi
}

# The median of the numbers on standard input, one a line.
side_by_side_median() {
  sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
