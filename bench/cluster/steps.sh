# steps.sh - the steps every emulated-cluster experiment takes per configuration, sourced by
# run-experiments.sh, whatif_fidelity.sh and epoch_time.sh (which set HERE, CLUSTER and OUT).

log() { echo "[$(date +%T)] $*" | tee -a "$OUT/run.log"; }

# The gate: `cluster.sh check` up to TRIES times, PAUSE seconds apart, since other jobs on the
# host can hold a link below its rate. Its report goes to DIR/check.txt.
checked() {  # DIR TRIES PAUSE
  local dir=$1 tries=$2 pause=$3 try
  for ((try = 1; try <= tries; try++)); do
    if nice -n -10 "$CLUSTER" check > "$dir/check.txt" 2>&1; then return 0; fi
    log "  check failed (try $try, load $(cut -d' ' -f1-3 /proc/loadavg)): $(tail -1 "$dir/check.txt")"
    [ $try -lt "$tries" ] && sleep "$pause"
  done
  return 1
}

# Calibrates the cluster that is up and writes its topology: DIR/calibration.json and
# DIR/topology.json, errors in DIR/calibrate.err. Further arguments go to calibrate.py.
calibrated_topology() {  # DIR [CALIBRATE_ARGS...]
  local dir=$1; shift
  nice -n -10 "$HERE/calibrate.py" -o "$dir/calibration.json" "$@" 2> "$dir/calibrate.err" \
    && "$HERE/make_topology.py" "$dir/calibration.json" -o "$dir/topology.json" 2>> "$dir/calibrate.err"
}
