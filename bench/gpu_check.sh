#!/usr/bin/env bash
# GPU check of `driftwarden bench`: CUDA events, fp32/bf16/fp16, CUDA memory classes (leak / steady),
# NVML telemetry and energy per inference, on small real TorchScript models. Prints ONE JSON line
# (also $OUT/summary.json, with the JSON and HTML reports beside it). Takes about 1-2 minutes on an H200.
#
# The device image has torch, numpy, scipy, matplotlib, pyyaml, rich, typer and nvidia-ml-py, but not
# pydantic, orjson or jsonschema. Before the device call, on the dev machine, in the repo root:
#     bash bench/gpu_check.sh fetch-wheels        # downloads py3.12 manylinux wheels into .whl/ (git-ignored)
# Then, with the device tool:
#     run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=420)
# Checks in the summary's "checks": heavier candidate -> regression (exit 3), same model twice -> no
# significant change, longer incident inputs -> attributed to inputs, leaky model -> leak, steady -> steady,
# reports valid against schemas/latency_report.schema.json.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS="pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 orjson==3.13.0
jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1"

if [[ "${1:-}" == "fetch-wheels" ]]; then
  py=${PYTHON:-.venv/bin/python}
  # shellcheck disable=SC2086
  "$py" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl $WHEELS
  ls -la .whl
  exit 0
fi

PY=${PYTHON:-python3}
OUTDIR=${OUT:-/tmp/driftwarden-gpu-check}
mkdir -p "$OUTDIR"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >&2 || true
# 280 s cap: the script must print its summary well inside the 5 minutes it is given.
timeout 280 "$PY" bench/bench_latency.py gpu-check --out "$OUTDIR" --min-duration "${MIN_DURATION:-0.5}" \
  2> "$OUTDIR/stderr.log" || { echo "{\"status\": \"failed\", \"rc\": $?}"; tail -n 40 "$OUTDIR/stderr.log" >&2; exit 1; }
