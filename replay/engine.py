"""Run the streaming job's per-window pipeline over replayed records.

Records go through the same steps, in the same code, as in ``jobs/drift_job.py``: validation
(:func:`pipeline.validation.validate_record`), the event-time rules (``pipeline/event_time.py``:
a bad clock, per-partition lateness marks, late events) in :class:`pipeline.windowing.Windower`,
each on-time event's features appended to its window's :class:`pipeline.summary.WindowRows` (the
same summary bytes the live job's Java aggregate builds, see sketches/FORMAT.md), then
:func:`pipeline.judging.judge_window` against the reference the live job would use. Only the
transport differs: records come from a file or a bounded topic read.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from driftwarden.core.records import WindowReport
from driftwarden.pipeline.judging import cusum_state, judge_window
from driftwarden.pipeline.summary import WindowRows, WindowSummary
from driftwarden.pipeline.window_store import MemoryWindows
from driftwarden.pipeline.windowing import OpenWindow, Windower
from driftwarden.replay.ordering import PartitionMerger
from driftwarden.replay.records import RawRecord
from driftwarden.replay.setup import ReplaySetup
from driftwarden.replay.validate import Rejection, ValidatedBatch, reject_future, validate_batch
from driftwarden.schemas.events import Event
from driftwarden.sketches import Reference

RecordSink = Callable[[RawRecord, "int | None"], None]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WindowResult:
    """One judged (model, window): the verdicts and the counts the store keeps."""

    report: WindowReport
    events: int
    unknown_features: int
    late: int


@dataclass(frozen=True)
class DriftDetail:
    """The sketches behind a feature's first drifted window (for the HTML plots)."""

    model: str
    feature: str
    kind: str
    window_start_ms: int
    window_sketch: object
    reference_sketch: object
    reference: object = None  # the FeatureReference (its profile, thresholds and null scores)
    evidence: object = None  # the verdict's evidence (a group's: pairs, variance lost, correlation difference)


@dataclass
class ReplayOutcome:
    """Everything a replay found."""

    windows: list[WindowResult] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    rejections: list[Rejection] = field(default_factory=list)
    late: list[tuple[RawRecord, Event]] = field(default_factory=list)
    first_drift: dict[tuple[str, str], DriftDetail] = field(default_factory=dict)
    event_ms_range: list[int] = field(default_factory=list)


class Replayer:
    """Feed it batches of raw records, then :meth:`finish` for the outcome."""

    def __init__(self, setup: ReplaySetup, partitions: Iterable[int],
                 last_offsets: dict[int, int] | None = None, sink: RecordSink | None = None) -> None:
        self.setup = setup
        partitions = sorted(partitions)
        self._windower = Windower(setup.config.window.size_ms, setup.config.window.out_of_orderness_ms, partitions,
                                  self._rows_for)
        self._merger = PartitionMerger(partitions) if len(partitions) > 1 else None
        self._last_offsets = last_offsets or {}
        self._sink = sink
        self.outcome = ReplayOutcome()
        self._wanted = setup.models  # the --model filter (None: every model)
        self._lo, self._hi = math.inf, -math.inf
        self._placed: dict[tuple[int, int], _Placed] = {}  # (window, batch) -> rows not yet in the window
        self._cusum: dict[str, dict] = {}  # model -> each feature's CUSUM after its last judged window
        self._segments: dict[str, tuple | None] = {}  # model -> top segment keys its windows are cut by (None: none)
        self._windows = MemoryWindows()  # the warm-up or rolling reference's windows

    @property
    def event_time_covered(self) -> tuple[int | None, int | None]:
        """Smallest and largest valid event time seen so far (epoch ms; None before the first)."""
        if self._lo > self._hi:
            return None, None
        return self._lo, self._hi

    def feed(self, records: Sequence[RawRecord], validated: ValidatedBatch | None = None) -> None:
        """Order and window a batch of records; judge the windows that fired.

        ``validated`` is :func:`replay.validate.validate_batch` of the records' values when a worker
        already did it (replay/workers.py); else it is done here.
        """
        if validated is None:
            validated = validate_batch([record.value for record in records], self.setup.config)
        reject_future(records, validated, self.setup.config)
        self.outcome.counts["read"] += len(records)
        if self._merger is None and self._sink is None:  # one ordered stream: windowed in one vectorised step
            self._accept_batch(records, validated)
            self._judge(self._windower.fired())
            return
        merger, reasons, mark_ms = self._merger, validated.reasons, validated.mark_ms
        for i, record in enumerate(records):
            if reasons[i] is not None:
                self._reject(Rejection(record, reasons[i], validated.details[i]))
            if mark_ms[i] is None:  # rejected, with no readable time or a bad clock: it moves no mark
                pass
            elif merger is None:  # valid, or rejected with a readable time (it moves its partition's mark)
                self._accept(record.partition, records, validated, i)
            else:
                merger.push(record.partition, mark_ms[i], (records, validated, i))
            if merger is not None and self._last_offsets.get(record.partition) == record.coordinates[-1]:
                if merger.finish(record.partition):
                    self._windower.drop_partition(record.partition)
        self._release()

    def finish(self) -> ReplayOutcome:
        """The input ended: release every queued event, fire every window, return the outcome."""
        if self._merger is not None:
            for p in self._merger.finish_all():
                self._windower.drop_partition(p)
            self._release()
        self._judge(self._windower.flush())
        counts = self.outcome.counts
        counts["read"] -= counts["filtered_out"]
        if self._lo <= self._hi:
            self.outcome.event_ms_range = [self._lo, self._hi]
        return self.outcome

    def _reject(self, rejection: Rejection) -> None:
        self.outcome.counts["rejected"] += 1
        self.outcome.rejections.append(rejection)
        if self._sink is not None:
            self._sink(rejection.record, None)

    def _release(self) -> None:
        if self._merger is not None:
            for partition, (records, validated, i), exhausted in self._merger.pop_ready():
                self._accept(partition, records, validated, i)
                if exhausted:
                    self._windower.drop_partition(partition)
        self._move_placed_rows()
        self._judge(self._windower.fired())

    def _accept(self, partition: int, records: Sequence[RawRecord], validated: ValidatedBatch, i: int) -> None:
        """Window the record ``records[i]`` (one at a time: several partitions, or a sink): a valid one
        joins its window or is late; a rejected one only moves its partition's mark."""
        if validated.reasons[i] is not None:
            self._windower.add(partition, validated.mark_ms[i], "", keep=False)
            return
        record, ms, model = records[i], validated.event_ms[i], validated.models[i]
        keep = self._wanted is None or model in self._wanted  # setup.wants, inlined: per event
        window = self._windower.add(partition, ms, model, keep)
        if self._sink is not None:
            self._sink(record, ms)
        counts = self.outcome.counts
        if not keep:
            counts["filtered_out"] += 1
            return
        counts["valid"] += 1
        if ms < self._lo:
            self._lo = ms
        if ms > self._hi:
            self._hi = ms
        if window is None:
            counts["late"] += 1
            self.outcome.late.append((record, Event(model, ms, {})))
        elif window.rows is not None:
            placed = self._placed.get((id(window), id(validated)))
            if placed is None:
                placed = self._placed[(id(window), id(validated))] = _Placed(window, records, validated)
            placed.chosen.append(i)

    def _accept_batch(self, records: Sequence[RawRecord], validated: ValidatedBatch) -> None:
        """What :meth:`_accept` does for each record of a batch, in one vectorised step (one partition)."""
        reasons = validated.reasons
        marking: Sequence[int] = range(len(records))  # the records that move the mark: all of a clean batch
        if any(reasons):  # a clean batch (the usual case) skips the per-record pass
            for i, reason in enumerate(reasons):
                if reason is not None:
                    self._reject(Rejection(records[i], reason, validated.details[i]))
            marking = [i for i, ms in enumerate(validated.mark_ms) if ms is not None]
        event_ms = np.array([validated.mark_ms[i] for i in marking], dtype=np.int64)
        valid = np.array([reasons[i] is None for i in marking], dtype=bool)
        models = [validated.models[i] for i in marking]
        wanted = self._wanted
        keep = valid if wanted is None else valid & np.array([m in wanted for m in models], dtype=bool)
        groups, late = self._windower.add_batch(records[0].partition if records else 0, event_ms, models, keep)
        self._count_batch(event_ms[keep], int(valid.sum()), late.size)
        for j in late.tolist():
            self.outcome.late.append((records[marking[j]], Event(models[j], int(event_ms[j]), {})))
        for window, members in groups:
            if window.rows is not None:
                _add_batch_rows(window, [marking[j] for j in members.tolist()], records, validated)

    def _count_batch(self, kept_ms: np.ndarray, valid: int, late: int) -> None:
        counts = self.outcome.counts
        counts["filtered_out"] += valid - kept_ms.size
        counts["valid"] += kept_ms.size
        counts["late"] += late
        if kept_ms.size:
            self._lo, self._hi = min(self._lo, int(kept_ms.min())), max(self._hi, int(kept_ms.max()))

    def _move_placed_rows(self) -> None:
        """Give each window the columns of the rows placed in it (before any window is judged)."""
        for placed in self._placed.values():
            placed.move()
        self._placed.clear()

    def _judge(self, windows: list[OpenWindow]) -> None:
        for window in windows:
            summary = self._summarize(window)
            report, reference = judge_window(summary, self.setup.references, self._windows,
                                             self._cusum.get(window.model))
            self._cusum[window.model] = cusum_state(report)
            late = self._windower.late_by_window.get((window.model, window.start_ms), 0)
            self.outcome.windows.append(WindowResult(report, summary.events, summary.unknown_features, late))
            self.outcome.counts["windowed"] += summary.events
            self._note_first_drift(report, summary, reference)

    def _rows_for(self, model: str) -> WindowRows | None:
        model_config = self.setup.config.model(model)
        return WindowRows(model_config) if model_config is not None else None

    def _summarize(self, window: OpenWindow) -> WindowSummary:
        window_ms = self.setup.config.window.size_ms
        if window.rows is None:  # not monitored: counted, not sketched (as in the live job)
            return WindowSummary(window.model, window.start_ms, window.start_ms + window_ms, events=window.events)
        return window.rows.summarize(window.model, window.start_ms, window_ms, self._segment_keys(window.model))

    def _segment_keys(self, model: str) -> tuple | None:
        """The top segment keys of a segmented model's reference (None: no segments; said once per model)."""
        if model not in self._segments:
            segments = self.setup.config.model(model).segments
            keys = self.setup.references.segment_keys(model, segments.by) if segments is not None else None
            if segments is not None and keys is None:
                log.warning("model %s: segments by %s configured, but reference %s has none for it (built "
                            "without segments, by other features, or a warmup/rolling reference): its windows "
                            "are summarized without segments", model, ", ".join(segments.by),
                            self.setup.reference_label)
            self._segments[model] = keys
        return self._segments[model]

    def _note_first_drift(self, report: WindowReport, summary: WindowSummary, reference: Reference) -> None:
        """The first drift of each (model, feature) of the global view (a segment's: in the report's first_drift)."""
        for outcome in report.features:
            key = (report.model, outcome.name)
            if outcome.segment is not None or not outcome.drifted or key in self.outcome.first_drift:
                continue
            sketch = summary.sketches.get(outcome.name)
            ref = reference.features.get(outcome.name)
            self.outcome.first_drift[key] = DriftDetail(report.model, outcome.name, outcome.kind,
                                                        summary.window_start_ms, sketch, ref.sketch if ref else None,
                                                        ref, outcome.evidence)


def _add_batch_rows(window: OpenWindow, chosen: list[int], records: Sequence[RawRecord],
                    validated: ValidatedBatch) -> None:
    """Append the feature columns of the batch's records ``chosen`` (indices) to the window."""
    taken = pa.array([validated.rows[i] for i in chosen], type=pa.int32())
    columns = validated.columns[window.model]
    invalid = []
    if validated.invalid:
        position = {index: j for j, index in enumerate(chosen)}
        invalid = [(position[i], name, value) for i, name, value in validated.invalid if i in position]
    window.rows.add_columns({name: column.take(taken) for name, column in columns.items()},
                            [records[i].coordinates for i in chosen], [validated.unknown[i] for i in chosen], invalid)


class _Placed:
    """Records of one validated batch placed in one open window, moved there as columns in one go."""

    __slots__ = ("window", "records", "batch", "chosen")

    def __init__(self, window: OpenWindow, records: Sequence[RawRecord], batch: ValidatedBatch) -> None:
        self.window, self.records, self.batch = window, records, batch
        self.chosen: list[int] = []  # indices into the batch

    def move(self) -> None:
        """Append the placed records' feature columns to the window."""
        _add_batch_rows(self.window, self.chosen, self.records, self.batch)
