"""Validate a replay's batches in worker processes, in order, with a bounded number in flight.

Parsing and validating each record (orjson, the contract's checks, Arrow columns of the features)
is most of a replay's work and needs nothing from other records; what must stay sequential
(watermarks, windows, late events, sketches, judging) stays in the parent. So the parent reads
batches and hands their raw values to ``workers`` processes running
:func:`replay.validate.validate_batch`; results come back as Arrow IPC, in the batches' order.
Only bytes and tuples of bytes cross the process boundary; no application object is unpickled.

Worth it for large inputs only: a worker process takes about a second to start (imports).
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Iterable, Iterator

from driftwarden.core.errors import ReplayError
from driftwarden.replay.records import RawRecord
from driftwarden.replay.validate import ValidatedBatch, validate_batch
from driftwarden.schemas.config import MonitorConfig

#: Records from which ``--workers auto`` uses worker processes (below, start-up costs more than it saves).
AUTO_MIN_RECORDS = 200_000
#: A file of at least this many bytes counts as large (about 200,000 records of 25 features).
AUTO_MIN_FILE_BYTES = 64 * 1024 * 1024

_config: MonitorConfig | None = None


def auto_workers(expected_records: int) -> int:
    """Worker processes for ``--workers auto``: one per core for a large replay, else none."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores if expected_records >= AUTO_MIN_RECORDS and cores > 1 else 0


class ValidationPool:
    """Worker processes validating batches; use as a context manager.

    >>> from schemas.config import MonitorConfig
    >>> config = MonitorConfig.model_validate({"models": [{"name": "m", "features": {"x": "numeric"}}]})
    >>> record = RawRecord(("f", 1), 0, b'{"event_time": 1767225600000, "model": "m", "features": {"x": 2}}')
    >>> with ValidationPool(config, workers=1) as pool:
    ...     [(len(records), done.models, done.columns["m"]["x"].to_pylist())
    ...      for records, done in pool.validated([[record]])]
    [(1, ['m'], [2.0])]
    """

    def __init__(self, config: MonitorConfig, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._in_flight = 2 * workers
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_start_worker, initargs=(config,))

    def __enter__(self) -> "ValidationPool":
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def validated(self, batches: Iterable[list[RawRecord]]) -> Iterator[tuple[list[RawRecord], ValidatedBatch]]:
        """Each batch with its validation, in the input's order, at most 2 x workers in flight."""
        pending: deque[tuple[list[RawRecord], Future]] = deque()
        try:
            for batch in batches:
                pending.append((batch, self._pool.submit(_validate_values, [record.value for record in batch])))
                if len(pending) >= self._in_flight:
                    yield _collect(*pending.popleft())
            while pending:
                yield _collect(*pending.popleft())
        except BrokenProcessPool as exc:
            raise ReplayError(f"a validating worker process died ({exc}); rerun with --workers 0 to validate "
                              "in the replay's own process") from exc


def _collect(batch: list[RawRecord], future: Future) -> tuple[list[RawRecord], ValidatedBatch]:
    return batch, ValidatedBatch.from_ipc(future.result())


def _start_worker(config: MonitorConfig) -> None:
    global _config
    _config = config


def _validate_values(values: list[bytes]) -> tuple[bytes, ...]:
    return validate_batch(values, _config).to_ipc()
