"""Run the streaming job's per-window pipeline over replayed records.

Records go through the same steps, in the same code, as in ``jobs/drift_job.py``: validation
(``validate_event`` with the configured kinds), event-time windows with per-partition watermarks
and late events, :func:`jobs.pipeline.summarize_raw` on each fired window's raw values with their
coordinates (it orders them canonically, as in the live job's aggregate), then :func:`jobs.pipeline.analyze_summary` against the reference the live job
would use. Only the transport differs: records come from a file or a bounded topic read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable

from alerting.records import WindowReport
from jobs.pipeline import WindowSummary, analyze_summary, summarize_raw
from replay.ordering import PartitionMerger
from replay.records import RawRecord
from replay.setup import ReplaySetup
from replay.validate import Rejection, Validator
from replay.windowing import OpenWindow, Windower
from schemas.events import Event
from sketches import Reference

RecordSink = Callable[[RawRecord, "int | None"], None]


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
        self._validator = Validator(setup.config)
        self._windower = Windower(setup.config.window.size_ms, setup.config.window.out_of_orderness_ms, partitions)
        self._merger = PartitionMerger(partitions) if len(partitions) > 1 else None
        self._last_offsets = last_offsets or {}
        self._sink = sink
        self.outcome = ReplayOutcome()
        self._lo = self._hi = None

    @property
    def event_time_covered(self) -> tuple[int | None, int | None]:
        """Smallest and largest valid event time seen so far (epoch ms)."""
        return self._lo, self._hi

    def feed(self, records: Iterable[RawRecord]) -> None:
        """Validate, order and window a batch of records; judge the windows that fired."""
        counts = self.outcome.counts
        for record in records:
            counts["read"] += 1
            checked = self._validator.check(record)
            if isinstance(checked, Rejection):
                self._reject(checked)
            elif self._merger is None:
                self._accept(record.partition, record, checked)
            else:
                self._merger.push(record.partition, checked.event_ms, (record, checked))
            if self._merger is not None and self._last_offsets.get(record.partition) == record.coordinates[-1]:
                if self._merger.finish(record.partition):
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
        if self._lo is not None:
            self.outcome.event_ms_range = [self._lo, self._hi]
        return self.outcome

    def _reject(self, rejection: Rejection) -> None:
        self.outcome.counts["rejected"] += 1
        self.outcome.rejections.append(rejection)
        if self._sink is not None:
            self._sink(rejection.record, None)

    def _release(self) -> None:
        if self._merger is not None:
            for partition, (record, event), exhausted in self._merger.pop_ready():
                self._accept(partition, record, event)
                if exhausted:
                    self._windower.drop_partition(partition)
        self._judge(self._windower.fired())

    def _accept(self, partition: int, record: RawRecord, event: Event) -> None:
        keep = self.setup.wants(event.model)
        on_time = self._windower.add(partition, record.coordinates, event, record.value, keep)
        if self._sink is not None:
            self._sink(record, event.event_ms)
        if not keep:
            self.outcome.counts["filtered_out"] += 1
            return
        self.outcome.counts["valid"] += 1
        ms = event.event_ms
        self._lo = ms if self._lo is None or ms < self._lo else self._lo
        self._hi = ms if self._hi is None or ms > self._hi else self._hi
        if not on_time:
            self.outcome.counts["late"] += 1
            self.outcome.late.append((record, event))

    def _judge(self, windows: list[OpenWindow]) -> None:
        for window in windows:
            summary = self._summarize(window)
            monitored = self.setup.config.model(window.model) is not None
            reference = self.setup.references.reference_for(window.model, window.start_ms) if monitored else Reference()
            if monitored:
                self.setup.references.remember(summary)
            report = analyze_summary(summary, reference, self.setup.policy)
            late = self._windower.late_by_window.get((window.model, window.start_ms), 0)
            self.outcome.windows.append(WindowResult(report, summary.events, summary.unknown_features, late))
            self.outcome.counts["windowed"] += summary.events
            self._note_first_drift(report, summary, reference)

    def _summarize(self, window: OpenWindow) -> WindowSummary:
        window_ms = self.setup.config.window.size_ms
        model_config = self.setup.config.model(window.model)
        if model_config is None:  # not monitored: counted, not sketched (as in the live job)
            return WindowSummary(window.model, window.start_ms, window.start_ms + window_ms,
                                 events=len(window.values))
        return summarize_raw(window.model, window.start_ms, window_ms, window.values, window.coordinates,
                             model_config)

    def _note_first_drift(self, report: WindowReport, summary: WindowSummary, reference: Reference) -> None:
        for outcome in report.features:
            key = (report.model, outcome.name)
            if not outcome.drifted or key in self.outcome.first_drift:
                continue
            sketch = summary.features.get(outcome.name, (None,))[0]
            ref = reference.features.get(outcome.name)
            self.outcome.first_drift[key] = DriftDetail(report.model, outcome.name, outcome.kind,
                                                        summary.window_start_ms, sketch, ref.sketch if ref else None)
