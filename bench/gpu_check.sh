#!/usr/bin/env bash
# The GPU check: the CUDA paths that CPU tests can only emulate, and real-size throughput, offline.
#
#   bash bench/gpu_check.sh --plan                      the steps, their time limits, the two device calls
#   bash bench/gpu_check.sh --call 1 --report "$OUT"    on the lent machine: its own packages only
#   bash bench/gpu_check.sh --call 2 --wheels .whl --report "$OUT"   with bitsandbytes and datasets carried
#   bash bench/gpu_check.sh --cpu [--call N]            the same steps on a CPU at toy size (the dry run)
#   bash bench/gpu_check.sh --help                      every option (or: make gpu-check, all steps)
#
# The steps, their limits and the runner are in bench/gpu_check.py (docs/gpu.md says what each step
# measures). This wrapper only picks the interpreter: $PY, else the project's .venv, else the machine's
# python3 (on the lent GPU machine that is the one with torch; the project's pins do not apply there).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
if ! PY_PATH=$(command -v "$PY"); then
  echo "gpu_check.sh: no Python interpreter '$PY' (set PY=/path/to/python)" >&2
  exit 2
fi
case $PY_PATH in /*) ;; *) PY_PATH="$PWD/$PY_PATH" ;; esac
exec "$PY_PATH" bench/gpu_check.py "$@"
