#!/usr/bin/env bash
# Renders `flexplan whatif --report` in headless Chromium: the page must log nothing to the
# console, and the screenshot must be a PNG of the window size asked for. A page that does log
# an error is rendered first, to show that the check can fail.
#   report_renders_in_chromium.sh FLEXPLAN SOURCE_DIR WORK_DIR
set -euo pipefail
flexplan=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
browser=$(command -v chromium || true)
[ -n "$browser" ] || { echo "FAIL: chromium is not installed (setup.sh installs it)"; exit 1; }

width=1200 height=1600
# Console messages, failed loads and uncaught errors, as Chromium logs them on stderr.
render() {  # render PAGE PNG LOG
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --enable-logging=stderr --v=0 \
    --window-size=$width,$height --screenshot="$2" "file://$1" >"$3" 2>&1
}
console_problems() { grep -E ':CONSOLE|Uncaught|Failed to load' "$1" || true; }

# The negative control: a page with a console error must be caught.
printf '<!DOCTYPE html><html><body><script>console.error("broken")</script></body></html>' \
  >"$work/broken.html"
render "$work/broken.html" "$work/broken.png" "$work/broken.log"
if [ -z "$(console_problems "$work/broken.log")" ]; then
  echo "FAIL: the console check missed the error of a broken page"; cat "$work/broken.log"; exit 1
fi

"$flexplan" whatif "$source_dir/topologies/asym-3level-b.json" \
  'machines.bandwidth*=0.5,1,2,4' 'under:spine/rack-b.latency*=1,4' \
  -b 1M -e 64M -f 64 --workload resnet50 -q --report "$work/report" >"$work/whatif.txt"
page="$work/report/index.html"
grep -q '<svg' "$page" || { echo "FAIL: no SVG in $page"; exit 1; }
render "$page" "$work/report.png" "$work/report.log"
problems=$(console_problems "$work/report.log")
if [ -n "$problems" ]; then echo "FAIL: console output while rendering the report:"; echo "$problems"; exit 1; fi
size=$(/usr/bin/python3 -c '
import struct, sys
data = open(sys.argv[1], "rb").read(24)
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
print("%dx%d" % struct.unpack(">II", data[16:24]))' "$work/report.png")
[ "$size" = "${width}x${height}" ] || { echo "FAIL: screenshot is $size, expected ${width}x${height}"; exit 1; }
echo "ok: report rendered without console output, screenshot $size ($work/report.png)"
