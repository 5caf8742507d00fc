#!/usr/bin/env bash
# A PE job under scripts/with_mps.sh that is stopped (by with_mps.sh's own
# --timeout, and by a SIGTERM to with_mps.sh, as a caller's timeout sends)
# leaves nothing behind: no process of the job, no GPU compute process, no
# MPS daemon, no pipe folder, no GPU memory held. GPU machines only.
#
#   scripts/test_mps_cleanup.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: test_mps_cleanup.sh BUILD_DIR}
exe=$build/tests/device/test_device_deadline
[ -x "$exe" ] || { echo "SKIP: $exe not built"; exit 77; }
command -v nvidia-smi >/dev/null || { echo "SKIP: no nvidia-smi"; exit 77; }
fail=0

apps() { nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null | sort; }
used_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
folders() { ls -d /tmp/symm-mps.* 2>/dev/null | sort; }

check_clean() { # $1: what was stopped
  local what=$1 left
  sleep 1
  left=$(pgrep -f "$exe" || true)
  [ -z "$left" ] || { echo "FAIL ($what): PE processes left: $left"; fail=1; }
  [ "$(apps)" = "$apps0" ] || { echo "FAIL ($what): GPU compute processes now:"; apps; fail=1; }
  [ "$(folders)" = "$folders0" ] || { echo "FAIL ($what): MPS folders left: $(folders)"; fail=1; }
  if pgrep -f "nvidia-cuda-mps-(control|server)" >/dev/null && [ "$mps0" = 0 ]; then
    echo "FAIL ($what): an MPS daemon is still running:"; pgrep -af nvidia-cuda-mps; fail=1
  fi
  local used; used=$(used_mib)
  if [ -n "$used" ] && [ -n "$used0" ] && [ "$used" -gt $((used0 + 64)) ]; then
    echo "FAIL ($what): GPU memory used $used MiB, $used0 MiB before"; fail=1
  fi
  echo "$what: PEs, GPU processes, MPS daemon and folders all gone (GPU memory ${used:-?} MiB, ${used0:-?} before)"
}

apps0=$(apps)
used0=$(used_mib)
folders0=$(folders)
mps0=$(pgrep -c -f "nvidia-cuda-mps-(control|server)" || true)

# 4 PEs on one GPU, each waiting for a value nobody writes, with a deadline
# (an hour) far beyond the stop
hang=(env SYMM_WAIT_TIMEOUT=3600 "$build/tools/symmrun" -n 4 "$exe" timeout 4)

t0=$(date +%s)
scripts/with_mps.sh --timeout 8 -- "${hang[@]}"
rc=$?
echo "with_mps.sh --timeout 8: exit $rc after $(( $(date +%s) - t0 )) s"
[ "$rc" = 124 ] || { echo "FAIL: expected exit 124 from the timeout"; fail=1; }
check_clean "stopped by --timeout"

t0=$(date +%s)
timeout -s TERM 8 scripts/with_mps.sh -- "${hang[@]}"
rc=$?
echo "with_mps.sh under timeout -s TERM 8: exit $rc after $(( $(date +%s) - t0 )) s"
[ "$rc" = 124 ] || { echo "FAIL: expected exit 124 from timeout(1)"; fail=1; }
check_clean "stopped by SIGTERM"

[ "$fail" = 0 ] && echo "PASS: nothing left behind" || echo "FAILED"
exit "$fail"
