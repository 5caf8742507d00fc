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
# waited for, and the folders are removed (the daemon's logs first copied to
# $SYMM_MPS_LOGS when set). The GPU's compute mode and other settings are
# never changed. Exit: the command's status, 124 on timeout.
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

stop_group() { # $1: the group's leader pid
  kill -0 -- "-$1" 2>/dev/null || return 0
  kill -TERM -- "-$1" 2>/dev/null
  for _ in $(seq 100); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.1; done
  echo "with_mps.sh: process group $1 still alive after SIGTERM: SIGKILL" >&2
  kill -KILL -- "-$1" 2>/dev/null
  for _ in $(seq 50); do kill -0 -- "-$1" 2>/dev/null || return 0; sleep 0.1; done
}

cleanup() {
  trap '' INT TERM
  if [ "$watchdog" -gt 0 ]; then # its sleep, so it ends without signalling
    pkill -P "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
  fi
  [ "$child" -gt 0 ] && stop_group "$child"
  if [ "$daemon_up" = 1 ]; then
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
    # it exits once its servers have no clients left (they are stopped above);
    # while it lives, a client command still reaches it
    for _ in $(seq 150); do
      echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1 || { daemon_up=0; break; }
      sleep 0.1
    done
    [ "$daemon_up" = 1 ] && echo "with_mps.sh: the MPS daemon did not quit within 15 s" >&2
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
