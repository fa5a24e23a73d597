#!/bin/bash
# Runs a test command up to N times until it passes: for tests that judge timings on a shared
# host, where noise fails an attempt now and then but broken logic fails every one.
#   retry.sh N COMMAND...
attempts=$1
shift
for ((i = 1; i <= attempts; ++i)); do
  "$@" && exit 0
  status=$?
  [ "$i" -lt "$attempts" ] && echo "retry.sh: attempt $i of $attempts failed (exit $status); again"
done
exit "$status"
