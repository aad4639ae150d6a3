"""Event-time tumbling windows with per-partition lateness marks, as the streaming job keeps them.

Replay and the notebook front door window their records here; the rules themselves are
``pipeline/event_time.py``'s (the live job's source task applies them in Java, compared record by
record with this class by ``tests/test_event_time_java.py``). Each partition's mark is the largest
:func:`pipeline.event_time.lateness_mark` of its records so far; the job's watermark is the smallest
mark over the partitions still open (a finished partition stops holding it back, as a finished
Kafka split does in Flink). A window fires once its last millisecond is at or below the watermark.
An event is late (:func:`pipeline.event_time.is_late`) when its window's last millisecond is at or
below its own partition's mark before it: counted, kept by the caller, never silently dropped.
Lateness thus depends on each partition's order alone, not on how partitions interleave, and a
window the job's watermark has fired can get no on-time event (the job's watermark is never ahead
of a partition's mark).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from driftwarden.pipeline.event_time import is_late, lateness_mark, window_start
from driftwarden.pipeline.summary import WindowRows

#: Makes a window's rows for a model; None for a model that is counted but not sketched.
RowsFactory = Callable[[str], "WindowRows | None"]


@dataclass
class OpenWindow:
    """The on-time events of one (model, window) so far: their count, and their rows when sketched."""

    model: str
    start_ms: int
    rows: WindowRows | None = None
    events: int = 0


def _no_rows(_model: str) -> None:
    return None


class Windower:
    """Assigns events to tumbling windows, classifies late events and releases fired windows."""

    def __init__(self, window_ms: int, out_of_orderness_ms: int, partitions: list[int],
                 rows_for: RowsFactory = _no_rows) -> None:
        self.window_ms = window_ms
        self._rows_for = rows_for
        self.out_of_orderness_ms = out_of_orderness_ms
        self._marks: dict[int, float] = {p: -math.inf for p in partitions}
        self._watermark = -math.inf
        self._open: dict[tuple[int, str], OpenWindow] = {}
        self._heap: list[tuple[int, str]] = []
        self.late_by_window: Counter = Counter()

    @property
    def watermark(self) -> float:
        """The current combined watermark (epoch ms; -inf before any event, inf at the end)."""
        return self._watermark

    def add(self, partition: int, event_ms: int, model: str, keep: bool = True) -> OpenWindow | None:
        """Count the event in its window and move its partition's mark on.

        Returns the window the event joins (the caller adds its features there), or None when it
        joins none: it is late (counted in :attr:`late_by_window` when ``keep``) or not kept.
        ``keep=False``: a record that only moves its partition's mark (a model the caller leaves
        out, or a record rejected after its event time was read, as the live job's source task
        reads it before validation).
        """
        start = window_start(event_ms, self.window_ms)
        window = None
        if not is_late(start, self.window_ms, self._marks.get(partition, self._watermark)):
            if keep:
                window = self._open.get((start, model)) or self._window(model, start)
                window.events += 1
        elif keep:
            self.late_by_window[(model, start)] += 1
        self._advance(partition, lateness_mark(event_ms, self.out_of_orderness_ms))
        return window

    def add_batch(self, partition: int, event_ms: np.ndarray, models: Sequence[str],
                  keep: np.ndarray) -> tuple[list[tuple[OpenWindow, np.ndarray]], np.ndarray]:
        """:meth:`add` for a batch of events of the only partition, in order, vectorised.

        Returns ``(window, indices of the batch's events it gets)`` pairs and the indices of the
        late kept events; the windows, late counts and watermark end as if :meth:`add` had been
        called for each event in turn (tested against it).
        """
        if set(self._marks) - {partition}:
            raise ValueError("add_batch needs the batch's partition to be the only one")
        if not len(event_ms):
            return [], np.empty(0, dtype=np.int64)
        marks = lateness_mark(event_ms, self.out_of_orderness_ms)
        before = np.maximum.accumulate(np.concatenate(([self._watermark], marks[:-1].astype(np.float64))))
        starts = window_start(event_ms, self.window_ms)
        on_time = ~is_late(starts, self.window_ms, before)
        late = np.flatnonzero(keep & ~on_time)
        for i in late.tolist():
            self.late_by_window[(models[i], int(starts[i]))] += 1
        self._advance(partition, int(marks.max()))
        return self._group(np.flatnonzero(keep & on_time), starts, models), late

    def _group(self, joining: np.ndarray, starts: np.ndarray, models: Sequence[str]) -> list[tuple[OpenWindow, np.ndarray]]:
        """The open window of each (start, model) among the ``joining`` events, with their indices."""
        names = sorted({models[i] for i in joining.tolist()})
        codes = np.array([names.index(models[i]) for i in joining.tolist()] if len(names) > 1
                         else np.zeros(len(joining), dtype=np.int64), dtype=np.int64)
        keys = (starts[joining] // self.window_ms) * len(names or [0]) + codes
        groups = []
        for key in np.unique(keys).tolist():
            members = joining[keys == key]
            model, start = models[members[0]], int(starts[members[0]])
            window = self._open.get((start, model)) or self._window(model, start)
            window.events += len(members)
            groups.append((window, members))
        return groups

    def _window(self, model: str, start: int) -> OpenWindow:
        key = (start, model)
        window = self._open[key] = OpenWindow(model, start, self._rows_for(model))
        heapq.heappush(self._heap, key)
        return window

    def _advance(self, partition: int, mark: int) -> None:
        old = self._marks.get(partition, -math.inf)
        if mark > old:
            self._marks[partition] = mark
            if old <= self._watermark:  # it may have been the slowest partition
                self._watermark = max(self._watermark, min(self._marks.values()))

    def drop_partition(self, partition: int) -> None:
        """``partition`` has finished: it no longer holds the watermark back."""
        self._marks.pop(partition, None)
        self._watermark = max(self._watermark, min(self._marks.values(), default=math.inf))

    def fired(self) -> list[OpenWindow]:
        """Windows whose last millisecond the watermark has reached, in (start, model) order."""
        out = []
        while self._heap and self._heap[0][0] + self.window_ms - 1 <= self._watermark:
            out.append(self._open.pop(heapq.heappop(self._heap)))
        return out

    def flush(self) -> list[OpenWindow]:
        """Every window still open (the input ended), in (start, model) order."""
        self._marks.clear()
        self._watermark = math.inf
        return self.fired()
