#!/usr/bin/env bash
# Run a command with NCCL_HOSTID set from the launcher's rank, so that NCCL
# takes each rank for a host of its own (docs/multinode.md, "Developing on one
# host"): two ranks then share one GPU over NCCL's socket transport.
#   symmrun -n 2 scripts/with_hostid.sh ./my_program
set -euo pipefail
rank=${RANK:-${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}}
export NCCL_HOSTID="symm-host-$rank"
exec "$@"
