# Sourced by the scripts/gpu_*.sh runs after `cd` to the repository root: the step runner
# they share. A step is one command under `timeout -k`, its output in a log; its verdict is
# a row of the table the script prints last. What a step's exit status and log mean (the
# verdict) is each script's own: steps_exec runs the command, the script then calls steps_row.
#
# Set by the script, read when a function runs:
#   dry               1: print each step instead of running it (its row says "dry run")
#   steps_fmt         printf format of a row: name, status, seconds, detail
#   steps_dry_form    how a dry step prints: bracket ("DRY: [NAME, Ls, > LOG] CMD", the default)
#                     or timeout ("DRY: timeout -k 10 L CMD > LOG")
#   steps_dry_status  the status of a dry step's row: skip (the default) or ok
#   steps_deadline    epoch seconds, optional: each limit is cut to what is left; with fewer
#                     than steps_min_left (default 15) s left a step is not run and its row is
#                     a FAIL that says "not run: $steps_spent"
# Kept here: steps_rows (the table; a script may append a row of its own) and failed (1 once
# a row is neither ok nor skip: the script's exit status).
# shellcheck shell=bash disable=SC2034,SC2154 # step_*, failed: read by the script; steps_spent: set by it
steps_rows=()
failed=0

# steps_row NAME STATUS SECONDS [DETAIL]: one row of the table
steps_row() {
  steps_rows+=("$(printf "$steps_fmt" "$1" "$2" "$3" "${@:4}")")
  case $2 in ok | skip) ;; *) failed=1 ;; esac
}

# steps_table: the rows, one a line
steps_table() { printf '%s\n' "${steps_rows[@]}"; }

# steps_exec NAME LIMIT LOG CMD...: CMD under timeout -k 10 LIMIT, stdout and stderr in LOG.
# Ran: returns 0 with step_rc (CMD's exit status), step_dt (its seconds) and step_limit set.
# Not run (dry, or out of time; its row written): returns 1, step_rc 0 when dry, else 124.
steps_exec() {
  local name=$1 limit=$2 log=$3 left t0
  shift 3
  if [ -n "${steps_deadline:-}" ]; then
    left=$(( steps_deadline - $(date +%s) ))
    if [ "$left" -lt "${steps_min_left:-15}" ]; then
      steps_row "$name" FAIL 0 "not run: $steps_spent"
      step_rc=124
      return 1
    fi
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  step_limit=$limit
  if [ "${dry:-0}" = 1 ]; then
    if [ "${steps_dry_form:-bracket}" = timeout ]; then
      echo "DRY: timeout -k 10 $limit $* > $log"
    else
      echo "DRY: [$name, ${limit}s, > $log] $*"
    fi
    steps_row "$name" "${steps_dry_status:-skip}" 0 "dry run"
    step_rc=0
    return 1
  fi
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  step_rc=$?
  step_dt=$(( $(date +%s) - t0 ))
  return 0
}

# steps_failed NAME LOG WHERE: the FAIL row of a step that ran and did not pass (step_rc not 0):
# "timed out after L s" (124, or 137 after the kill) or its status, with WHERE (where its log
# is kept, for the reader), then the log's first error lines on stdout
steps_failed() {
  if [ "$step_rc" -eq 124 ] || [ "$step_rc" -eq 137 ]; then
    steps_row "$1" FAIL "$step_dt" "timed out after $step_limit s, see $3"
  else
    steps_row "$1" FAIL "$step_dt" "rc=$step_rc, see $3"
    grep -E 'FAIL|Error|error|timed out|assert' "$2" | head -"${steps_err_lines:-8}"
  fi
}
