#!/usr/bin/env bash
# Run a command with a private MPS control daemon, so several PEs can share
# one GPU side by side (README, "Develop on one GPU"):
#
#   scripts/with_mps.sh [--timeout SECONDS] [--] command [args...]
#
# The daemon gets its own pipe and log folders under /tmp (nothing outside
# this command joins it, and no MPS daemon of the machine is touched). The
# command runs in a process group of its own; when it ends, fails, passes
# --timeout (exit 124) or this script gets SIGINT/SIGTERM, the group is
# stopped (SIGTERM, SIGKILL after 10 s), the daemon is told to quit and
# waited for (15 s at most: a daemon that has not quit by then, or does not
# answer, has its own processes killed), and the folders are removed (the
# daemon's logs first copied to $SYMM_MPS_LOGS when set). The GPU's compute
# mode and other settings are never changed. Exit: the command's status, 124
# on timeout.
set -uo pipefail

timeout_s=0
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s=${2:?--timeout needs seconds}; shift 2 ;;
    --timeout=*) timeout_s=${1#--timeout=}; shift ;;
    --) shift; break ;;
    -*) echo "with_mps.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: with_mps.sh [--timeout S] [--] command [args...]" >&2; exit 2; }
command -v nvidia-cuda-mps-control >/dev/null || { echo "with_mps.sh: nvidia-cuda-mps-control not found" >&2; exit 2; }

dir=$(mktemp -d /tmp/symm-mps.XXXXXX) || exit 1
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
child=0 watchdog=0 daemon_up=0
quit_wait=15 # s a daemon gets to quit once the command has ended

stop_group() { # $1: the group's leader pid
  kill -0 -- "-$1" 2>/dev/null || return 0
  kill -TERM -- "-$1" 2>/dev/null
  for _ in $(seq 100); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.1; done
  echo "with_mps.sh: process group $1 still alive after SIGTERM: SIGKILL" >&2
  kill -KILL -- "-$1" 2>/dev/null
  for _ in $(seq 50); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.1; done
}

ctl() { # $1: seconds, $2: a command for this daemon; 124 when it did not answer in time
  echo "$2" | timeout -k 1 "$1" nvidia-cuda-mps-control >/dev/null 2>&1
}

kill_daemon() {
  local pids="" p
  for p in $(sed -nE 's/^\[[^]]*(Control|Server) +([0-9]+)\].*/\2/p' "$CUDA_MPS_LOG_DIRECTORY"/*.log 2>/dev/null | sort -u); do
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in nvidia-cuda-mps*) pids="$pids $p" ;; esac
  done
  echo "with_mps.sh: the MPS daemon did not quit within $quit_wait s: killing its processes:${pids:- none found}" >&2
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  for _ in $(seq 50); do
    local alive=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
}

cleanup() {
  trap '' INT TERM
  if [ "$watchdog" -gt 0 ]; then # its sleep, so it ends without signalling
    pkill -P "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
  fi
  [ "$child" -gt 0 ] && stop_group "$child"
  if [ "$daemon_up" = 1 ]; then
    local until=$(($(date +%s) + quit_wait)) rc
    ctl 5 quit
    # it exits once its servers have no clients left (they are stopped above);
    # while it lives, a client command still reaches it (or hangs: still up)
    while [ "$(date +%s)" -lt "$until" ]; do
      ctl 2 get_server_list
      rc=$?
      [ $rc = 0 ] || [ $rc = 124 ] || { daemon_up=0; break; }
      sleep 0.1
    done
    # after a kernel stopped on purpose a server can count a client that has
    # exited and never shut down: then this daemon's own processes are killed
    [ "$daemon_up" = 1 ] && kill_daemon
  fi
  if [ -n "${SYMM_MPS_LOGS:-}" ] && mkdir -p "$SYMM_MPS_LOGS" 2>/dev/null; then
    for f in "$CUDA_MPS_LOG_DIRECTORY"/*.log; do
      [ -f "$f" ] && cp "$f" "$SYMM_MPS_LOGS/$(basename "$dir")-$(basename "$f")"
    done
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! nvidia-cuda-mps-control -d; then
  echo "with_mps.sh: could not start the MPS control daemon" >&2
  exit 1
fi
daemon_up=1
for _ in $(seq 50); do [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] && break; sleep 0.1; done
echo "with_mps.sh: MPS daemon up (pipes in $CUDA_MPS_PIPE_DIRECTORY)" >&2

on_timeout() {
  : >"$dir/timed_out"
  echo "with_mps.sh: --timeout $timeout_s s passed: stopping the command" >&2
  stop_group "$child"
}
trap on_timeout USR1

setsid "$@" &
child=$!
if [ "$timeout_s" != 0 ]; then
  { sleep "$timeout_s" && kill -USR1 $$; } 2>/dev/null &
  watchdog=$!
fi
wait "$child"
rc=$?
if [ -e "$dir/timed_out" ]; then
  wait "$child" 2>/dev/null
  rc=124
fi
exit "$rc"
