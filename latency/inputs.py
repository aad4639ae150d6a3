"""Benchmark inputs: replayed JSONL event files, and the request batches built from them.

Building the batches is the preprocessing step (features -> tensors); it is timed here, apart
from the model, so that a slow adapter is never mistaken for a slow model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftwarden.core.errors import InvalidEventError
from driftwarden.latency.adapter import AdapterConfig, Batch, build_batch
from driftwarden.latency.errors import BenchInputError
from driftwarden.schemas.events import Event, parse_event

DEFAULT_MAX_BATCHES = 64


@dataclass
class EventFile:
    """The valid events of one JSONL file and how many lines were rejected."""

    path: Path
    events: list[Event]
    rejected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class BatchPool:
    """Pre-built request batches of one input set and batch size, with the preprocessing times."""

    inputs: str
    batch_size: int
    batches: list[Batch]
    preprocess_ns: list[int]

    def __len__(self) -> int:
        return len(self.batches)


def read_events(path: Path, max_events: int = 0) -> EventFile:
    """Read valid events from a JSONL file (at most ``max_events`` when > 0), counting rejected lines."""
    path = Path(path)
    result = EventFile(path, [])
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if line.strip():
                    _take(line, result)
                if max_events and len(result.events) >= max_events:
                    break
    except OSError as exc:
        raise BenchInputError(f"cannot read events file {path}: {exc}") from exc
    if not result.events:
        raise BenchInputError(
            f"{path} holds no valid event ({result.rejected} rejected): pass a JSONL file of events, "
            "e.g. the output of `driftwarden replay`"
        )
    return result


def build_pool(
    name: str, events: list[Event], adapter: AdapterConfig, batch_size: int, dtype: Any, device: str,
    max_batches: int = DEFAULT_MAX_BATCHES,
) -> BatchPool:
    """Cut events into consecutive batches (wrapping around when short), timing each conversion."""
    count = max(1, min(max_batches, len(events) // batch_size))
    batches, times = [], []
    for i in range(count):
        chunk = [events[(i * batch_size + j) % len(events)] for j in range(batch_size)]
        start = time.perf_counter_ns()
        batch = build_batch(adapter, chunk, dtype, device)
        _sync(device)
        times.append(time.perf_counter_ns() - start)
        batches.append(batch)
    return BatchPool(name, batch_size, batches, times)


def _take(line: bytes, result: EventFile) -> None:
    try:
        result.events.append(parse_event(line))
    except InvalidEventError as exc:
        result.rejected += 1
        result.reasons[exc.reason] = result.reasons.get(exc.reason, 0) + 1


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
