#!/usr/bin/env bash
# The GPU session in one command, for a borrowed CUDA machine: run from the repository root,
#   bash calibrate/gpu_session.sh            (writes under $OUT; see calibrate/gpu_session.py for the steps)
# Extra arguments pass through, e.g. --hardware h100_sxm --total-s 420, or --dry-run to rehearse on a CPU.
set -u
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -m calibrate.gpu_session --out "${OUT:-gpu_session_out}" "$@"
