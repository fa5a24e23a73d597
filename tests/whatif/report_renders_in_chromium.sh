#!/usr/bin/env bash
# Renders `flexplan whatif --report` in headless Chromium at 700 and 1400 px wide: the page must
# log nothing to the console, the screenshot must be a PNG of the window size asked for, and
# nothing may reach past the window's width (no sideways scrolling, no cut chart labels): a
# copy of the page carries a script that measures every element's box and writes the result
# into the DOM, which Chromium dumps. A page that logs an error and a page wider than the window
# are rendered first, to show that the checks can fail.
#   report_renders_in_chromium.sh FLEXPLAN SOURCE_DIR WORK_DIR
# Exit 77 (ctest: skipped) only where chromium is not installed; setup.sh installs it.
set -euo pipefail
flexplan=$1 source_dir=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
browser=$(command -v chromium || true)
if [ -z "$browser" ]; then
  echo "SKIP: chromium is not installed here (setup.sh installs it: apt-get install chromium)"
  exit 77
fi

chromium_run() {  # chromium_run WIDTH HEIGHT ARGS...: headless, this test's own profile
  local width=$1 height=$2; shift 2
  timeout 90 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --hide-scrollbars --window-size="$width,$height" "$@"
}
render() {  # render PAGE PNG LOG WIDTH HEIGHT: console messages, failed loads and errors on stderr
  chromium_run "$4" "$5" --enable-logging=stderr --v=0 --screenshot="$2" "file://$1" >"$3" 2>&1
}
console_problems() { grep -E ':CONSOLE|Uncaught|Failed to load' "$1" || true; }
png_size() {
  /usr/bin/python3 -c '
import struct, sys
data = open(sys.argv[1], "rb").read(24)
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
print("%dx%d" % struct.unpack(">II", data[16:24]))' "$1"
}

# The overflow probe: every element's box against the window's width, and the document's
# scroll width, written into <pre id="overflow-probe"> for --dump-dom.
probe='<script>
window.addEventListener("load", function () {
  var width = document.documentElement.clientWidth, over = [];
  document.querySelectorAll("body *").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > width + 0.5 || r.left < -0.5))
      over.push(el.tagName + " " + Math.round(r.left) + ".." + Math.round(r.right) + " " +
                (el.textContent || "").trim().slice(0, 40));
  });
  var pre = document.createElement("pre");
  pre.id = "overflow-probe";
  pre.textContent = "PROBE width=" + width + " scrollWidth=" + document.documentElement.scrollWidth +
                    " over=" + over.length + (over.length ? "\n" + over.slice(0, 8).join("\n") : "");
  document.body.appendChild(pre);
});
</script>'
overflow() {  # overflow PAGE WIDTH: prints the probe's report; exit status 1 when anything overflows
  local copy="$work/probe-$(basename "$1" .html)-$2.html"
  { cat "$1"; printf '%s\n' "$probe"; } >"$copy"
  local dom
  dom=$(chromium_run "$2" 900 --virtual-time-budget=5000 --dump-dom "file://$copy" 2>/dev/null)
  local report
  report=$(printf '%s\n' "$dom" | sed -n '/<pre id="overflow-probe">/,/<\/pre>/p' |
           sed -e 's/.*<pre id="overflow-probe">//' -e 's/<\/pre>.*//')
  [ -n "$report" ] || { echo "the probe did not run (no PROBE line in the dumped DOM)"; return 2; }
  echo "$report"
  local vw sw n
  vw=$(printf '%s' "$report" | sed -n 's/.*PROBE width=\([0-9]*\).*/\1/p')
  sw=$(printf '%s' "$report" | sed -n 's/.*scrollWidth=\([0-9]*\).*/\1/p')
  n=$(printf '%s' "$report" | sed -n 's/.*over=\([0-9]*\).*/\1/p')
  [ "$sw" -le "$vw" ] && [ "$n" -eq 0 ]
}

# The negative controls: a page with a console error, and a page wider than the window.
printf '<!DOCTYPE html><html><body><script>console.error("broken")</script></body></html>' \
  >"$work/broken.html"
render "$work/broken.html" "$work/broken.png" "$work/broken.log" 700 900
if [ -z "$(console_problems "$work/broken.log")" ]; then
  echo "FAIL: the console check missed the error of a broken page"; cat "$work/broken.log"; exit 1
fi
printf '<!DOCTYPE html><html><body><div style="width:1000px">wide</div></body></html>' >"$work/wide.html"
if overflow "$work/wide.html" 700 >"$work/wide.probe"; then
  echo "FAIL: the overflow check missed a 1000 px wide element in a 700 px window"; cat "$work/wide.probe"; exit 1
fi
grep -q 'PROBE' "$work/wide.probe" || { echo "FAIL: the probe did not run on the wide page"; cat "$work/wide.probe"; exit 1; }

# A report with several sizes, link names and a workload; long point labels on purpose.
"$flexplan" whatif "$source_dir/topologies/asym-3level-b.json" \
  'machines.bandwidth*=0.5,1,2,4' 'under:spine/rack-b.latency*=1,4' \
  -b 64K -e 256M -f 16 --workload resnet50 -q --report "$work/report" >"$work/whatif.txt"
page="$work/report/index.html"
grep -q '<svg' "$page" || { echo "FAIL: no SVG in $page"; exit 1; }
for width in 700 1400; do
  height=1600
  render "$page" "$work/report-$width.png" "$work/report-$width.log" "$width" "$height"
  problems=$(console_problems "$work/report-$width.log")
  if [ -n "$problems" ]; then echo "FAIL: console output while rendering the report at $width px:"; echo "$problems"; exit 1; fi
  size=$(png_size "$work/report-$width.png")
  [ "$size" = "${width}x${height}" ] || { echo "FAIL: screenshot is $size, expected ${width}x${height}"; exit 1; }
  if ! overflow "$page" "$width" >"$work/report-$width.probe"; then
    echo "FAIL: the report overflows a $width px window:"; cat "$work/report-$width.probe"; exit 1
  fi
  echo "ok: $width px: no console output, screenshot $size, $(head -1 "$work/report-$width.probe")"
done
