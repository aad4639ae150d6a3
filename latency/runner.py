"""The benchmark run: 2x2 arms {baseline, candidate} x {reference, incident} interleaved in rounds,
for every (dtype, batch size) cell, then the memory probe of each model.

Within a round every arm runs 2 x (number of arms) short slices, alternating with the other arms:
the order rotates once forwards and once backwards (ABBA for two arms), so within every round each
arm holds each position equally often, and a burst of machine load hits every arm. The order the
rotation starts from is drawn anew each round (seeded by ``--seed``): a fixed order gives one arm a fixed
place in the round's pattern (with four arms the last one never follows itself), and anything on the
machine that recurs with the rounds' rhythm would then fall on that arm in every round, where drawn
orders spread it over all arms (randomized multiple interleaved trials, Abedi and Brecht, ICPE 2017).
A round's slices of one arm form that arm's sample of the round. Each slice starts with
one untimed request (the caches were just used by another model) and then holds at least
``min_count / (rounds * slices)`` requests and as many seconds, so each arm ends with at least the
run's minimum count and minimum duration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from driftwarden.latency import memory, verdict
from driftwarden.latency.adapter import AdapterConfig, load_adapter
from driftwarden.latency.errors import AdapterError, BenchOptionError, ModelFormatError
from driftwarden.latency.inputs import BatchPool, EventFile, build_pool, read_events
from driftwarden.latency.models import LoadedModel, load_model, torch_dtype
from driftwarden.latency.options import BenchOptions, resolve_device, resolve_dtypes
from driftwarden.latency.cells import ROLES, ArmRun, cell_report
from driftwarden.latency.telemetry import Telemetry
from driftwarden.latency.timing import Chunk, Timer, make_timer, run_chunk, summarise, warm_up



class Progress(Protocol):
    """Told once per finished chunk (and once per memory probe)."""

    def advance(self, description: str) -> None:
        """One more step is done."""
        ...


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

    @property
    def cells_judged(self) -> int:
        """How many (dtype, batch size) cells the run judges: the count its intervals' level is split over."""
        return len(self.dtypes) * len(self.options.batch_sizes)


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
    result = RunResult(options, device, dtypes, make_timer(device).name, inputs, adapter)
    check_rounds(options, result.cells_judged)
    return result


def check_rounds(options: BenchOptions, cells: int) -> None:
    """Refuse a run whose rounds are too few for any p50 interval at the level its ``cells`` cells need."""
    level = verdict.interval_level(options.confidence, cells)
    needed = verdict.min_rounds(level)
    if options.rounds < needed:
        raise BenchOptionError(
            f"--rounds {options.rounds} is too few: {cells} cell(s) (batch sizes x dtypes) at --confidence "
            f"{options.confidence} need each interval at {level:.4f}, which takes at least {needed} rounds; "
            f"use --rounds {needed} or more (the default is 20)")


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
    arms = [ArmRun(role, name, batch_size) for role in ROLES for name in pools]
    cell = _CellRun(arms, {(a.model, a.inputs): models[a.model].module for a in arms}, pools,
                    make_timer(result.device), telemetry, rng, opts)
    problem = _try_arms(arms, cell.calls, pools, dtype, cell.timer, opts.warmup)
    if problem:
        return _unsupported(batch_size, dtype, problem)
    for r in range(opts.rounds):
        cell.run_round()
        if progress:
            for _ in arms:
                progress.advance(f"{dtype} batch {batch_size}: round {r + 1}/{opts.rounds}")
    result.arms[(dtype, batch_size)] = arms
    return cell_report(arms, dtype, batch_size, opts, result.cells_judged)


class _CellRun:
    """The arms of one cell and where each has got to in its batch pool."""

    def __init__(self, arms: list[ArmRun], calls: dict, pools: dict[str, BatchPool], timer: Timer,
                 telemetry: Telemetry, rng: np.random.Generator, opts: BenchOptions) -> None:
        self.arms, self.calls, self.pools, self.timer = arms, calls, pools, timer
        self.telemetry, self.rng, self.rate = telemetry, rng, opts.arrival_rate
        self.slices = 2 * len(arms)  # one full rotation forwards and one backwards: every round is balanced
        total = opts.rounds * self.slices
        self.per_count, self.per_ns = math.ceil(opts.min_count / total), int(opts.min_duration_s * 1e9 / total)
        self.cursors = {id(a): 0 for a in arms}

    def run_round(self) -> None:
        """Run one round (every arm in every slice) and append each arm's merged chunk."""
        parts: dict[int, list[Chunk]] = {id(a): [] for a in self.arms}
        drawn = round_arms(self.arms, self.rng)
        for s in range(self.slices):
            for arm in _order(drawn, s):
                parts[id(arm)].append(self._slice(arm))
        for arm in self.arms:
            arm.chunks.append(merge_chunks(parts[id(arm)]))

    def _slice(self, arm: ArmRun) -> Chunk:
        fn, pool = self.calls[(arm.model, arm.inputs)], self.pools[arm.inputs]
        before = self.telemetry.energy_mj()
        chunk = run_chunk(fn, pool, self.cursors[id(arm)], self.per_count, self.per_ns, self.timer, self.rate, self.rng)
        _charge(arm, before, self.telemetry.energy_mj())
        self.cursors[id(arm)] = chunk.cursor
        return chunk


def _try_arms(arms: list[ArmRun], calls: dict, pools: dict[str, BatchPool], dtype: str, timer: Timer,
              warmup: int) -> str | None:
    """Warm every arm up; return why a reduced-precision cell cannot run (fp32 failures raise)."""
    import torch

    # a model's own `raise` arrives as torch.jit.Error; a torch.export shape guard as AssertionError
    failures = (RuntimeError, AssertionError, ValueError, TypeError, torch.jit.Error)
    for arm in arms:
        try:
            warm_up(calls[(arm.model, arm.inputs)], pools[arm.inputs], warmup, timer)
        except failures as exc:
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


def round_arms(arms: list[ArmRun], rng: np.random.Generator) -> list[ArmRun]:
    """The arms in this round's drawn order, from which every slice's order is rotated."""
    return [arms[i] for i in rng.permutation(len(arms))]


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
