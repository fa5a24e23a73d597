# Shell test helpers shared by the launcher scripts: run a command, compare its exit status, then
# look for text in what it printed. Sourced; the caller sets status=0 first and exits with it.
#   expect CODE DESCRIPTION COMMAND...   runs COMMAND; its output stays in LAST_OUTPUT
#   contains TEXT DESCRIPTION            LAST_OUTPUT holds TEXT
expect() {
  local code=$1 what=$2; shift 2
  local got
  LAST_OUTPUT=$("$@" 2>&1)
  got=$?
  if [ "$got" -ne "$code" ]; then
    echo "FAIL: $what: exit $got, expected $code"
    echo "$LAST_OUTPUT" | tail -15
    status=1
  else
    echo "ok: $what: exit $got"
  fi
}
contains() {
  if [[ $LAST_OUTPUT == *"$1"* ]]; then echo "ok: $2"; else echo "FAIL: $2: no '$1' in:"; echo "$LAST_OUTPUT" | tail -8; status=1; fi
}
