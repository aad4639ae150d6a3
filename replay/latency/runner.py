"""The benchmark run: 2x2 arms {baseline, candidate} x {reference, incident} interleaved in rounds,
for every (dtype, batch size) cell, then the memory probe of each model.

Within a round every arm runs 2 x (number of arms) short slices, alternating with the other arms:
the order rotates once forwards and once backwards (ABBA for two arms), so within every round each
arm holds each position and follows each neighbour equally often, and a burst of machine load hits
every arm. A round's slices of one arm form that arm's sample of the round. Each slice starts with
one untimed request (the caches were just used by another model) and then holds at least
``min_count / (rounds * slices)`` requests and as many seconds, so each arm ends with at least the
run's minimum count and minimum duration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from replay.latency import memory, verdict
from replay.latency.adapter import AdapterConfig, load_adapter
from replay.latency.errors import AdapterError, ModelFormatError
from replay.latency.inputs import BatchPool, EventFile, build_pool, read_events
from replay.latency.models import LoadedModel, load_model, torch_dtype
from replay.latency.options import BenchOptions, resolve_device, resolve_dtypes
from replay.latency.telemetry import Telemetry
from replay.latency.timing import Chunk, Timer, make_timer, run_chunk, summarise, warm_up

ROLES = ("baseline", "candidate")


class Progress(Protocol):
    """Told once per finished chunk (and once per memory probe)."""

    def advance(self, description: str) -> None:
        """One more step is done."""
        ...


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


@dataclass
class RunResult:
    """What the report is built from: cells, preprocessing, memory, telemetry and the raw arms."""

    options: BenchOptions
    device: str
    dtypes: tuple[str, ...]
    timer: str
    inputs: dict[str, EventFile]
    adapter: AdapterConfig
    models: dict[str, LoadedModel] = field(default_factory=dict)
    cells: list[dict] = field(default_factory=list)
    arms: dict[tuple[str, int], list[ArmRun]] = field(default_factory=dict)
    preprocessing: list[dict] = field(default_factory=list)
    memory: dict[str, dict] = field(default_factory=dict)
    telemetry: dict = field(default_factory=dict)


def total_steps(options: BenchOptions, dtypes: int) -> int:
    """How many progress steps a run has (chunks plus memory probes)."""
    arms = 2 * (2 if options.incident_input else 1)
    probes = 2 if options.memory_iterations else 0
    return dtypes * len(options.batch_sizes) * options.rounds * arms + probes


def prepare(options: BenchOptions) -> RunResult:
    """Resolve device and dtypes, read both event files and the adapter (no model is run yet)."""
    device = resolve_device(options.device)
    inputs = {"reference": read_events(options.reference_input, options.max_events)}
    if options.incident_input:
        inputs["incident"] = read_events(options.incident_input, options.max_events)
    adapter = load_adapter(options.adapter, inputs["reference"].events)
    dtypes = resolve_dtypes(options.dtypes, device)
    return RunResult(options, device, dtypes, make_timer(device).name, inputs, adapter)


def run(result: RunResult, progress: Progress | None = None) -> RunResult:
    """Measure every (dtype, batch size) cell, then memory, with NVML sampling throughout."""
    import torch

    opts = result.options
    if opts.threads:
        torch.set_num_threads(opts.threads)
    telemetry = Telemetry(result.device).start()
    rng = np.random.default_rng(opts.seed)
    try:
        with torch.inference_mode():
            for dtype in result.dtypes:
                _run_dtype(result, dtype, telemetry, rng, progress)
            _run_memory(result, progress)
    finally:
        telemetry.stop()
    result.telemetry = telemetry.summary()
    return result


def _run_dtype(result: RunResult, dtype: str, telemetry: Telemetry, rng: np.random.Generator,
               progress: Progress | None) -> None:
    opts = result.options
    try:
        models = {role: load_model(getattr(opts, role), result.device, dtype) for role in ROLES}
    except ModelFormatError as exc:
        if dtype == "fp32":
            raise
        result.cells.extend(_unsupported(bs, dtype, str(exc)) for bs in opts.batch_sizes)
        return
    result.models.update({f"{role}:{dtype}": m for role, m in models.items()})
    for batch_size in opts.batch_sizes:
        pools = _pools(result, batch_size, dtype)
        cell = _run_cell(result, models, pools, dtype, batch_size, telemetry, rng, progress)
        result.cells.append(cell)


def _pools(result: RunResult, batch_size: int, dtype: str) -> dict[str, BatchPool]:
    pools = {}
    for name, events in result.inputs.items():
        pool = build_pool(name, events.events, result.adapter, batch_size, torch_dtype(dtype), result.device)
        pools[name] = pool
        result.preprocessing.append({
            "inputs": name, "batch_size": batch_size, "dtype": dtype, "batches": len(pool),
            "latency_ms": summarise(np.asarray(pool.preprocess_ns)),
        })
    return pools


def _run_cell(result: RunResult, models: dict[str, LoadedModel], pools: dict[str, BatchPool], dtype: str,
              batch_size: int, telemetry: Telemetry, rng: np.random.Generator, progress: Progress | None) -> dict:
    opts = result.options
    timer = make_timer(result.device)
    arms = [ArmRun(role, name, batch_size) for role in ROLES for name in pools]
    calls = {(a.model, a.inputs): models[a.model].module for a in arms}
    problem = _try_arms(arms, calls, pools, dtype, timer, opts.warmup)
    if problem:
        return _unsupported(batch_size, dtype, problem)
    per_round = 2 * len(arms)  # one full rotation forwards and one backwards: every round is balanced
    slices = opts.rounds * per_round
    per_count, per_ns = math.ceil(opts.min_count / slices), int(opts.min_duration_s * 1e9 / slices)
    cursors = {id(a): 0 for a in arms}
    for r in range(opts.rounds):
        parts: dict[int, list[Chunk]] = {id(a): [] for a in arms}
        for s in range(per_round):
            for arm in _order(arms, s):
                fn, pool = calls[(arm.model, arm.inputs)], pools[arm.inputs]
                before = telemetry.energy_mj()
                chunk = run_chunk(fn, pool, cursors[id(arm)], per_count, per_ns, timer, opts.arrival_rate, rng)
                _charge(arm, before, telemetry.energy_mj())
                cursors[id(arm)] = chunk.cursor
                parts[id(arm)].append(chunk)
        for arm in arms:
            arm.chunks.append(merge_chunks(parts[id(arm)]))
            if progress:
                progress.advance(f"{dtype} batch {batch_size}: round {r + 1}/{opts.rounds}")
    result.arms[(dtype, batch_size)] = arms
    return cell_report(arms, dtype, batch_size, opts, rng)


def _try_arms(arms: list[ArmRun], calls: dict, pools: dict[str, BatchPool], dtype: str, timer: Timer,
              warmup: int) -> str | None:
    """Warm every arm up; return why a reduced-precision cell cannot run (fp32 failures raise)."""
    for arm in arms:
        try:
            warm_up(calls[(arm.model, arm.inputs)], pools[arm.inputs], warmup, timer)
        except (RuntimeError, AssertionError, ValueError, TypeError) as exc:  # torch.export guards raise AssertionError
            if dtype != "fp32":
                return f"{arm.model} model does not run in {dtype} on this device: {_last_line(exc)}"
            raise AdapterError(
                f"the {arm.model} model rejected the adapter's inputs ({arm.inputs} events): {_last_line(exc)}; "
                "fix the adapter config (feature list, sequence buckets, dtype) so that it matches the model signature; "
                "a torch.export model must be exported with dynamic_shapes for the batch (and sequence) dimension"
            ) from exc
    return None


def _last_line(exc: BaseException) -> str:
    """The last line of a (TorchScript) error: the one that says what went wrong."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else type(exc).__name__


def _order(arms: list[ArmRun], k: int) -> list[ArmRun]:
    """The arm order of slice ``k``: rotated by k, and reversed every other full rotation (ABBA for two arms)."""
    n = len(arms)
    rotated = arms[k % n:] + arms[:k % n]
    return rotated[::-1] if (k // n) % 2 else rotated


def merge_chunks(chunks: list[Chunk]) -> Chunk:
    """One chunk made of several slices of the same arm in the same round."""
    return Chunk(np.concatenate([c.latency_ns for c in chunks]), [b for c in chunks for b in c.buckets],
                 sum(c.elapsed_ns for c in chunks), chunks[-1].cursor)


def _charge(arm: ArmRun, before: int | None, after: int | None) -> None:
    if before is None or after is None:
        arm.energy_known = False
    else:
        arm.energy_mj += after - before


def _unsupported(batch_size: int, dtype: str, reason: str) -> dict:
    return {"batch_size": batch_size, "dtype": dtype, "status": "unsupported", "reason": reason}


def _run_memory(result: RunResult, progress: Progress | None) -> None:
    opts = result.options
    if not opts.memory_iterations:
        result.memory = {role: {"status": "skipped", "reason": "--memory-iterations 0"} for role in ROLES}
        return
    dtype = result.dtypes[0]
    pool = build_pool("reference", result.inputs["reference"].events, result.adapter, max(opts.batch_sizes),
                      torch_dtype(dtype), result.device)
    for role in ROLES:
        model = load_model(getattr(opts, role), result.device, dtype)
        trace = memory.probe(model.module, pool, opts.memory_iterations, result.device)
        result.memory[role] = {**memory.classify(trace), "dtype": dtype, "batch_size": max(opts.batch_sizes)}
        if progress:
            progress.advance(f"memory probe: {role}")


def cell_report(arms: list[ArmRun], dtype: str, batch_size: int, opts: BenchOptions,
                rng: np.random.Generator) -> dict:
    """Summaries of each arm plus the model effect, the input effect and the 2x2 decomposition."""
    by = {(a.model, a.inputs): [c.latency_ns for c in a.chunks] for a in arms}
    sets = sorted({a.inputs for a in arms}, key=("reference", "incident").index)
    stats = dict(tolerance=opts.tolerance, n_boot=opts.bootstrap, confidence=opts.confidence, rng=rng)
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
