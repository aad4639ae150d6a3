"""What one measured (dtype, batch size) cell says: per-arm summaries, the model effect, the
input effect and the 2x2 decomposition of the total change."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from driftwarden.latency import verdict
from driftwarden.latency.options import BenchOptions
from driftwarden.latency.timing import Chunk, summarise

ROLES = ("baseline", "candidate")


@dataclass
class ArmRun:
    """The chunks one arm ran, round by round, and the energy charged to it."""

    model: str
    inputs: str
    batch_size: int
    chunks: list[Chunk] = field(default_factory=list)
    energy_mj: float = 0.0
    energy_known: bool = True

    @property
    def latency_ns(self) -> np.ndarray:
        """All latencies of the arm, rounds concatenated."""
        return np.concatenate([c.latency_ns for c in self.chunks])


def cell_report(arms: list[ArmRun], dtype: str, batch_size: int, opts: BenchOptions, cells: int) -> dict:
    """Summaries of each arm plus the model effect, the input effect and the 2x2 decomposition.

    ``cells`` is how many cells the run judges: each interval keeps the whole run's confidence.
    """
    by = {(a.model, a.inputs): [c.latency_ns for c in a.chunks] for a in arms}
    sets = sorted({a.inputs for a in arms}, key=("reference", "incident").index)
    stats = dict(tolerance=opts.tolerance, confidence=opts.confidence, cells=cells)
    model_eff = verdict.effect([by["candidate", s] for s in sets], [by["baseline", s] for s in sets], **stats)
    cell = {
        "batch_size": batch_size, "dtype": dtype, "status": "ok",
        "arms": [arm_report(a) for a in arms],
        "model_effect": model_eff,
        "model_effect_by_inputs": {s: verdict.effect([by["candidate", s]], [by["baseline", s]], **stats) for s in sets},
        "input_effect": None, "input_effect_by_model": None,
    }
    if "incident" in sets:
        cell["input_effect"] = verdict.effect([by[m, "incident"] for m in ROLES], [by[m, "reference"] for m in ROLES], **stats)
        cell["input_effect_by_model"] = {
            m: verdict.effect([by[m, "incident"]], [by[m, "reference"]], **stats) for m in ROLES
        }
    cell["decomposition"] = decomposition(cell)
    cell["verdict"] = model_eff["verdict"]
    cell["attribution"] = verdict.attribute(model_eff["verdict"], (cell["input_effect"] or {}).get("verdict"))
    return cell


def decomposition(cell: dict) -> dict:
    """Split the total p50 change (candidate on incident vs baseline on reference) into model x inputs."""
    model = cell["model_effect"]["p50"]["ratio"]
    inputs = cell["input_effect"]["p50"]["ratio"] if cell["input_effect"] else 1.0
    total = model * inputs
    log_total = abs(math.log(model)) + abs(math.log(inputs))
    share = abs(math.log(model)) / log_total if log_total > 0 else 0.0
    return {"total_ratio_p50": total, "model_ratio_p50": model, "input_ratio_p50": inputs,
            "model_share": share, "input_share": (1.0 - share) if log_total > 0 else 0.0}


def arm_report(arm: ArmRun) -> dict:
    """Latency summary, throughput, per-bucket latencies and energy of one arm."""
    lat = arm.latency_ns
    seconds = sum(c.elapsed_ns for c in arm.chunks) / 1e9
    return {
        "model": arm.model, "inputs": arm.inputs, "requests": int(lat.size),
        "samples": int(lat.size * arm.batch_size), "duration_s": seconds,
        "latency_ms": summarise(lat),
        "throughput": {"requests_per_s": lat.size / seconds if seconds else 0.0,
                       "samples_per_s": lat.size * arm.batch_size / seconds if seconds else 0.0},
        "by_bucket": by_bucket(arm),
        "energy": _energy(arm, int(lat.size)),
    }


def by_bucket(arm: ArmRun) -> list[dict]:
    """Latency of the arm's requests grouped by the padded input-size bucket."""
    labels = np.array([b for c in arm.chunks for b in c.buckets])
    lat = arm.latency_ns
    out = []
    for label in sorted(set(labels.tolist()), key=_bucket_key):
        sel = lat[labels == label]
        s = summarise(sel)
        out.append({"bucket": label, "requests": int(sel.size), "p50_ms": s["p50"], "p99_ms": s["p99"], "mean_ms": s["mean"]})
    return out


def _bucket_key(label: str) -> tuple:
    digits = "".join(ch if ch.isdigit() else " " for ch in label).split()
    return tuple(int(d) for d in digits) or (0,)


def _energy(arm: ArmRun, requests: int) -> dict | None:
    if not arm.energy_known or not requests:
        return None
    joules = arm.energy_mj / 1000.0
    return {"joules": joules, "j_per_request": joules / requests, "j_per_sample": joules / (requests * arm.batch_size)}
