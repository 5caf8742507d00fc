# Sourced by every scripts/gpu_*.sh (bash): the environment a GPU run must have,
# whatever the caller's. It sets variables and defines a function; it runs nothing.
#
# No multicast object on any machine (docs/design.md, decision 7): NCCL, NVSHMEM and
# torch are told so, and symm's own opt-in is removed.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
# a device wait that is never satisfied stops its kernel with a message, not a hang
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}

# gpu_env_pip_libs: NCCL's and NVSHMEM's libraries from their pip wheels (where the
# GPU image has them) first on LD_LIBRARY_PATH, so symm's backends and the NCCL
# columns load the versions torch uses; a wheel that is not installed is skipped.
gpu_env_pip_libs() {
  local py pkg d
  py=$(command -v python3) || return 0
  for pkg in nccl nvshmem; do
    d=$("$py" -c "import nvidia.$pkg as m; print(m.__path__[0])" 2>/dev/null) &&
      export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  return 0
}
