# Sourced by gpu_gemm.sh and gpu_cute_gemm_rs.sh after `cd` to the repository
# root: the environment every GEMM step runs in (multicast off, bounded device
# waits), where libsymm and the CuTe cubins are, and the step helpers. `dry`
# (1: print the steps instead of running them) is read when a helper runs.
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
export PYTHONUNBUFFERED=1
here=$PWD
OUT=${OUT:-$PWD/out}
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
cubins=${SYMM_CUTE_CUBINS:-build-cute}
case "$build" in /*) lib=$build/src/libsymm.so ;; *) lib=$here/$build/src/libsymm.so ;; esac
t_start=$(date +%s)

since() { echo "$(( $(date +%s) - $1 )) s"; }
# run LOG WALL CMD...: CMD under timeout -k, output to LOG; echoes the status
run() {
  local log=$1 wall=$2
  shift 2
  if [ "${dry:-0}" = 1 ]; then
    echo "dry: timeout -k 10 $wall $* > $log" >&2
    echo 0
    return
  fi
  timeout -k 10 "$wall" "$@" >"$log" 2>&1
  echo $?
}
status() { # $1: exit status -> words
  case "$1" in 0) echo ok ;; 124|137) echo "TIMEOUT (rc=$1)" ;; *) echo "FAILED (rc=$1)" ;; esac
}
# gpu_count [AS_IF]: the GPUs nvidia-smi lists; under dry, AS_IF where given
gpu_count() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  [ "${dry:-0}" = 1 ] && [ -n "${1:-}" ] && n=$1
  echo "${n:-0}"
}
