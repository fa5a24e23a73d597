#!/usr/bin/env bash
# Times how long flexplan takes to refuse deeply nested topology JSON (issue 39: the reader once
# spelled out a path for every node past the 64-level limit, about n^3; it must stay linear).
#
#   bench/parsing/deep_nesting.sh [FLEXPLAN] [LEVELS...]   (default: build/flexplan; 100000 1000000)
#
# For each depth it writes three files and runs `flexplan topo show` on each:
#   nodes   a chain of node objects, each with a name and a link (about 60 bytes a level);
#   bare    a chain of {"children": [ ... ]} (14 bytes a level: the most levels per byte);
#   arrays  nested arrays in a link, [[[...]]] (no node past the first).
# Prints per file: levels, size, exit code (2 is a refusal), wall seconds, peak KiB, and the
# message without its location. A run past TIMEOUT seconds (default 120) is stopped and shows exit 124.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
flexplan=${1:-$here/../../build/flexplan}
shift $(($# >= 1 ? 1 : 0))
levels=("$@")
[ ${#levels[@]} -gt 0 ] || levels=(100000 1000000)
[ -x "$flexplan" ] || { echo "$0: $flexplan is not an executable" >&2; exit 2; }
timeout_s=${TIMEOUT:-120}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# $(date -u +%FT%TZ), $flexplan, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-7s %9s %10s %5s %8s %9s  %s\n' shape levels bytes exit seconds "peak KiB" message
for n in "${levels[@]}"; do
  for shape in nodes bare arrays; do
    file="$work/$shape-$n.json"
    N=$n SHAPE=$shape /usr/bin/python3 - > "$file" <<'PY'
import os, sys
n, shape = int(os.environ["N"]), os.environ["SHAPE"]
link = '"link": {"bandwidth": "1 GB/s"}'
out = sys.stdout
out.write('{"name": "deep", "root": {"name": "s", "children": [')
if shape == "nodes":
    out.write(('{"name": "n", %s, "children": [' % link) * n)
    out.write('{"name": "a", %s}, {"name": "b", %s}' % (link, link))
    out.write("]}" * n)
elif shape == "bare":
    out.write('{"children": [' * n + "{}" + "]}" * n)
else:
    out.write('{"name": "a", %s}, {"name": "b", "link": ' % link + "[" * n + "]" * n + "}")
out.write("]}}\n")
PY
    set +e
    /usr/bin/time -f "%e %M" -o "$work/time.txt" timeout "$timeout_s" \
      "$flexplan" topo show "$file" > "$work/out.txt" 2>&1
    code=$?
    set -e
    read -r seconds peak < <(tail -n 1 "$work/time.txt")
    # The message without its location, which is hundreds of characters of "children[0]".
    message=$(head -c 100000 "$work/out.txt" | head -n 1 | sed -E 's/.*\]: //' | cut -c1-60)
    printf '%-7s %9s %10s %5s %8s %9s  %s\n' "$shape" "$n" "$(stat -c %s "$file")" "$code" \
      "$seconds" "$peak" "$message"
  done
done
