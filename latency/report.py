"""The JSON report of a benchmark run, validated against ``schemas/latency_report.schema.json``."""

from __future__ import annotations

import math
import platform
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from driftwarden.core.errors import EXIT_REGRESSION
from driftwarden.latency import verdict
from driftwarden.latency.cells import ROLES
from driftwarden.latency.runner import RunResult
from driftwarden.schemas.events import rfc3339

KIND = "driftwarden.latency_report"
REPORT_VERSION = 1
SCHEMA_PATH = resources.files("driftwarden.schemas") / "latency_report.schema.json"  # package data, in a checkout or a wheel
REGRESSION_EXIT_CODE = EXIT_REGRESSION  # driftwarden.core.errors: the exit codes of the command


def build_report(result: RunResult, created_ms: int) -> dict:
    """Assemble the report object of a finished run (non-finite numbers become null)."""
    cells = result.cells
    run_verdict = verdict.overall(cells)
    input_verdicts = [c["input_effect"]["verdict"] for c in cells if c.get("status") == "ok" and c["input_effect"]]
    report = {
        "kind": KIND, "version": REPORT_VERSION, "run_id": uuid.uuid4().hex,
        "created_at": rfc3339(created_ms),
        "verdict": run_verdict,
        "attribution": verdict.attribute(run_verdict, verdict.combine(input_verdicts) if input_verdicts else None),
        "exit_code": exit_code(run_verdict),
        "models": _models(result), "inputs": _inputs(result),
        "adapter": result.adapter.model_dump(mode="json"),
        "options": result.options.as_json(), "environment": environment(result),
        "cells": cells, "preprocessing": result.preprocessing,
        "memory": result.memory, "telemetry": result.telemetry,
    }
    return clean(report)


def exit_code(run_verdict: str) -> int:
    """3 on a regression (so that CI can gate a release), 0 otherwise."""
    return REGRESSION_EXIT_CODE if run_verdict == verdict.REGRESSION else 0


def environment(result: RunResult) -> dict:
    """Where the numbers were measured: versions, device, timer and thread count."""
    import torch

    device_name = torch.cuda.get_device_name(result.device) if result.device.startswith("cuda") else platform.processor() or platform.machine()
    return {
        "python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
        "device": result.device, "device_name": device_name, "timer": result.timer,
        "cuda": torch.version.cuda, "threads": torch.get_num_threads(), "dtypes": list(result.dtypes),
    }


def validate_report(report: dict) -> list[str]:
    """Return the schema violations of a report (empty when it is valid)."""
    import jsonschema

    schema = orjson.loads(SCHEMA_PATH.read_bytes())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(report)]


def write_json(report: dict, path: Path) -> None:
    """Write the report as indented JSON."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def clean(value: Any) -> Any:
    """Recursively turn NaN/inf into None and numpy scalars into Python numbers."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _models(result: RunResult) -> dict:
    out = {}
    for role in ROLES:
        loaded = next((m for k, m in result.models.items() if k.startswith(role + ":")), None)
        path = getattr(result.options, role)
        out[role] = {"path": str(path), "format": loaded.fmt if loaded else None, "sha256": loaded.sha256 if loaded else None}
    return out


def _inputs(result: RunResult) -> dict:
    return {
        name: {"path": str(f.path), "events": len(f.events), "rejected": f.rejected, "reject_reasons": f.reasons}
        for name, f in result.inputs.items()
    }
